#pragma once

// WorkCoalescer: work that other threads hand to one AMQP connection, with at
// most one wake of that connection on its way at a time (the Waker in
// services/amqp/client_connections.h is one per connection). A wake — a post
// to the connection's proton::work_queue — writes an eventfd and usually
// makes its container thread sleep and wake once more; one per event for a
// subscriber or per journal commit was most of what a second container
// thread cost under a flood (docs/benchmarks.md, "Listener threads"). Work
// added while a wake is on its way rides along with it.
//
// Nothing waits unseen: the woken side takes what is queued and clears the
// flag in one step, then runs it, so work added from then on posts a wake
// of its own. Work runs in the order it was added: each wake is posted after
// the one before it was taken, and a connection runs its posts one at a time.
//
// Thread-safety: add() and close() may be called from any thread; the queued
// work runs wherever `post` runs what it is given (the connection's thread).
// Ownership: owns the work until it ran; a posted wake shares the queue, so it
// may run after the coalescer is gone (it runs what was queued, as a post
// of each would have).

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace cepbus::services::amqp {

class WorkCoalescer {
 public:
  using Work = std::function<void()>;
  // Hands one job to the target thread, to run later (never before it
  // returns): false when it will not run.
  using Post = std::function<bool(Work)>;

  explicit WorkCoalescer(Post post);

  WorkCoalescer(const WorkCoalescer&) = delete;
  WorkCoalescer& operator=(const WorkCoalescer&) = delete;

  // Queues `work`, waking the target unless a wake is already on its way.
  // False when it will not run: closed, or the post was refused (then the
  // queue was empty, so nothing else is lost with it).
  bool add(Work work);
  // No more work is taken; what is queued runs if its wake does.
  void close();
  // Wakes posted so far.
  uint64_t wakes() const;

 private:
  struct Queue {
    std::mutex mu;
    std::vector<Work> work;  // guarded by mu; not empty only while woken
    bool woken = false;      // guarded by mu: a wake is on its way
    bool closed = false;     // guarded by mu
    uint64_t wakes = 0;      // guarded by mu
  };
  static void runQueued(Queue& queue);

  const Post post_;
  const std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
};

}  // namespace cepbus::services::amqp
