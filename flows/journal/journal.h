#pragma once

// Journal: the durable store behind ReliableFlow, an SQLite database in WAL
// mode (a real embedded store, not a home-made file format). Two tables:
//
//   pending(seq PRIMARY KEY, target, event_id, address, sender, pattern,
//           correlation_id, event)  -- accepted, not yet acknowledged by target;
//           `event` its binary record (event_record.h) or, written by an
//           older cepbus, its JSON line
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

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/status.h"
#include "bus/core/symbol.h"
#include "bus/core/wire_names.h"
#include "flows/exchange.h"
#include "flows/journal/checkpoint_record.h"

struct sqlite3;
struct sqlite3_stmt;

namespace cepbus::flows {

// One accepted delivery of an event to a target, as journaled.
struct JournalRecord {
  uint64_t seq = 0;
  SharedName target;  // held while the record lives, as its address
  EventId event_id = 0;
  SharedName address;  // holds a client's address while the record lives
  Symbol sender;
  Pattern pattern = Pattern::kInOnly;
  uint64_t correlation_id = 0;
  // The event as stored (event_record.h: a binary record, or the JSON line
  // of a journal written before it); decodeEventRecord() reads either.
  std::string stored_event;
  // When stored_event is empty, commit() encodes this event instead: the
  // encoding then costs the journal thread, not the sender, and a record
  // that is never written never pays for it. pending() fills stored_event only.
  EventPtr event;
};

// A target acknowledged the delivery `seq` of `event_id`.
struct JournalAck {
  uint64_t seq = 0;
  SharedName target;
  EventId event_id = 0;
  // False when the record was never written (cancelled before a transaction
  // took it): there is no pending row to delete, only the id to remember.
  bool written = true;
};

struct DeliveredId {
  SharedName target;
  EventId event_id = 0;
};

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

  // The pending records, oldest first.
  Result<std::vector<JournalRecord>> pending();
  // The remembered acknowledged ids, oldest first. A batch that does not
  // decode is skipped (see corruptBatches()): it only costs the duplicate
  // suppression of its ids.
  Result<std::vector<DeliveredId>> delivered();
  // Batches the last delivered() skipped.
  size_t corruptBatches() const { return corrupt_batches_; }
  // The highest sequence number ever used (0 for an empty journal).
  Result<uint64_t> maxSeq();

  // One transaction: insert `inserts` (encoding the events of those without
  // stored bytes), delete the acknowledged pending rows (those written) and remember
  // every acknowledged id, trim the delivered window, store `checkpoints`
  // (replacing the rows of their names). All or nothing.
  Status commit(std::span<const JournalRecord> inserts, std::span<const JournalAck> acks,
                std::span<const CheckpointRecord> checkpoints = {});

  const std::string& path() const { return path_; }

  // Records per INSERT statement when a transaction has that many: a
  // checkpointed consumer leaves every record to be written, and binding
  // and stepping one statement per record was part of that cost.
  static constexpr size_t kRowsPerInsert = 64;
  static constexpr size_t kInsertColumns = 8;

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
  Result<BatchChange> commitBody(std::span<const JournalRecord> inserts,
                                 std::span<const JournalAck> acks,
                                 std::span<const CheckpointRecord> checkpoints);
  // Inserts the ids of `acks` as one batch and trims the window (inside a transaction).
  Result<BatchChange> rememberBatch(std::span<const JournalAck> acks);
  // Inserts the records (inside a transaction), kRowsPerInsert at a time.
  Status insertRecords(std::span<const JournalRecord> inserts);
  // Deletes the pending rows of `acks` (inside a transaction).
  Status deleteAcknowledged(std::span<const JournalAck> acks);
  Status migrateDeliveredRows();
  Status loadBatches();
  // Switches between fsyncing commits (FULL) and not (NORMAL) when needed.
  Status setSynchronous(bool full);

  const std::string path_;
  const JournalOptions options_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;
  sqlite3_stmt* insert_many_ = nullptr;  // kRowsPerInsert rows
  sqlite3_stmt* delete_ = nullptr;       // a range of sequence numbers
  sqlite3_stmt* remember_ = nullptr;
  sqlite3_stmt* trim_ = nullptr;
  sqlite3_stmt* checkpoint_ = nullptr;
  bool synchronous_full_ = false;  // the connection's current setting
  std::deque<Batch> batches_;      // the window's rows, oldest first
  size_t remembered_ = 0;          // ids in batches_
  std::string blob_;               // reused by rememberBatch()
  // Reused by insertRecords(): the event records of one statement.
  std::array<std::string, kRowsPerInsert> encoded_;
  std::vector<uint64_t> seqs_;  // reused by deleteAcknowledged()
  size_t corrupt_batches_ = 0;
};

}  // namespace cepbus::flows
