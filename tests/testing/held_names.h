#pragma once

// reuseHeldId: a new held name on the id of one that was given back, for
// tests of what must not mistake the new name for the old (bus/core/wire_names.h).

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "bus/core/wire_names.h"

namespace cepbus::testing {

// Holds new names until one gets `id`, whose name nothing holds any more:
// it is pushed out of the idle names by newer ones and freed, and names kept
// meanwhile take the lowest free ids, so one gets it. `kept` keeps the
// others held meanwhile. nullopt (and a test failure) if none did.
inline std::optional<NameHold> reuseHeldId(Symbol id, const std::string& prefix,
                                           std::vector<NameHold>& kept) {
  for (uint32_t i = 1; i <= 8 * kIdleHeldNames; ++i) {
    std::optional<NameHold> next = holdWireName(prefix + std::to_string(i));
    if (!next) break;
    if (next->symbol() == id) return next;
    if (i > kIdleHeldNames) kept.push_back(std::move(*next));
  }
  ADD_FAILURE() << "the freed id " << id.id() << " was not reused";
  return std::nullopt;
}

}  // namespace cepbus::testing
