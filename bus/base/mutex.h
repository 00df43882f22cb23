#pragma once

// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with
// the annotations of Clang's thread-safety analysis (thread_annotations.h);
// SharedMutex, ReaderMutexLock and WriterMutexLock likewise for
// std::shared_mutex,
// so that "guarded by mu_" is a GUARDED_BY(mu_) the compiler checks rather
// than a comment. They add nothing at run time: every call is the standard
// library's, inlined.
//
// Thread-safety: a Mutex is a lock, for any thread; a MutexLock belongs to
// the thread that made it (a ReaderMutexLock and a WriterMutexLock too);
// CondVar as std::condition_variable.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "bus/base/thread_annotations.h"

namespace cepbus {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis that the caller holds the mutex where it cannot see
  // it (a callback the holder runs); checks nothing at run time.
  void assertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope; unlock()/lock() in between release and take it
// again (for work that must not run under the lock).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void lock() ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// A lock that many readers may hold at once, or one writer alone.
class CAPABILITY("shared mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  void lock_shared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds `mu` shared (as a reader) for its scope.
class SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex& mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_.lock_shared(); }
  ~ReaderMutexLock() RELEASE() { mu_.unlock_shared(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex& mu_;
};

// Holds `mu` exclusively (as the writer) for its scope.
class SCOPED_CAPABILITY WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~WriterMutexLock() RELEASE() { mu_.unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex& mu_;
};

// A condition variable waited on with a Mutex held.
class CondVar {
 public:
  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }

  // Releases `mu` while it waits; holds it again when it returns.
  void wait(Mutex& mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  template <class Predicate>
  void wait(Mutex& mu, Predicate done) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock, std::move(done));
    lock.release();
  }
  // Returns at `deadline` at the latest, or earlier when notified (or
  // spuriously): the caller looks at what it waits for again.
  template <class Clock, class Duration>
  void waitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait_until(lock, deadline);
    lock.release();
  }
  // False when `deadline` passed with `done()` still false.
  template <class Clock, class Duration, class Predicate>
  bool waitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline,
                 Predicate done) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const bool met = cv_.wait_until(lock, deadline, std::move(done));
    lock.release();
    return met;
  }
  template <class Rep, class Period, class Predicate>
  bool waitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout, Predicate done)
      REQUIRES(mu) {
    return waitUntil(mu, std::chrono::steady_clock::now() + timeout, std::move(done));
  }

 private:
  std::condition_variable cv_;
};

}  // namespace cepbus
