#include "bus/app/engine_comparison.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace cepbus::app {

bool streamOrder(const RecordedMatch& a, const RecordedMatch& b) {
  const Timestamp a_end = a.ts.empty() ? 0 : a.ts.back();
  const Timestamp b_end = b.ts.empty() ? 0 : b.ts.back();
  return std::tie(a_end, a.ts, a.pattern) < std::tie(b_end, b.ts, b.pattern);
}

void MatchRecorder::onMatch(size_t pattern, const plugin::Match& match) {
  RecordedMatch m;
  m.pattern = pattern;
  m.ts.reserve(match.size());
  for (size_t i = 0; i < match.size(); ++i) m.ts.push_back(match.ts(i));
  matches_.push_back(std::move(m));
}

std::vector<RecordedMatch> MatchRecorder::takeSorted() {
  std::sort(matches_.begin(), matches_.end(), streamOrder);
  return std::exchange(matches_, {});
}

std::optional<MatchDifference> firstDifference(const std::vector<RecordedMatch>& reference,
                                               const std::vector<RecordedMatch>& other) {
  size_t r = 0;
  size_t o = 0;
  while (r < reference.size() || o < other.size()) {
    // The smaller of the two heads, and how often each side has it.
    const RecordedMatch& head = o == other.size()                     ? reference[r]
                                : r == reference.size()               ? other[o]
                                : streamOrder(other[o], reference[r]) ? other[o]
                                                                      : reference[r];
    const RecordedMatch current = head;
    size_t in_reference = 0;
    size_t in_other = 0;
    for (; r < reference.size() && reference[r] == current; ++r) ++in_reference;
    for (; o < other.size() && other[o] == current; ++o) ++in_other;
    if (in_reference != in_other) return MatchDifference{current, in_reference, in_other};
  }
  return std::nullopt;
}

}  // namespace cepbus::app
