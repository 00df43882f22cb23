#pragma once

// Waiting in threaded tests: poll a condition until it holds or a deadline
// passes. The deadline is generous because CI boxes are loaded; a test only
// waits that long when the code under test is broken.

#include <chrono>
#include <functional>
#include <thread>

namespace cepbus::testing {

inline bool waitUntil(const std::function<bool()>& done,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace cepbus::testing
