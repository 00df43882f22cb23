#pragma once

// Waiting in threaded and end-to-end tests: poll a condition until it holds
// or a deadline passes, instead of sleeping a fixed time and hoping. The
// deadline is generous because CI boxes are loaded; a test only waits that
// long when the code under test is broken.
//
//   ASSERT_TRUE(eventually("the writer inserted 20 records",
//                          [&] { return writer.metrics().inserted == 20; }));
//
// A fixed sleep stays only where a test lets time pass on purpose: to show
// that something does NOT happen in that time, or to age a timer. Such a
// sleep says so in its comment.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string_view>
#include <thread>

namespace cepbus::testing {

// Polls `done` every `poll` until it holds (true) or `timeout` passes
// (false). A wider `poll` suits conditions that are costly to read, such as
// an HTTP request or a broker's management API.
inline bool waitUntil(const std::function<bool()>& done,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30),
                      std::chrono::milliseconds poll = std::chrono::milliseconds(1)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(poll);
  }
  return true;
}

// waitUntil() for assertions: on timeout the failure names what was awaited
// and how long the test waited for it.
inline ::testing::AssertionResult eventually(
    std::string_view what, const std::function<bool()>& done,
    std::chrono::milliseconds timeout = std::chrono::seconds(30),
    std::chrono::milliseconds poll = std::chrono::milliseconds(1)) {
  if (waitUntil(done, timeout, poll)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "waited " << timeout.count() << " ms in vain for " << what;
}

// Polls `read` until it returns the same value over a whole `quiet` period,
// and returns that value; for counts that grow for a while after a cause
// (redeliveries, a stage draining) and must be compared once they stop.
// Gives up after `timeout` with the last value read, which the caller's
// comparison then reports.
template <typename Read>
auto settledValue(Read read, std::chrono::milliseconds quiet,
                  std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  auto last = read();
  auto since = std::chrono::steady_clock::now();
  waitUntil(
      [&] {
        auto now = read();
        if (now != last) {
          last = std::move(now);
          since = std::chrono::steady_clock::now();
        }
        return std::chrono::steady_clock::now() - since >= quiet;
      },
      timeout, std::max(quiet / 10, std::chrono::milliseconds(1)));
  return last;
}

}  // namespace cepbus::testing
