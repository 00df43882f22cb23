#include "flows/journal/checkpoint_table.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "bus/core/event_json.h"
#include "flows/journal/journal.h"
#include "flows/journal/journal_writer.h"
#include "tests/flows/flow_test_util.h"
#include "tests/testing/sqlite_raw.h"

namespace cepbus::flows {
namespace {

using testing::makeEvent;
using testing::TempDir;

JournalRecord record(uint64_t seq, EventId id) {
  return JournalRecord{seq,
                       Symbol::intern("cep/q"),
                       id,
                       Symbol::intern("orders.in"),
                       Symbol::intern("sender"),
                       Pattern::kInOnly,
                       0,
                       encodeEvent(*makeEvent(static_cast<int64_t>(seq), id), EventFormat::kFull),
                       nullptr};
}

CheckpointRecord checkpoint(std::string state, uint64_t position) {
  return CheckpointRecord{"cep.detector/q",
                          "nfa",
                          3,
                          0xfeedfacecafebeefULL,
                          position,
                          std::move(state),
                          std::string("\x01\x02\0\x03", 4)};
}

TEST(CheckpointTableTest, ACheckpointAndTheAcknowledgementsItCoversCommitTogether) {
  TempDir dir;
  const std::string path = dir.file("j.db");
  auto journal = Journal::open(path, {});
  ASSERT_TRUE(journal.isOk());
  std::vector<JournalRecord> inserts{record(1, 101), record(2, 102)};
  ASSERT_TRUE((*journal)->commit(inserts, {}).isOk());
  std::vector<JournalAck> acks{{1, Symbol::intern("cep/q"), 101, true}};
  std::vector<CheckpointRecord> rows{checkpoint(std::string("state\0bytes", 11), 1)};
  ASSERT_TRUE((*journal)->commit({}, acks, rows).isOk());

  auto pending = (*journal)->pending();
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].seq, 2u);
  auto stored = readCheckpoint(path, "cep.detector/q");
  ASSERT_TRUE(stored.isOk()) << stored.status().toString();
  ASSERT_TRUE(stored->has_value());
  const CheckpointRecord& c = **stored;
  EXPECT_EQ(c.engine, "nfa");
  EXPECT_EQ(c.version, 3u);
  EXPECT_EQ(c.fingerprint, 0xfeedfacecafebeefULL);
  EXPECT_EQ(c.position, 1u);
  EXPECT_EQ(c.state, std::string("state\0bytes", 11));
  EXPECT_EQ(c.published, std::string("\x01\x02\0\x03", 4));

  // A later one replaces it.
  rows = {checkpoint("newer", 2)};
  acks = {{2, Symbol::intern("cep/q"), 102, true}};
  ASSERT_TRUE((*journal)->commit({}, acks, rows).isOk());
  EXPECT_EQ((*readCheckpoint(path, "cep.detector/q"))->state, "newer");
  EXPECT_TRUE((*journal)->pending()->empty());
}

// A store that refuses the checkpoint's row (here an SQLite trigger, as a
// full disk or a read-only file would) takes the acknowledgements down with
// it: the records stay pending, the old checkpoint stays.
TEST(CheckpointTableTest, AFailedCheckpointLeavesItsAcknowledgementsUndone) {
  TempDir dir;
  const std::string path = dir.file("j.db");
  auto journal = Journal::open(path, {});
  ASSERT_TRUE(journal.isOk());
  std::vector<JournalRecord> inserts{record(1, 101)};
  std::vector<CheckpointRecord> rows{checkpoint("first", 0)};
  ASSERT_TRUE((*journal)->commit(inserts, {}, rows).isOk());
  cepbus::testing::execRaw(path,
                           "CREATE TRIGGER refuse BEFORE INSERT ON checkpoints "
                           "BEGIN SELECT RAISE(ABORT, 'checkpoints refused'); END");
  std::vector<JournalAck> acks{{1, Symbol::intern("cep/q"), 101, true}};
  rows = {checkpoint("second", 1)};
  const Status status = (*journal)->commit({}, acks, rows);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("store checkpoint cep.detector/q"), std::string::npos)
      << status.message();
  EXPECT_EQ((*journal)->pending()->size(), 1u);
  EXPECT_TRUE((*journal)->delivered()->empty());
  EXPECT_EQ((*readCheckpoint(path, "cep.detector/q"))->state, "first");
}

TEST(CheckpointTableTest, NothingStoredReadsAsNone) {
  TempDir dir;
  auto missing = readCheckpoint(dir.file("none.db"), "q");
  ASSERT_TRUE(missing.isOk());
  EXPECT_FALSE(missing->has_value());
  // A database without the table (written by another program, or a
  // journal from before checkpoints).
  cepbus::testing::execRaw(dir.file("other.db"), "CREATE TABLE t(x)");
  auto no_table = readCheckpoint(dir.file("other.db"), "q");
  ASSERT_TRUE(no_table.isOk()) << no_table.status().toString();
  EXPECT_FALSE(no_table->has_value());
  ASSERT_TRUE(Journal::open(dir.file("j.db"), {}).isOk());
  auto no_row = readCheckpoint(dir.file("j.db"), "q");
  ASSERT_TRUE(no_row.isOk());
  EXPECT_FALSE(no_row->has_value());
}

TEST(CheckpointTableTest, ARowOfTheWrongTypesIsRefusedNamingIt) {
  TempDir dir;
  const std::string path = dir.file("j.db");
  ASSERT_TRUE(Journal::open(path, {}).isOk());
  cepbus::testing::execRaw(path,
                           "INSERT INTO checkpoints VALUES('cep.detector/q', 'nfa', 'three', 1, 0, "
                           "x'00', x'')");
  auto stored = readCheckpoint(path, "cep.detector/q");
  ASSERT_FALSE(stored.isOk());
  EXPECT_EQ(stored.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(stored.status().message().find("checkpoint cep.detector/q: column version"),
            std::string::npos)
      << stored.status().message();
}

// The writer's checkpoint takes every record appended so far, ripe or not:
// a record it acknowledges is written and deleted in that one transaction.
TEST(CheckpointTableTest, TheWritersCheckpointTakesEveryRecordAppendedSoFar) {
  TempDir dir;
  const std::string path = dir.file("j.db");
  auto journal = Journal::open(path, {});
  ASSERT_TRUE(journal.isOk());
  JournalWriterOptions options;
  options.commit_delay = std::chrono::hours(1);  // nothing ripens by itself
  std::vector<uint64_t> committed;
  std::mutex mu;
  JournalWriter writer(
      options,
      [&](std::span<const uint64_t> tokens, const Status& status) {
        std::lock_guard lock(mu);
        if (status.isOk()) committed.insert(committed.end(), tokens.begin(), tokens.end());
      },
      [](auto) { return false; });
  writer.start(std::move(*journal));
  ASSERT_TRUE(writer.append(record(1, 101), 11).has_value());
  ASSERT_TRUE(writer.append(record(2, 102), 12).has_value());
  std::promise<Status> done;
  writer.checkpoint(checkpoint("s", 1), {{1, Symbol::intern("cep/q"), 101, true}},
                    [&done](const Status& status) { done.set_value(status); });
  auto result = done.get_future();
  ASSERT_EQ(result.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(result.get().isOk());
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(committed, (std::vector<uint64_t>{11, 12}));
  }
  writer.stop();
  auto reopened = Journal::open(path, {});
  ASSERT_TRUE(reopened.isOk());
  auto pending = (*reopened)->pending();
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].seq, 2u);
  EXPECT_EQ((*readCheckpoint(path, "cep.detector/q"))->state, "s");
}

TEST(CheckpointTableTest, AStoppedWriterRefusesACheckpointAtOnce) {
  JournalWriter writer(
      {}, [](auto, const Status&) {}, [](auto) { return false; });
  Status got = Status::ok();
  writer.checkpoint(checkpoint("s", 1), {}, [&got](const Status& status) { got = status; });
  EXPECT_EQ(got.code(), Status::Code::kUnavailable);
}

}  // namespace
}  // namespace cepbus::flows
