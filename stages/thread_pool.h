#pragma once

// The worker threads of a stage (P1 SEDA: event handler + thread pool).
// Every thread runs the same body, a loop that returns when its work is done
// or when it claims a retirement with shouldRetire(); the resource controller
// resizes the pool between its min and max.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <thread>

#include "bus/base/mutex.h"

namespace cepbus::stages {

// Thread-safety: resize() and join() from controlling threads (they serialize
// on an internal mutex); shouldRetire() and threads() from anywhere.
// join() must not race with resize().
class ThreadPool {
 public:
  using Body = std::function<void()>;

  // `name` (truncated to 15 bytes) names the threads for debuggers and `top`.
  ThreadPool(std::string name, Body body);
  ~ThreadPool();  // joins
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Makes `n` threads run the body: spawns threads, or asks running ones to
  // retire (each exits at its next shouldRetire() check). Joins retired threads.
  void resize(size_t n);
  // Called by a body between units of work: true when this thread must return.
  bool shouldRetire();
  // Threads running the body and not asked to retire: the size the pool is heading to.
  size_t threads() const;
  // Waits for every body to return (they must be on their way out) and joins them.
  void join();

 private:
  struct Worker {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void reapLocked() REQUIRES(mu_);

  const std::string name_;
  const Body body_;
  // Running threads (high 32 bits) and retirements requested but not yet
  // claimed (low 32 bits), in one word so that both change together.
  std::atomic<uint64_t> counts_{0};
  Mutex mu_;
  // A list: a Worker is pinned while its thread runs.
  std::list<Worker> workers_ GUARDED_BY(mu_);
};

}  // namespace cepbus::stages
