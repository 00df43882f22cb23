#pragma once

// The deployment-descriptor model: what a `<cepbus>` XML file describes, in
// the spirit of JBI service assemblies and service units.
//
// The model is plain data. The parser (bus/host/descriptor/parser.h) fills it
// once and checks it completely, so whoever consumes it (the Bus, the admin
// API, `cepbus validate`) can trust every field: names are unique where they
// must be, numbers are in range, enums are known, stage references resolve,
// addresses are well formed. What the parser does not interpret — query text,
// filter expressions, service-unit types and params — is kept verbatim with
// the line it came from, so a later failure (a query that does not compile, a
// service factory that rejects a param) can still name file:line.
//
// Thread safety: the structs have no behaviour beyond const look-ups; share a
// parsed descriptor as `const` (e.g. shared_ptr<const Descriptor>) and it is
// safe to read from any thread.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cepbus::descriptor {

// One problem found in a descriptor, or later when deploying it.
struct DescriptorError {
  std::string file;  // the name the text was parsed under, usually the path given
  int line = 0;      // 1-based; 0 when the problem is not tied to a line
  std::string message;

  // "quickstart.xml:12: message", or "quickstart.xml: message" without a line.
  std::string toString() const;
};

// Where an element (or attribute) of the model was written.
struct Location {
  std::string file;
  int line = 0;  // 0 for elements absent from the file (defaults)

  std::string toString() const;  // "quickstart.xml:12"
  // An error at this location, for errors found after parsing (deployment).
  DescriptorError error(std::string message) const;
};

enum class LogLevel : uint8_t { kTrace, kDebug, kInformation, kNotice, kWarning, kError };

// Which flow carries the events of a route (flows/).
enum class FlowKind : uint8_t {
  kSt,        // straight-through, on the publisher's thread
  kSeda,      // through a stage's queue and thread pool
  kReliable,  // journaled, acknowledged, redelivered
};

// What delivery guarantee the senders on a route ask for.
enum class Qos : uint8_t { kBestEffort, kReliable };

std::string_view logLevelName(LogLevel level);  // "information"
std::string_view flowName(FlowKind flow);       // "seda"
std::string_view qosName(Qos qos);              // "best-effort"

struct LoggingConfig {
  LogLevel level = LogLevel::kInformation;
  Location where;
};

// ReliableFlow's SQLite journal.
struct JournalConfig {
  std::filesystem::path path;  // resolved against the descriptor's folder
  // commit-delay-us: how long a record waits before it is written, so that a
  // delivery acknowledged meanwhile is never written (flows/journal/journal_writer.h);
  // unset: the journal writer's default.
  std::optional<uint64_t> commit_delay_us;
  // retry-delay-ms, max-retry-delay-ms: the first and the longest wait of a
  // target's held-back deliveries (flows/reliable_flow.h); unset: its defaults.
  std::optional<uint64_t> retry_delay_ms;
  std::optional<uint64_t> max_retry_delay_ms;
  Location where;
};

// TLS for an AMQP listener: the server's certificate chain and private key
// (PEM files, resolved against the descriptor's folder; the key not
// encrypted). With TLS configured
// the listener accepts TLS connections only.
struct AmqpTls {
  std::filesystem::path cert;
  std::filesystem::path key;
  Location where;
};

// What one <permit> lets a user do: publish to addresses matching `publish`,
// subscribe with patterns that `subscribe` covers. Either may be empty.
struct AmqpPermit {
  std::string publish;    // a pattern ('*', '#'); empty: grants no publishing
  std::string subscribe;  // a pattern; empty: grants no subscribing
  Location where;
};

// A user that may authenticate with SASL PLAIN. The password is stored only
// as a salted hash: "pbkdf2-sha256:<iterations>:<salt hex>:<hash hex>"
// (services/protocols/amqp/password_hash.h; the parser checks the shape only).
struct AmqpUser {
  std::string name;
  std::string password_hash;
  std::vector<AmqpPermit> permits;  // nothing is allowed unless a permit allows it
  Location where;
};

struct AmqpListener {
  std::string host = "127.0.0.1";
  uint16_t port = 5672;  // 0 asks the system for a free port
  // SASL ANONYMOUS accepted; anonymous clients may publish and subscribe
  // anywhere (development mode).
  bool allow_anonymous = false;
  std::optional<AmqpTls> tls;
  std::vector<AmqpUser> users;  // names unique
  // Flow control and buffering; absent: the listener's defaults
  // (services/amqp/listener/amqp_listener.h, AmqpListenerOptions).
  std::optional<uint32_t> credit_window;                // credit-window: per publishing link
  std::optional<uint64_t> subscriber_buffer;            // subscriber-buffer: events per subscriber
  std::optional<uint64_t> durable_buffer;               // durable-buffer: kept while away
  std::optional<uint64_t> request_timeout_ms;           // request-timeout (ms)
  std::optional<uint64_t> subscriber_stall_timeout_ms;  // subscriber-stall-timeout (ms)
  std::optional<uint64_t> handshake_timeout_ms;         // handshake-timeout (ms; 0: none)
  // What one client may make it hold (services/amqp/listener/admission.h, AmqpLimits).
  std::optional<uint64_t> max_connections;       // max-connections: all clients together
  std::optional<uint64_t> max_sessions;          // max-sessions: per connection
  std::optional<uint64_t> max_links;             // max-links: per connection
  std::optional<uint64_t> max_durable;           // max-durable: per user (or container id)
  std::optional<uint64_t> max_pending_requests;  // max-pending-requests: per connection
  std::optional<uint64_t> max_message_size;      // max-message-size: bytes, encoded
  // threads: the container threads serving the connections; absent: one per
  // core.
  std::optional<unsigned> threads;
  Location where;

  const AmqpUser* user(std::string_view name) const;  // nullptr when absent
};

struct HttpListener {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0 asks the system for a free port
  // Name of the environment variable holding the admin API's bearer token;
  // empty when none was named.
  std::string token_env;
  // Limits; absent: the listener's defaults (services/http/http_listener.h).
  std::optional<uint64_t> max_connections;     // max-connections: open at once, feeds included
  std::optional<uint64_t> max_ws_clients;      // max-ws-clients: WebSocket feeds open at once
  std::optional<uint64_t> request_timeout_ms;  // request-timeout (ms): to read one request
  Location where;
};

struct Listeners {
  std::optional<AmqpListener> amqp;
  std::optional<HttpListener> http;
};

// A SEDA stage (stages/): a bounded queue and a thread pool. The admission
// thresholds are fractions of `capacity`: from `degrade_at` on, reliable
// work is degraded to best effort; from `reject_at` on, work is rejected.
struct StageSpec {
  std::string name;
  size_t capacity = 4096;
  size_t min_threads = 1;
  size_t max_threads = 1;  // defaults to min_threads when only that is given
  double degrade_at = 0.75;
  double reject_at = 1.0;
  // run-inline="when-idle": an item offered to the idle stage is handled on
  // the offering thread (stages::StageConfig::run_inline_when_idle).
  bool run_inline_when_idle = false;
  Location where;
};

// A plugin to load at start-up (bus/host/loader/plugin_loader.h).
struct PluginSpec {
  std::string name;  // found along the search path as libcepbus_plugin_<name>.so
  // When not empty, the library file itself, resolved against the
  // descriptor's folder; it always holds a '/', so the loader takes it for a
  // path, not a name.
  std::filesystem::path library;
  Location where;
};

struct PluginsConfig {
  // In the order written, each resolved against the descriptor's folder;
  // searched before the loader's default paths.
  std::vector<std::filesystem::path> search_paths;
  std::vector<PluginSpec> plugins;
  Location where;
};

// Events published to an address matching `address` travel on `flow`.
struct RouteSpec {
  std::string address;  // may hold '*' (one segment) and '#' (any number)
  FlowKind flow = FlowKind::kSt;
  Qos qos = Qos::kBestEffort;
  std::string stage;  // a declared stage; set for seda, optional for reliable, empty for st
  Location where;
};

struct RoutesConfig {
  // The flow, and for seda the stage, of events that match no route.
  FlowKind default_flow = FlowKind::kSt;
  std::string default_stage;
  std::vector<RouteSpec> routes;  // in the order written
  Location where;
};

// A name/value pair: a service unit's <param> or a query's <option>.
struct Param {
  std::string name;
  std::string value;
  Location where;
};

struct Subscription {
  std::string address;  // may hold '*' and '#' segments
  // The filter expression, verbatim (the router compiles it); empty when none.
  std::string filter;
  Location filter_where;  // the line of the filter attribute
  // The durable subscription's name, unique in the descriptor; empty when
  // the subscription is not durable.
  std::string durable;
  Location where;
};

struct Publication {
  std::string address;
  Location where;
};

// A CEP query: the CEP service engine hands `text` to the engine's plugin.
struct QuerySpec {
  std::string name;
  std::string engine;               // a detector factory name, e.g. "nfa"
  std::vector<std::string> inputs;  // addresses the query consumes
  std::string output;               // the address its composite events go to
  std::vector<Param> options;       // engine options, e.g. construction=batched
  // The folder relative file paths in option values resolve against (the
  // assembly's base_dir; empty for a query given without a descriptor).
  std::filesystem::path base_dir;
  // The query text with surrounding blank space removed; its first character
  // sits on `text_where.line`, so line k of the text is at line
  // text_where.line + k - 1 of the file.
  std::string text;
  Location text_where;
  Location where;

  const Param* option(std::string_view name) const;  // nullptr when absent
};

// A service unit: one component instance the service registered for `type`
// builds from the params; what it subscribes to, publishes and (for the CEP
// engine) the queries it runs.
struct ServiceUnit {
  std::string name;
  std::string type;  // free text; a service factory must be registered under it
  std::vector<Param> params;
  std::vector<Subscription> subscriptions;
  std::vector<Publication> publications;
  std::vector<QuerySpec> queries;
  Location where;

  const Param* param(std::string_view name) const;  // nullptr when absent
};

// A service assembly: service units deployed and undeployed together.
struct ServiceAssembly {
  std::string name;
  std::vector<ServiceUnit> units;
  // The folder relative paths in params resolve against: the descriptor's
  // folder, or what the caller gave for a fragment.
  std::filesystem::path base_dir;
  Location where;

  const ServiceUnit* unit(std::string_view name) const;  // nullptr when absent
  // `path` unchanged when absolute or when base_dir is empty, else base_dir/path.
  std::filesystem::path resolvePath(std::string_view path) const;
};

// One RabbitMQ node of a cluster's failover list: its AMQP 1.0 listener and
// its management HTTP API (used to declare the topology and to close the
// connections of a node that stopped answering).
struct ClusterBroker {
  std::string host = "127.0.0.1";
  uint16_t port = 5672;
  uint16_t management_port = 15672;
  Location where;
};

// TLS to the brokers of a cluster (<cluster><tls ca peer-name>): AMQP goes
// over amqps:// and management calls over https://, to the ports the
// <broker> elements name. The brokers' certificates are verified against
// `ca` and must name `peer_name` (the broker's host when empty).
struct ClusterTls {
  std::filesystem::path ca;
  std::string peer_name;
  Location where;
};

// Scale-out on a RabbitMQ cluster (services/cluster/): the events of input
// stream `name` are split into `partitions` quorum queues by a hash of the
// `key` attributes; every node of the cluster consumes the partitions it owns
// and runs `queries` on each partition separately. Broker objects are named
// after the cluster: exchange "<name>.in" (direct, routing key "p<i>"),
// queues "<name>.p<i>" (quorum, single active consumer), exchange
// "<name>.out" (topic, routing key = the query's output) with the queue
// "<name>.composites" bound to it, and exchange "<name>.members" (fanout) for
// the nodes' heartbeats.
//
// With input="stream" the events go to a stream per partition instead,
// "<name>.p<i>.log" (what "p<i>" routes to), and "<name>.p<i>" holds the
// partition's lease: one token, carrying the stream offset a new owner
// resumes from (services/cluster/stream_checkpoint.h).
struct ClusterSpec {
  // Where a partition's events wait and what a successor replays.
  enum class Input {
    // A quorum queue: the unsettled messages are the replay log, so a
    // window can hold at most `max_unsettled` messages per partition.
    kQueue,
    // A stream read from a checkpointed offset: windows as long as the
    // stream's `retention` keeps.
    kStream,
  };

  std::string name;
  std::string node;  // this node's id, unique among the cluster's nodes
  uint32_t partitions = 0;
  std::vector<std::string> key;        // attribute names, in hashing order
  std::vector<ClusterBroker> brokers;  // failover order
  std::optional<ClusterTls> tls;       // absent: plain TCP, loopback brokers only
  std::string user = "guest";
  // The environment variable holding the broker password; empty for the
  // user "guest" (password "guest"), required for any other user.
  std::string password_env;
  uint64_t heartbeat_ms = 500;      // how often a node announces itself
  uint64_t idle_timeout_ms = 3000;  // silence after which a node counts as gone
  // The most unsettled input messages a node holds per partition: with
  // queue input, the events that a window or a partial match may still
  // need (the bound the replay design puts on windows); with stream input,
  // how far the node reads ahead of its detectors.
  uint32_t max_unsettled = 20000;
  Input input = Input::kQueue;
  // How long a partition stream keeps its events (RabbitMQ's x-max-age:
  // a count and one of Y M D h m s); input="stream" only.
  std::string retention = "7D";
  int64_t slack = 0;               // event-time reordering slack within a partition
  std::vector<QuerySpec> queries;  // inputs empty: a cluster query reads its partition
  Location where;
};

struct Descriptor {
  std::string name;
  std::string source;  // the name it was parsed under (usually its path)
  std::filesystem::path base_dir;
  LoggingConfig logging;
  std::optional<JournalConfig> journal;
  Listeners listeners;
  std::vector<StageSpec> stages;
  PluginsConfig plugins;
  RoutesConfig routes;
  std::vector<ServiceAssembly> assemblies;
  std::optional<ClusterSpec> cluster;
  Location where;

  const StageSpec* stage(std::string_view name) const;           // nullptr when absent
  const ServiceAssembly* assembly(std::string_view name) const;  // nullptr when absent
};

}  // namespace cepbus::descriptor
