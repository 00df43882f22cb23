#pragma once

// One rule of a query's output control (docs/pattern-language.md, "Output
// control"): EMIT FIRST EVERY, EMIT LAST EVERY or AFTER MATCH SKIP PAST LAST
// EVENT. A rule takes the query's matches as its engine reports them, keeps
// some, and passes those on to the next rule or to the query's output; the
// others are suppressed and counted. output_control.h chains the rules of a
// query in front of its output, the same on every engine.
//
// Thread safety: onMatch() and onTime() run on the detector's thread;
// suppressed() may be read from any thread. Ownership: `next` is the
// caller's and outlives the rule.

#include <atomic>
#include <cstdint>

#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/plugin/snapshot.h"

namespace cepbus::detection {

class OutputRule : public plugin::MatchSink {
 public:
  explicit OutputRule(plugin::MatchSink& next) : next_(next) {}
  OutputRule(const OutputRule&) = delete;
  OutputRule& operator=(const OutputRule&) = delete;

  // A match of the query, in the order the engine reports it.
  void onMatch(const plugin::Match& match) override = 0;
  // Event time has passed `t`: every match ending at or before `t` has been
  // reported (a rule that waits for a trailing negation's span takes that
  // into account itself). What waited for it is decided and passed on.
  virtual void onTime(Timestamp t) = 0;
  // The event time whose passing lets the rule decide what it holds now;
  // INT64_MAX when it holds nothing.
  virtual Timestamp due() const = 0;

  // Its state (the matches it holds, its gates, the count it suppressed) for
  // a snapshot of its output control; load() reads it back into a rule just
  // made for the same query, failing `in` on what does not fit.
  virtual void save(plugin::SnapshotWriter& out) const = 0;
  virtual void load(plugin::SnapshotReader& in) = 0;

  // The matches this rule has suppressed so far.
  uint64_t suppressed() const { return suppressed_.load(std::memory_order_relaxed); }

 protected:
  void pass(const plugin::Match& match) { next_.onMatch(match); }
  // One writer (the detector's thread): a plain store, no locked add.
  void suppress() {
    suppressed_.store(suppressed_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  void restoreSuppressed(uint64_t n) { suppressed_.store(n, std::memory_order_relaxed); }

 private:
  plugin::MatchSink& next_;
  std::atomic<uint64_t> suppressed_{0};
};

}  // namespace cepbus::detection
