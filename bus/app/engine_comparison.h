#pragma once

// What `cepbus match --engine all` compares: the matches each engine reports
// for the same queries over the same events, as multisets of (pattern, ts of
// the matched events), and the first match on which two engines differ.
//
// Matches are ordered by where they end in the stream (their last ts), then
// by their ts, then by pattern, so "the first difference" is the earliest
// point of the stream at which the engines part, and it does not depend on
// the order in which an engine reports its matches.
//
// Each engine runs in a child process (runInChild) so that one still busy at
// its deadline, perhaps inside a single Detector::onEvents() call, can be
// stopped without leaving anything half-done in the comparing process.
//
// Thread safety: none; a recorder is the sink of one detection.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"
#include "bus/host/detection/detection.h"

namespace cepbus::app {

// One match as compared: its pattern's index (0 for a single --query) and
// the ts of its events in pattern order.
struct RecordedMatch {
  size_t pattern = 0;
  std::vector<Timestamp> ts;

  friend bool operator==(const RecordedMatch&, const RecordedMatch&) = default;
};

// The comparison order: last ts, then ts, then pattern.
bool streamOrder(const RecordedMatch& a, const RecordedMatch& b);

// Records every match of a detection, by pattern (its member).
class MatchRecorder final : public detection::DetectionSink {
 public:
  void onMatch(size_t pattern, const plugin::Match& match) override;

  // The matches in stream order (see streamOrder); the recorder is left empty.
  std::vector<RecordedMatch> takeSorted();

 private:
  std::vector<RecordedMatch> matches_;
};

// A match that two engines report a different number of times.
struct MatchDifference {
  RecordedMatch match;
  size_t in_reference = 0;
  size_t in_other = 0;
};

// The first match (in stream order) whose count differs between
// `reference` and `other`, both sorted by streamOrder; nullopt when they
// are the same multiset.
std::optional<MatchDifference> firstDifference(const std::vector<RecordedMatch>& reference,
                                               const std::vector<RecordedMatch>& other);

// What a run in a child process gave back.
struct ChildOutcome {
  bool timed_out = false;
  uint64_t progress = 0;  // the work's counter when it finished or was stopped
  std::string output;     // what the work returned; empty when timed out
};

// Runs `work` in a forked child process and waits for the text it returns,
// at most `timeout_seconds` (0: no limit); a child still running then is
// killed and the outcome is `timed_out`. `work` advances the counter it is
// given (events done, say), which this process reads as `progress`. The
// child ends with _exit(): it writes nothing but its result and runs no
// destructor of this process's objects, so `work` reports through the text
// it returns, not through streams. Called from a single-threaded process
// (the child has only the calling thread). Internal when the child cannot be
// started or dies without returning (naming its signal or exit status).
Result<ChildOutcome> runInChild(const std::function<std::string(std::atomic<uint64_t>&)>& work,
                                double timeout_seconds);

}  // namespace cepbus::app
