#include "stages/thread_pool.h"

#include <algorithm>

#include "bus/base/thread_name.h"

namespace cepbus::stages {
namespace {

constexpr uint64_t kRunningOne = uint64_t{1} << 32;

size_t runningOf(uint64_t counts) { return static_cast<size_t>(counts >> 32); }
size_t pendingOf(uint64_t counts) { return static_cast<size_t>(counts & 0xffffffffu); }
uint64_t pack(size_t running, size_t pending) {
  return (static_cast<uint64_t>(running) << 32) | static_cast<uint64_t>(pending);
}

// Set by shouldRetire() on the thread that claimed a retirement, so that the
// thread's exit does not count itself twice. A fact of the pool's own worker
// thread (the body cannot know which Worker it runs in), not a protocol
// between components.
thread_local bool t_retired = false;

}  // namespace

ThreadPool::ThreadPool(std::string name, Body body)
    : name_(std::move(name)), body_(std::move(body)) {}

ThreadPool::~ThreadPool() { join(); }

void ThreadPool::resize(size_t n) {
  MutexLock lock(mu_);
  reapLocked();
  uint64_t counts = counts_.load(std::memory_order_relaxed);
  size_t spawn = 0;
  for (;;) {
    const size_t running = runningOf(counts);
    const size_t pending = pendingOf(counts);
    const size_t active = running - pending;
    uint64_t next;
    if (active > n) {
      next = pack(running, pending + (active - n));
      spawn = 0;
    } else {
      // Cancel pending retirements first: a thread that has not claimed its
      // retirement yet is as good as a new one.
      const size_t cancel = std::min(pending, n - active);
      spawn = n - active - cancel;
      next = pack(running + spawn, pending - cancel);
    }
    if (counts_.compare_exchange_weak(counts, next, std::memory_order_relaxed)) break;
  }
  for (size_t i = 0; i < spawn; ++i) {
    Worker& w = workers_.emplace_back();
    w.thread = std::thread([this, &w] {
      nameThisThread(name_);
      body_();
      if (!t_retired) counts_.fetch_sub(kRunningOne, std::memory_order_relaxed);
      w.done.store(true, std::memory_order_release);
    });
  }
}

size_t ThreadPool::threads() const {
  const uint64_t counts = counts_.load(std::memory_order_relaxed);
  return runningOf(counts) - pendingOf(counts);
}

bool ThreadPool::shouldRetire() {
  uint64_t counts = counts_.load(std::memory_order_relaxed);
  while (pendingOf(counts) > 0) {
    // Claiming a retirement and leaving the running set is one step, so
    // running - pending is exact for resize().
    if (counts_.compare_exchange_weak(counts, counts - kRunningOne - 1,
                                      std::memory_order_relaxed)) {
      t_retired = true;
      return true;
    }
  }
  return false;
}

void ThreadPool::reapLocked() {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->done.load(std::memory_order_acquire)) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

void ThreadPool::join() {
  MutexLock lock(mu_);
  for (Worker& w : workers_) {
    if (w.thread.joinable()) w.thread.join();
  }
  workers_.clear();
  // Retirements nobody claimed are moot once every thread has returned.
  counts_.store(0, std::memory_order_relaxed);
}

}  // namespace cepbus::stages
