#include "bus/host/detection/last_every_rule.h"

#include <algorithm>

namespace cepbus::detection {
namespace {

// floor(a / b) for b > 0: intervals are aligned to ts 0 on both sides of it.
Timestamp floorDiv(Timestamp a, Timestamp b) {
  const Timestamp q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// a + b, held at INT64_MAX: an interval at the end of time waits for it.
Timestamp saturatedAdd(Timestamp a, Timestamp b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

}  // namespace

LastEveryRule::LastEveryRule(Timestamp every, MatchKeyer keyer, Timestamp delay,
                             plugin::MatchSink& next)
    : OutputRule(next), every_(every), delay_(delay), keyer_(std::move(keyer)) {}

void LastEveryRule::onMatch(const plugin::Match& match) {
  keyer_.keyOf(match, key_);
  Intervals& intervals = keys_[key_];
  const Timestamp interval = floorDiv(matchEnd(match), every_);
  auto it = intervals.find(interval);
  if (it == intervals.end()) return hold(intervals, interval, MatchCopy(match));
  if (compareMatches(match, it->second.view()) > 0) it->second = MatchCopy(match);
  suppress();
}

void LastEveryRule::hold(Intervals& intervals, Timestamp interval, MatchCopy copy) {
  intervals.emplace(interval, std::move(copy));
  const Timestamp last_unit =
      interval >= INT64_MAX / every_ ? INT64_MAX : (interval + 1) * every_ - 1;
  waiting_.emplace(saturatedAdd(last_unit, delay_), std::make_pair(&intervals, interval));
}

void LastEveryRule::onTime(Timestamp t) {
  std::vector<MatchCopy> out;
  for (auto it = waiting_.begin(); it != waiting_.end() && it->first <= t;
       it = waiting_.erase(it)) {
    auto [intervals, interval] = it->second;
    auto held = intervals->find(interval);
    out.push_back(std::move(held->second));
    intervals->erase(held);
  }
  std::sort(out.begin(), out.end(), [](const MatchCopy& a, const MatchCopy& b) {
    return compareMatches(a.view(), b.view()) < 0;
  });
  for (const MatchCopy& m : out) pass(m.view());
  if (keys_.size() >= next_sweep_) {
    std::erase_if(keys_, [](const auto& key) { return key.second.empty(); });
    next_sweep_ = std::max<size_t>(64, 2 * keys_.size());
  }
}

Timestamp LastEveryRule::due() const {
  return waiting_.empty() ? INT64_MAX : waiting_.begin()->first;
}

void LastEveryRule::save(plugin::SnapshotWriter& out) const {
  out.varint(suppressed());
  out.varint(next_sweep_);
  out.varint(keys_.size());
  for (const auto& [key, intervals] : keys_) {
    saveKey(key, out);
    out.varint(intervals.size());
    for (const auto& [interval, copy] : intervals) {
      out.signedVarint(interval);
      copy.save(out);
    }
  }
}

void LastEveryRule::load(plugin::SnapshotReader& in) {
  restoreSuppressed(in.varint());
  next_sweep_ = in.varint();
  const uint64_t keys = in.count();
  for (uint64_t k = 0; k < keys && in.ok(); ++k) {
    auto [it, added] = keys_.try_emplace(loadKey(in));
    if (!added) in.fail("EMIT LAST EVERY holds a key twice");
    const uint64_t n = in.count(2);
    for (uint64_t i = 0; i < n && in.ok(); ++i) {
      const Timestamp interval = in.signedVarint();
      MatchCopy copy = MatchCopy::load(in);
      if (!in.ok()) break;
      if (floorDiv(copy.end(), every_) != interval || it->second.contains(interval)) {
        in.fail("EMIT LAST EVERY holds a match in another interval than its end's");
        break;
      }
      hold(it->second, interval, std::move(copy));
    }
  }
}

}  // namespace cepbus::detection
