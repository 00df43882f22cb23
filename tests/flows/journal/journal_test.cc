#include "flows/journal/journal.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <array>
#include <atomic>
#include <filesystem>
#include <mutex>

#include "bus/core/event_json.h"
#include "flows/journal/event_record.h"
#include "tests/flows/flow_test_util.h"
#include "tests/testing/sqlite_raw.h"

namespace cepbus::flows {
namespace {

using testing::makeEvent;
using testing::TempDir;

JournalRecord record(uint64_t seq, std::string_view target, EventId id) {
  EventPtr event = makeEvent(static_cast<int64_t>(seq), id);
  return JournalRecord{seq,
                       Symbol::intern(target),
                       id,
                       Symbol::intern("journal.topic"),
                       Symbol::intern("sender"),
                       Pattern::kRobustInOnly,
                       77,
                       encodeEvent(*event, EventFormat::kFull),
                       nullptr};
}

// An SQLite VFS that is the platform's default but counts xSync calls (the
// fsyncs), so a test can tell which commits reach the disk durably. It lets
// the default VFS open each file in place and only swaps in a copy of that
// file's method table with xSync wrapped (the database file and its WAL have
// different tables).
struct SyncCountingMethods {
  const sqlite3_io_methods* base = nullptr;
  sqlite3_io_methods counting{};
};

class SyncCountingVfs {
 public:
  static constexpr const char* kName = "cepbus-sync-counting";

  static void install() {
    static const bool installed = [] {
      sqlite3_vfs* base = sqlite3_vfs_find(nullptr);
      vfs_ = *base;
      vfs_.zName = kName;
      vfs_.pAppData = base;
      vfs_.xOpen = &open;
      return sqlite3_vfs_register(&vfs_, 0) == SQLITE_OK;
    }();
    ASSERT_TRUE(installed);
  }
  static uint64_t syncs() { return syncs_.load(); }

 private:
  static constexpr size_t kMaxTables = 8;

  static int open(sqlite3_vfs* vfs, sqlite3_filename name, sqlite3_file* file, int flags,
                  int* out_flags) {
    auto* base = static_cast<sqlite3_vfs*>(vfs->pAppData);
    const int rc = base->xOpen(base, name, file, flags, out_flags);
    if (file->pMethods == nullptr) return rc;
    std::lock_guard lock(mu_);
    for (SyncCountingMethods& m : tables_) {
      if (m.base == nullptr) {
        m.base = file->pMethods;
        m.counting = *file->pMethods;
        m.counting.xSync = &sync;
      }
      if (m.base == file->pMethods) {
        file->pMethods = &m.counting;
        return rc;
      }
    }
    ADD_FAILURE() << "more than " << kMaxTables << " SQLite method tables";
    return rc;
  }
  static int sync(sqlite3_file* file, int flags) {
    syncs_.fetch_add(1);
    // The tables never change once filled, and this file's was filled before it was opened.
    for (const SyncCountingMethods& m : tables_) {
      if (&m.counting == file->pMethods) return m.base->xSync(file, flags);
    }
    return SQLITE_IOERR_FSYNC;
  }

  static inline sqlite3_vfs vfs_{};
  static inline std::mutex mu_;
  static inline std::array<SyncCountingMethods, kMaxTables> tables_{};
  static inline std::atomic<uint64_t> syncs_{0};
};

std::string journalMode(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr);
  std::string mode;
  if (sqlite3_step(stmt) == SQLITE_ROW) {
    mode = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return mode;
}

using cepbus::testing::execRaw;

int64_t countRows(const std::string& path, const std::string& table) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, ("SELECT COUNT(*) FROM " + table).c_str(), -1, &stmt, nullptr);
  const int64_t n = sqlite3_step(stmt) == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : -1;
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return n;
}

TEST(JournalTest, CommitsSurviveReopeningInWalMode) {
  TempDir dir;
  const std::string path = dir.file("j.db");
  {
    auto journal = Journal::open(path, {});
    ASSERT_TRUE(journal.isOk()) << journal.status().toString();
    std::vector<JournalRecord> inserts{record(1, "a", 101), record(2, "b", 102),
                                       record(3, "a", 103)};
    ASSERT_TRUE((*journal)->commit(inserts, {}).isOk());
  }
  EXPECT_EQ(journalMode(path), "wal");
  auto journal = Journal::open(path, {});
  ASSERT_TRUE(journal.isOk());
  auto pending = (*journal)->pending();
  ASSERT_TRUE(pending.isOk());
  ASSERT_EQ(pending->size(), 3u);
  const JournalRecord& r = (*pending)[1];
  EXPECT_EQ(r.seq, 2u);
  EXPECT_EQ(r.target.name(), "b");
  EXPECT_EQ(r.event_id, 102u);
  EXPECT_EQ(r.address.name(), "journal.topic");
  EXPECT_EQ(r.sender.name(), "sender");
  EXPECT_EQ(r.pattern, Pattern::kRobustInOnly);
  EXPECT_EQ(r.correlation_id, 77u);
  // Written as a JSON line (as an older cepbus did), read back as one.
  auto event = decodeEventRecord(r.stored_event);
  ASSERT_TRUE(event.isOk());
  EXPECT_EQ((*event)->id(), 102u);
  EXPECT_EQ(*(*journal)->maxSeq(), 3u);
}

TEST(JournalTest, AcknowledgementsRemoveRowsAndRememberIds) {
  TempDir dir;
  auto journal = Journal::open(dir.file("j.db"), {});
  ASSERT_TRUE(journal.isOk());
  std::vector<JournalRecord> inserts{record(1, "a", 101), record(2, "a", 102)};
  std::vector<JournalAck> acks{{1, Symbol::intern("a"), 101, true}};
  // Inserts and acknowledgements of one batch go in one transaction.
  ASSERT_TRUE((*journal)->commit(inserts, acks).isOk());
  auto pending = (*journal)->pending();
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].seq, 2u);
  auto delivered = (*journal)->delivered();
  ASSERT_EQ(delivered->size(), 1u);
  EXPECT_EQ((*delivered)[0].target.name(), "a");
  EXPECT_EQ((*delivered)[0].event_id, 101u);
}

TEST(JournalTest, ARecordWithoutStoredBytesIsWrittenAsItsEventsFields) {
  TempDir dir;
  auto journal = Journal::open(dir.file("j.db"), {});
  ASSERT_TRUE(journal.isOk());
  JournalRecord r = record(1, "a", 101);
  r.stored_event.clear();
  r.event = makeEvent(5, 101);
  std::vector<JournalRecord> inserts{r};
  ASSERT_TRUE((*journal)->commit(inserts, {}).isOk());
  auto pending = (*journal)->pending();
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_TRUE((*pending)[0].stored_event.empty());  // read back as the event
  const EventPtr& event = (*pending)[0].event;
  ASSERT_NE(event, nullptr);
  EXPECT_EQ(event->id(), 101u);
  EXPECT_EQ(event->ts(), 5);
  EXPECT_EQ(event->find(Symbol::intern("n"))->asInt(), 5);
}

// Many records, and acknowledgements in runs with gaps: each record is
// written once, and only the acknowledged ones are gone.
TEST(JournalTest, ManyRecordsAndRunsOfAcknowledgements) {
  TempDir dir;
  auto journal = Journal::open(dir.file("j.db"), {});
  ASSERT_TRUE(journal.isOk());
  const uint64_t n = 133;
  std::vector<JournalRecord> inserts;
  for (uint64_t seq = 1; seq <= n; ++seq) {
    JournalRecord r = record(seq, "a", 1000 + seq);
    r.stored_event.clear();
    r.event = makeEvent(static_cast<int64_t>(seq), 1000 + seq);
    inserts.push_back(std::move(r));
  }
  ASSERT_TRUE((*journal)->commit(inserts, {}).isOk());
  // Out of order, duplicates none: 1-10, 12, 30-40 written; 11 unwritten
  // (never in the table here, but a run must not bridge it).
  std::vector<JournalAck> acks;
  auto ack = [&](uint64_t seq, bool written) {
    acks.push_back(JournalAck{seq, Symbol::intern("a"), 1000 + seq, written});
  };
  for (uint64_t seq = 40; seq >= 30; --seq) ack(seq, true);
  ack(12, true);
  ack(11, false);
  for (uint64_t seq = 1; seq <= 10; ++seq) ack(seq, true);
  ASSERT_TRUE((*journal)->commit({}, acks).isOk());
  auto pending = (*journal)->pending();
  ASSERT_TRUE(pending.isOk());
  std::vector<uint64_t> left;
  for (const JournalRecord& r : *pending) left.push_back(r.seq);
  std::vector<uint64_t> expected{11};
  for (uint64_t seq = 13; seq <= n; ++seq) {
    if (seq < 30 || seq > 40) expected.push_back(seq);
  }
  EXPECT_EQ(left, expected);
  for (const JournalRecord& r : *pending) {
    ASSERT_NE(r.event, nullptr) << r.seq;
    EXPECT_EQ(r.event->id(), r.event_id);
  }
}

TEST(JournalTest, AnAcknowledgementOfAnUnwrittenRecordOnlyRemembersItsId) {
  TempDir dir;
  auto journal = Journal::open(dir.file("j.db"), {});
  ASSERT_TRUE(journal.isOk());
  std::vector<JournalRecord> inserts{record(1, "a", 101), record(3, "a", 103)};
  ASSERT_TRUE((*journal)->commit(inserts, {}).isOk());
  // seq 2 was never written; seq 3 is acknowledged as unwritten on purpose,
  // to show that such an acknowledgement deletes nothing.
  std::vector<JournalAck> acks{{2, Symbol::intern("a"), 102, false},
                               {3, Symbol::intern("a"), 103, false},
                               {1, Symbol::intern("a"), 101, true}};
  ASSERT_TRUE((*journal)->commit({}, acks).isOk());
  auto pending = (*journal)->pending();
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].seq, 3u);
  auto delivered = (*journal)->delivered();
  ASSERT_EQ(delivered->size(), 3u);
  EXPECT_EQ((*delivered)[0].event_id, 102u);
  EXPECT_EQ((*delivered)[2].event_id, 101u);
}

// Records are fsynced when committed; acknowledgements alone are not (they
// become durable with the next records, and losing them only redelivers).
TEST(JournalTest, OnlyCommitsThatWriteRecordsAreFsynced) {
  SyncCountingVfs::install();
  TempDir dir;
  JournalOptions options;
  options.vfs = SyncCountingVfs::kName;
  auto journal = Journal::open(dir.file("j.db"), options);
  ASSERT_TRUE(journal.isOk()) << journal.status().message();
  std::vector<JournalRecord> first{record(1, "a", 101)};
  std::vector<JournalRecord> second{record(2, "a", 102)};
  std::vector<JournalAck> acks{{1, Symbol::intern("a"), 101, true},
                               {7, Symbol::intern("a"), 107, false}};

  uint64_t before = SyncCountingVfs::syncs();
  ASSERT_TRUE((*journal)->commit(first, {}).isOk());
  EXPECT_GT(SyncCountingVfs::syncs(), before);
  before = SyncCountingVfs::syncs();
  ASSERT_TRUE((*journal)->commit({}, acks).isOk());
  EXPECT_EQ(SyncCountingVfs::syncs(), before);
  before = SyncCountingVfs::syncs();
  ASSERT_TRUE((*journal)->commit(second, {}).isOk());
  EXPECT_GT(SyncCountingVfs::syncs(), before);  // and the acknowledgements with it

  auto pending = (*journal)->pending();
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].seq, 2u);
  EXPECT_EQ((*journal)->delivered()->size(), 2u);
}

TEST(JournalTest, WithoutFsyncNoCommitIsFsynced) {
  SyncCountingVfs::install();
  TempDir dir;
  JournalOptions options;
  options.vfs = SyncCountingVfs::kName;
  options.fsync = false;
  auto journal = Journal::open(dir.file("j.db"), options);
  ASSERT_TRUE(journal.isOk()) << journal.status().message();
  const uint64_t before = SyncCountingVfs::syncs();
  std::vector<JournalRecord> inserts{record(1, "a", 101)};
  ASSERT_TRUE((*journal)->commit(inserts, {}).isOk());
  EXPECT_EQ(SyncCountingVfs::syncs(), before);
}

TEST(JournalTest, TheDeliveredWindowIsBounded) {
  TempDir dir;
  JournalOptions options;
  options.delivered_window = 3;
  options.fsync = false;
  auto journal = Journal::open(dir.file("j.db"), options);
  ASSERT_TRUE(journal.isOk());
  for (uint64_t seq = 1; seq <= 6; ++seq) {
    std::vector<JournalRecord> inserts{record(seq, "a", 100 + seq)};
    std::vector<JournalAck> acks{{seq, Symbol::intern("a"), 100 + seq, true}};
    ASSERT_TRUE((*journal)->commit(inserts, acks).isOk());
  }
  auto delivered = (*journal)->delivered();
  ASSERT_EQ(delivered->size(), 3u);
  EXPECT_EQ((*delivered)[0].event_id, 104u);  // the oldest kept
  EXPECT_EQ((*delivered)[2].event_id, 106u);
  EXPECT_TRUE((*journal)->pending()->empty());
}

// A transaction's ids are one row; the window keeps whole rows while the
// newer ones hold fewer ids than it, and returns exactly the newest ids.
TEST(JournalTest, TheWindowKeepsWholeBatchesAcrossReopening) {
  TempDir dir;
  const std::string path = dir.file("j.db");
  JournalOptions options;
  options.delivered_window = 5;
  options.fsync = false;
  const Symbol a = Symbol::intern("a"), b = Symbol::intern("b");
  EventId next = 1;
  auto commitBatch = [&](Journal& journal) {
    // Runs of two targets in one batch: a, a, b.
    std::vector<JournalAck> acks{
        {0, a, next, false}, {0, a, next + 1, false}, {0, b, next + 2, false}};
    next += 3;
    ASSERT_TRUE(journal.commit({}, acks).isOk());
  };
  {
    auto journal = Journal::open(path, options);
    ASSERT_TRUE(journal.isOk());
    for (int i = 0; i < 4; ++i) commitBatch(**journal);  // ids 1..12
  }
  EXPECT_EQ(countRows(path, "delivered_batches"), 2);  // 7..9 and 10..12: 6 ids >= 5
  auto journal = Journal::open(path, options);
  ASSERT_TRUE(journal.isOk());
  commitBatch(**journal);  // ids 13..15: the batch of 7..9 goes
  EXPECT_EQ(countRows(path, "delivered_batches"), 2);
  auto delivered = (*journal)->delivered();
  ASSERT_TRUE(delivered.isOk());
  ASSERT_EQ(delivered->size(), 5u);
  const std::vector<std::pair<Symbol, EventId>> expected{
      {a, 11}, {b, 12}, {a, 13}, {a, 14}, {b, 15}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ((*delivered)[i].target, expected[i].first) << i;
    EXPECT_EQ((*delivered)[i].event_id, expected[i].second) << i;
  }
}

// A journal from before the batches (one `delivered` row per id) keeps its
// window when opened, converted into one batch.
TEST(JournalTest, ConvertsTheFormerOneRowPerIdWindow) {
  TempDir dir;
  const std::string path = dir.file("j.db");
  execRaw(path,
          "CREATE TABLE delivered(n INTEGER PRIMARY KEY AUTOINCREMENT, target TEXT NOT NULL, "
          "event_id INTEGER NOT NULL);"
          "INSERT INTO delivered(target, event_id) VALUES('a', 7), ('b', 8), ('a', 9);");
  auto journal = Journal::open(path, {});
  ASSERT_TRUE(journal.isOk()) << journal.status().message();
  auto delivered = (*journal)->delivered();
  ASSERT_TRUE(delivered.isOk());
  ASSERT_EQ(delivered->size(), 3u);
  EXPECT_EQ((*delivered)[0].target.name(), "a");
  EXPECT_EQ((*delivered)[1].target.name(), "b");
  EXPECT_EQ((*delivered)[1].event_id, 8u);
  EXPECT_EQ((*delivered)[2].event_id, 9u);
  EXPECT_EQ(countRows(path, "delivered"), -1);  // gone
}

// A batch that does not decode costs only its own ids' duplicate
// suppression: the others are read, and it is counted.
TEST(JournalTest, ACorruptBatchIsSkippedAndCounted) {
  TempDir dir;
  const std::string path = dir.file("j.db");
  {
    auto journal = Journal::open(path, {});
    ASSERT_TRUE(journal.isOk());
    std::vector<JournalAck> acks{{0, Symbol::intern("a"), 7, false}};
    ASSERT_TRUE((*journal)->commit({}, acks).isOk());
  }
  // A name longer than the blob, then a count past its end.
  execRaw(path,
          "INSERT INTO delivered_batches(n, count, ids) VALUES(42, 1, x'0500616263'),"
          " (43, 2, x'010061020000000900000000000000');");
  auto journal = Journal::open(path, {});
  ASSERT_TRUE(journal.isOk());
  auto delivered = (*journal)->delivered();
  ASSERT_TRUE(delivered.isOk()) << delivered.status().message();
  ASSERT_EQ(delivered->size(), 1u);
  EXPECT_EQ((*delivered)[0].event_id, 7u);
  EXPECT_EQ((*journal)->corruptBatches(), 2u);
}

// The batch stores a name's length in 16 bits: a longer target name (a
// remote link may be named so) is left out of the window instead of
// wrapping its length, which would read back as other targets' ids.
TEST(JournalTest, ATargetNameTooLongForTheWindowIsLeftOut) {
  TempDir dir;
  const std::string path = dir.file("j.db");
  const Symbol a = Symbol::intern("a");
  // 65536 + 16 bytes: a wrapped length of 16 would cut into this very name.
  const Symbol huge = Symbol::intern(std::string(65536 + 16, 'x'));
  {
    auto journal = Journal::open(path, {});
    ASSERT_TRUE(journal.isOk());
    std::vector<JournalAck> acks{{0, a, 7, false}, {0, huge, 8, false}, {0, a, 9, false}};
    ASSERT_TRUE((*journal)->commit({}, acks).isOk());
    std::vector<JournalAck> only_huge{{0, huge, 10, false}};
    ASSERT_TRUE((*journal)->commit({}, only_huge).isOk());
  }
  EXPECT_EQ(countRows(path, "delivered_batches"), 1);  // nothing to keep of the second
  auto journal = Journal::open(path, {});
  ASSERT_TRUE(journal.isOk());
  auto delivered = (*journal)->delivered();
  ASSERT_TRUE(delivered.isOk()) << delivered.status().message();
  ASSERT_EQ(delivered->size(), 2u);
  EXPECT_EQ((*delivered)[0].target, a);
  EXPECT_EQ((*delivered)[0].event_id, 7u);
  EXPECT_EQ((*delivered)[1].target, a);
  EXPECT_EQ((*delivered)[1].event_id, 9u);
  EXPECT_EQ((*journal)->corruptBatches(), 0u);
}

TEST(JournalTest, AFailingBatchLeavesNothingBehind) {
  TempDir dir;
  auto journal = Journal::open(dir.file("j.db"), {});
  ASSERT_TRUE(journal.isOk());
  std::vector<JournalRecord> first{record(1, "a", 101)};
  ASSERT_TRUE((*journal)->commit(first, {}).isOk());
  // seq 1 is pending already: the whole batch is refused.
  std::vector<JournalRecord> second{record(2, "a", 102), record(1, "a", 103)};
  Status status = (*journal)->commit(second, {});
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(status.message().find("insert pending: record 1 is pending already"), std::string::npos)
      << status.message();
  // So is a record twice in one transaction.
  std::vector<JournalRecord> twice{record(3, "a", 103), record(2, "a", 102), record(3, "a", 103)};
  status = (*journal)->commit(twice, {});
  EXPECT_NE(status.message().find("record 3 twice in one transaction"), std::string::npos)
      << status.message();
  auto pending = (*journal)->pending();
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].event_id, 101u);
  // And the journal stays usable.
  std::vector<JournalRecord> third{record(2, "a", 102)};
  EXPECT_TRUE((*journal)->commit(third, {}).isOk());
}

std::vector<uint64_t> seqsOf(const std::vector<JournalRecord>& records) {
  std::vector<uint64_t> seqs;
  for (const JournalRecord& r : records) seqs.push_back(r.seq);
  return seqs;
}

// A transaction's records are one row; acknowledging some of them stores
// which, so that a restart brings back only the others; the last one deletes
// the row and its bitmap.
TEST(JournalTest, ATransactionsRecordsAreOneRowUntilAllAreAcknowledged) {
  TempDir dir;
  const std::string path = dir.file("j.db");
  const Symbol a = Symbol::intern("a");
  {
    auto journal = Journal::open(path, {});
    ASSERT_TRUE(journal.isOk());
    std::vector<JournalRecord> inserts;
    for (uint64_t seq = 1; seq <= 10; ++seq) inserts.push_back(record(seq, "a", 100 + seq));
    ASSERT_TRUE((*journal)->commit(inserts, {}).isOk());
    std::vector<JournalAck> acks;
    for (uint64_t seq : {2, 3, 9}) acks.push_back(JournalAck{seq, a, 100 + seq, true});
    ASSERT_TRUE((*journal)->commit({}, acks).isOk());
  }
  EXPECT_EQ(countRows(path, "pending_batches"), 1);
  EXPECT_EQ(countRows(path, "pending_acked"), 1);
  EXPECT_EQ(countRows(path, "pending"), 0);
  auto journal = Journal::open(path, {});
  ASSERT_TRUE(journal.isOk());
  auto pending = (*journal)->pending();
  ASSERT_TRUE(pending.isOk()) << pending.status().toString();
  EXPECT_EQ(seqsOf(*pending), (std::vector<uint64_t>{1, 4, 5, 6, 7, 8, 10}));
  EXPECT_EQ(*(*journal)->maxSeq(), 10u);
  // The rest, after the restart: the row goes, with its bitmap.
  std::vector<JournalAck> rest;
  for (const JournalRecord& r : *pending) rest.push_back(JournalAck{r.seq, a, r.event_id, true});
  ASSERT_TRUE((*journal)->commit({}, rest).isOk());
  EXPECT_EQ(countRows(path, "pending_batches"), 0);
  EXPECT_EQ(countRows(path, "pending_acked"), 0);
  EXPECT_TRUE((*journal)->pending()->empty());
  EXPECT_EQ((*journal)->delivered()->size(), 10u);
}

// A checkpoint takes every record appended so far and acknowledges most of
// them in the same transaction: those are never written.
TEST(JournalTest, RecordsAcknowledgedInTheirOwnTransactionAreNotWritten) {
  TempDir dir;
  const std::string path = dir.file("j.db");
  auto journal = Journal::open(path, {});
  ASSERT_TRUE(journal.isOk());
  const Symbol a = Symbol::intern("a");
  std::vector<JournalRecord> inserts{record(1, "a", 101), record(2, "a", 102)};
  std::vector<JournalAck> acks{{1, a, 101, true}, {2, a, 102, true}};
  ASSERT_TRUE((*journal)->commit(inserts, acks).isOk());
  EXPECT_EQ(countRows(path, "pending_batches"), 0);
  EXPECT_EQ((*journal)->delivered()->size(), 2u);
  std::vector<JournalRecord> more{record(3, "a", 103), record(4, "a", 104)};
  std::vector<JournalAck> one{{4, a, 104, true}};
  ASSERT_TRUE((*journal)->commit(more, one).isOk());
  EXPECT_EQ(countRows(path, "pending_acked"), 0);  // 4 was never in the row
  EXPECT_EQ(seqsOf(*(*journal)->pending()), (std::vector<uint64_t>{3}));
}

// A journal of an older cepbus holds a row per record (a binary record as a
// BLOB, or, older still, a JSON line as TEXT): read with the new rows, and
// deleted when acknowledged.
TEST(JournalTest, ReadsAndAcknowledgesTheRowPerRecordOfAnOlderCepbus) {
  TempDir dir;
  const std::string path = dir.file("j.db");
  { ASSERT_TRUE(Journal::open(path, {}).isOk()); }
  execRaw(path,
          "INSERT INTO pending(seq, target, event_id, address, sender, pattern, correlation_id,"
          " event) VALUES(3, 'a', 103, 'old.topic', 's', 1, 9,"
          " '{\"type\":\"Tick\",\"ts\":3,\"id\":103,\"attrs\":{\"n\":3}}')");
  cepbus::testing::writeBlobRaw(
      path,
      "INSERT INTO pending(seq, target, event_id, address, sender, pattern, correlation_id,"
      " event) VALUES(4, 'a', 104, 'old.topic', 's', 0, 0, ?1)",
      encodeEventRecord(*makeEvent(4, 104)));
  auto journal = Journal::open(path, {});
  ASSERT_TRUE(journal.isOk());
  EXPECT_EQ(*(*journal)->maxSeq(), 4u);
  std::vector<JournalRecord> inserts{record(5, "a", 105)};
  ASSERT_TRUE((*journal)->commit(inserts, {}).isOk());
  auto pending = (*journal)->pending();
  ASSERT_TRUE(pending.isOk());
  ASSERT_EQ(seqsOf(*pending), (std::vector<uint64_t>{3, 4, 5}));
  EXPECT_EQ((*pending)[0].address.name(), "old.topic");
  EXPECT_EQ((*pending)[0].pattern, Pattern::kRobustInOnly);
  EXPECT_EQ((*pending)[0].correlation_id, 9u);
  for (const JournalRecord& r : *pending) {
    auto event = decodeEventRecord(r.stored_event);
    ASSERT_TRUE(event.isOk()) << r.seq << ": " << event.status().toString();
    EXPECT_EQ((*event)->id(), r.event_id);
  }
  const Symbol a = Symbol::intern("a");
  std::vector<JournalAck> acks{{3, a, 103, true}, {5, a, 105, true}, {4, a, 104, true}};
  ASSERT_TRUE((*journal)->commit({}, acks).isOk());
  EXPECT_EQ(countRows(path, "pending"), 0);
  EXPECT_EQ(countRows(path, "pending_batches"), 0);
  EXPECT_TRUE((*journal)->pending()->empty());
}

// A row that does not decode (damaged records, or seqs that do not list
// them) is removed and counted; the other rows are read as before.
TEST(JournalTest, APendingRowThatDoesNotDecodeIsRemovedAndCounted) {
  TempDir dir;
  const std::string path = dir.file("j.db");
  {
    auto journal = Journal::open(path, {});
    ASSERT_TRUE(journal.isOk());
    for (uint64_t seq = 1; seq <= 3; ++seq) {
      std::vector<JournalRecord> inserts{record(seq, "a", 100 + seq)};
      ASSERT_TRUE((*journal)->commit(inserts, {}).isOk());
    }
  }
  std::string records =
      cepbus::testing::readBlobRaw(path, "SELECT records FROM pending_batches WHERE n = 1");
  ASSERT_FALSE(records.empty());
  records[records.size() / 2] ^= 0x10;
  cepbus::testing::writeBlobRaw(path, "UPDATE pending_batches SET records = ?1 WHERE n = 1",
                                records);
  cepbus::testing::writeBlobRaw(path, "UPDATE pending_batches SET seqs = ?1 WHERE n = 3",
                                std::string(5, 'x'));
  auto journal = Journal::open(path, {});
  ASSERT_TRUE(journal.isOk());
  auto pending = (*journal)->pending();
  ASSERT_TRUE(pending.isOk()) << pending.status().toString();
  EXPECT_EQ(seqsOf(*pending), (std::vector<uint64_t>{2}));
  EXPECT_EQ((*journal)->corruptPendingRows(), 2u);
  EXPECT_EQ(countRows(path, "pending_batches"), 1);
  // Gone for good: the next read finds only the good row.
  EXPECT_EQ(seqsOf(*(*journal)->pending()), (std::vector<uint64_t>{2}));
  EXPECT_EQ((*journal)->corruptPendingRows(), 0u);
}

// Row keys are reused once the highest row is gone: a bitmap left under a
// key (only a damaged file has one) does not mark a new row's records.
TEST(JournalTest, ANewRowTakesNoBitmapLeftUnderItsKey) {
  TempDir dir;
  const std::string path = dir.file("j.db");
  { ASSERT_TRUE(Journal::open(path, {}).isOk()); }
  execRaw(path, "INSERT INTO pending_acked(n, acked) VALUES(1, x'ff')");
  {
    auto journal = Journal::open(path, {});
    ASSERT_TRUE(journal.isOk());
    std::vector<JournalRecord> inserts{record(1, "a", 101), record(2, "a", 102)};
    ASSERT_TRUE((*journal)->commit(inserts, {}).isOk());
  }
  auto journal = Journal::open(path, {});
  ASSERT_TRUE(journal.isOk());
  EXPECT_EQ(seqsOf(*(*journal)->pending()), (std::vector<uint64_t>{1, 2}));
}

TEST(JournalTest, AnUnopenablePathIsAnIoErrorNamingIt) {
  auto journal = Journal::open("/nonexistent-dir/sub/j.db", {});
  ASSERT_FALSE(journal.isOk());
  EXPECT_EQ(journal.status().code(), Status::Code::kIoError);
  EXPECT_NE(journal.status().message().find("/nonexistent-dir/sub/j.db"), std::string::npos);
}

}  // namespace
}  // namespace cepbus::flows
