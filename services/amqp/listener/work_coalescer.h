#pragma once

// WorkCoalescer: work that other threads hand to one AMQP connection, with at
// most one wake of that connection on its way at a time (the Waker in
// services/amqp/listener/client_connections.h is one per connection). A wake — a post
// to the connection's proton::work_queue — writes an eventfd and usually
// makes a container thread sleep and wake once more; one per event for a
// subscriber or per journal commit made a second container thread switch
// context about once per message under a flood (docs/benchmarks.md,
// "Listener threads"). Work added while a wake is on its way rides along
// with it.
//
// Nothing waits unseen: the woken side takes what is queued and clears the
// flag in one step, then runs it, so work added from then on posts a wake
// of its own. Work runs in the order it was added: each wake is posted after
// the one before it was taken, and a connection runs its posts one at a time.
//
// Under a WakeHold (flows/wake_hold.h) — a publishing connection's, lent to
// the deliveries of the burst it reads — the first wake of a burst goes at
// once and the later ones wait for the end of the burst: the queue is the
// hold's Target.
//
// Thread-safety: WorkCoalescer::add() and close() may be called from any
// thread (with a hold, only from the hold's own thread); the queued work runs
// wherever `post` runs what it is given (the connection's thread).
// Ownership: a coalescer owns the work until it ran; a posted or held wake
// shares the queue (and with it `post`), so it may be posted or run after the
// coalescer is gone — it runs what was queued, as a post of each would have.

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "bus/base/mutex.h"
#include "flows/wake_hold.h"

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

  // Queues `work`, waking the target unless a wake is already on its way
  // (or `hold`, the caller's, holds it). False when it will not run: closed,
  // or the post was refused (then the queue was empty, so nothing else is
  // lost with it).
  bool add(Work work, flows::WakeHold* hold = nullptr);
  // No more work is taken; what is queued runs if its wake does.
  void close();
  // Wakes posted so far.
  uint64_t wakes() const;

 private:
  // The hold wakes it as its Target; its posts keep it alive (shared_from_this()).
  struct Queue final : flows::WakeHold::Target, std::enable_shared_from_this<Queue> {
    explicit Queue(Post p) : post(std::move(p)) {}
    void wakeHeld() override EXCLUDES(mu);
    const Post post;
    Mutex mu;
    std::vector<Work> work GUARDED_BY(mu);  // not empty only while woken
    bool woken GUARDED_BY(mu) = false;      // a wake is on its way, or held
    bool closed GUARDED_BY(mu) = false;
    uint64_t wakes GUARDED_BY(mu) = 0;
  };
  // Posts the wake; when refused, what was queued goes to `dropped`, for the
  // caller to destroy outside the lock.
  static bool wakeLocked(const std::shared_ptr<Queue>& queue, std::vector<Work>& dropped)
      REQUIRES(queue->mu);
  static void runQueued(Queue& queue) EXCLUDES(queue.mu);

  const std::shared_ptr<Queue> queue_;
};

}  // namespace cepbus::services::amqp
