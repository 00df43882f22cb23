#pragma once

// Caps on a detector's state (docs/engines.md, "Bounded state"): the engine
// options max_partition_partial_matches, max_partial_matches and
// state_policy, parsed once for every engine that caps its partial matches,
// so that they mean the same and are refused in the same words everywhere.
// A window bounds state in time, not in size: one key that starts partial
// matches faster than they complete or expire would otherwise grow without
// bound.
//
// Thread safety: a value type; parse() is a pure function.

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "bus/core/api.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"

namespace cepbus::plugin {

// What a detector does when its state reaches a cap.
enum class StatePolicy : uint8_t {
  // Drop the oldest partial matches, as if the window had narrowed for the
  // partition; over the total cap, shed the partitions least recently active.
  kDropOldest,
  // Keep what is held (it goes on completing) and take no new partial match.
  kRefuseNew,
};

struct CEPBUS_API StateCaps {
  // The defaults: far above what a query with a sensible window holds, low
  // enough that one runaway key cannot take the process down.
  static constexpr uint64_t kDefaultPartition = 1'000'000;
  static constexpr uint64_t kDefaultTotal = 10'000'000;
  // The option names, for an engine's DetectorOptions::checkKnown().
  static constexpr std::string_view kOptionNames[] = {"max_partition_partial_matches",
                                                      "max_partial_matches", "state_policy"};

  uint64_t partition = kDefaultPartition;  // max_partition_partial_matches
  uint64_t total = kDefaultTotal;          // max_partial_matches
  StatePolicy policy = StatePolicy::kDropOldest;

  // The caps `options` set (the defaults for those it does not);
  // InvalidArgument naming the option and its value when one is not a
  // positive integer or not a policy. Other options are not looked at.
  static Result<StateCaps> parse(const DetectorOptions& options);

  // The cap of a detector that runs one partition, or the query without
  // PARTITION BY: no part holds more than the whole may.
  uint64_t perDetector() const { return std::min(partition, total); }
  bool refuseNew() const { return policy == StatePolicy::kRefuseNew; }
};

// What `cepbus plugins` says of the three options, for an engine's
// DetectorFactory::options().
inline constexpr OptionInfo kStateCapOptionInfo[] = {
    {"max_partition_partial_matches",
     "N > 0: the partial matches one partition may hold (default 1000000)"},
    {"max_partial_matches",
     "N > 0: the partial matches all partitions may hold (default 10000000)"},
    {"state_policy",
     "drop_oldest|refuse_new: at a cap, drop the oldest partial matches (over the total cap: shed "
     "the least recently active partitions; the default), or take no new partial match"},
};

// Where a detector over `cap` under drop_oldest trims to: a 32nd below the
// cap (at least back to it), so that dropping from the front of a vector
// costs O(1) amortised per partial match rather than a move of the whole
// state per event.
inline uint64_t trimTarget(uint64_t cap) { return cap - cap / 32; }

// The options an engine that caps its state accepts besides its own: `own`
// then kOptionNames, for DetectorOptions::checkKnown().
template <size_t N>
constexpr std::array<std::string_view, N + 3> withStateCapOptions(
    const std::array<std::string_view, N>& own) {
  std::array<std::string_view, N + 3> all{};
  std::copy(own.begin(), own.end(), all.begin());
  std::copy(std::begin(StateCaps::kOptionNames), std::end(StateCaps::kOptionNames),
            all.begin() + N);
  return all;
}

}  // namespace cepbus::plugin
