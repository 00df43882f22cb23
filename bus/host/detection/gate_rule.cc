#include "bus/host/detection/gate_rule.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace cepbus::detection {

namespace {

// forgetIdleKeys() looks at the keys when there are at least this many, then
// when twice as many as it kept: amortized constant time per key.
constexpr size_t kMinSweep = 64;

}  // namespace

std::unique_ptr<GateRule> GateRule::firstEvery(Timestamp every, MatchKeyer keyer, Timestamp delay,
                                               plugin::MatchSink& next) {
  return std::unique_ptr<GateRule>(
      new GateRule(Measure::kEnd, every, Timestamp{0}, std::move(keyer), delay, next));
}

std::unique_ptr<GateRule> GateRule::skipPastLastEvent(MatchKeyer keyer,
                                                      std::optional<Timestamp> within,
                                                      Timestamp delay, plugin::MatchSink& next) {
  return std::unique_ptr<GateRule>(
      new GateRule(Measure::kStart, 1, within, std::move(keyer), delay, next));
}

GateRule::GateRule(Measure measure, Timestamp step, std::optional<Timestamp> reach,
                   MatchKeyer keyer, Timestamp delay, plugin::MatchSink& next)
    : OutputRule(next),
      measure_(measure),
      step_(step),
      delay_(delay),
      reach_(reach),
      next_sweep_(kMinSweep),
      keyer_(std::move(keyer)) {}

Timestamp GateRule::measure(const plugin::Match& match) const {
  return measure_ == Measure::kEnd ? matchEnd(match) : matchStart(match);
}

void GateRule::onMatch(const plugin::Match& match) {
  keyer_.keyOf(match, key_);
  Key& key = keys_[key_];
  // The gate only moves forward: what is shut now stays shut.
  if (measure(match) < key.open_at) return suppress();
  const Timestamp end = matchEnd(match);
  auto it = key.held.find(end);
  if (it == key.held.end()) {
    key.held.emplace(end, MatchCopy(match));
    waiting_.emplace(end, &key);
    return;
  }
  // At most one match of a key ending at one time can pass.
  if (preferred(match, it->second.view())) it->second = MatchCopy(match);
  suppress();
}

bool GateRule::preferred(const plugin::Match& a, const plugin::Match& b) const {
  if (measure_ == Measure::kStart) {
    // The one that starts last: it passes if any of them does, and whichever
    // passes, the gate opens at the same place.
    const Timestamp sa = matchStart(a);
    const Timestamp sb = matchStart(b);
    if (sa != sb) return sa > sb;
  }
  return compareMatches(a, b) < 0;
}

void GateRule::onTime(Timestamp t) {
  if (t < INT64_MIN + delay_) return;
  const Timestamp decided = t - delay_;  // every match ending by it is in
  std::vector<MatchCopy> passed;
  for (auto it = waiting_.begin(); it != waiting_.end() && it->first <= decided;
       it = waiting_.erase(it)) {
    Key& key = *it->second;
    auto held = key.held.find(it->first);
    const plugin::Match match = held->second.view();
    if (measure(match) >= key.open_at) {
      key.open_at = held->second.end() + step_;
      passed.push_back(std::move(held->second));
    } else {
      suppress();
    }
    key.held.erase(held);
  }
  // Keys are independent; what passes goes on in one order on every engine.
  std::sort(passed.begin(), passed.end(), [](const MatchCopy& a, const MatchCopy& b) {
    return compareMatches(a.view(), b.view()) < 0;
  });
  for (const MatchCopy& m : passed) pass(m.view());
  forgetIdleKeys(decided);
}

void GateRule::forgetIdleKeys(Timestamp decided) {
  if (keys_.size() < next_sweep_ || !reach_ || decided < INT64_MIN + *reach_) return;
  // A later match measures more than decided - reach: a gate open by then
  // stops none of them, as a new key's would not.
  const Timestamp lowest = decided - *reach_;
  for (auto it = keys_.begin(); it != keys_.end();) {
    const Key& key = it->second;
    const bool idle = key.held.empty() && (key.open_at == INT64_MIN || key.open_at - 1 <= lowest);
    it = idle ? keys_.erase(it) : std::next(it);
  }
  next_sweep_ = std::max(kMinSweep, 2 * keys_.size());
}

Timestamp GateRule::due() const {
  if (waiting_.empty()) return INT64_MAX;
  const Timestamp end = waiting_.begin()->first;
  return end > INT64_MAX - delay_ ? INT64_MAX : end + delay_;
}

void GateRule::save(plugin::SnapshotWriter& out) const {
  out.varint(suppressed());
  out.varint(next_sweep_);
  out.varint(keys_.size());
  for (const auto& [values, key] : keys_) {
    saveKey(values, out);
    out.signedVarint(key.open_at);
    out.varint(key.held.size());
    for (const auto& [end, copy] : key.held) copy.save(out);
  }
}

void GateRule::load(plugin::SnapshotReader& in) {
  restoreSuppressed(in.varint());
  next_sweep_ = in.varint();
  const uint64_t keys = in.count();
  for (uint64_t k = 0; k < keys && in.ok(); ++k) {
    auto [it, added] = keys_.try_emplace(loadKey(in));
    if (!added) in.fail("the output gate holds a key twice");
    Key& key = it->second;
    key.open_at = in.signedVarint();
    const uint64_t n = in.count(2);
    for (uint64_t i = 0; i < n && in.ok(); ++i) {
      MatchCopy copy = MatchCopy::load(in);
      if (!in.ok()) break;
      const Timestamp end = copy.end();
      if (!key.held.emplace(end, std::move(copy)).second) {
        in.fail("the output gate holds two matches of a key ending together");
        break;
      }
      waiting_.emplace(end, &key);
    }
  }
}

}  // namespace cepbus::detection
