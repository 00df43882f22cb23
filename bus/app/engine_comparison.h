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
// Thread safety: none; a recorder is the sink of one detection.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"
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

}  // namespace cepbus::app
