#pragma once

// Journal: the durable store behind ReliableFlow, an SQLite database in WAL
// mode (a real embedded store, not a home-made file format). Its tables:
//
//   pending_batches(n PRIMARY KEY, last_seq, seqs BLOB, records BLOB)  --
//           accepted records not yet acknowledged by their targets, one row
//           per transaction that wrote them: `records` the batch record
//           (batch_record.h), `seqs` their sequence numbers (u64 each, host
//           byte order), `last_seq` the highest
//   pending_acked(n PRIMARY KEY, acked BLOB)  -- which records of row n are
//           acknowledged, while some are not (pending_batches.h)
//   pending(seq PRIMARY KEY, target, event_id, address, sender, pattern,
//           correlation_id, event)  -- one row per record, as an older
//           cepbus wrote them (`event` its binary record or JSON line);
//           read, and deleted as acknowledged, never written any more
//   delivered_batches(n PRIMARY KEY, count, ids BLOB)  -- recently
//           acknowledged (target, event id) pairs, one row per transaction,
//           bounded to a window, for duplicate suppression across restarts
//   checkpoints(name PRIMARY KEY, engine, version, fingerprint, position,
//           state BLOB, published BLOB)  -- a consumer's stored state
//           (checkpoint_record.h), written in the transaction that
//           acknowledges the deliveries it covers; read by checkpoint_table.h
//
// A commit() is one transaction holding a whole batch of inserts and
// acknowledgements (group commit): one fsync for many events. An
// acknowledgement of a record that was never written (ReliableFlow cancelled
// it because its target acknowledged first) only remembers the id.
//
// A record acknowledged in the transaction that would write it (a
// checkpoint takes every record appended so far, and acknowledges most of
// them) is not written at all. A row whose records are all acknowledged is
// deleted; at a restart only a row's records not acknowledged come back.
//
// Freed pages are not zeroed (secure_delete=FAST): a deleted row's pages
// would otherwise be written once more, to the WAL and then the file.
//
// The acknowledged ids of a transaction go into one row: under a flood a
// transaction carries hundreds of them, and a row (and a trim) each made the
// window most of the journal thread's work. A journal written with one row
// per id (the former `delivered` table) is converted when opened.
//
// A transaction of acknowledgements only is not fsynced: the WAL is written
// in order, so it becomes durable with the next transaction that is (or the
// next checkpoint). Losing it in a power cut can only bring acknowledged
// events back, marked as redelivered, which at-least-once allows; an fsync
// for it cost ~2 ms of a core on the development VM, 20 times a second.

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bus/core/status.h"
#include "flows/journal/checkpoint_record.h"
#include "flows/journal/journal_record.h"
#include "flows/journal/pending_batches.h"

struct sqlite3;
struct sqlite3_stmt;

namespace cepbus::flows {

struct JournalOptions {
  // Every commit that writes records is fsynced (durable against power
  // loss); false: none is, durable against a crash of the process only.
  bool fsync = true;
  // How many acknowledged ids the window keeps (whole transactions' worth
  // are stored; delivered() returns exactly the newest this many).
  size_t delivered_window = 100'000;
  // The SQLite VFS to open the file with; empty: the platform's default.
  // Lets a test count what reaches the disk.
  std::string vfs;
};

// Thread-safety: none; one thread at a time (ReliableFlow opens it on the
// control thread, then hands it to its journal thread). Owns the connection.
class Journal {
 public:
  // Opens or creates the database; IoError naming the path and SQLite's
  // message when it cannot.
  static Result<std::unique_ptr<Journal>> open(const std::string& path, JournalOptions options);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // The pending records, in the order they were written (the rows of an
  // older cepbus first, by sequence number). A row that does not decode is
  // logged naming it and what fails, deleted and counted
  // (corruptPendingRows()): its records cannot be told apart.
  Result<std::vector<JournalRecord>> pending();
  // Rows the last pending() deleted as corrupt.
  size_t corruptPendingRows() const { return corrupt_pending_rows_; }
  // The remembered acknowledged ids, oldest first. A batch that does not
  // decode is skipped (see corruptBatches()): it only costs the duplicate
  // suppression of its ids.
  Result<std::vector<DeliveredId>> delivered();
  // Batches the last delivered() skipped.
  size_t corruptBatches() const { return corrupt_batches_; }
  // The highest sequence number ever used (0 for an empty journal).
  Result<uint64_t> maxSeq();

  // One transaction: write `inserts` not acknowledged in it as one row
  // (encoding the events of those without stored bytes), mark the records
  // of `acks` (those written) acknowledged, deleting the rows they empty,
  // and remember every acknowledged id, trim the delivered window, store
  // `checkpoints` (replacing the rows of their names). All or nothing; an
  // InvalidArgument for a record whose sequence number is pending already.
  Status commit(std::span<const JournalRecord> inserts, std::span<const JournalAck> acks,
                std::span<const CheckpointRecord> checkpoints = {});

  const std::string& path() const { return path_; }

 private:
  Journal(std::string path, JournalOptions options)
      : path_(std::move(path)), options_(std::move(options)) {}
  Status exec(const char* sql);
  Status prepare(const char* sql, sqlite3_stmt** stmt);
  Status error(const std::string& what) const;
  // One row of delivered_batches: its key and how many ids it holds.
  struct Batch {
    int64_t n = 0;
    size_t count = 0;
  };
  // What a transaction does to the window, applied to batches_ once committed.
  struct BatchChange {
    Batch added;         // count 0: nothing added
    size_t dropped = 0;  // oldest batches deleted
  };
  // What a transaction does to the pending rows, applied to pending_ once committed.
  struct PendingChange {
    PendingBatches::Plan acked;
    int64_t added = 0;  // the row written (0: none); its records' seqs in written_
  };
  struct Change {
    BatchChange window;
    PendingChange pending;
  };
  Result<Change> commitBody(std::span<const JournalRecord> inserts,
                            std::span<const JournalAck> acks,
                            std::span<const CheckpointRecord> checkpoints);
  // Inserts the ids of `acks` as one batch and trims the window (inside a transaction).
  Result<BatchChange> rememberBatch(std::span<const JournalAck> acks);
  // Writes the records not acknowledged in this transaction (acked_, sorted)
  // as one row; returns its key, 0 when there is none (inside a transaction).
  Result<int64_t> insertRecords(std::span<const JournalRecord> inserts);
  // Marks the written records of acked_ acknowledged (inside a transaction).
  Result<PendingBatches::Plan> acknowledgeRecords();
  // Deletes the rows of an older cepbus of `seqs` (inside a transaction).
  Status deleteRecordRows(std::span<const uint64_t> seqs);
  // Deletes a row of pending_batches and its bitmap (inside a transaction or not).
  Status deletePendingRow(int64_t row, bool had_bitmap);
  // Reads the rows of an older cepbus and of pending_batches into `out`.
  Status readRecordRows(std::vector<JournalRecord>& out);
  Status readPendingRows(std::vector<JournalRecord>& out);
  Status migrateDeliveredRows();
  Status loadBatches();
  // Indexes the rows of pending_batches by their seqs and bitmaps (at open),
  // and notes whether `pending` holds rows.
  Status loadPendingRows();
  // Switches between fsyncing commits (FULL) and not (NORMAL) when needed.
  Status setSynchronous(bool full);

  const std::string path_;
  const JournalOptions options_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;         // a row of pending_batches
  sqlite3_stmt* delete_row_ = nullptr;     // one of pending_batches
  sqlite3_stmt* delete_bitmap_ = nullptr;  // one of pending_acked
  sqlite3_stmt* store_bitmap_ = nullptr;   // one of pending_acked
  sqlite3_stmt* delete_ = nullptr;         // a range of an older cepbus's rows
  sqlite3_stmt* remember_ = nullptr;
  sqlite3_stmt* trim_ = nullptr;
  sqlite3_stmt* checkpoint_ = nullptr;
  bool synchronous_full_ = false;  // the connection's current setting
  std::deque<Batch> batches_;      // the window's rows, oldest first
  size_t remembered_ = 0;          // ids in batches_
  std::string blob_;               // reused by rememberBatch() and insertRecords()
  PendingBatches pending_;         // the rows of pending_batches
  bool record_rows_ = false;       // `pending` had rows when opened
  // Reused by each transaction: the written records it acknowledges
  // (sorted), the records it writes and their sequence numbers.
  std::vector<uint64_t> acked_;
  std::vector<const JournalRecord*> writing_;
  std::vector<uint64_t> written_;
  size_t corrupt_batches_ = 0;
  size_t corrupt_pending_rows_ = 0;
};

}  // namespace cepbus::flows
