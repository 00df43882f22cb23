#include "services/cluster/partition_runner.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <cstdint>

#include "bus/host/detection/composite_id.h"
#include "services/cluster/cluster_publisher.h"
#include "services/cluster/topology.h"

namespace cepbus::services::cluster {
namespace {

// How long stream messages wait for an earlier one of their publisher's
// (stream_sequencer.h): a publisher resends within its confirm timeout and
// a read-back, and gives up on the brokers after its give_up_ms.
constexpr std::chrono::milliseconds kSequenceGapWait(PublishOptions{}.give_up_ms);

// How many event ids a partition remembers to drop resent copies: what
// it may hold, and at least many times what a publisher resends after a
// failover (ClusterPublisher keeps up to 1,000 events in flight).
size_t dedupeEvents(const ClusterSpec& spec) {
  return std::max<size_t>(2 * size_t{spec.max_unsettled}, 16384);
}

// How many stream messages may wait for an earlier one of their
// publisher's: at least twice what a publisher has in flight (all that a
// broker can store after one it refuses), and what the node reads ahead.
size_t maxOutOfOrder(const ClusterSpec& spec) {
  return std::max<size_t>(spec.max_unsettled, 2 * size_t{PublishOptions{}.max_in_flight});
}

std::string joinTs(const plugin::Match& match) {
  std::string out = "[";
  for (size_t i = 0; i < match.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(match.ts(i));
  }
  return out + "]";
}

}  // namespace

struct PartitionRunner::Stream {
  Stream(const LeaseMark& lease, size_t max_out_of_order)
      : checkpoint(lease.resume_from),
        sequencer(max_out_of_order, kSequenceGapWait),
        replay_to(lease.read_to) {}

  StreamCheckpoint checkpoint;
  StreamSequencer sequencer;
  // What came ahead of a publisher's gap waits here, by offset.
  std::map<uint64_t, PartitionInput> ahead_of_gap;
  std::vector<HeldToken> tokens;
  const uint64_t replay_to;  // offsets below were read by the previous owner
};

Result<std::unique_ptr<PartitionRunner>> PartitionRunner::create(
    const ClusterSpec& spec, uint32_t partition, std::span<const CompiledQuery> queries,
    PartitionIo& io, ClusterStats& counters, std::optional<LeaseMark> lease) {
  std::unique_ptr<PartitionRunner> runner(
      new PartitionRunner(spec, partition, longestWindow(queries), io, counters));
  auto runs = QueryRuns::create(queries, partitionTime(spec), *runner);
  if (!runs) return runs.status();
  runner->runs_ = std::move(*runs);
  if (lease) runner->stream_ = std::make_unique<Stream>(*lease, maxOutOfOrder(spec));
  return runner;
}

PartitionRunner::PartitionRunner(const ClusterSpec& spec, uint32_t partition, Timestamp window,
                                 PartitionIo& io, ClusterStats& counters)
    : spec_(spec),
      partition_(partition),
      queue_(Symbol::intern(partitionQueue(spec.name, partition))),
      io_(io),
      counters_(counters),
      log_(Poco::Logger::get("cepbus.cluster")),
      ledger_(window),
      seen_(dedupeEvents(spec)) {}

PartitionRunner::~PartitionRunner() = default;

void PartitionRunner::onQueueInput(uint64_t tag, PartitionInput input, Time now) {
  ++counters_.received;
  if (input.redelivered) ++counters_.replayed;
  take(tag, std::move(input), now);
  if (held_.size() >= spec_.max_unsettled) {
    ++counters_.window_full;
    if (counters_.window_full == 1 || counters_.window_full % 1000 == 0) {
      log_.warning(
          "cluster %s node %s: partition %u holds max-unsettled=%u messages that its windows "
          "still need: it waits for newer events (raise max-unsettled, shorten WITHIN, or "
          "use input=\"stream\")",
          spec_.name, spec_.node, partition_, spec_.max_unsettled);
    }
  }
}

void PartitionRunner::onStreamInput(PartitionInput input, Time now) {
  ++counters_.received;
  if (!input.offset) {
    ++counters_.rejected;
    log_.warning(
        "cluster %s node %s: partition %u: a stream message without x-stream-offset; "
        "ignored",
        spec_.name, spec_.node, partition_);
    return;
  }
  const uint64_t offset = *input.offset;
  if (offset < stream_->replay_to) ++counters_.replayed;
  if (const uint64_t lost = stream_->checkpoint.read(offset); lost > 0) {
    counters_.retention_gaps += lost;
    log_.error(
        "cluster %s node %s: partition %u: the stream no longer holds offsets %s to %s "
        "that its lease says to replay (retention=%s is shorter than the windows and "
        "the downtime): matches needing those events are lost",
        spec_.name, spec_.node, partition_, std::to_string(offset - lost),
        std::to_string(offset - 1), spec_.retention);
  }
  sequence(offset, std::move(input), now);
}

// A stream message goes on in its publisher's order (stream_sequencer.h);
// one that came ahead of a gap waits for it.
void PartitionRunner::sequence(uint64_t offset, PartitionInput input, Time now) {
  StreamSequencer& sequencer = stream_->sequencer;
  const uint64_t gaps = sequencer.gaps();
  const StreamSequencer::Offer offer = sequencer.offer(offset, input.sequence, now);
  if (offer.held) {
    ++counters_.out_of_order;
    stream_->ahead_of_gap.emplace(offset, std::move(input));
  } else {
    take(offset, std::move(input), now);
  }
  resume(offer.then, sequencer.gaps() - gaps, now);
}

// Held stream messages whose turn came, in order; `gaps` messages were
// given up on to let them go.
void PartitionRunner::resume(const std::vector<uint64_t>& offsets, uint64_t gaps, Time now) {
  if (gaps > 0) {
    counters_.sequence_gaps += gaps;
    log_.error(
        "cluster %s node %s: partition %u: %s messages of a publisher were missing from "
        "the stream ahead of later ones for %s ms (or %s later ones were held); the "
        "later ones go on, and the missing ones count as late if they come",
        spec_.name, spec_.node, partition_, std::to_string(gaps),
        std::to_string(kSequenceGapWait.count()), std::to_string(maxOutOfOrder(spec_)));
  }
  for (uint64_t offset : offsets) {
    auto held = stream_->ahead_of_gap.extract(offset);
    if (!held.empty()) take(offset, std::move(held.mapped()), now);
  }
}

void PartitionRunner::holdLeaseToken(uint64_t tag, std::string id) {
  stream_->tokens.push_back(HeldToken{tag, std::move(id)});
}

void PartitionRunner::take(uint64_t tag, PartitionInput input, Time now) {
  if (input.end_of_stream) {
    endOfStream(tag);
    return;
  }
  if (ended_) {
    // The first message after an end of stream: detectors and order start over.
    runs_->restart();
    ledger_.newStream();
    ended_ = false;
  }
  if (input.events.empty()) {
    refuse(tag, input);
    return;
  }
  // The ledger holds the message once per event; it is settled when the
  // last of them may go.
  held_.emplace(tag, static_cast<uint32_t>(input.events.size()));
  held_peak_ = std::max<uint64_t>(held_peak_, held_.size());
  for (EventPtr& event : input.events) {
    const flows::DeliveryKey key{queue_, event->id()};
    if (seen_.contains(key)) {
      // Resent by a publisher after a broker failover: the original is
      // held or was settled already.
      ++counters_.duplicates;
      ledger_.holdUntilOutputsAccepted(tag);
      continue;
    }
    seen_.insert(key);
    const Timestamp ts = event->ts();
    if (Status s = runs_->push(event, now); !s) {
      ++counters_.late;
      publish(OutputMessage{0, std::move(event), std::nullopt});
      ledger_.holdUntilOutputsAccepted(tag);
    } else {
      ledger_.hold(tag, ts);
    }
  }
  runs_->release();
  settle();
}

// A message that is no event. A queue rejects it; a stream keeps it, so
// it is only logged, counted and let go.
void PartitionRunner::refuse(uint64_t tag, const PartitionInput& input) {
  ++counters_.rejected;
  log_.warning("cluster %s node %s: partition %u: refused a message: %s", spec_.name, spec_.node,
               partition_, input.description);
  if (stream_) {
    stream_->checkpoint.done(tag);
  } else {
    io_.reject(tag, input.condition, input.description);
  }
}

// No event follows in this stream: every buffered event goes to the
// detectors, every window closes, and what was held may go once the
// outputs are accepted.
void PartitionRunner::endOfStream(uint64_t tag) {
  runs_->drain();
  ledger_.released(INT64_MAX);
  held_.emplace(tag, 1);
  ledger_.holdUntilOutputsAccepted(tag);
  ended_ = true;
  ++counters_.streams_ended;
  settle();
}

void PartitionRunner::settle() {
  for (uint64_t tag : ledger_.settleable()) {
    auto it = held_.find(tag);
    if (it == held_.end()) continue;
    ++counters_.settled;
    if (--it->second > 0) continue;
    held_.erase(it);
    if (stream_) {
      stream_->checkpoint.done(tag);
    } else {
      io_.accept(tag);
    }
  }
}

void PartitionRunner::publish(OutputMessage output) {
  output.seq = ledger_.published();
  auto [it, added] = unaccepted_.emplace(output.seq, std::move(output));
  io_.send(it->second);
}

void PartitionRunner::outputDone(uint64_t seq, bool accepted) {
  auto it = unaccepted_.find(seq);
  if (it == unaccepted_.end()) return;
  if (!accepted) {
    // Sent again: an input is settled only after its outputs are accepted.
    io_.send(it->second);
    return;
  }
  unaccepted_.erase(it);
  ledger_.accepted(seq);
  settle();
}

void PartitionRunner::tick(Time now, WallTime wall) {
  if (!stream_) {
    advanceTime(now, wall);
    return;
  }
  StreamSequencer& sequencer = stream_->sequencer;
  const uint64_t gaps = sequencer.gaps();
  const std::vector<uint64_t> overdue = sequencer.expire(now);
  resume(overdue, sequencer.gaps() - gaps, now);
  advanceTime(now, wall);
  checkpoint();
}

// Not after an end of stream (every window closed; the next event starts
// anew) nor while stream messages wait for a publisher's missing one: its
// events may precede theirs, and the wall clock would make them late.
void PartitionRunner::advanceTime(Time now, WallTime wall) {
  if (ended_ || (stream_ && !stream_->ahead_of_gap.empty())) return;
  runs_->tick(now, wall);
  settle();
}

// Stream input: moves the partition's lease forward when its windows let
// go of the oldest messages (stream_checkpoint.h).
void PartitionRunner::checkpoint() {
  StreamCheckpoint& checkpoint = stream_->checkpoint;
  const std::optional<uint64_t> at = checkpoint.due();
  if (!at) return;
  if (io_.sendLeaseToken(LeaseMark{*at, checkpoint.readTo()})) checkpoint.sending(*at);
}

// The broker took the new token: the ones held before it are settled, so
// the lease carries only the newest offset.
void PartitionRunner::leaseTokenDone(const std::string& id, bool accepted) {
  if (!stream_) return;
  stream_->checkpoint.sent(accepted);
  if (!accepted) return;
  ++counters_.checkpoints;
  std::vector<HeldToken> kept;
  for (HeldToken& token : stream_->tokens) {
    if (token.id == id) {
      kept.push_back(std::move(token));
    } else {
      io_.settleLeaseToken(token.tag);
    }
  }
  stream_->tokens = std::move(kept);
}

void PartitionRunner::describe(PartitionStats& stats) const {
  stats.held = ledger_.held();
  stats.unaccepted_outputs = ledger_.unacceptedOutputs();
  stats.stream_ended = ended_;
  stats.held_messages_peak = held_peak_;
  if (runs_) stats.watermark = runs_->watermark();
  if (stream_) {
    stats.resume_from = stream_->checkpoint.resumeFrom();
    stats.lease_offset = stream_->checkpoint.token();
  }
}

uint64_t PartitionRunner::readTo() const { return stream_ ? stream_->checkpoint.readTo() : 0; }

void PartitionRunner::onMatch(const CompiledQuery& query, const plugin::Match& match) {
  std::vector<EventId> ids;
  ids.reserve(match.size());
  for (size_t i = 0; i < match.size(); ++i) ids.push_back(match.event(i)->id());
  ++counters_.composites;
  publish(OutputMessage{
      0, match.composite(),
      OutputMessage::Composite{query.name, query.output, detection::compositeId(query.name, ids),
                               joinTs(match)}});
}

void PartitionRunner::onReleased(Timestamp ts) { ledger_.released(ts); }

void PartitionRunner::onDetectorError(const CompiledQuery& query, const Status& error) {
  ++counters_.detector_errors;
  log_.warning("cluster %s node %s: partition %u query %s: %s", spec_.name, spec_.node, partition_,
               query.name, error.message());
}

}  // namespace cepbus::services::cluster
