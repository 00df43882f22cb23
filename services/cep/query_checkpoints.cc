#include "services/cep/query_checkpoints.h"

#include <Poco/Logger.h>

#include <future>
#include <utility>

#include "bus/host/detection/composite_id.h"
#include "flows/journal/checkpoint_table.h"
#include "services/cep/cep_detection.h"
#include "services/cep/cep_query.h"

namespace cepbus::services::cep {
namespace {

double msSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

QueryCheckpoints::QueryCheckpoints(CheckpointSettings settings, Poco::Logger& log)
    : settings_(std::move(settings)), log_(log), last_(std::chrono::steady_clock::now()) {}

Result<std::string> QueryCheckpoints::encodePublished(
    const std::optional<plugin::SourceClock::Saved>& clock) const {
  std::vector<OutboxEntry> held;
  held.reserve(held_.size());
  for (const Held& h : held_) {
    held.push_back(OutboxEntry{static_cast<uint32_t>(h.query->member()), h.composite});
  }
  return encodeOutbox(published_, held, clock);
}

bool QueryCheckpoints::restore(detection::Detection& detection, plugin::SourceClock& clock,
                               std::span<const std::shared_ptr<CepQuery>> members) {
  const auto start = std::chrono::steady_clock::now();
  auto refuse = [&](const std::string& why) {
    {
      MutexLock lock(stats_mu_);
      ++stats_.restore_refused;
    }
    log_.error(
        "%s: checkpoint refused, the query starts empty and the journal redelivers what "
        "it holds: %s",
        settings_.label, why);
    return false;
  };
  Result<std::optional<flows::CheckpointRecord>> stored =
      flows::readCheckpoint(settings_.journal_path, settings_.name);
  if (!stored) return refuse(stored.status().message());
  if (!stored->has_value()) return true;
  const flows::CheckpointRecord& record = **stored;
  const std::string what =
      "checkpoint of " + settings_.label + " in journal " + settings_.journal_path;
  Outbox outbox(kPublishedWindow);
  if (Status s = decodeOutbox(record.published, members.size(), outbox); !s) {
    return refuse(what + ": " + s.message());
  }
  Result<detection::RestoredCheckpoint> restored =
      detection::restoreCheckpointBytes(record.state, what, detection, settings_.identity);
  if (!restored) return refuse(restored.status().message());
  position_base_ = restored->position;
  // The links it heard are gone with the process: one source, of an id no
  // link of this run has.
  if (outbox.clock)
    clock.restore(flows::newSource(), *outbox.clock, std::chrono::steady_clock::now());
  published_ = std::move(outbox.published);
  held_.clear();
  for (OutboxEntry& entry : outbox.held) {
    held_.push_back(Held{members[entry.member].get(), std::move(entry.composite), true});
  }
  const double ms = msSince(start);
  {
    MutexLock lock(stats_mu_);
    stats_.restored_bytes = record.state.size();
    stats_.restore_ms = ms;
    stats_.held = held_.size();
  }
  log_.information(
      "%s: restored from its checkpoint%s (%Lu events in, %Lu bytes, %.1f ms; %Lu composites to "
      "publish again)",
      settings_.label,
      std::string(restored->carried_over ? ", its state carried over to the edited query" : ""),
      static_cast<Poco::UInt64>(restored->position), static_cast<Poco::UInt64>(record.state.size()),
      ms, static_cast<Poco::UInt64>(held_.size()));
  return true;
}

void QueryCheckpoints::delivered(const Event* event, flows::DeliveryContext& context) {
  if (!context.journaled()) return;
  flows::DeferredAck ack = context.deferAcknowledgement();
  MutexLock lock(mu_);
  delivered_[event].push_back(ack);
  via_ = std::move(ack);
}

void QueryCheckpoints::refused(const Event* event) {
  std::vector<flows::DeferredAck> acks;
  {
    MutexLock lock(mu_);
    auto it = delivered_.find(event);
    if (it == delivered_.end()) return;
    acks = std::move(it->second);
    delivered_.erase(it);
  }
  // Refused, not taken: the flow delivers it again later.
  for (const flows::DeferredAck& ack : acks) ack(Status::rejected("query stage full"));
}

void QueryCheckpoints::consumed(std::span<const EventPtr> events) {
  std::vector<flows::DeferredAck> now;  // once checkpoints stopped: acknowledged at once
  {
    MutexLock lock(mu_);
    changed_ = changed_ || !events.empty();
    std::vector<flows::DeferredAck>& to = disabled_ ? now : covered_;
    for (const EventPtr& event : events) {
      auto it = delivered_.find(event.get());
      if (it == delivered_.end()) continue;
      for (flows::DeferredAck& ack : it->second) to.push_back(std::move(ack));
      delivered_.erase(it);
    }
  }
  for (const flows::DeferredAck& ack : now) ack(Status::ok());
}

void QueryCheckpoints::hold(CepQuery& query, EventPtr composite,
                            std::span<const EventId> constituents) {
  if (!published_.insert(detection::compositeId(query.name(), constituents))) {
    MutexLock lock(stats_mu_);
    ++stats_.duplicates_dropped;
    return;
  }
  if (disabled_) {
    query.send(std::move(composite), false);
    return;
  }
  held_.push_back(Held{&query, std::move(composite), false});
  MutexLock lock(stats_mu_);
  stats_.held = held_.size();
}

bool QueryCheckpoints::pending() const {
  if (disabled_ || !activated_.load(std::memory_order_acquire)) return false;
  MutexLock lock(mu_);
  return changed_ || !covered_.empty() || !held_.empty();
}

bool QueryCheckpoints::due(std::chrono::steady_clock::time_point now) const {
  return now - last_ >= settings_.interval && pending();
}

void QueryCheckpoints::publishHeld() {
  for (Held& h : held_) h.query->send(std::move(h.composite), h.redelivery);
  held_.clear();
  MutexLock lock(stats_mu_);
  stats_.held = 0;
}

void QueryCheckpoints::giveUp(const std::string& why) {
  disabled_ = true;
  log_.error("%s: checkpoints stopped, the query goes on without them: %s", settings_.label, why);
  std::vector<flows::DeferredAck> acks;
  {
    MutexLock lock(mu_);
    acks = std::move(covered_);
    covered_.clear();
  }
  for (const flows::DeferredAck& ack : acks) ack(Status::ok());
  publishHeld();
}

void QueryCheckpoints::checkpoint(const detection::Detection& detection,
                                  const plugin::SourceClock& clock, uint64_t consumed) {
  if (disabled_) return;
  const auto start = std::chrono::steady_clock::now();
  last_ = start;
  std::vector<flows::DeferredAck> acks;
  flows::DeferredAck via;
  {
    MutexLock lock(mu_);
    acks = std::move(covered_);
    covered_.clear();
    via = via_;
    changed_ = false;
  }
  if (!via) {
    // No journaled input yet: nothing the journal could redeliver, so nothing
    // to keep exactly once.
    publishHeld();
    return;
  }
  if (via.journalPath() != settings_.journal_path) {
    {
      MutexLock lock(mu_);
      acks.insert(acks.end(), std::make_move_iterator(covered_.begin()),
                  std::make_move_iterator(covered_.end()));
      covered_ = std::move(acks);
    }
    return giveUp("its input comes through journal " + via.journalPath() +
                  ", checkpoints are kept in the bus's journal " + settings_.journal_path +
                  " (a reliable route without a stage)");
  }
  Result<std::string> state =
      detection::checkpointBytes(detection, settings_.identity, position_base_ + consumed);
  Result<std::string> published = encodePublished(clock.save(start));
  if (!state || !published) {
    {
      MutexLock lock(mu_);
      covered_ = std::move(acks);
    }
    return giveUp(!state ? state.status().message()
                         : "its outbox cannot be written: " + published.status().message());
  }
  const size_t bytes = state->size();
  flows::CheckpointRecord record{settings_.name,
                                 settings_.identity.engine,
                                 detection.snapshotVersion(),
                                 settings_.identity.fingerprint,
                                 position_base_ + consumed,
                                 std::move(state).value(),
                                 std::move(published).value()};
  std::promise<Status> stored;
  std::future<Status> result = stored.get_future();
  via.storeCheckpoint(acks, std::move(record),
                      [&stored](const Status& status) { stored.set_value(status); });
  const Status status = result.get();
  const double ms = msSince(start);
  if (!status) {
    uint64_t failed;
    {
      MutexLock lock(mu_);
      // The oldest first again, for the next checkpoint.
      acks.insert(acks.end(), std::make_move_iterator(covered_.begin()),
                  std::make_move_iterator(covered_.end()));
      covered_ = std::move(acks);
      changed_ = true;
    }
    {
      MutexLock lock(stats_mu_);
      failed = ++stats_.failed;
    }
    if (worthLogging(failed - 1, failed)) {
      log_.error(
          "%s: checkpoint not stored (%Lu failed so far); its input stays unacknowledged "
          "and its composites held until one is: %s",
          settings_.label, static_cast<Poco::UInt64>(failed), status.message());
    }
    return;
  }
  {
    MutexLock lock(stats_mu_);
    ++stats_.written;
    stats_.last_bytes = bytes;
    stats_.last_ms = ms;
  }
  publishHeld();
}

void QueryCheckpoints::finish(const detection::Detection& detection,
                              const plugin::SourceClock& clock, uint64_t consumed) {
  if (disabled_) return;
  bool pending;
  {
    MutexLock lock(mu_);
    pending = changed_ || !covered_.empty();
  }
  if (pending || !held_.empty()) checkpoint(detection, clock, consumed);
  if (held_.empty()) return;
  log_.warning(
      "%s: stopped without a checkpoint of its last %Lu composite events; the journal "
      "replays their input at the next start, which publishes them then",
      settings_.label, static_cast<Poco::UInt64>(held_.size()));
  held_.clear();
}

CheckpointStats QueryCheckpoints::stats() const {
  MutexLock lock(stats_mu_);
  return stats_;
}

}  // namespace cepbus::services::cep
