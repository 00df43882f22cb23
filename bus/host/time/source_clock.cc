#include "bus/host/time/source_clock.h"

#include <algorithm>

namespace cepbus::plugin {

SourceClock::SourceClock(std::chrono::milliseconds idle_timeout) : idle_timeout_(idle_timeout) {}

void SourceClock::heard(SourceId source, Timestamp ts, TimePoint now) {
  auto [it, added] = sources_.try_emplace(source, Source{ts, now});
  if (!added) {
    it->second.newest = std::max(it->second.newest, ts);
    it->second.last_heard = now;
    return;
  }
  // A new source is rare (a link attached): the moment to forget old ones.
  forget(now);
}

std::optional<Timestamp> SourceClock::eventTime(TimePoint now) const {
  std::optional<Timestamp> live_min;
  Timestamp newest = gone_newest_;
  for (const auto& [id, source] : sources_) {
    newest = std::max(newest, source.newest);
    if (!idle(source, now)) live_min = std::min(live_min.value_or(source.newest), source.newest);
  }
  if (live_min) return live_min;
  if (newest == INT64_MIN) return std::nullopt;
  return newest;
}

size_t SourceClock::idleSources(TimePoint now) const {
  return static_cast<size_t>(std::count_if(sources_.begin(), sources_.end(),
                                           [&](const auto& s) { return idle(s.second, now); }));
}

void SourceClock::forget(TimePoint now) {
  std::erase_if(sources_, [&](const auto& s) {
    if (now - s.second.last_heard <= kForgetAfter * idle_timeout_) return false;
    gone_newest_ = std::max(gone_newest_, s.second.newest);
    return true;
  });
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

}  // namespace cepbus::plugin
