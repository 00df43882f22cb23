#pragma once

// StopSignals: SIGINT and SIGTERM taken by a command's main thread instead
// of ending the process, so that the command can wind down (drain a bus,
// settle what is in flight, print its summary). The constructor blocks them
// in the calling thread: make it before any other thread starts, so that
// every thread inherits the mask and only wait() takes them.
//
// Thread-safety: wait() from the thread that made it.

#include <signal.h>
#include <time.h>

#include <chrono>
#include <optional>

namespace cepbus::app {

class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  }

  // The signal that arrived, or 0 when `timeout` passed first; without a
  // timeout it waits for one.
  int wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt) const {
    if (!timeout) return sigwaitinfo(&set_, nullptr);
    const timespec limit{static_cast<time_t>(timeout->count() / 1000),
                         static_cast<long>(timeout->count() % 1000 * 1'000'000)};
    const int sig = sigtimedwait(&set_, nullptr, &limit);
    return sig > 0 ? sig : 0;
  }

 private:
  sigset_t set_;
};

}  // namespace cepbus::app
