#pragma once

// The broker objects of a cepbus cluster (ClusterSpec) and the
// calls that declare, verify and clean up after them through the RabbitMQ
// management API (services/cluster/management_client.h), all in vhost "/":
//
//   exchange <name>.in          direct, durable; routing key "p<i>" -> queue <name>.p<i>
//   queues   <name>.p0 .. p<P-1> durable, quorum, single active consumer
//   exchange <name>.out         topic, durable; "#" -> queue <name>.composites (quorum)
//   exchange <name>.members     fanout, durable (the nodes' heartbeats)
//
// With input="stream" the partitions' events go to streams instead, and the
// quorum queues hold the partitions' leases (stream_checkpoint.h):
//
//   exchange <name>.in          routing key "p<i>" -> stream <name>.p<i>.log
//   streams  <name>.p<i>.log    durable, x-max-age = the cluster's retention
//   queues   <name>.p<i>        quorum, single active consumer, one lease token
//
// The partition count P is part of the topology: a node hashing keys into 8
// partitions must not consume a topology of 4, so declaring over a different
// P, or over queues that are not quorum + single active consumer, is refused
// (never "fixed" by deleting queues that may hold events), and a node checks
// inspectTopology() before it consumes.
//
// Thread-safety: free functions, each call independent. They block (HTTP),
// so they belong to the control plane. A topology of one input kind is a
// conflict for a descriptor of the other: a node must never read a
// partition from the wrong place.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bus/core/status.h"
#include "services/cluster/cluster_spec.h"

namespace cepbus::services::cluster {

// --- names -------------------------------------------------------------------
std::string inExchange(std::string_view cluster);                           // "<name>.in"
std::string outExchange(std::string_view cluster);                          // "<name>.out"
std::string membersExchange(std::string_view cluster);                      // "<name>.members"
std::string compositesQueue(std::string_view cluster);                      // "<name>.composites"
std::string partitionQueue(std::string_view cluster, uint32_t partition);   // "<name>.p<i>"
std::string partitionStream(std::string_view cluster, uint32_t partition);  // "<name>.p<i>.log"
std::string partitionRoutingKey(uint32_t partition);                        // "p<i>"
// The partition of a queue named "<cluster>.p<i>" (i decimal, no sign, no
// leading zero); nullopt for any other name.
std::optional<uint32_t> partitionOf(std::string_view cluster, std::string_view queue);
// The same for a stream named "<cluster>.p<i>.log".
std::optional<uint32_t> partitionStreamOf(std::string_view cluster, std::string_view queue);

// --- what the broker has -----------------------------------------------------
struct ExchangeState {
  bool exists = false;
  std::string type;  // "direct", "topic", "fanout", ...
  bool durable = false;
};

struct QueueState {
  std::string name;
  std::string type;  // "quorum", "classic", "stream"
  bool durable = false;
  bool single_active_consumer = false;
  std::vector<std::string> members;  // quorum queue replicas (node names)
  std::vector<std::string> online;   // the members that run
  std::string leader;
  // Ready + unacknowledged, as last sampled by the broker; absent until the
  // broker's first sample of a new queue.
  std::optional<uint64_t> messages;
};

struct Topology {
  std::string name;
  ExchangeState in, out, members;
  std::map<uint32_t, QueueState> partitions;  // every "<name>.p<i>" queue, by i
  std::map<uint32_t, QueueState> streams;     // every "<name>.p<i>.log" queue, by i
  std::optional<QueueState> composites;
  std::set<std::pair<std::string, std::string>> in_bindings;  // (queue, routing key) from <name>.in
  std::set<std::string> composites_keys;  // routing keys <name>.out -> <name>.composites

  // 1 + the highest partition queue or stream found; 0 when there is none.
  uint32_t partitionCount() const;
};

// Fields of the management API's JSON (GET /api/queues/..., /api/exchanges/...).
Result<QueueState> parseQueue(const nlohmann::json& queue);
ExchangeState parseExchange(const nlohmann::json& exchange);

// What in `found` contradicts `spec` and would make declaring it wrong
// (InvalidArgument): another partition count — a queue "<name>.p<i>" with
// i >= P, or "<name>.p<P-1>" missing while other partition queues exist
// (declareTopology() creates the highest first, so a declaration cut short
// still has it) —, a queue that is not durable + quorum (+ single active
// consumer for the partitions), a partition bound with another key, an
// exchange of another type. Objects merely missing are no conflict
// (declaring adds them).
Status checkConflicts(const Topology& found, const ClusterSpec& spec);
// checkConflicts() and nothing missing: every object and binding exists.
// What a node requires before it consumes.
Status checkComplete(const Topology& found, const ClusterSpec& spec);

// --- calls -------------------------------------------------------------------
// Reads the cluster's objects (failover over spec.brokers).
Result<Topology> inspectTopology(const ClusterSpec& spec, const std::string& password);

// Declares every object and binding, idempotently: what exists and matches
// is left alone. With stream input, a lease queue it declares, or one the
// broker samples as empty, gets a first token (offset 0). The samples lag
// by up to the broker's statistics interval, so declaring again within it
// may add a second token, which the partition's owner then settles
// (stream_checkpoint.h). Refuses (InvalidArgument, naming the object) when
// checkConflicts() fails, before changing anything. Two nodes declaring
// different partition counts at the same instant can both pass the check;
// the inspectTopology() + checkComplete() a node does before consuming
// catches that.
Status declareTopology(const ClusterSpec& spec, const std::string& password);

// --- connections ---------------------------------------------------------------
struct BrokerConnection {
  std::string name;      // "<peer host>:<peer port> -> <host>:<port>", the id to close it by
  std::string node;      // the RabbitMQ node it is on
  std::string protocol;  // "AMQP 1.0", "AMQP 0-9-1", ...
  std::string user;
  std::string peer_host;
  int peer_port = 0;
  // The client's AMQP 1.0 container id when the broker shows one. RabbitMQ
  // 3.10 does not: its AMQP 1.0 connections list empty client_properties
  // (the open frame's container-id and properties are not kept).
  std::string container_id;
};

BrokerConnection parseConnection(const nlohmann::json& connection);
// "<peer_host>:<peer_port>", the form pn_netaddr_str() gives for the local
// address of the client's transport (pn_transport_local_addr()).
std::string peerAddress(const BrokerConnection& connection);

Result<std::vector<BrokerConnection>> listConnections(const ClusterSpec& spec,
                                                      const std::string& password);

// Closes (DELETE /api/connections/NAME, with a reason) the AMQP 1.0
// connections whose container id is `container_id`, so that a node that
// went silent gives up its single-active-consumer places. A connection gone
// in between is no error. Fails with Unavailable when the broker shows no
// container id for its AMQP 1.0 connections (RabbitMQ 3.10): then use
// closeConnectionsFrom() with the addresses the node announced.
Status closeConnectionsOf(const ClusterSpec& spec, const std::string& password,
                          const std::string& container_id);
// The same, for the connections whose peer address ("host:port", see
// peerAddress()) is one of `peer_addresses`; how many it closed.
Result<size_t> closeConnectionsFrom(const ClusterSpec& spec, const std::string& password,
                                    const std::vector<std::string>& peer_addresses);

}  // namespace cepbus::services::cluster
