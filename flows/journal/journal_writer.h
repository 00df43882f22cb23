#pragma once

// JournalWriter: the group-commit thread of a ReliableFlow. Senders append
// records; the thread takes everything appended since its last commit (up to
// a batch limit), writes it in one transaction, and only then calls back so
// the flow can acknowledge the senders (and, without concurrent dispatch,
// dispatch the events). Target acknowledgements ride along in the same
// transactions. While a commit is on disk the next batch accumulates, so the
// batch size adapts to the load instead of costing one fsync per event.
//
// Cancellation (KahaDB's concurrent store and dispatch): a record waiting for
// the writer may be withdrawn with cancel(), e.g. because its event already
// reached its target while the previous commit was on disk. It is then never
// written (no insert, no JSON encoding, no delete later) and its callback
// never runs. Whether a record is cancelled or written is decided under the
// writer's lock: the thread takes a batch and cancel() looks for the record
// atomically with respect to each other, so exactly one of them wins.
//
// Commit delay: a record is written only once it has waited `commit_delay`
// (or when flush() or stop() asks for it). Records ripen on a grid of half
// the delay (so a record waits between 1 and 1.5 times it), which lets the
// thread take all that ripened in one slot at one wake-up: at 10,000 records/s
// and the default 2 ms that is at most 1,000 wake-ups/s instead of 10,000,
// each a context switch and a round on the lock the senders take. An
// acknowledgement rides with the
// next transaction that writes records, or waits `ack_delay` (it only saves
// a redelivery after a crash, so it need not cost an fsync of its own at low
// rates: a crash loses at most that much of them, and their events come
// again marked as redelivered). With concurrent dispatch most
// events reach their target and come back acknowledged within that time, so
// their records are cancelled instead of being inserted and deleted again;
// under a flood that halves what the journal writes. The cost: a sender whose
// target does not acknowledge in time hears kAccepted `commit_delay` later.
//
// Checkpoints: checkpoint() queues a consumer's stored state with the
// acknowledgements of the deliveries it covers; the next transaction takes
// it, with every record appended so far (ripe or not, so that a record it
// acknowledges is written and deleted in that one transaction), and stores
// the state and the acknowledgements together or neither.
//
// The thread also calls a tick callback every `tick` (the flow's retry
// timer) while it wants ticks: one that returns false is not called again
// until requestTicks(), so an idle writer sleeps until there is work.
// A writer owns the journal from start() to stop(), and may be started again
// with another journal afterwards.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/core/status.h"
#include "flows/journal/journal.h"

namespace cepbus::flows {

struct JournalWriterOptions {
  size_t max_batch = 1024;     // records per transaction
  size_t max_backlog = 65536;  // records waiting for a commit; append() refuses beyond it
  std::chrono::milliseconds tick{50};
  // How long a record waits before it is written (see above); 0: at once.
  std::chrono::microseconds commit_delay{2000};
  // How long acknowledgements wait for a transaction that writes records
  // before they get one of their own.
  std::chrono::microseconds ack_delay{50000};
  std::string thread_name = "journal";  // the writer thread's, as `top -H` shows it
};

struct JournalWriterMetrics {
  uint64_t commits = 0;       // transactions written
  uint64_t inserted = 0;      // records committed
  uint64_t acknowledged = 0;  // acknowledgements committed (of cancelled records too)
  uint64_t cancelled = 0;     // records withdrawn by cancel() before a transaction took them
  uint64_t errors = 0;        // transactions that failed
  size_t backlog = 0;         // records waiting now
};

// Thread-safety: append(), cancel(), acknowledge(), flush() and metrics() may be called
// from any thread; start() and stop() from the control thread, not
// concurrently. The callbacks run on the writer thread, one at a time.
// Ownership: owns the journal it was started with until stop() closes it.
class JournalWriter {
 public:
  // Called after each transaction with the tokens of the records it held
  // (cancelled ones excluded); `status` is OK when they are durable.
  using CommitCallback =
      std::function<void(std::span<const uint64_t> tokens, const Status& status)>;
  // Returns whether to keep ticking.
  using TickCallback = std::function<bool(std::chrono::steady_clock::time_point now)>;

  JournalWriter(JournalWriterOptions options, CommitCallback on_commit, TickCallback on_tick);
  ~JournalWriter();  // stop()
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

  // Starts the thread on `journal`. No effect while running.
  void start(std::unique_ptr<Journal> journal) EXCLUDES(mu_);
  // Commits everything appended or acknowledged so far, ends the thread and
  // closes the journal. Idempotent.
  void stop() EXCLUDES(mu_);

  // Queues a record; returns its ticket (for cancel()), or nullopt when the
  // backlog is full or the writer is stopped.
  std::optional<uint64_t> append(JournalRecord record, uint64_t token) EXCLUDES(mu_);
  // Withdraws the record of `ticket` if no transaction took it yet: it is
  // never written and its callback never runs (the caller settles it). False
  // when a transaction took it already (its callback runs or ran), it was
  // cancelled before, or the writer is not running.
  bool cancel(uint64_t ticket) EXCLUDES(mu_);
  // Queues the removal of an acknowledged record for the next transaction.
  // Only for a record a transaction took already (cancel() returned false)
  // or read from the journal; for a cancelled one with `written` false (the
  // id is only remembered). Ignored once stopped (the record then stays
  // journaled and is redelivered after a restart).
  void acknowledge(JournalAck ack) EXCLUDES(mu_);
  // Queues `record` and `acks` for the next transaction (see above); `done`
  // runs on the writer thread after it with its status, or at once with
  // Unavailable when the writer is not running. A transaction that fails
  // drops them: the caller acknowledges them again with a later checkpoint.
  void checkpoint(CheckpointRecord record, std::vector<JournalAck> acks, CheckpointDone done)
      EXCLUDES(mu_);
  // Returns once every record appended before the call is committed and its
  // callback has run, or was cancelled (immediately when the writer is not running).
  void flush() EXCLUDES(mu_);

  // Ticks again (the next one a tick period from now) after a tick said it
  // wanted no more; also when called during that tick.
  void requestTicks() EXCLUDES(mu_);

  JournalWriterMetrics metrics() const EXCLUDES(mu_);

 private:
  using Clock = std::chrono::steady_clock;
  struct Queued {
    JournalRecord record;
    uint64_t token = 0;
    bool cancelled = false;
    Clock::time_point appended_at;
  };

  struct QueuedCheckpoint {
    CheckpointRecord record;
    std::vector<JournalAck> acks;
    CheckpointDone done;
  };

  // When a record appended at `appended_at` is ripe: its commit delay later,
  // rounded up to the grid (see above).
  Clock::time_point ripeAt(Clock::time_point appended_at) const;
  // Whether the writer must be woken for work due at `due`: it is waiting and
  // would not wake by itself by then.
  bool mustWake(Clock::time_point due) const REQUIRES(mu_);
  void run() EXCLUDES(mu_);
  // Logs the first failed transaction of a run of them and the first that
  // works again: a full disk fails every transaction, a line each would
  // flood the log. Writer thread only.
  void logHealth(const Status& status);

  const JournalWriterOptions options_;
  const Clock::duration ripening_grid_;  // commit_delay / 2; 0: no grid
  const CommitCallback on_commit_;
  const TickCallback on_tick_;

  bool failing_ = false;  // writer thread only: the last transaction failed
  mutable Mutex mu_;
  CondVar work_cv_;     // writer waits for work
  CondVar flushed_cv_;  // flush() waits for commits
  // Appended, not yet taken by a transaction, oldest first: the record of
  // ticket t sits at queue_[t - 1 - taken_].
  std::deque<Queued> queue_ GUARDED_BY(mu_);
  std::vector<JournalAck> acks_ GUARDED_BY(mu_);
  std::vector<QueuedCheckpoint> checkpoints_ GUARDED_BY(mu_);
  Clock::time_point first_ack_at_ GUARDED_BY(mu_);  // of acks_.front()
  // While the writer waits, when it wakes by itself (max() when it waits for
  // work only); min() while it works (it looks at the queue again before it
  // waits).
  Clock::time_point wake_at_ GUARDED_BY(mu_) = Clock::time_point::min();
  bool ticking_ GUARDED_BY(mu_) = true;
  Clock::time_point next_tick_ GUARDED_BY(mu_);  // while ticking_
  uint64_t tick_requests_ GUARDED_BY(mu_) = 0;   // requestTicks() calls
  uint64_t appended_ GUARDED_BY(mu_) = 0;        // the last ticket given
  uint64_t taken_ GUARDED_BY(mu_) = 0;           // records taken out of queue_
  // Records through their callback (or cancelled).
  uint64_t committed_ GUARDED_BY(mu_) = 0;
  uint64_t flush_through_ GUARDED_BY(mu_) = 0;  // flush() wants tickets up to here now
  std::unique_ptr<Journal> journal_;            // used by the writer thread only while running
  bool running_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  JournalWriterMetrics metrics_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace cepbus::flows
