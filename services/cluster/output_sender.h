#pragma once

// OutputSender: a cluster node's output path, from what its partitions'
// runners publish to the broker's answers coming back to them.
//
// An output goes into its routing key's batch (output_batcher.h); a batch
// that closes, full or at the end of its linger, is encoded and sent on the
// node's link for its routing key ("late" for late events). The broker's
// answer to a batch is each of its outputs' answer, handed to the runner
// that published it (PartitionRunner::outputDone()): a confirmed batch lets
// the inputs waiting for its composites be accepted, and a refused one (or
// one whose link the broker ended) makes each runner send its outputs
// again, into a later batch, while their inputs wait. A batch with no link
// to go on is dropped unanswered: the connection is going, and every
// runner with it.
//
// The sender reaches the broker and the runners only through Io, so a test
// drives it without either; the node's connection handler is its Io in a
// running bus, and keeps each sent batch's tracker until the broker answers.
//
// Thread-safety: none; one per node, on its container thread. Time is
// passed in. Ownership: the spec, the queries and the Io outlive it.

#include <cstdint>
#include <optional>
#include <proton/message.hpp>
#include <span>
#include <string>
#include <vector>

#include "services/cluster/cluster_queries.h"
#include "services/cluster/cluster_spec.h"
#include "services/cluster/output_batcher.h"
#include "services/cluster/partition_runner.h"

namespace cepbus::services::cluster {

class OutputSender {
 public:
  using TimePoint = OutputBatcher::TimePoint;

  // What the sender asks of the node.
  class Io {
   public:
    virtual ~Io() = default;
    // Sends `message`, carrying batch `batch`, on the link of `routing_key`
    // (`late`: the link for late events); the broker's answer comes through
    // OutputSender::answered(). False when there is no open link.
    virtual bool send(uint64_t batch, const std::string& routing_key, bool late,
                      const proton::message& message) = 0;
    // Calls OutputSender::lingered() at `due` or soon after. The sender asks
    // again only once that call came.
    virtual void wakeAt(TimePoint due) = 0;
    // The broker's answer to output `seq` of partition `partition`'s
    // runner, the one that published it.
    virtual void outputDone(uint32_t partition, uint64_t seq, bool accepted) = 0;
  };

  // The sender of the node of `spec`, running `queries`.
  OutputSender(const ClusterSpec& spec, std::span<const CompiledQuery> queries, Io& io);

  // Partition `partition`'s runner publishes `output` at `now`.
  void send(uint32_t partition, const OutputMessage& output, TimePoint now);
  // The time Io::wakeAt() asked for came: sends the batches whose linger
  // ended by `now`. True when it sent any (off the connection's own events,
  // Proton 0.37 writes them out only once the connection is woken).
  bool lingered(TimePoint now);
  // The broker's answer to batch `batch`: each output's goes to its runner.
  void answered(uint64_t batch, bool accepted);

  // Partition `partition`'s runner is gone: its outputs are not answered
  // (OutputBatcher::forget()).
  void forget(uint32_t partition) { batcher_.forget(partition); }
  // The broker connection is gone, and every runner with it: no batch is
  // answered any more, and batch numbers start again.
  void clear() { batcher_.clear(); }

 private:
  void sendBatches(const std::vector<OutputBatcher::Batch>& batches);
  void armTimer();

  Io& io_;
  OutputBatcher batcher_;
  proton::message message_;  // reused for every batch
  bool timer_armed_ = false;
};

}  // namespace cepbus::services::cluster
