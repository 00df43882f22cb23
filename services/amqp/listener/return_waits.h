#pragma once

// ReturnWaits: runs a task after a delay, for the AMQP listener's
// subscriber-return-timeout (what a non-durable subscriber that went away
// left unsettled waits for it, then goes).
//
// A thread of its own (a Poco::Util::Timer, made at the first wait), not
// the Proton container's timers: the container's stop waits for those
// still pending, which held a bus's stop for as long as a wait had left.
//
// Thread-safety: after() and stop() may be called from any thread. A task
// runs on the timer's thread; it must not call stop().

#include <chrono>
#include <functional>
#include <memory>

#include "bus/base/mutex.h"

namespace Poco::Util {
class Timer;
}

namespace cepbus::services::amqp {

class ReturnWaits {
 public:
  ReturnWaits();
  ~ReturnWaits();  // stops
  ReturnWaits(const ReturnWaits&) = delete;
  ReturnWaits& operator=(const ReturnWaits&) = delete;

  // Runs `task` once `delay` has passed, unless stop() came first.
  void after(std::chrono::milliseconds delay, std::function<void()> task);
  // Drops the tasks still waiting and returns once none runs. The caller
  // must not hold a lock a task takes.
  void stop();

 private:
  Mutex mu_;
  std::unique_ptr<Poco::Util::Timer> timer_ GUARDED_BY(mu_);
};

}  // namespace cepbus::services::amqp
