#pragma once

// The configuration of a scale-out cluster node, read from the descriptor's
// <cluster> by services/cluster/cluster_element.h.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bus/host/descriptor/descriptor.h"

namespace cepbus::services::cluster {

// One RabbitMQ node of a cluster's failover list: its AMQP 1.0 listener and
// its management HTTP API (used to declare the topology and to close the
// connections of a node that stopped answering).
struct ClusterBroker {
  std::string host = "127.0.0.1";
  uint16_t port = 5672;
  uint16_t management_port = 15672;
  descriptor::Location where;
};

// TLS to the brokers of a cluster (<cluster><tls ca peer-name>): AMQP goes
// over amqps:// and management calls over https://, to the ports the
// <broker> elements name. The brokers' certificates are verified against
// `ca` and must name `peer_name` (the broker's host when empty).
struct ClusterTls {
  std::filesystem::path ca;
  std::string peer_name;
  descriptor::Location where;
};

// A node's door for ordinary AMQP 1.0 producers (<cluster><ingress>,
// services/cluster/cluster_ingress.h): a listener on host:port taking
// events sent to the address "<name>.in", forwarded to the partitions in
// batches (services/cluster/ingress_batcher.h).
struct ClusterIngressSpec {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  uint32_t batch_events = 256;
  uint64_t batch_bytes = 65536;
  uint64_t linger_ms = 5;
  // What the node holds of the producers' events (in open batches and in
  // batches the broker has not confirmed) before they get no more credit.
  uint64_t max_held_events = 20000;
  uint32_t credit = 100;  // per producer link
  descriptor::Location where;
};

// How a node publishes its composites and late events to "<name>.out"
// (<cluster><output>, services/cluster/output_batcher.h): per routing key,
// in batch messages closed at `batch_events`, `batch_bytes` or `linger_ms`
// after their first output, as the ingress batches its events. With
// `batch_events` 1, each output goes alone in the plain event mapping, for a
// subscriber that needs one composite per message.
struct ClusterOutputSpec {
  uint32_t batch_events = 256;
  uint64_t batch_bytes = 65536;
  uint64_t linger_ms = 5;
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
  int64_t max_delay =
      0;  // how far behind a partition's newest ts an event may come (`slack`: synonym)
  // Event time (docs/time.md): the unit of the events' ts (`time-unit`; the
  // queries' default, kNone when not declared) and how long a partition with
  // no input keeps its event time before, with a unit, it follows the wall
  // clock (`source-idle-timeout`; the bus's default idle_timeout).
  pattern::TimeUnit ts_unit = pattern::TimeUnit::kNone;
  uint64_t source_idle_timeout_ms = 2000;
  std::optional<ClusterIngressSpec> ingress;  // absent: no producers' door on this node
  ClusterOutputSpec output;
  std::vector<descriptor::QuerySpec> queries;  // inputs empty: a cluster query reads its partition
  descriptor::Location where;
};

}  // namespace cepbus::services::cluster
