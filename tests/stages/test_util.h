#pragma once

// Helpers shared by the stages tests.

#include <chrono>
#include <cstdint>

#include "bus/core/event.h"
#include "stages/stage_types.h"
#include "tests/testing/wait.h"

namespace cepbus::stages::testing {

inline StageItem makeItem(uint64_t token, int32_t cost = 0, bool reliable = false) {
  StageItem item;
  item.event = EventBuilder("T").at(static_cast<Timestamp>(token)).cost(cost).build();
  item.token = token;
  item.reliable = reliable;
  return item;
}

// Polls `done` until it holds or `limit` passes; the limit only bounds a
// failing test, it is never the expected path.
template <typename Pred>
bool eventually(Pred done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  return cepbus::testing::waitUntil(done, limit);
}

}  // namespace cepbus::stages::testing
