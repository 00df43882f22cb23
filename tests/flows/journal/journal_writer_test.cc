#include "flows/journal/journal_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "tests/flows/flow_test_util.h"

namespace cepbus::flows {
namespace {

using testing::TempDir;
using testing::waitUntil;

JournalRecord record(uint64_t seq) {
  return JournalRecord{seq,    Symbol::intern("w"), 1000 + seq, Symbol::intern("w.topic"),
                       {},     Pattern::kInOnly,    0,          R"({"type":"A","ts":1})",
                       nullptr};
}

// A commit callback that can hold the writer thread inside a commit.
class CommitProbe {
 public:
  void onCommit(std::span<const uint64_t> tokens, const Status& status) {
    std::unique_lock lock(mu_);
    ++calls_;
    for (uint64_t t : tokens) tokens_.insert(t);
    ok_ = ok_ && status.isOk();
    cv_.notify_all();
    cv_.wait(lock, [&] { return !hold_; });
  }
  void hold() {
    std::lock_guard lock(mu_);
    hold_ = true;
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      hold_ = false;
    }
    cv_.notify_all();
  }
  void waitCalls(int n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return calls_ >= n; });
  }
  std::set<uint64_t> tokens() const {
    std::lock_guard lock(mu_);
    return tokens_;
  }
  bool allOk() const {
    std::lock_guard lock(mu_);
    return ok_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0;
  std::set<uint64_t> tokens_;
  bool ok_ = true;
  bool hold_ = false;
};

class JournalWriterTest : public ::testing::Test {
 protected:
  // Commits go to probe_; ticks are ignored.
  JournalWriter::CommitCallback commitToProbe() {
    return [this](std::span<const uint64_t> t, const Status& s) { probe_.onCommit(t, s); };
  }
  static bool noTick(std::chrono::steady_clock::time_point) { return false; }

  std::unique_ptr<Journal> open() {
    auto journal = Journal::open(dir_.file("w.db"), {});
    EXPECT_TRUE(journal.isOk());
    return std::move(*journal);
  }

  TempDir dir_;
  CommitProbe probe_;
  std::atomic<int> ticks_{0};
};

TEST_F(JournalWriterTest, RecordsAppendedDuringACommitShareTheNextOne) {
  JournalWriterOptions options;
  options.max_batch = 4096;
  // Batches by the commit on disk alone: with a commit delay, records
  // appended over more than the delay (a slow, sanitized run) ripen apart.
  options.commit_delay = std::chrono::microseconds(0);
  JournalWriter writer(options, commitToProbe(), noTick);
  writer.start(open());
  probe_.hold();
  ASSERT_TRUE(writer.append(record(1), 1));
  probe_.waitCalls(1);  // the writer is inside the first commit's callback
  for (uint64_t seq = 2; seq <= 1001; ++seq) ASSERT_TRUE(writer.append(record(seq), seq));
  probe_.release();
  writer.flush();
  JournalWriterMetrics m = writer.metrics();
  EXPECT_EQ(m.inserted, 1001u);
  EXPECT_EQ(m.commits, 2u);  // one for the first record, one for the 1000 that waited
  EXPECT_EQ(probe_.tokens().size(), 1001u);
  EXPECT_TRUE(probe_.allOk());
  writer.stop();
  auto journal = Journal::open(dir_.file("w.db"), {});
  EXPECT_EQ((*journal)->pending()->size(), 1001u);
}

TEST_F(JournalWriterTest, BatchesAreBounded) {
  JournalWriterOptions options;
  options.max_batch = 100;
  options.commit_delay = std::chrono::microseconds(0);  // as above
  JournalWriter writer(options, commitToProbe(), noTick);
  writer.start(open());
  probe_.hold();
  ASSERT_TRUE(writer.append(record(1), 1));
  probe_.waitCalls(1);
  for (uint64_t seq = 2; seq <= 301; ++seq) ASSERT_TRUE(writer.append(record(seq), seq));
  probe_.release();
  writer.flush();
  EXPECT_EQ(writer.metrics().commits, 4u);  // 1, then 300 in batches of 100
}

TEST_F(JournalWriterTest, AFullBacklogRefusesAppends) {
  JournalWriterOptions options;
  options.max_backlog = 10;
  JournalWriter writer(options, commitToProbe(), noTick);
  writer.start(open());
  probe_.hold();
  ASSERT_TRUE(writer.append(record(1), 1));
  probe_.waitCalls(1);
  for (uint64_t seq = 2; seq <= 11; ++seq) ASSERT_TRUE(writer.append(record(seq), seq));
  EXPECT_FALSE(writer.append(record(12), 12));
  EXPECT_EQ(writer.metrics().backlog, 10u);
  probe_.release();
  writer.flush();
  EXPECT_TRUE(writer.append(record(12), 12));
}

TEST_F(JournalWriterTest, StopCommitsEverythingAndRefusesMore) {
  JournalWriter writer({}, commitToProbe(), noTick);
  writer.start(open());
  for (uint64_t seq = 1; seq <= 200; ++seq) ASSERT_TRUE(writer.append(record(seq), seq));
  writer.acknowledge(JournalAck{1, Symbol::intern("w"), 1001, true});
  writer.stop();
  writer.stop();  // idempotent
  EXPECT_EQ(probe_.tokens().size(), 200u);
  EXPECT_FALSE(writer.append(record(201), 201));
  writer.flush();  // returns at once when stopped
  auto journal = Journal::open(dir_.file("w.db"), {});
  auto pending = (*journal)->pending();
  // The acknowledgement was queued after record 1 and committed no earlier than it.
  EXPECT_EQ(pending->size(), 199u);
}

TEST_F(JournalWriterTest, CancelledRecordsAreNeitherWrittenNorCalledBack) {
  JournalWriter writer({}, commitToProbe(), noTick);
  writer.start(open());
  probe_.hold();
  std::optional<uint64_t> first = writer.append(record(1), 1);
  ASSERT_TRUE(first);
  probe_.waitCalls(1);  // record 1 was taken: too late to cancel it
  EXPECT_FALSE(writer.cancel(*first));
  std::vector<uint64_t> tickets;
  for (uint64_t seq = 2; seq <= 11; ++seq) {
    std::optional<uint64_t> ticket = writer.append(record(seq), seq);
    ASSERT_TRUE(ticket);
    tickets.push_back(*ticket);
  }
  // Records 2, 4, 6 are withdrawn; a second cancel of one is refused.
  EXPECT_TRUE(writer.cancel(tickets[0]));
  EXPECT_TRUE(writer.cancel(tickets[2]));
  EXPECT_TRUE(writer.cancel(tickets[4]));
  EXPECT_FALSE(writer.cancel(tickets[2]));
  // Every other record of the queue is cancelled too: flush() still returns.
  probe_.release();
  writer.flush();
  JournalWriterMetrics m = writer.metrics();
  EXPECT_EQ(m.cancelled, 3u);
  EXPECT_EQ(m.inserted, 8u);
  EXPECT_EQ(probe_.tokens(), (std::set<uint64_t>{1, 3, 5, 7, 8, 9, 10, 11}));
  for (uint64_t t : tickets) EXPECT_FALSE(writer.cancel(t));  // all taken now
  writer.stop();
  auto journal = Journal::open(dir_.file("w.db"), {});
  auto pending = (*journal)->pending();
  ASSERT_TRUE(pending.isOk());
  std::set<uint64_t> seqs;
  for (const JournalRecord& r : *pending) seqs.insert(r.seq);
  EXPECT_EQ(seqs, (std::set<uint64_t>{1, 3, 5, 7, 8, 9, 10, 11}));
}

TEST_F(JournalWriterTest, ABatchOfCancelledRecordsOnlyLetsFlushReturn) {
  JournalWriter writer({}, commitToProbe(), noTick);
  writer.start(open());
  probe_.hold();
  ASSERT_TRUE(writer.append(record(1), 1));
  probe_.waitCalls(1);
  std::optional<uint64_t> second = writer.append(record(2), 2);
  ASSERT_TRUE(second);
  ASSERT_TRUE(writer.cancel(*second));
  probe_.release();
  writer.flush();
  EXPECT_EQ(writer.metrics().commits, 1u);  // nothing left to write for record 2
  EXPECT_EQ(probe_.tokens(), std::set<uint64_t>{1});
  EXPECT_FALSE(writer.cancel(*second));
}

// With a commit delay an idle writer still leaves a fresh record alone, so a
// target that acknowledges quickly saves its write; flush() does not wait the
// delay out.
TEST_F(JournalWriterTest, ARecordWaitsTheCommitDelaySoAQuickCancelSavesItsWrite) {
  JournalWriterOptions options;
  options.commit_delay = std::chrono::seconds(30);  // longer than the test
  JournalWriter writer(options, commitToProbe(), noTick);
  writer.start(open());
  const std::optional<uint64_t> ticket = writer.append(record(1), 1);
  ASSERT_TRUE(ticket);
  // Time for an idle writer to take it, had it no delay.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(writer.cancel(*ticket));
  ASSERT_TRUE(writer.append(record(2), 2));
  writer.flush();
  const JournalWriterMetrics m = writer.metrics();
  EXPECT_EQ(m.inserted, 1u);
  EXPECT_EQ(m.cancelled, 1u);
  EXPECT_EQ(probe_.tokens(), std::set<uint64_t>{2});
  writer.stop();
}

// A record is written once it waited commit_delay; an acknowledgement with no
// record to ride with, once it waited ack_delay.
TEST_F(JournalWriterTest, RecordsAndAcknowledgementsAreWrittenOnceTheyWaitedTheirDelays) {
  JournalWriterOptions options;
  options.commit_delay = std::chrono::milliseconds(5);
  options.ack_delay = std::chrono::milliseconds(20);
  JournalWriter writer(options, commitToProbe(), noTick);
  writer.start(open());
  ASSERT_TRUE(writer.append(record(1), 1));
  ASSERT_TRUE(waitUntil([&] { return writer.metrics().inserted == 1; }));
  const uint64_t commits = writer.metrics().commits;
  writer.acknowledge(JournalAck{1, Symbol::intern("w"), 1001, true});
  ASSERT_TRUE(waitUntil([&] { return writer.metrics().acknowledged == 1; }));
  EXPECT_EQ(writer.metrics().commits, commits + 1);  // a transaction of its own
  auto journal = Journal::open(dir_.file("w.db"), {});
  EXPECT_TRUE((*journal)->pending()->empty());
  writer.stop();
}

// Records ripen on a grid of half the commit delay: records appended a little
// apart share a wake-up and a transaction instead of costing one each.
TEST_F(JournalWriterTest, RecordsThatRipenInOneSlotShareATransaction) {
  JournalWriterOptions options;
  options.commit_delay = std::chrono::milliseconds(40);  // slots of 20 ms
  options.ack_delay = std::chrono::seconds(30);
  JournalWriter writer(options, commitToProbe(), noTick);
  writer.start(open());
  constexpr uint64_t kRecords = 20;
  const auto first = std::chrono::steady_clock::now();
  for (uint64_t i = 1; i <= kRecords; ++i) {
    ASSERT_TRUE(writer.append(record(i), i));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // spreads them over slots
  }
  // The records' ripe times fall into at most this many slots.
  const uint64_t slots =
      (std::chrono::steady_clock::now() - first) / std::chrono::milliseconds(20) + 2;
  if (slots >= kRecords) GTEST_SKIP() << "the appends took too long to tell";
  ASSERT_TRUE(waitUntil([&] { return writer.metrics().inserted == kRecords; }));
  EXPECT_LE(writer.metrics().commits, slots);
  writer.stop();
}

TEST_F(JournalWriterTest, AcknowledgementsRideWithTheNextRecordsInsteadOfWaiting) {
  JournalWriterOptions options;
  options.commit_delay = std::chrono::microseconds(0);
  options.ack_delay = std::chrono::seconds(30);  // longer than the test
  JournalWriter writer(options, commitToProbe(), noTick);
  writer.start(open());
  ASSERT_TRUE(writer.append(record(1), 1));
  writer.flush();
  writer.acknowledge(JournalAck{1, Symbol::intern("w"), 1001, true});
  // Time for an idle writer to commit the acknowledgement alone, were it not
  // to wait for the next records.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(writer.metrics().acknowledged, 0u);  // no transaction of its own yet
  ASSERT_TRUE(writer.append(record(2), 2));
  writer.flush();
  const JournalWriterMetrics m = writer.metrics();
  EXPECT_EQ(m.acknowledged, 1u);
  EXPECT_EQ(m.commits, 2u);
  writer.stop();
}

// Ticks come every period while the callback wants them; after one that
// says no more, none until requestTicks() — not even slowly.
TEST_F(JournalWriterTest, TicksWhileWantedAndAgainWhenRequested) {
  JournalWriterOptions options;
  options.tick = std::chrono::milliseconds(1);
  std::atomic<bool> wanted{true};
  JournalWriter writer(
      options, [](std::span<const uint64_t>, const Status&) {},
      [&](std::chrono::steady_clock::time_point) {
        ticks_.fetch_add(1);
        return wanted.load();
      });
  writer.start(open());
  EXPECT_TRUE(waitUntil([&] { return ticks_.load() >= 3; }));
  wanted = false;
  const int before = ticks_.load();
  EXPECT_TRUE(waitUntil([&] { return ticks_.load() > before; }));  // the one saying no more
  // Once told no more, time for 1 ms ticks to go on, had they: first for a
  // tick already under way, then thirty more that must not come.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int idle = ticks_.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(ticks_.load(), idle);
  // Records still go through while it does not tick.
  ASSERT_TRUE(writer.append(record(1), 1));
  writer.flush();
  wanted = true;
  writer.requestTicks();
  EXPECT_TRUE(waitUntil([&] { return ticks_.load() >= idle + 3; }));
  writer.stop();
}

TEST_F(JournalWriterTest, CanBeRestartedOnAnotherJournal) {
  JournalWriter writer({}, commitToProbe(), noTick);
  writer.start(open());
  ASSERT_TRUE(writer.append(record(1), 1));
  writer.stop();
  writer.start(open());
  ASSERT_TRUE(writer.append(record(2), 2));
  writer.stop();
  auto journal = Journal::open(dir_.file("w.db"), {});
  EXPECT_EQ((*journal)->pending()->size(), 2u);
}

}  // namespace
}  // namespace cepbus::flows
