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

#include <any>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/pattern/parser.h"

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

// An event type the descriptor declares in <schemas>, with its attributes:
// what the bus's queries may name (checked when the bus is built).
struct EventSchema {
  std::string type;
  std::vector<std::string> attributes;
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
  // The unit of the input's ts (attribute time-unit); kNone when not declared.
  pattern::TimeUnit ts_unit = pattern::TimeUnit::kNone;
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

// An element a service owns (<listeners><amqp>, <cluster>, ...), as the
// ElementParser that service registered read it (element_parser.h).
struct ServiceElement {
  std::string parent;  // "cepbus" or "listeners"
  std::string tag;
  std::any config;  // the service's own configuration type
  Location where;
};

struct Descriptor {
  std::string name;
  std::string source;  // the name it was parsed under (usually its path)
  std::filesystem::path base_dir;
  LoggingConfig logging;
  std::optional<JournalConfig> journal;
  std::vector<StageSpec> stages;
  PluginsConfig plugins;
  RoutesConfig routes;
  std::vector<ServiceAssembly> assemblies;
  std::vector<ServiceElement> elements;  // in document order
  // The event types of <schemas>; empty when the descriptor declares none,
  // and then queries are not checked against any.
  std::vector<EventSchema> schemas;
  Location where;

  const StageSpec* stage(std::string_view name) const;           // nullptr when absent
  const ServiceAssembly* assembly(std::string_view name) const;  // nullptr when absent
  // The configuration a service's element parser read, by its type; nullptr
  // when the descriptor has no such element.
  template <typename Config>
  const Config* element() const {
    for (const ServiceElement& e : elements) {
      if (const Config* config = std::any_cast<Config>(&e.config)) return config;
    }
    return nullptr;
  }
};

}  // namespace cepbus::descriptor
