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
// WakeHold: while a connection reads a burst of messages, the connections it
// feeds would each wake once per message they find idle — one burst read on
// one thread, written out one message at a time on the other. A WakeHold
// scoped over the handling of each message (WakeHold::Scope) lets the first
// wake of each target in the burst go at once (it starts writing while the
// rest is read) and holds the later ones until the reader calls flush() at
// the end of its burst: at most two wakes per target per burst.
//
// Thread-safety: WorkCoalescer::add() and close() may be called from any
// thread; the queued work runs wherever `post` runs what it is given (the
// connection's thread). A WakeHold is its connection's: used by that
// connection's events and work only. Ownership: a coalescer owns the work
// until it ran; a posted or held wake shares the queue (and with it `post`),
// so it may be posted or run after the coalescer is gone — it runs what was
// queued, as a post of each would have.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace cepbus::services::amqp {

class WakeHold;

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
  // (or, under a WakeHold on this thread, held). False when it will not run:
  // closed, or the post was refused (then the queue was empty, so nothing
  // else is lost with it).
  bool add(Work work);
  // No more work is taken; what is queued runs if its wake does.
  void close();
  // Wakes posted so far.
  uint64_t wakes() const;

 private:
  friend class WakeHold;

  struct Queue {
    explicit Queue(Post p) : post(std::move(p)) {}
    const Post post;
    std::mutex mu;
    std::vector<Work> work;  // guarded by mu; not empty only while woken
    bool woken = false;      // guarded by mu: a wake is on its way, or held
    bool closed = false;     // guarded by mu
    uint64_t wakes = 0;      // guarded by mu
  };
  // Posts the wake (mu held); when refused, what was queued goes to
  // `dropped`, for the caller to destroy outside the lock.
  static bool wakeLocked(const std::shared_ptr<Queue>& queue, std::vector<Work>& dropped);
  static void runQueued(Queue& queue);

  const std::shared_ptr<Queue> queue_;
};

class WakeHold {
 public:
  // While it lives, wakes raised on this thread go through `hold` (none:
  // nothing is held). Scopes nest; the innermost counts.
  class Scope {
   public:
    explicit Scope(WakeHold* hold);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    WakeHold* const outer_;
  };

  WakeHold() = default;
  WakeHold(const WakeHold&) = delete;
  WakeHold& operator=(const WakeHold&) = delete;

  // Wakes held, waiting for flush().
  bool holding() const { return !held_.empty(); }
  // Ends the burst: posts what it held, and the next wake of each target goes
  // at once again. Must run, or what was held waits forever: at the latest
  // when the connection goes away.
  void flush();

 private:
  friend class WorkCoalescer;
  // The hold open on this thread, if any.
  static WakeHold* current();
  // Whether `queue`'s wake is held: not its first in this burst.
  bool holds(const std::shared_ptr<WorkCoalescer::Queue>& queue);

  std::vector<std::shared_ptr<WorkCoalescer::Queue>> woken_;  // woken at once in this burst
  std::vector<std::shared_ptr<WorkCoalescer::Queue>> held_;
};

}  // namespace cepbus::services::amqp
