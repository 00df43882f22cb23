#pragma once

// SourceEnds: the sources of events (flows::newSource()) that ended
// cleanly, in the order they ended, for the readers that track sources.
//
// A query's event time is the slowest of its live sources
// (bus/host/time/source_clock.h). A source that ends cleanly — a publishing
// link closed by its client, a replay at the end of its file — will send
// nothing more, so it should stop holding the time back at once rather
// than after the idle timeout. The ends are a log, not a broadcast: each
// reader keeps a cursor (count() when it last looked) and reads the ends
// after it when it is ready to apply them, which is after the events the
// source had sent before it ended (a detection applies them on its next
// tick, which is queued behind those events).
//
// The log keeps the last kKept ends. A reader that falls further behind
// loses the older ones; it learns how many, and those sources go idle
// after the idle timeout as if they had not ended.
//
// Thread safety: every member may be called from any thread.
// Ownership: sourceEnds() is the process's log; tests make their own.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "bus/base/mutex.h"

namespace cepbus::flows {

class SourceEnds {
 public:
  static constexpr size_t kKept = 4096;

  // `source` has ended: none of its events comes after this call.
  void end(uint64_t source);
  // How many sources have ended so far: the cursor of a reader that has
  // seen them all.
  uint64_t count() const { return count_.load(std::memory_order_acquire); }
  // The sources that ended at positions [from, to) of the log (`to` at
  // most count()), in order, and how many of those positions the log no
  // longer keeps.
  struct Ends {
    std::vector<uint64_t> sources;
    uint64_t lost = 0;
  };
  Ends read(uint64_t from, uint64_t to) const;

 private:
  mutable Mutex mu_;
  std::array<uint64_t, kKept> ring_ GUARDED_BY(mu_){};
  std::atomic<uint64_t> count_{0};
};

// The process's log, which the AMQP listener and replay sources write.
SourceEnds& sourceEnds();

}  // namespace cepbus::flows
