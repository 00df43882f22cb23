#include "flows/journal.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>

#include "bus/core/event_json.h"
#include "tests/flows/flow_test_util.h"

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
  auto event = decodeEvent(r.event_json);
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

TEST(JournalTest, ARecordWithoutJsonIsEncodedWhenCommitted) {
  TempDir dir;
  auto journal = Journal::open(dir.file("j.db"), {});
  ASSERT_TRUE(journal.isOk());
  JournalRecord r = record(1, "a", 101);
  r.event_json.clear();
  r.event = makeEvent(5, 101);
  std::vector<JournalRecord> inserts{r};
  ASSERT_TRUE((*journal)->commit(inserts, {}).isOk());
  auto pending = (*journal)->pending();
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].event, nullptr);  // read back as JSON only
  auto event = decodeEvent((*pending)[0].event_json);
  ASSERT_TRUE(event.isOk()) << (*pending)[0].event_json;
  EXPECT_EQ((*event)->id(), 101u);
  EXPECT_EQ((*event)->ts(), 5);
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

TEST(JournalTest, AFailingBatchLeavesNothingBehind) {
  TempDir dir;
  auto journal = Journal::open(dir.file("j.db"), {});
  ASSERT_TRUE(journal.isOk());
  std::vector<JournalRecord> first{record(1, "a", 101)};
  ASSERT_TRUE((*journal)->commit(first, {}).isOk());
  // seq 1 again violates the primary key: the whole batch rolls back.
  std::vector<JournalRecord> second{record(2, "a", 102), record(1, "a", 103)};
  Status status = (*journal)->commit(second, {});
  EXPECT_EQ(status.code(), Status::Code::kIoError);
  EXPECT_NE(status.message().find("insert pending"), std::string::npos);
  auto pending = (*journal)->pending();
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].event_id, 101u);
  // And the journal stays usable.
  std::vector<JournalRecord> third{record(2, "a", 102)};
  EXPECT_TRUE((*journal)->commit(third, {}).isOk());
}

TEST(JournalTest, AnUnopenablePathIsAnIoErrorNamingIt) {
  auto journal = Journal::open("/nonexistent-dir/sub/j.db", {});
  ASSERT_FALSE(journal.isOk());
  EXPECT_EQ(journal.status().code(), Status::Code::kIoError);
  EXPECT_NE(journal.status().message().find("/nonexistent-dir/sub/j.db"), std::string::npos);
}

}  // namespace
}  // namespace cepbus::flows
