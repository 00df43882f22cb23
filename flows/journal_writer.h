#pragma once

// JournalWriter: the group-commit thread of a ReliableFlow. Senders append
// records; the thread takes everything appended since its last commit (up to
// a batch limit), writes it in one transaction, and only then calls back so
// the flow can acknowledge the senders and dispatch the events. Target
// acknowledgements ride along in the same transactions. While a commit is on
// disk the next batch accumulates, so the batch size adapts to the load
// instead of costing one fsync per event.
//
// The thread also calls a tick callback periodically (the flow's redelivery timer).
// A writer owns the journal from start() to stop(), and may be started again
// with another journal afterwards.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "bus/core/status.h"
#include "flows/journal.h"

namespace cepbus::flows {

struct JournalWriterOptions {
  size_t max_batch = 1024;     // records per transaction
  size_t max_backlog = 65536;  // records waiting for a commit; append() refuses beyond it
  std::chrono::milliseconds tick{50};
};

struct JournalWriterMetrics {
  uint64_t commits = 0;       // transactions written
  uint64_t inserted = 0;      // records committed
  uint64_t acknowledged = 0;  // acknowledgements committed
  uint64_t errors = 0;        // transactions that failed
  size_t backlog = 0;         // records waiting now
};

// Thread-safety: append(), acknowledge(), flush() and metrics() may be called
// from any thread; start() and stop() from the control thread, not
// concurrently. The callbacks run on the writer thread, one at a time.
// Ownership: owns the journal it was started with until stop() closes it.
class JournalWriter {
 public:
  // Called after each transaction with the tokens of the records it held;
  // `status` is OK when they are durable.
  using CommitCallback =
      std::function<void(std::span<const uint64_t> tokens, const Status& status)>;
  using TickCallback = std::function<void(std::chrono::steady_clock::time_point now)>;

  JournalWriter(JournalWriterOptions options, CommitCallback on_commit, TickCallback on_tick);
  ~JournalWriter();  // stop()
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

  // Starts the thread on `journal`. No effect while running.
  void start(std::unique_ptr<Journal> journal);
  // Commits everything appended or acknowledged so far, ends the thread and
  // closes the journal. Idempotent.
  void stop();

  // Queues a record; false when the backlog is full or the writer is stopped.
  bool append(JournalRecord record, uint64_t token);
  // Queues the removal of an acknowledged record. Ignored once stopped (the
  // record then stays journaled and is redelivered after a restart).
  void acknowledge(JournalAck ack);
  // Returns once every record appended before the call is committed and its
  // callback has run (immediately when the writer is not running).
  void flush();

  JournalWriterMetrics metrics() const;

 private:
  void run();

  const JournalWriterOptions options_;
  const CommitCallback on_commit_;
  const TickCallback on_tick_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;     // writer waits for work
  std::condition_variable flushed_cv_;  // flush() waits for commits
  std::vector<JournalRecord> records_;  // guarded by mu_
  std::vector<uint64_t> tokens_;        // guarded by mu_, parallel to records_
  std::vector<JournalAck> acks_;        // guarded by mu_
  uint64_t appended_ = 0;               // guarded by mu_
  uint64_t committed_ = 0;              // guarded by mu_: records through their callback
  std::unique_ptr<Journal> journal_;    // used by the writer thread only while running
  bool running_ = false;                // guarded by mu_
  bool stopping_ = false;               // guarded by mu_
  JournalWriterMetrics metrics_;        // guarded by mu_
  std::thread thread_;
};

}  // namespace cepbus::flows
