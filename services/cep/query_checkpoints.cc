#include "services/cep/query_checkpoints.h"

#include <Poco/Logger.h>

#include <cstring>
#include <future>
#include <utility>

#include "bus/core/event_json.h"
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

template <typename T>
void appendLe(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

template <typename T>
T readLe(std::string_view bytes) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    v |= static_cast<T>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  return v;
}

}  // namespace

bool PublishedWindow::insert(uint64_t id) {
  if (!ids_.insert(id).second) return false;
  order_.push_back(id);
  if (order_.size() > capacity_) {
    ids_.erase(order_.front());
    order_.pop_front();
  }
  return true;
}

std::string PublishedWindow::encode() const {
  std::string out;
  out.reserve(4 + 8 * order_.size());
  appendLe(out, static_cast<uint32_t>(order_.size()));
  for (uint64_t id : order_) appendLe(out, id);
  return out;
}

bool PublishedWindow::decode(std::string_view bytes) {
  if (bytes.size() < 4) return false;
  const auto count = readLe<uint32_t>(bytes);
  bytes.remove_prefix(4);
  if (bytes.size() != 8 * static_cast<size_t>(count)) return false;
  order_.clear();
  ids_.clear();
  for (uint32_t i = 0; i < count; ++i) insert(readLe<uint64_t>(bytes.substr(size_t{8} * i, 8)));
  return true;
}

QueryCheckpoints::QueryCheckpoints(CheckpointSettings settings, Poco::Logger& log)
    : settings_(std::move(settings)), log_(log), last_(std::chrono::steady_clock::now()) {}

std::string QueryCheckpoints::encodePublished(
    const std::optional<plugin::SourceClock::Saved>& clock) const {
  std::string out;
  const std::string window = published_.encode();
  appendLe(out, static_cast<uint32_t>(window.size()));
  out += window;
  appendLe(out, static_cast<uint32_t>(held_.size()));
  for (const Held& h : held_) {
    const std::string json = encodeEvent(*h.composite, EventFormat::kFull);
    appendLe(out, static_cast<uint32_t>(h.query->member()));
    appendLe(out, static_cast<uint32_t>(json.size()));
    out += json;
  }
  if (clock) {
    appendLe(out, static_cast<uint64_t>(clock->time));
    appendLe(out, static_cast<uint64_t>(clock->newest));
  }
  return out;
}

bool QueryCheckpoints::decodePublished(std::string_view bytes, PublishedWindow& window,
                                       std::vector<Held>& held,
                                       std::optional<plugin::SourceClock::Saved>& clock,
                                       std::span<const std::shared_ptr<CepQuery>> members) const {
  auto u32 = [&bytes](uint32_t& v) {
    if (bytes.size() < 4) return false;
    v = readLe<uint32_t>(bytes);
    bytes.remove_prefix(4);
    return true;
  };
  uint32_t length = 0;
  if (!u32(length) || bytes.size() < length || !window.decode(bytes.substr(0, length))) {
    return false;
  }
  bytes.remove_prefix(length);
  uint32_t count = 0;
  if (!u32(count)) return false;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t member = 0;
    if (!u32(member) || member >= members.size() || !u32(length) || bytes.size() < length) {
      return false;
    }
    Result<EventPtr> event = decodeEvent(bytes.substr(0, length));
    if (!event) return false;
    bytes.remove_prefix(length);
    held.push_back(Held{members[member].get(), std::move(event).value(), true});
  }
  if (bytes.empty()) return true;
  if (bytes.size() != 16) return false;
  clock = plugin::SourceClock::Saved{static_cast<Timestamp>(readLe<uint64_t>(bytes)),
                                     static_cast<Timestamp>(readLe<uint64_t>(bytes.substr(8)))};
  return true;
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
  PublishedWindow published(kPublishedWindow);
  std::vector<Held> held;
  std::optional<plugin::SourceClock::Saved> saved_clock;
  if (!decodePublished(record.published, published, held, saved_clock, members)) {
    return refuse(what + ": its published composite ids and held composites do not decode");
  }
  Result<detection::RestoredCheckpoint> restored =
      detection::restoreCheckpointBytes(record.state, what, detection, settings_.identity);
  if (!restored) return refuse(restored.status().message());
  position_base_ = restored->position;
  // The links it heard are gone with the process: one source, of an id no
  // link of this run has.
  if (saved_clock)
    clock.restore(flows::newSource(), *saved_clock, std::chrono::steady_clock::now());
  published_ = std::move(published);
  held_ = std::move(held);
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
  if (!state) {
    {
      MutexLock lock(mu_);
      covered_ = std::move(acks);
    }
    return giveUp(state.status().message());
  }
  const size_t bytes = state->size();
  flows::CheckpointRecord record{settings_.name,
                                 settings_.identity.engine,
                                 detection.snapshotVersion(),
                                 settings_.identity.fingerprint,
                                 position_base_ + consumed,
                                 std::move(state).value(),
                                 encodePublished(clock.save(start))};
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
