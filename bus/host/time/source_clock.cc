#include "bus/host/time/source_clock.h"

#include <algorithm>

namespace cepbus::plugin {

SourceClock::SourceClock(std::chrono::milliseconds idle_timeout) : idle_timeout_(idle_timeout) {}

void SourceClock::heard(SourceId source, Timestamp ts, TimePoint now) {
  newest_ = std::max(newest_, ts);
  auto [it, added] = sources_.try_emplace(source, Source{ts, now});
  if (added && ended_.contains(source)) {
    sources_.erase(it);
    return;
  }
  if (added) {
    // A new source is rare (a link attached): the moment to forget old
    // ones, after which the kept minimum is recomputed.
    forget(now);
    stale_ = true;
    return;
  }
  Source& s = it->second;
  const bool was_live = !idle(s, now);
  const Timestamp before = s.newest;
  s.newest = std::max(s.newest, ts);
  s.last_heard = now;
  if (stale_) return;
  if (!was_live) {
    stale_ = true;  // back from idle: it may be the slowest now
  } else if (live_min_ && before == *live_min_ && s.newest > before && --at_min_ == 0) {
    stale_ = true;  // the last of the slowest moved on
  }
}

void SourceClock::ended(SourceId source, TimePoint now) {
  ended_.insert_or_assign(source, now);
  if (sources_.erase(source) > 0) stale_ = true;
}

std::optional<Timestamp> SourceClock::eventTime(TimePoint now) const {
  if (stale_ || now > valid_until_) recompute(now);
  if (live_min_) return live_min_;
  if (newest_ == INT64_MIN) return std::nullopt;
  return newest_;
}

std::optional<SourceClock::Saved> SourceClock::save(TimePoint now) const {
  const std::optional<Timestamp> time = eventTime(now);
  if (!time) return std::nullopt;
  return Saved{*time, newest_};
}

void SourceClock::restore(SourceId source, const Saved& saved, TimePoint now) {
  heard(source, saved.time, now);
  newest_ = std::max(newest_, saved.newest);
}

void SourceClock::recompute(TimePoint now) const {
  live_min_.reset();
  at_min_ = 0;
  live_ = 0;
  valid_until_ = TimePoint::max();
  for (const auto& [id, source] : sources_) {
    if (idle(source, now)) continue;
    ++live_;
    valid_until_ = std::min(valid_until_, source.last_heard + idle_timeout_);
    if (!live_min_ || source.newest < *live_min_) {
      live_min_ = source.newest;
      at_min_ = 1;
    } else if (source.newest == *live_min_) {
      ++at_min_;
    }
  }
  stale_ = false;
}

size_t SourceClock::idleSources(TimePoint now) const {
  // Every change of liveness makes the kept figures stale or expires them.
  if (stale_ || now > valid_until_) recompute(now);
  return sources_.size() - live_;
}

void SourceClock::forget(TimePoint now) {
  std::erase_if(sources_, [&](const auto& s) {
    return now - s.second.last_heard > kForgetAfter * idle_timeout_;
  });
  std::erase_if(ended_,
                [&](const auto& e) { return now - e.second > kForgetAfter * idle_timeout_; });
}

std::optional<Timestamp> wallTime(pattern::TimeUnit unit,
                                  std::chrono::system_clock::time_point now) {
  using namespace std::chrono;
  const auto since = now.time_since_epoch();
  switch (unit) {
    case pattern::TimeUnit::kMicroseconds:
      return duration_cast<microseconds>(since).count();
    case pattern::TimeUnit::kMilliseconds:
      return duration_cast<milliseconds>(since).count();
    case pattern::TimeUnit::kSeconds:
      return duration_cast<seconds>(since).count();
    case pattern::TimeUnit::kNone:
      break;
  }
  return std::nullopt;
}

std::optional<Timestamp> WallClockAdvance::eventTime(const SourceClock& sources,
                                                     SourceClock::TimePoint now,
                                                     std::chrono::system_clock::time_point wall) {
  std::optional<Timestamp> time = sources.eventTime(now);
  if (!time || !sources.allIdle(now)) return time;
  if (auto w = wallTime(unit_, wall)) {
    wall_time_ = std::max(wall_time_, *w);
    time = std::max(*time, wall_time_);
  }
  return time;
}

}  // namespace cepbus::plugin
