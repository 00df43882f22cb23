#include "flows/journal_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "tests/flows/flow_test_util.h"

namespace cepbus::flows {
namespace {

using testing::TempDir;
using testing::waitUntil;

JournalRecord record(uint64_t seq) {
  return JournalRecord{seq, Symbol::intern("w"), 1000 + seq, Symbol::intern("w.topic"),
                       {},  Pattern::kInOnly,    0,          R"({"type":"A","ts":1})"};
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
  JournalWriter writer(
      options, [this](std::span<const uint64_t> t, const Status& s) { probe_.onCommit(t, s); },
      [](std::chrono::steady_clock::time_point) {});
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
  JournalWriter writer(
      options, [this](std::span<const uint64_t> t, const Status& s) { probe_.onCommit(t, s); },
      [](std::chrono::steady_clock::time_point) {});
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
  JournalWriter writer(
      options, [this](std::span<const uint64_t> t, const Status& s) { probe_.onCommit(t, s); },
      [](std::chrono::steady_clock::time_point) {});
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
  JournalWriter writer(
      {}, [this](std::span<const uint64_t> t, const Status& s) { probe_.onCommit(t, s); },
      [](std::chrono::steady_clock::time_point) {});
  writer.start(open());
  for (uint64_t seq = 1; seq <= 200; ++seq) ASSERT_TRUE(writer.append(record(seq), seq));
  writer.acknowledge(JournalAck{1, Symbol::intern("w"), 1001});
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

TEST_F(JournalWriterTest, TicksPeriodically) {
  JournalWriterOptions options;
  options.tick = std::chrono::milliseconds(1);
  JournalWriter writer(
      options, [](std::span<const uint64_t>, const Status&) {},
      [this](std::chrono::steady_clock::time_point) { ticks_.fetch_add(1); });
  writer.start(open());
  EXPECT_TRUE(waitUntil([&] { return ticks_.load() >= 3; }));
}

TEST_F(JournalWriterTest, CanBeRestartedOnAnotherJournal) {
  JournalWriter writer(
      {}, [this](std::span<const uint64_t> t, const Status& s) { probe_.onCommit(t, s); },
      [](std::chrono::steady_clock::time_point) {});
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
