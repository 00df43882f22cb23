#pragma once

// OutputBatcher: what a cluster node publishes to "<name>.out" — its
// partitions' composites and late events — packed into batch messages.
//
// A quorum queue message costs the brokers far more than an event in it
// (docs/cluster.md, "Where the time goes"), and a node makes a composite
// every few events, so each going alone would cost the brokers more than
// the input it came from. Outputs are batched per routing key (the query's
// output, or "late"), across the node's partitions, by IngressBatcher's
// rule: a batch closes at `batch_events`, before `batch_bytes`, or
// `linger` after its first output. An output is one "delivery" of one
// event to the IngressBatcher, on the lane of its routing key.
//
// The at-least-once rule of partition_runner.h holds per output: a batch
// the broker accepts answers each of its outputs as accepted
// (PartitionRunner::outputDone()), a refused batch answers each as refused,
// and the runner sends it again (into a new batch); its inputs wait.
//
// Formats (docs/cluster.md, "Composites on <name>.out"): a composite batch
// has subject kCompositeBatchSubject and a string body of JSON lines
//   {"id":<composite id>,"query":"q","match_ts":[t1,...],"partition":p,
//    "node":"n","event":<the composite, compact format>}
// and a late batch is an event batch (event_batch.h, full format, so each
// event keeps its id) with application property late=true. With
// `batch_events` 1 every output goes alone, as a plain event message whose
// message-id is the composite id (the format before batches).
//
// Thread-safety: none; one per node, on its container thread. Time is
// passed in; the caller arms a timer for nextDeadline().

#include <cstdint>
#include <optional>
#include <proton/message.hpp>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "services/cluster/cluster_queries.h"
#include "services/cluster/cluster_spec.h"
#include "services/cluster/ingress_batcher.h"
#include "services/cluster/partition_runner.h"

namespace cepbus::services::cluster {

// The subject of a batch of composites on "<name>.out".
inline constexpr char kCompositeBatchSubject[] = "cepbus.composites";

class OutputBatcher {
 public:
  using TimePoint = IngressBatcher::TimePoint;
  using Batch = IngressBatcher::Batch;

  // An output as its runner named it: the runner's answer goes to it.
  struct Ref {
    uint32_t partition = 0;
    uint64_t seq = 0;
  };

  // Batches for `node` of the cluster `spec`, running `queries`.
  OutputBatcher(const ClusterSpec& spec, std::span<const CompiledQuery> queries);

  // Takes partition `partition`'s `output`; the batches that closed.
  std::vector<Batch> add(uint32_t partition, const OutputMessage& output, TimePoint now);
  // The batches whose linger ended by `now`.
  std::vector<Batch> expire(TimePoint now) { return batcher_->expire(now); }
  std::optional<TimePoint> nextDeadline() const { return batcher_->nextDeadline(); }

  // The routing key `batch` goes with on "<name>.out".
  const std::string& routingKey(const Batch& batch) const { return lanes_[batch.partition]; }
  // Whether `batch` carries late events (routing key "late") rather than composites.
  bool late(const Batch& batch) const { return batch.partition + 1 == lanes_.size(); }
  // Makes `message` (cleared first) the message carrying `batch`.
  void encode(const Batch& batch, proton::message& message) const;

  // The broker's answer to `batch`: the outputs it carried whose partition
  // still runs under the runner that sent them.
  std::vector<Ref> confirmed(uint64_t batch);
  std::vector<Ref> refused(uint64_t batch);

  // Partition `partition`'s runner is gone: its outputs are not answered
  // (a batch already open still carries them: a composite is correct
  // whoever publishes it, and its id makes a second copy a duplicate).
  void forget(uint32_t partition);
  // The broker connection is gone, and every runner with it.
  void clear();

 private:
  struct Pending {
    Ref ref;
    uint64_t generation = 0;  // of its partition when taken
    OutputMessage output;     // for the plain format of batch_events 1
    std::string line;         // its line in a batch
  };

  std::vector<Ref> answered(const std::vector<uint64_t>& outputs);
  std::string line(uint32_t partition, const OutputMessage& output) const;
  void encodeOne(const Pending& pending, proton::message& message) const;

  const ClusterSpec& spec_;
  const IngressBatcher::Limits limits_;
  std::vector<std::string> lanes_;  // routing keys; the last is "late"
  std::unordered_map<std::string, uint32_t> lane_of_;
  std::optional<IngressBatcher> batcher_;
  std::unordered_map<uint64_t, Pending> pending_;  // by output id, until answered
  std::vector<uint64_t> generations_;              // per partition
  uint64_t next_output_ = 1;
};

}  // namespace cepbus::services::cluster
