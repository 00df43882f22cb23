#pragma once

// PartitionRunner: one partition's active life on a cluster node, from the
// first input the broker gives the node until the partition's session ends.
//
// It takes the partition's input messages (decoded from AMQP by the
// connection handler), drops the events a publisher resent, puts a stream's
// messages back in their publishers' order (stream_sequencer.h), feeds the
// events to the cluster's queries in event-time order (QueryRuns),
// re-publishes an event more than the max-delay behind as late, and publishes each
// composite with its deterministic id (bus/host/detection/composite_id.h). An input message is
// settled once no window needs its events and every output published before
// was accepted (partition_ledger.h): a queue's message is then accepted;
// with stream input its offset stops holding the partition's lease back,
// and the runner moves the lease forward with new tokens
// (stream_checkpoint.h). An end-of-stream marker lets every window close
// and the next event start a new stream. The partition is its queries' one
// source of event time (query_runs.h): on the node's tick, a partition
// silent for the source idle timeout whose events declare their time unit
// follows the wall clock, so its windows close, its trailing negations fire
// and the input they held is settled with no later event — except while a
// stream's messages wait for a publisher's missing one (its time waits too).
//
// The runner reaches the broker only through PartitionIo, and the broker's
// answers come back through outputDone() and leaseTokenDone(): a test runs
// a partition against a fake.
//
// Thread-safety: none; the node drives each runner from its container
// thread. Time is passed in. Ownership: the spec, the queries, the
// PartitionIo and the counters outlive the runner.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/status.h"
#include "bus/core/symbol.h"
#include "flows/dedupe_window.h"
#include "services/cluster/cluster_queries.h"
#include "services/cluster/cluster_spec.h"
#include "services/cluster/cluster_stats.h"
#include "services/cluster/partition_ledger.h"
#include "services/cluster/query_runs.h"
#include "services/cluster/stream_checkpoint.h"
#include "services/cluster/stream_sequencer.h"

namespace Poco {
class Logger;
}

namespace cepbus::services::cluster {

// An input message of a partition as the connection handler decoded it.
struct PartitionInput {
  // One event, or a batch (event_batch.h) in order; empty for the
  // end-of-stream marker and for a message that is no event.
  std::vector<EventPtr> events;
  bool end_of_stream = false;
  // Why a message without events is no event: the AMQP condition and a
  // description for its sender.
  std::string condition;
  std::string description;
  // Queue input: the broker delivered it before (to this node or another).
  bool redelivered = false;
  // Stream input: the offset the stream holds it at (nullopt: the broker
  // stamped none), and its place in its publisher's order.
  std::optional<uint64_t> offset;
  std::optional<StreamSequencer::Tag> sequence;
};

// What a runner publishes on the cluster's "<name>.out" exchange.
struct OutputMessage {
  // Its number among the partition's outputs: outputDone() names it.
  uint64_t seq = 0;
  // The composite event, or the late input event itself.
  EventPtr event;
  // A composite's query, the routing key of its output, its deterministic
  // message-id and its match's timestamps ("[t1,t2,...]").
  struct Composite {
    std::string query;
    std::string output;
    uint64_t id = 0;
    std::string match_ts;
  };
  std::optional<Composite> composite;  // nullopt: a late event (routing key "late")
};

// What a runner asks of the broker. Each call is answered, when at all,
// through the runner's methods.
class PartitionIo {
 public:
  virtual ~PartitionIo() = default;
  // Queue input: the message the runner was given as `tag` is no longer
  // needed; the broker forgets it.
  virtual void accept(uint64_t tag) = 0;
  // Queue input: the message `tag` is no event; the broker drops it, telling
  // its sender `condition` and `description`.
  virtual void reject(uint64_t tag, const std::string& condition,
                      const std::string& description) = 0;
  // Publishes `output`; the broker's answer comes through
  // PartitionRunner::outputDone(). Without a link to send on (the
  // connection is going, and the partition with it) it is dropped.
  virtual void send(const OutputMessage& output) = 0;
  // Stream input: publishes a lease token carrying `mark`, whose answer comes
  // through PartitionRunner::leaseTokenDone(); its message-id, or nullopt
  // when the lease takes no token now.
  virtual std::optional<std::string> sendLeaseToken(const LeaseMark& mark) = 0;
  // Stream input: settles the held lease token `tag`: a newer one replaced it.
  virtual void settleLeaseToken(uint64_t tag) = 0;
};

class PartitionRunner final : private QueryRuns::Listener {
 public:
  using Time = QueryRuns::Time;
  using WallTime = QueryRuns::WallTime;

  // The runner of `partition` of the cluster `spec`, running `queries`,
  // counting into `counters`. `lease`: with stream input, the mark of the
  // lease token the node took the partition with (where it reads from, and
  // how far the previous owner had read). The engine's error when a query
  // cannot run.
  static Result<std::unique_ptr<PartitionRunner>> create(const ClusterSpec& spec,
                                                         uint32_t partition,
                                                         std::span<const CompiledQuery> queries,
                                                         PartitionIo& io, ClusterStats& counters,
                                                         std::optional<LeaseMark> lease);
  ~PartitionRunner() override;
  PartitionRunner(const PartitionRunner&) = delete;
  PartitionRunner& operator=(const PartitionRunner&) = delete;

  // Queue input: a message of the partition queue, known to PartitionIo as
  // `tag` (unique for the runner's life), received at `now`.
  void onQueueInput(uint64_t tag, PartitionInput input, Time now);
  // Stream input: a message read from the partition's stream at `now`. The
  // stream keeps it, so the runner only holds its offset.
  void onStreamInput(PartitionInput input, Time now);
  // Stream input: a lease token the node holds unsettled, `tag` for
  // PartitionIo::settleLeaseToken() and `id` its message-id (empty for the
  // first token); settled once a newer token is accepted.
  void holdLeaseToken(uint64_t tag, std::string id);

  // The broker's answer to output `seq`: once accepted, the inputs waiting
  // for it may go; a refused output is sent again.
  void outputDone(uint64_t seq, bool accepted);
  // The broker's answer to the lease token `id`: once accepted, the lease
  // carries its offset and the older tokens are settled.
  void leaseTokenDone(const std::string& id, bool accepted);
  // Every heartbeat period: moves event time with the wall clock `wall`
  // when the partition is silent (see the file comment); with stream
  // input, first lets go of publishers' gaps waited on too long, and then
  // moves the lease forward when it can.
  void tick(Time now, WallTime wall);

  // The partition's holdings, as PartitionStats reports them.
  void describe(PartitionStats& stats) const;
  // Stream input: one past the highest offset read, where a new reader of
  // the stream starts so that nothing is read twice.
  uint64_t readTo() const;

 private:
  // Stream input's state: the lease, the publishers' order, the tokens held.
  struct Stream;
  struct HeldToken {
    uint64_t tag;
    std::string id;
  };

  PartitionRunner(const ClusterSpec& spec, uint32_t partition, Timestamp window, PartitionIo& io,
                  ClusterStats& counters);

  // An input message in its turn; `tag` is what settling it names.
  void take(uint64_t tag, PartitionInput input, Time now);
  void sequence(uint64_t offset, PartitionInput input, Time now);
  void resume(const std::vector<uint64_t>& offsets, uint64_t gaps, Time now);
  // Lets event time follow the wall clock on a tick (QueryRuns::tick()).
  void advanceTime(Time now, WallTime wall);
  void refuse(uint64_t tag, const PartitionInput& input);
  void endOfStream(uint64_t tag);
  void settle();
  void checkpoint();
  void publish(OutputMessage output);

  // QueryRuns::Listener
  void onMatch(const CompiledQuery& query, const plugin::Match& match) override;
  void onReleased(Timestamp ts) override;
  void onDetectorError(const CompiledQuery& query, const Status& error) override;

  const ClusterSpec& spec_;
  const uint32_t partition_;
  const Symbol queue_;  // the partition queue's name: where the event ids come from
  PartitionIo& io_;
  ClusterStats& counters_;
  Poco::Logger& log_;

  PartitionLedger ledger_;
  flows::DedupeWindow seen_;
  std::unique_ptr<QueryRuns> runs_;
  // The input messages the ledger holds, by tag: how many of their events
  // it still holds (a message is settled with its last).
  std::unordered_map<uint64_t, uint32_t> held_;
  uint64_t held_peak_ = 0;
  // Outputs published and not accepted yet, by seq: sent again if refused.
  std::map<uint64_t, OutputMessage> unaccepted_;
  bool ended_ = false;  // an end-of-stream marker came; the next event starts anew
  std::unique_ptr<Stream> stream_;
};

}  // namespace cepbus::services::cluster
