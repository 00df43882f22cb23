#pragma once

// MatchRecorder: a plugin::MatchSink that keeps a copy of every match a
// detector reports, for tests that run an engine and compare what it found.
//
//   MatchRecorder sink(/*compose=*/true);
//   auto detector = plugin->createDetector("nfa", query, options, sink);
//   ... feed events, flush ...
//   EXPECT_EQ(sink.sortedTs(), (std::vector<std::vector<Timestamp>>{{1, 3}}));
//
// Thread-safety: onMatch() may be called from a detector's worker threads
// while a test reads; every member may be called from any thread.
// Ownership: holds the composites, not the matched events.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"
#include "tests/testing/wait.h"

namespace cepbus::testing {

// One match, copied out of the detector's view of it: the values of its
// events, not the events, so that recording a match does not keep its events
// alive (tests check that a detector lets go of the events it no longer needs).
struct RecordedMatch {
  std::vector<EventId> ids;            // in match order
  std::vector<Timestamp> ts;           // of the same events
  std::vector<double> probabilities;   // of the same events
  std::vector<uint32_t> element_ends;  // element j holds events [ends[j-1], ends[j])
  EventPtr composite;                  // null unless the recorder composes

  // The first event of element `j` of the pattern, and one past its last.
  size_t elementBegin(size_t j) const { return j == 0 ? 0 : element_ends[j - 1]; }
  size_t elementEnd(size_t j) const { return element_ends[j]; }
};

class MatchRecorder : public plugin::MatchSink {
 public:
  // `compose`: also keep each match's composite event (match.composite()).
  explicit MatchRecorder(bool compose = false) : compose_(compose) {}

  void onMatch(const plugin::Match& match) override EXCLUDES(mu_) {
    RecordedMatch m;
    for (size_t i = 0; i < match.size(); ++i) {
      m.ids.push_back(match.event(i)->id());
      m.ts.push_back(match.ts(i));
      m.probabilities.push_back(match.event(i)->probability());
    }
    uint32_t end = 0;
    for (size_t j = 0; j < match.elementCount(); ++j) {
      end += static_cast<uint32_t>(match.elementEvents(j).size());
      m.element_ends.push_back(end);
    }
    if (compose_) m.composite = match.composite();
    MutexLock lock(mu_);
    matches_.push_back(std::move(m));
  }

  // The matches in the order the detector reported them.
  std::vector<RecordedMatch> matches() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return matches_;
  }
  size_t size() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return matches_.size();
  }
  bool empty() const { return size() == 0; }
  // True once `n` matches are recorded; false when `timeout` passes first.
  bool waitFor(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(30)) const {
    return waitUntil([&] { return size() >= n; }, timeout);
  }

  // The timestamps of each match, in report order; sortedTs() sorted, for
  // comparing with a reference that finds the same matches in another order.
  std::vector<std::vector<Timestamp>> timestamps() const {
    std::vector<std::vector<Timestamp>> out;
    for (const RecordedMatch& m : matches()) out.push_back(m.ts);
    return out;
  }
  std::vector<std::vector<Timestamp>> sortedTs() const {
    auto out = timestamps();
    std::sort(out.begin(), out.end());
    return out;
  }
  // The event ids of each match, sorted.
  std::vector<std::vector<EventId>> sortedIds() const {
    std::vector<std::vector<EventId>> out;
    for (const RecordedMatch& m : matches()) out.push_back(m.ids);
    std::sort(out.begin(), out.end());
    return out;
  }
  // The composites, in report order (empty unless composing).
  std::vector<EventPtr> composites() const {
    std::vector<EventPtr> out;
    if (!compose_) return out;
    for (const RecordedMatch& m : matches()) out.push_back(m.composite);
    return out;
  }

 private:
  const bool compose_;
  mutable Mutex mu_;
  std::vector<RecordedMatch> matches_ GUARDED_BY(mu_);
};

}  // namespace cepbus::testing
