#include "flows/reliable_flow.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "bus/core/event_json.h"
#include "flows/journal/batch_record.h"
#include "flows/journal/checkpoint_table.h"
#include "tests/flows/flow_test_util.h"
#include "tests/testing/sqlite_raw.h"

extern char** environ;

namespace cepbus::flows {
namespace {

using testing::inOnly;
using testing::makeEvent;
using testing::OutcomeRecorder;
using testing::RecordingTarget;
using testing::TempDir;
using testing::waitUntil;
using Behavior = RecordingTarget::Behavior;

// Set by the fixture: every ReliableFlowTest runs with concurrent dispatch
// and with commit-then-dispatch.
bool g_concurrent_dispatch = true;

ReliableFlowConfig reliableConfig(const std::string& path, size_t capacity = 1024) {
  ReliableFlowConfig config;
  config.concurrent_dispatch = g_concurrent_dispatch;
  config.journal_path = path;
  config.stage.capacity = capacity;
  config.stage.batch_size = 1;
  config.stage.admission.soft_threshold = 0.25;
  config.stage.admission.static_threshold = 0.5;
  config.stage.admission.saturation_threshold = 0.9;
  config.journal.fsync = false;  // the crash test uses fsync; elsewhere it only slows tests down
  config.writer.tick = std::chrono::milliseconds(2);
  config.retry_delay = std::chrono::milliseconds(5);
  config.max_attempts = 3;
  return config;
}

std::vector<JournalRecord> pendingIn(const std::string& path) {
  auto journal = Journal::open(path, {});
  EXPECT_TRUE(journal.isOk()) << journal.status().toString();
  return *(*journal)->pending();
}

std::set<EventId> idsOf(const std::vector<JournalRecord>& records) {
  std::set<EventId> ids;
  for (const JournalRecord& r : records) ids.insert(r.event_id);
  return ids;
}

JournalRecord recordFor(uint64_t seq, std::string_view target, EventPtr event) {
  return JournalRecord{seq,
                       Symbol::intern(target),
                       event->id(),
                       Symbol::intern("r.topic"),
                       Symbol::intern("r.sender"),
                       Pattern::kInOnly,
                       0,
                       encodeEvent(*event, EventFormat::kFull),
                       nullptr};
}

class ReliableFlowTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { g_concurrent_dispatch = GetParam(); }
  void TearDown() override { g_concurrent_dispatch = true; }
};

// On kAccepted, looks the event up in the journal through a connection of
// its own: acceptance must only ever be reported for a committed record.
class DurabilityChecker final : public ExchangeListener {
 public:
  explicit DurabilityChecker(const std::string& path) { sqlite3_open(path.c_str(), &db_); }
  ~DurabilityChecker() override { sqlite3_close(db_); }

  void onOutcome(const Exchange& exchange, const Outcome& outcome) override {
    if (outcome.kind != OutcomeKind::kAccepted) return;
    // In one of the rows of pending_batches (flows/journal/batch_record.h).
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db_, "SELECT records FROM pending_batches", -1, &stmt, nullptr);
    int found = 0;
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      const std::string_view bytes(static_cast<const char*>(sqlite3_column_blob(stmt, 0)),
                                   static_cast<size_t>(sqlite3_column_bytes(stmt, 0)));
      Result<std::vector<JournalRecord>> records = decodeBatchRecord(bytes);
      for (const JournalRecord& r : records ? *records : std::vector<JournalRecord>{}) {
        if (r.event_id == exchange.event->id()) ++found;
      }
    }
    sqlite3_finalize(stmt);
    (found == 1 ? found_ : missing_).fetch_add(1);
  }
  int found() const { return found_.load(); }
  int missing() const { return missing_.load(); }

 private:
  sqlite3* db_ = nullptr;
  std::atomic<int> found_{0}, missing_{0};
};

TEST_P(ReliableFlowTest, JournalsBeforeAcceptingAndForgetsAfterDelivery) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  RecordingTarget a("a");
  ReliableFlow flow(reliableConfig(path));
  ASSERT_TRUE(flow.attach(a).isOk());
  ASSERT_TRUE(flow.start().isOk());
  a.closeGate();  // keep records journaled while the listener looks for them
  auto checker = std::make_shared<DurabilityChecker>(path);
  std::vector<DeliveryTarget*> targets{&a};
  for (int i = 0; i < 20; ++i) {
    SendOutcome out = flow.send(inOnly(makeEvent(i), "t", Qos::kReliable, checker), targets);
    ASSERT_EQ(out.queued, 1u) << out.status.toString();
  }
  ASSERT_TRUE(waitUntil([&] { return checker->found() + checker->missing() == 20; }));
  EXPECT_EQ(checker->missing(), 0);
  a.openGate();
  ASSERT_TRUE(waitUntil([&] { return a.delivered() == 20; }));
  flow.stop();
  EXPECT_TRUE(pendingIn(path).empty());
  ReliableMetricsSnapshot m = flow.reliableMetrics();
  EXPECT_EQ(m.journaled, 20u);
  EXPECT_EQ(m.acknowledged, 20u);
  EXPECT_LE(m.commits, 40u);
  EXPECT_EQ(m.in_flight, 0u);
  EXPECT_EQ(flow.metrics().delivered, 20u);
  auto journal = Journal::open(path, {});
  EXPECT_EQ((*journal)->delivered()->size(), 20u);
  // What it shows as any flow.
  const AbstractFlow& any = flow;
  EXPECT_TRUE(any.journals());
  ASSERT_EQ(any.stageMetrics().size(), 1u);
  EXPECT_EQ(any.stageMetrics()[0].name, "reliable/a");
}

TEST_P(ReliableFlowTest, BestEffortExchangesSkipTheJournal) {
  TempDir dir;
  RecordingTarget a("a");
  ReliableFlow flow(reliableConfig(dir.file("r.db")));
  ASSERT_TRUE(flow.attach(a).isOk());
  ASSERT_TRUE(flow.start().isOk());
  std::vector<DeliveryTarget*> targets{&a};
  for (int i = 0; i < 10; ++i) ASSERT_EQ(flow.send(inOnly(makeEvent(i)), targets).queued, 1u);
  ASSERT_TRUE(waitUntil([&] { return a.delivered() == 10; }));
  flow.stop();
  EXPECT_EQ(flow.reliableMetrics().journaled, 0u);
  EXPECT_EQ(flow.metrics().degraded, 0u);
}

TEST_P(ReliableFlowTest, DuplicatesAreSuppressedPerTarget) {
  TempDir dir;
  RecordingTarget a("a"), b("b");
  ReliableFlow flow(reliableConfig(dir.file("r.db")));
  ASSERT_TRUE(flow.attach(a).isOk());
  ASSERT_TRUE(flow.attach(b).isOk());
  ASSERT_TRUE(flow.start().isOk());
  a.closeGate();
  EventPtr event = makeEvent(1);
  std::vector<DeliveryTarget*> only_a{&a}, only_b{&b};
  EXPECT_EQ(flow.send(inOnly(event, "t", Qos::kReliable), only_a).queued, 1u);
  // In flight: the same event again is a duplicate for a, not for b.
  EXPECT_EQ(flow.send(inOnly(event, "t", Qos::kReliable), only_a).duplicates, 1u);
  EXPECT_EQ(flow.send(inOnly(event, "t", Qos::kReliable), only_b).queued, 1u);
  a.openGate();
  ASSERT_TRUE(waitUntil([&] { return a.delivered() == 1 && b.delivered() == 1; }));
  ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().in_flight == 0; }));
  // Delivered: remembered in the dedupe window.
  auto recorder = std::make_shared<OutcomeRecorder>();
  SendOutcome again = flow.send(inOnly(event, "t", Qos::kReliable, recorder), only_a);
  EXPECT_EQ(again.duplicates, 1u);
  EXPECT_EQ(recorder->count(OutcomeKind::kAccepted), 1u);  // taken care of, not an error
  flow.stop();
  EXPECT_EQ(a.counts().at(event->id()), 1);
  EXPECT_EQ(flow.metrics().duplicates, 2u);
}

TEST_P(ReliableFlowTest, FailedDeliveriesStayJournaledAndAreRedeliveredOnceAfterRestart) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  std::set<EventId> sent;
  {
    RecordingTarget a("a");
    ReliableFlow flow(reliableConfig(path));
    a.setBehavior(Behavior::kFail);
    ASSERT_TRUE(flow.attach(a).isOk());
    ASSERT_TRUE(flow.start().isOk());
    auto recorder = std::make_shared<OutcomeRecorder>();
    std::vector<DeliveryTarget*> targets{&a};
    for (int i = 0; i < 10; ++i) {
      EventPtr event = makeEvent(i);
      Exchange ex = inOnly(event, "t", Qos::kReliable, recorder);
      ex.pattern = Pattern::kRobustInOnly;
      ASSERT_EQ(flow.send(ex, targets).queued, 1u);
      sent.insert(event->id());
    }
    ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().abandoned == 10; }));
    EXPECT_EQ(a.failures(), 30u);  // max_attempts each
    // The sender hears one fault per event, after the last attempt.
    EXPECT_EQ(recorder->idsWith(OutcomeKind::kFault),
              std::multiset<EventId>(sent.begin(), sent.end()));
    EXPECT_EQ(flow.metrics().failed, 10u);
    EXPECT_EQ(flow.reliableMetrics().retries, 20u);
  }  // destroyed without any acknowledgement
  EXPECT_EQ(idsOf(pendingIn(path)), sent);

  RecordingTarget a("a");  // the same name: the journal addresses targets by name
  ReliableFlow flow(reliableConfig(path));
  ASSERT_TRUE(flow.attach(a).isOk());
  ASSERT_TRUE(flow.start().isOk());
  ASSERT_TRUE(waitUntil([&] { return a.delivered() == 10; }));
  flow.stop();
  for (const auto& [id, count] : a.counts()) EXPECT_EQ(count, 1) << id;
  std::vector<EventId> ids = a.ids();
  EXPECT_EQ(std::set<EventId>(ids.begin(), ids.end()), sent);
  EXPECT_EQ(flow.reliableMetrics().redelivered, 10u);
  EXPECT_TRUE(pendingIn(path).empty());
}

TEST_P(ReliableFlowTest, RestartSuppressesDuplicatesFoundInTheJournal) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  EventPtr e1 = makeEvent(1), e2 = makeEvent(2), e3 = makeEvent(3);
  {
    auto journal = Journal::open(path, {});
    ASSERT_TRUE(journal.isOk());
    // e1 twice (a sender retried), e2 once, e3 already delivered once.
    std::vector<JournalRecord> rows{recordFor(1, "a", e1), recordFor(2, "a", e1),
                                    recordFor(3, "a", e2), recordFor(4, "a", e3)};
    ASSERT_TRUE((*journal)->commit(rows, {}).isOk());
    std::vector<JournalRecord> again{recordFor(5, "a", e3)};
    std::vector<JournalAck> acks{{4, Symbol::intern("a"), e3->id(), true}};
    ASSERT_TRUE((*journal)->commit(again, acks).isOk());
  }
  RecordingTarget a("a");
  ReliableFlow flow(reliableConfig(path));
  ASSERT_TRUE(flow.attach(a).isOk());
  ASSERT_TRUE(flow.start().isOk());
  ASSERT_TRUE(waitUntil([&] { return a.delivered() == 2; }));
  flow.stop();
  EXPECT_EQ(a.counts(), (std::map<EventId, int>{{e1->id(), 1}, {e2->id(), 1}}));
  EXPECT_EQ(flow.metrics().duplicates, 2u);
  EXPECT_TRUE(pendingIn(path).empty());
}

TEST_P(ReliableFlowTest, AttachAfterStartRedeliversThatTargetsRecordsOnly) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  EventPtr for_late = makeEvent(1), for_absent = makeEvent(2);
  {
    auto journal = Journal::open(path, {});
    std::vector<JournalRecord> rows{recordFor(1, "late", for_late),
                                    recordFor(2, "absent", for_absent)};
    ASSERT_TRUE((*journal)->commit(rows, {}).isOk());
  }
  RecordingTarget late("late");
  ReliableFlow flow(reliableConfig(path));
  ASSERT_TRUE(flow.start().isOk());
  ASSERT_TRUE(flow.attach(late).isOk());
  ASSERT_TRUE(waitUntil([&] { return late.delivered() == 1; }));
  flow.stop();
  EXPECT_EQ(late.ids(), std::vector<EventId>{for_late->id()});
  std::vector<JournalRecord> left = pendingIn(path);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].target.name(), "absent");
}

// A target that takes the acknowledgement of each journaled delivery and
// gives it when the test says (as the AMQP listener does once its remote
// subscriber settles).
class DeferringTarget final : public DeliveryTarget {
 public:
  explicit DeferringTarget(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  Status deliver(const Exchange& exchange, DeliveryContext& context) override {
    DeferredAck ack = context.deferAcknowledgement();
    std::lock_guard lock(mu_);
    if (!ack) {
      ++undeferred_;
      return Status::ok();
    }
    previous_.push_back(ack.previousDeliveries());
    acks_.emplace_back(exchange.event->id(), std::move(ack));
    return Status::ok();
  }
  size_t waiting() {
    std::lock_guard lock(mu_);
    return acks_.size();
  }
  // Gives the oldest waiting acknowledgement.
  void ackOne(const Status& status) {
    DeferredAck ack;
    {
      std::lock_guard lock(mu_);
      ack = std::move(acks_.front().second);
      acks_.erase(acks_.begin());
    }
    ack(status);
    ack(Status::ok());  // a second call does nothing
  }
  // Takes the oldest `n` waiting acknowledgements, to give otherwise.
  std::vector<DeferredAck> take(size_t n) {
    std::lock_guard lock(mu_);
    std::vector<DeferredAck> out;
    for (size_t i = 0; i < n; ++i) out.push_back(std::move(acks_[i].second));
    acks_.erase(acks_.begin(), acks_.begin() + static_cast<ptrdiff_t>(n));
    return out;
  }
  std::vector<uint32_t> previous() {
    std::lock_guard lock(mu_);
    return previous_;
  }
  size_t undeferred() {
    std::lock_guard lock(mu_);
    return undeferred_;
  }

 private:
  const std::string name_;
  std::mutex mu_;
  std::vector<std::pair<EventId, DeferredAck>> acks_;  // guarded by mu_
  std::vector<uint32_t> previous_;                     // guarded by mu_
  size_t undeferred_ = 0;                              // guarded by mu_
};

// Stores `acks`' checkpoint through their flow and waits for its transaction.
Status storeCheckpoint(const std::vector<DeferredAck>& acks, const std::string& state) {
  std::promise<Status> done;
  acks.front().storeCheckpoint(acks, CheckpointRecord{"q", "nfa", 1, 7, acks.size(), state, ""},
                               [&done](const Status& status) { done.set_value(status); });
  return done.get_future().get();
}

// A target keeping state from its deliveries acknowledges them with a
// checkpoint of it: one transaction stores the state and deletes what it
// covers; one that fails leaves them in flight, for the next checkpoint.
TEST_P(ReliableFlowTest, ACheckpointAcknowledgesWhatItCoversInItsOwnTransaction) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  EventPtr e1 = makeEvent(1), e2 = makeEvent(2), e3 = makeEvent(3);
  {
    DeferringTarget a("a");
    ReliableFlow flow(reliableConfig(path));
    ASSERT_TRUE(flow.attach(a).isOk());
    ASSERT_TRUE(flow.start().isOk());
    std::vector<DeliveryTarget*> targets{&a};
    for (const EventPtr& e : {e1, e2, e3}) {
      ASSERT_EQ(flow.send(inOnly(e, "t", Qos::kReliable), targets).queued, 1u);
    }
    ASSERT_TRUE(waitUntil([&] { return a.waiting() == 3; }));
    const std::vector<DeferredAck> first = a.take(2);  // e1, e2
    EXPECT_EQ(first.front().journalPath(), path);
    cepbus::testing::execRaw(path,
                             "CREATE TRIGGER refuse BEFORE INSERT ON checkpoints "
                             "BEGIN SELECT RAISE(ABORT, 'refused'); END");
    EXPECT_FALSE(storeCheckpoint(first, "s1").isOk());
    EXPECT_EQ(flow.reliableMetrics().in_flight, 3u);
    cepbus::testing::execRaw(path, "DROP TRIGGER refuse");
    ASSERT_TRUE(storeCheckpoint(first, "s1").isOk());
    EXPECT_EQ(flow.reliableMetrics().in_flight, 1u);
    // Acknowledged already: a second checkpoint of them is refused whole.
    EXPECT_EQ(storeCheckpoint(first, "s2").code(), Status::Code::kUnavailable);
    flow.stop();
  }
  EXPECT_EQ(idsOf(pendingIn(path)), std::set<EventId>{e3->id()});
  auto stored = readCheckpoint(path, "q");
  ASSERT_TRUE(stored.isOk() && stored->has_value());
  EXPECT_EQ((*stored)->state, "s1");
  EXPECT_EQ((*stored)->position, 2u);
}

TEST_P(ReliableFlowTest, ADeferredAcknowledgementKeepsTheRecordUntilItIsGiven) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  EventPtr e1 = makeEvent(1), e2 = makeEvent(2);
  {
    DeferringTarget a("a");
    ReliableFlow flow(reliableConfig(path));
    ASSERT_TRUE(flow.attach(a).isOk());
    ASSERT_TRUE(flow.start().isOk());
    std::vector<DeliveryTarget*> targets{&a};
    ASSERT_EQ(flow.send(inOnly(e1, "t", Qos::kReliable), targets).queued, 1u);
    ASSERT_EQ(flow.send(inOnly(e2, "t", Qos::kReliable), targets).queued, 1u);
    // Best effort is acknowledged by the returned status, as before.
    ASSERT_EQ(flow.send(inOnly(makeEvent(3), "t", Qos::kBestEffort), targets).queued, 1u);
    ASSERT_TRUE(waitUntil([&] { return a.waiting() == 2 && a.undeferred() == 1; }));
    EXPECT_EQ(flow.reliableMetrics().in_flight, 2u);
    // A duplicate of a delivery waiting for its acknowledgement is suppressed.
    EXPECT_EQ(flow.send(inOnly(e1, "t", Qos::kReliable), targets).duplicates, 1u);
    a.ackOne(Status::ok());  // e1
    ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().acknowledged == 1; }));
    EXPECT_EQ(flow.reliableMetrics().in_flight, 1u);
    flow.stop();             // e2's acknowledgement is still out
    a.ackOne(Status::ok());  // too late: harmless, e2 stays journaled
  }
  EXPECT_EQ(idsOf(pendingIn(path)), std::set<EventId>{e2->id()});

  DeferringTarget a("a");
  ReliableFlow flow(reliableConfig(path));
  ASSERT_TRUE(flow.attach(a).isOk());
  ASSERT_TRUE(flow.start().isOk());
  ASSERT_TRUE(waitUntil([&] { return a.waiting() == 1; }));
  EXPECT_EQ(a.previous(), std::vector<uint32_t>{1});  // marked as a redelivery
  a.ackOne(Status::ok());
  ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().acknowledged == 1; }));
  flow.stop();
  EXPECT_TRUE(pendingIn(path).empty());
}

TEST_P(ReliableFlowTest, ANegativeDeferredAcknowledgementIsRetriedAndMarked) {
  TempDir dir;
  DeferringTarget a("a");
  ReliableFlow flow(reliableConfig(dir.file("r.db")));
  ASSERT_TRUE(flow.attach(a).isOk());
  ASSERT_TRUE(flow.start().isOk());
  std::vector<DeliveryTarget*> targets{&a};
  ASSERT_EQ(flow.send(inOnly(makeEvent(1), "t", Qos::kReliable), targets).queued, 1u);
  ASSERT_TRUE(waitUntil([&] { return a.waiting() == 1; }));
  a.ackOne(Status::unavailable("the subscriber released it"));
  ASSERT_TRUE(waitUntil([&] { return a.waiting() == 1; }));
  a.ackOne(Status::ok());
  ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().acknowledged == 1; }));
  EXPECT_EQ(a.previous(), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(flow.reliableMetrics().retries, 1u);
  flow.stop();
}

TEST_P(ReliableFlowTest, ANegativeAcknowledgementAfterDetachWaitsForTheNextAttach) {
  TempDir dir;
  ReliableFlow flow(reliableConfig(dir.file("r.db")));
  ASSERT_TRUE(flow.start().isOk());
  auto first = std::make_unique<DeferringTarget>("a");
  ASSERT_TRUE(flow.attach(*first).isOk());
  std::vector<DeliveryTarget*> targets{first.get()};
  ASSERT_EQ(flow.send(inOnly(makeEvent(1), "t", Qos::kReliable), targets).queued, 1u);
  ASSERT_TRUE(waitUntil([&] { return first->waiting() == 1; }));
  flow.detach(*first);
  first->ackOne(Status::unavailable("the subscriber went away"));
  first.reset();
  DeferringTarget again("a");  // the same name comes back
  ASSERT_TRUE(flow.attach(again).isOk());
  ASSERT_TRUE(waitUntil([&] { return again.waiting() == 1; }));
  EXPECT_EQ(again.previous(), std::vector<uint32_t>{1});
  again.ackOne(Status::ok());
  ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().acknowledged == 1; }));
  flow.stop();
}

TEST_P(ReliableFlowTest, ANegativeAcknowledgementAfterTheTargetCameBackGoesToItAtOnce) {
  TempDir dir;
  ReliableFlow flow(reliableConfig(dir.file("r.db")));
  ASSERT_TRUE(flow.start().isOk());
  DeferringTarget first("a");
  ASSERT_TRUE(flow.attach(first).isOk());
  std::vector<DeliveryTarget*> targets{&first};
  ASSERT_EQ(flow.send(inOnly(makeEvent(1), "t", Qos::kReliable), targets).queued, 1u);
  ASSERT_TRUE(waitUntil([&] { return first.waiting() == 1; }));
  flow.detach(first);
  DeferringTarget again("a");  // attached before the old acknowledgement comes
  ASSERT_TRUE(flow.attach(again).isOk());
  first.ackOne(Status::unavailable("the subscriber went away"));
  ASSERT_TRUE(waitUntil([&] { return again.waiting() == 1; }));
  again.ackOne(Status::ok());
  ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().acknowledged == 1; }));
  flow.stop();
}

// A retired target (a subscription that ended) does not come back: its
// records are acknowledged in its place, those waiting for it when it left
// and those its deliveries still out leave behind later (the negative
// acknowledgements of a subscriber that went away). None stays in memory or
// in the journal, and a new target of its name gets none of them.
TEST_P(ReliableFlowTest, ARetiredTargetsRecordsAreAcknowledgedInItsPlace) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  ReliableFlow flow(reliableConfig(path));
  ASSERT_TRUE(flow.start().isOk());
  DeferringTarget target("gone");
  ASSERT_TRUE(flow.attach(target).isOk());
  std::vector<DeliveryTarget*> targets{&target};
  for (int64_t i = 1; i <= 3; ++i) {
    ASSERT_EQ(flow.send(inOnly(makeEvent(i), "t", Qos::kReliable), targets).queued, 1u);
  }
  ASSERT_TRUE(waitUntil([&] { return target.waiting() == 3; }));
  target.ackOne(Status::unavailable("not now"));  // back to the flow, for a retry
  flow.retire(target);
  while (target.waiting() > 0) target.ackOne(Status::unavailable("the subscriber went away"));
  ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().departed == 3; }))
      << flow.reliableMetrics().departed;
  EXPECT_EQ(flow.reliableMetrics().orphans, 0u);
  DeferringTarget again("gone");
  ASSERT_TRUE(flow.attach(again).isOk());
  flow.stop();
  EXPECT_EQ(again.waiting(), 0u);
  EXPECT_TRUE(pendingIn(path).empty());
}

// Detached, a target may come back: its records wait for it (the contrast).
TEST_P(ReliableFlowTest, ADetachedTargetsRecordsWaitAsOrphans) {
  TempDir dir;
  ReliableFlow flow(reliableConfig(dir.file("r.db")));
  ASSERT_TRUE(flow.start().isOk());
  DeferringTarget target("away");
  ASSERT_TRUE(flow.attach(target).isOk());
  std::vector<DeliveryTarget*> targets{&target};
  ASSERT_EQ(flow.send(inOnly(makeEvent(1), "t", Qos::kReliable), targets).queued, 1u);
  ASSERT_TRUE(waitUntil([&] { return target.waiting() == 1; }));
  flow.detach(target);
  target.ackOne(Status::unavailable("the subscriber went away"));
  ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().orphans == 1; }));
  EXPECT_EQ(flow.reliableMetrics().departed, 0u);
  flow.stop();
}

// A target that stays away past its time is forgotten as a retired one;
// one attached under that name is not.
TEST_P(ReliableFlowTest, ATargetForgottenWhileAwayLosesItsRecordsUnlessItCameBack) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  ReliableFlow flow(reliableConfig(path));
  ASSERT_TRUE(flow.start().isOk());
  DeferringTarget away("away"), back("back");
  ASSERT_TRUE(flow.attach(away).isOk());
  ASSERT_TRUE(flow.attach(back).isOk());
  std::vector<DeliveryTarget*> targets{&away, &back};
  ASSERT_EQ(flow.send(inOnly(makeEvent(1), "t", Qos::kReliable), targets).queued, 2u);
  ASSERT_TRUE(waitUntil([&] { return away.waiting() == 1 && back.waiting() == 1; }));
  flow.detach(away);
  away.ackOne(Status::unavailable("the subscriber went away"));
  ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().orphans == 1; }));
  flow.forgetAway("back");  // attached: nothing happens
  flow.forgetAway("away");
  EXPECT_EQ(flow.reliableMetrics().departed, 1u);
  EXPECT_EQ(flow.reliableMetrics().orphans, 0u);
  back.ackOne(Status::ok());
  flow.stop();
  EXPECT_TRUE(pendingIn(path).empty());
}

// What a restart reads back for targets that are not attached names them as
// away, so that the service that owns such names can time their return; a
// target that attaches is no longer away.
TEST_P(ReliableFlowTest, TargetsWithRecordsReadBackAtARestartAreAwayUntilTheyAttach) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  {
    RecordingTarget a("a"), b("b");
    a.setBehavior(Behavior::kFail);
    b.setBehavior(Behavior::kFail);
    ReliableFlow flow(reliableConfig(path));
    ASSERT_TRUE(flow.attach(a).isOk());
    ASSERT_TRUE(flow.attach(b).isOk());
    ASSERT_TRUE(flow.start().isOk());
    std::vector<DeliveryTarget*> targets{&a, &b};
    ASSERT_EQ(flow.send(inOnly(makeEvent(1), "t", Qos::kReliable), targets).queued, 2u);
    ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().abandoned == 2; }));
    EXPECT_TRUE(flow.awayNames().empty());  // both attached
  }
  ReliableFlow flow(reliableConfig(path));
  ASSERT_TRUE(flow.start().isOk());
  std::vector<std::string> away = flow.awayNames();
  std::sort(away.begin(), away.end());
  EXPECT_EQ(away, (std::vector<std::string>{"a", "b"}));
  RecordingTarget a("a");
  ASSERT_TRUE(flow.attach(a).isOk());
  ASSERT_TRUE(waitUntil([&] { return a.delivered() == 1; }));
  EXPECT_EQ(flow.awayNames(), std::vector<std::string>{"b"});
  flow.forgetAway("b");
  EXPECT_TRUE(flow.awayNames().empty());
  flow.stop();
  EXPECT_TRUE(pendingIn(path).empty());
}

// Takes each journaled delivery's acknowledgement twice, as two parts of a
// target might: both are the same acknowledgement.
class TwiceDeferringTarget final : public DeliveryTarget {
 public:
  const std::string& name() const override { return name_; }
  Status deliver(const Exchange&, DeliveryContext& context) override {
    DeferredAck first = context.deferAcknowledgement();
    DeferredAck second = context.deferAcknowledgement();
    std::lock_guard lock(mu_);
    acks_.push_back(std::move(first));
    acks_.push_back(std::move(second));
    return Status::ok();
  }
  std::vector<DeferredAck> acks() {
    std::lock_guard lock(mu_);
    return acks_;
  }

 private:
  const std::string name_ = "twice";
  std::mutex mu_;
  std::vector<DeferredAck> acks_;  // guarded by mu_
};

TEST_P(ReliableFlowTest, AnAcknowledgementTakenTwiceIsOneAcknowledgement) {
  TempDir dir;
  TwiceDeferringTarget target;
  ReliableFlow flow(reliableConfig(dir.file("r.db")));
  ASSERT_TRUE(flow.attach(target).isOk());
  ASSERT_TRUE(flow.start().isOk());
  std::vector<DeliveryTarget*> targets{&target};
  ASSERT_EQ(flow.send(inOnly(makeEvent(1), "t", Qos::kReliable), targets).queued, 1u);
  ASSERT_TRUE(waitUntil([&] { return target.acks().size() == 2; }));
  for (const DeferredAck& ack : target.acks()) {
    ASSERT_TRUE(ack);
    ack(Status::ok());
  }
  ASSERT_TRUE(waitUntil([&] { return flow.metrics().delivered == 1; }));
  flow.stop();
  EXPECT_EQ(flow.reliableMetrics().acknowledged, 1u);
  EXPECT_EQ(flow.metrics().delivered, 1u);
  EXPECT_EQ(flow.reliableMetrics().in_flight, 0u);
}

// A stage that runs a delivery inline on the offering thread (under the
// flow's target lock) lets the target take the acknowledgement there; giving
// it later from another thread must not take the flow's locks in the
// opposite order (ThreadSanitizer checks the order).
TEST_P(ReliableFlowTest, AnAcknowledgementTakenInAnInlineDeliveryIsGivenLater) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  ReliableFlowConfig config = reliableConfig(path);
  config.stage.run_inline_when_idle = true;
  DeferringTarget a("a");
  ReliableFlow flow(config);
  ASSERT_TRUE(flow.attach(a).isOk());
  ASSERT_TRUE(flow.start().isOk());
  std::vector<DeliveryTarget*> targets{&a};
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(flow.send(inOnly(makeEvent(i), "t", Qos::kReliable), targets).queued, 1u);
  }
  ASSERT_TRUE(waitUntil([&] { return a.waiting() == 3; }));
  std::thread acker([&] {
    for (int i = 0; i < 3; ++i) a.ackOne(Status::ok());
  });
  acker.join();
  ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().acknowledged == 3; }));
  flow.stop();
  EXPECT_TRUE(pendingIn(path).empty());
  EXPECT_EQ(flow.reliableMetrics().in_flight, 0u);
}

// A delivery's context says whether it was journaled, and carries the
// publisher's hold only while the delivery runs inside the publisher's
// send(): a run inline of a best-effort one, and with concurrent dispatch a
// journaled one; without, a journaled one is dispatched after its commit,
// on the writer's thread.
TEST_P(ReliableFlowTest, TheContextSaysJournaledAndCarriesTheHoldOnlyInsideTheSend) {
  TempDir dir;
  ReliableFlowConfig config = reliableConfig(dir.file("r.db"));
  config.stage.run_inline_when_idle = true;
  RecordingTarget a("a");
  ReliableFlow flow(config);
  ASSERT_TRUE(flow.attach(a).isOk());
  ASSERT_TRUE(flow.start().isOk());
  std::vector<DeliveryTarget*> targets{&a};
  WakeHold hold;
  ASSERT_EQ(flow.send(inOnly(makeEvent(1), "t", Qos::kBestEffort), targets, &hold).queued, 1u);
  ASSERT_EQ(a.delivered(), 1u);  // run inline: the stage was idle
  EXPECT_FALSE(a.lastJournaled());
  EXPECT_EQ(a.lastWakeHold(), &hold);

  ASSERT_EQ(flow.send(inOnly(makeEvent(2), "t", Qos::kReliable), targets, &hold).queued, 1u);
  ASSERT_TRUE(waitUntil([&] { return a.delivered() == 2; }));
  EXPECT_TRUE(a.lastJournaled());
  if (g_concurrent_dispatch) {
    EXPECT_EQ(a.lastThread(), std::this_thread::get_id());
    EXPECT_EQ(a.lastWakeHold(), &hold);
  } else {
    EXPECT_NE(a.lastThread(), std::this_thread::get_id());
    EXPECT_EQ(a.lastWakeHold(), nullptr);
  }
  flow.stop();
}

// A target whose own buffer is full answers Rejected: that delays the
// delivery like a full stage, however often, instead of using up attempts.
class BusyThenFreeTarget final : public DeliveryTarget {
 public:
  explicit BusyThenFreeTarget(int busy) : busy_(busy) {}
  const std::string& name() const override { return name_; }
  Status deliver(const Exchange&, DeliveryContext&) override {
    if (busy_.fetch_sub(1) > 0) return Status::rejected("buffer full");
    delivered_.fetch_add(1);
    return Status::ok();
  }
  int delivered() const { return delivered_.load(); }

 private:
  const std::string name_ = "busy";
  std::atomic<int> busy_;
  std::atomic<int> delivered_{0};
};

TEST_P(ReliableFlowTest, ATargetThatIsOnlyBusyIsRetriedWithoutUsingUpAttempts) {
  TempDir dir;
  ReliableFlowConfig config = reliableConfig(dir.file("r.db"));  // max_attempts 3
  BusyThenFreeTarget target(7);
  ReliableFlow flow(config);
  ASSERT_TRUE(flow.attach(target).isOk());
  ASSERT_TRUE(flow.start().isOk());
  std::vector<DeliveryTarget*> targets{&target};
  ASSERT_EQ(flow.send(inOnly(makeEvent(1), "t", Qos::kReliable), targets).queued, 1u);
  ASSERT_TRUE(waitUntil([&] { return target.delivered() == 1; }));
  flow.stop();
  EXPECT_EQ(flow.reliableMetrics().abandoned, 0u);
  EXPECT_EQ(flow.reliableMetrics().acknowledged, 1u);
  EXPECT_GE(flow.reliableMetrics().retries, 7u);
}

// Answers Rejected while busy (its own buffer full) and records, in order,
// the events it took.
class SwitchableTarget final : public DeliveryTarget {
 public:
  explicit SwitchableTarget(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  Status deliver(const Exchange& exchange, DeliveryContext&) override {
    calls_.fetch_add(1);
    if (busy_.load()) return Status::rejected("buffer full");
    std::lock_guard lock(mu_);
    ids_.push_back(exchange.event->id());
    return Status::ok();
  }
  void setBusy(bool busy) { busy_.store(busy); }
  int calls() const { return calls_.load(); }
  std::vector<EventId> ids() const {
    std::lock_guard lock(mu_);
    return ids_;
  }

 private:
  const std::string name_;
  std::atomic<bool> busy_{false};
  std::atomic<int> calls_{0};
  mutable std::mutex mu_;
  std::vector<EventId> ids_;
};

std::vector<EventId> sendReliable(ReliableFlow& flow, DeliveryTarget& target, int from, int to) {
  std::vector<EventId> ids;
  std::vector<DeliveryTarget*> targets{&target};
  for (int i = from; i < to; ++i) {
    EventPtr event = makeEvent(i);
    ids.push_back(event->id());
    EXPECT_EQ(flow.send(inOnly(event, "t", Qos::kReliable), targets).queued, 1u);
  }
  return ids;
}

// The retry storm this replaces: every refused record had a timer of its
// own, and each due one was offered again at every tick, in no particular
// order. Now a busy target costs one probe per wait, the waits double, and
// what it held back arrives in journal order once it takes deliveries again,
// including what was sent while it was busy.
TEST_P(ReliableFlowTest, ABusyTargetIsProbedWithGrowingWaitsAndGetsItsRecordsInOrder) {
  TempDir dir;
  ReliableFlowConfig config = reliableConfig(dir.file("r.db"));  // retry_delay 5 ms
  config.max_retry_delay = std::chrono::milliseconds(1000);
  SwitchableTarget target("busy");
  target.setBusy(true);
  ReliableFlow flow(config);
  ASSERT_TRUE(flow.attach(target).isOk());
  ASSERT_TRUE(flow.start().isOk());
  std::vector<EventId> sent = sendReliable(flow, target, 0, 50);
  ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().held_back == 50; }));
  // Sent while the target is held back: they queue behind, not into its stage.
  const int calls_before = target.calls();
  std::vector<EventId> later = sendReliable(flow, target, 50, 100);
  sent.insert(sent.end(), later.begin(), later.end());
  ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().held_back == 100; }));
  const int probes_from = target.calls();
  // A window of time to count the probes in: the backoff's growth is what is
  // under test, so this sleep is the measurement, not a wait.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Waits of 5, 10, 20, ... ms: about six probes in 300 ms, however many
  // records are held. One timer per record would have made ~6,000 calls,
  // and a fixed 5 ms wait 60.
  const int probes = target.calls() - probes_from;
  EXPECT_LE(probes, 12);
  EXPECT_LE(probes_from - calls_before, 2);  // at most a probe meanwhile
  target.setBusy(false);
  ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().acknowledged == 100; }));
  EXPECT_EQ(target.ids(), sent);
  const ReliableMetricsSnapshot m = flow.reliableMetrics();
  EXPECT_EQ(m.held_back, 0u);
  EXPECT_EQ(m.abandoned, 0u);
  flow.stop();
}

// A target that refuses for long cannot make the flow hold events without
// bound: beyond its stage's capacity a send to it is refused, and what was
// accepted still arrives, in order.
TEST_P(ReliableFlowTest, ARefusingTargetHoldsBackAtMostItsStageCapacity) {
  TempDir dir;
  ReliableFlowConfig config = reliableConfig(dir.file("r.db"), 32);
  config.max_retry_delay = std::chrono::milliseconds(1000);
  SwitchableTarget target("busy");
  target.setBusy(true);
  ReliableFlow flow(config);
  ASSERT_TRUE(flow.attach(target).isOk());
  ASSERT_TRUE(flow.start().isOk());
  std::vector<EventId> accepted = sendReliable(flow, target, 0, 1);
  ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().held_back == 1; }));
  std::vector<DeliveryTarget*> targets{&target};
  int rejected = 0;
  Status why;
  for (int i = 1; i < 60; ++i) {
    EventPtr event = makeEvent(i);
    SendOutcome out = flow.send(inOnly(event, "t", Qos::kReliable), targets);
    if (out.queued == 1) {
      accepted.push_back(event->id());
      // Held once dispatched (after its commit, with commit-then-dispatch;
      // what waits for the commit is bounded by the writer's backlog).
      ASSERT_TRUE(
          waitUntil([&] { return flow.reliableMetrics().held_back + 1 >= accepted.size(); }));
    } else {
      ASSERT_EQ(out.rejected, 1u);
      ++rejected;
      why = out.status;
    }
  }
  // 32 held, one of them possibly out as a probe.
  EXPECT_GE(accepted.size(), 32u);
  EXPECT_LE(accepted.size(), 33u);
  EXPECT_EQ(rejected, 60 - static_cast<int>(accepted.size()));
  EXPECT_THAT(
      why.message(),
      ::testing::MatchesRegex(".*target busy holds back 3[23] deliveries, its stage's capacity"));
  target.setBusy(false);
  ASSERT_TRUE(waitUntil([&] { return target.ids().size() == accepted.size(); }));
  EXPECT_EQ(target.ids(), accepted);
  flow.stop();
}

TEST_P(ReliableFlowTest, HeldBackDeliveriesOfADetachedTargetWaitForItsReturnInOrder) {
  TempDir dir;
  ReliableFlow flow(reliableConfig(dir.file("r.db")));
  auto first = std::make_unique<SwitchableTarget>("a");
  first->setBusy(true);
  ASSERT_TRUE(flow.attach(*first).isOk());
  ASSERT_TRUE(flow.start().isOk());
  const std::vector<EventId> sent = sendReliable(flow, *first, 0, 20);
  ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().held_back == 20; }));
  flow.detach(*first);
  EXPECT_EQ(flow.reliableMetrics().held_back, 0u);
  first.reset();
  SwitchableTarget again("a");  // the same name: the records are addressed by name
  ASSERT_TRUE(flow.attach(again).isOk());
  ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().acknowledged == 20; }));
  EXPECT_EQ(again.ids(), sent);
  flow.stop();
}

TEST_P(ReliableFlowTest, CorruptRecordsAreCountedAndRemoved) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  {
    auto journal = Journal::open(path, {});
    JournalRecord bad = recordFor(1, "a", makeEvent(1));
    bad.stored_event = "{not json";
    std::vector<JournalRecord> rows{bad, recordFor(2, "a", makeEvent(2))};
    ASSERT_TRUE((*journal)->commit(rows, {}).isOk());
  }
  // And a batch of the delivered-id window that does not decode.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, "INSERT INTO delivered_batches(count, ids) VALUES(1, x'05')", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  RecordingTarget a("a");
  ReliableFlow flow(reliableConfig(path));
  ASSERT_TRUE(flow.attach(a).isOk());
  ASSERT_TRUE(flow.start().isOk());
  ASSERT_TRUE(waitUntil([&] { return a.delivered() == 1; }));
  flow.stop();
  EXPECT_EQ(flow.reliableMetrics().corrupt, 2u);  // the record and the batch
  EXPECT_TRUE(pendingIn(path).empty());
}

TEST_P(ReliableFlowTest, AnUnopenableJournalFailsStart) {
  ReliableFlow flow(reliableConfig("/nonexistent-dir/sub/r.db"));
  Status status = flow.start();
  EXPECT_EQ(status.code(), Status::Code::kIoError);
  EXPECT_FALSE(flow.running());
  RecordingTarget a("a");
  std::vector<DeliveryTarget*> targets{&a};
  EXPECT_EQ(flow.send(inOnly(makeEvent(1), "t", Qos::kReliable), targets).rejected, 1u);

  ReliableFlow unnamed(reliableConfig(""));
  EXPECT_EQ(unnamed.start().code(), Status::Code::kInvalidArgument);
}

// A reliable flow of stage capacity 20 whose one target, "slow", takes
// nothing until its gate opens: its stage fills, passing degrade-at first.
struct OverloadedFlow {
  TempDir dir;
  std::string path = dir.file("r.db");
  RecordingTarget slow{"slow"};
  ReliableFlow flow{reliableConfig(path, 20)};
  std::shared_ptr<OutcomeRecorder> recorder = std::make_shared<OutcomeRecorder>();
  std::vector<DeliveryTarget*> targets{&slow};

  bool start() {
    if (!flow.attach(slow).isOk() || !flow.start().isOk()) return false;
    slow.closeGate();
    return true;
  }
};

TEST_P(ReliableFlowTest, OverloadDegradesThenRejectsAndEveryAcceptedEventArrivesOnce) {
  OverloadedFlow o;
  ASSERT_TRUE(o.start());
  auto& [dir, path, slow, flow, recorder, targets] = o;
  std::set<EventId> journaled, degraded, rejected;
  for (int i = 0; i < 300 && rejected.empty(); ++i) {
    EventPtr event = makeEvent(i);
    SendOutcome out = flow.send(inOnly(event, "t", Qos::kReliable, recorder), targets);
    ASSERT_EQ(out.accounted(), 1u);
    if (out.rejected == 1) rejected.insert(event->id());
    if (out.degraded == 1) degraded.insert(event->id());
    if (out.queued == 1 && out.degraded == 0) {
      journaled.insert(event->id());
      // Let the commit land in the stage, so the next send sees the pressure.
      ASSERT_TRUE(waitUntil([&] {
        return recorder->idsWith(OutcomeKind::kAccepted).count(event->id()) == 1 &&
               flow.queueLength(slow) + slow.entered() == journaled.size() + degraded.size();
      }));
    }
  }
  EXPECT_FALSE(journaled.empty());
  EXPECT_FALSE(degraded.empty());
  ASSERT_FALSE(rejected.empty());
  EXPECT_EQ(recorder->idsWith(OutcomeKind::kAccepted),
            std::multiset<EventId>(journaled.begin(), journaled.end()));
  EXPECT_EQ(recorder->idsWith(OutcomeKind::kDegraded),
            std::multiset<EventId>(degraded.begin(), degraded.end()));
  EXPECT_EQ(recorder->idsWith(OutcomeKind::kRejected),
            std::multiset<EventId>(rejected.begin(), rejected.end()));

  slow.openGate();
  ASSERT_TRUE(waitUntil([&] { return slow.delivered() == journaled.size() + degraded.size(); }));
  flow.stop();
  std::set<EventId> delivered;
  for (const auto& [id, count] : slow.counts()) {
    EXPECT_EQ(count, 1) << id;
    delivered.insert(id);
  }
  std::set<EventId> expected = journaled;
  expected.insert(degraded.begin(), degraded.end());
  EXPECT_EQ(delivered, expected);
  for (EventId id : rejected) EXPECT_EQ(delivered.count(id), 0u);
  EXPECT_TRUE(pendingIn(path).empty());
  EXPECT_EQ(flow.metrics().degraded, degraded.size());
  EXPECT_EQ(flow.metrics().rejected, rejected.size());
}

// A sender that cannot take a loss (a query's output_qos=reliable
// composites) is refused under pressure instead of degraded: it holds the
// event and sends it again, and nothing it was told is queued can be dropped
// by a full target.
TEST_P(ReliableFlowTest, UnderLoadAnExchangeThatMayNotDegradeIsRefusedNotDegraded) {
  OverloadedFlow o;
  ASSERT_TRUE(o.start());
  auto& [dir, path, slow, flow, recorder, targets] = o;
  std::set<EventId> journaled;
  std::vector<EventPtr> refused;
  for (int i = 0; i < 300 && refused.empty(); ++i) {
    EventPtr event = makeEvent(i);
    Exchange exchange = inOnly(event, "t", Qos::kReliable, recorder);
    exchange.degrade_under_load = false;
    SendOutcome out = flow.send(exchange, targets);
    ASSERT_EQ(out.accounted(), 1u);
    ASSERT_EQ(out.degraded, 0u) << "event " << i;
    if (out.rejected == 1) {
      EXPECT_NE(out.status.message().find("under load"), std::string::npos) << out.status.message();
      refused.push_back(event);
      continue;
    }
    journaled.insert(event->id());
    ASSERT_TRUE(waitUntil([&] {
      return recorder->idsWith(OutcomeKind::kAccepted).count(event->id()) == 1 &&
             flow.queueLength(slow) + slow.entered() == journaled.size();
    }));
  }
  ASSERT_EQ(refused.size(), 1u);
  // Refused well before the stage is full: at its degrade threshold.
  EXPECT_LT(journaled.size(), 20u);
  EXPECT_TRUE(recorder->idsWith(OutcomeKind::kDegraded).empty());
  EXPECT_EQ(flow.metrics().degraded, 0u);

  // Sent again once the target catches up, it arrives, as does every one
  // before it, once each.
  slow.openGate();
  ASSERT_TRUE(waitUntil([&] { return slow.delivered() == journaled.size(); }));
  Exchange again = inOnly(refused.front(), "t", Qos::kReliable, recorder);
  again.degrade_under_load = false;
  ASSERT_EQ(flow.send(again, targets).queued, 1u);
  ASSERT_TRUE(waitUntil([&] { return slow.delivered() == journaled.size() + 1; }));
  flow.stop();
  for (const auto& [id, count] : slow.counts()) EXPECT_EQ(count, 1) << id;
  EXPECT_TRUE(pendingIn(path).empty());
}

// --- Concurrent dispatch: who settles the sender, and what is written. ---

// Records every outcome by (event id, target, kind), and can hold the thread
// that reports one chosen (event id, target) until released: on the journal
// thread that holds the writer between taking a batch and settling the rest
// of it, which lets a test order the race with a target's acknowledgement.
class GatedListener final : public ExchangeListener {
 public:
  void onOutcome(const Exchange& exchange, const Outcome& outcome) override {
    std::unique_lock lock(mu_);
    const auto key = std::make_pair(exchange.event->id(), std::string(outcome.target));
    ++counts_[{key.first, key.second, outcome.kind}];
    cv_.notify_all();
    if (!hold_ || *hold_ != key) return;
    hold_.reset();
    held_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !held_; });
  }
  // Holds the next outcome reported for (id, target).
  void holdOn(EventId id, const std::string& target) {
    std::lock_guard lock(mu_);
    hold_ = std::make_pair(id, target);
  }
  bool waitHeld() {
    return waitUntil([&] {
      std::lock_guard lock(mu_);
      return held_;
    });
  }
  void release() {
    std::lock_guard lock(mu_);
    held_ = false;
    cv_.notify_all();
  }
  int count(EventId id, const std::string& target, OutcomeKind kind) {
    std::lock_guard lock(mu_);
    auto it = counts_.find({id, target, kind});
    return it == counts_.end() ? 0 : it->second;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::tuple<EventId, std::string, OutcomeKind>, int> counts_;  // guarded by mu_
  std::optional<std::pair<EventId, std::string>> hold_;                  // guarded by mu_
  bool held_ = false;                                                    // guarded by mu_
};

std::set<EventId> deliveredIn(const std::string& path) {
  auto journal = Journal::open(path, {});
  EXPECT_TRUE(journal.isOk());
  auto delivered = (*journal)->delivered();
  EXPECT_TRUE(delivered.isOk());
  std::set<EventId> ids;
  for (const DeliveredId& d : *delivered) ids.insert(d.event_id);
  return ids;
}

// The journal thread is held inside the commit callback of a record for a
// gated target, so nothing appended meanwhile can be taken: a target that
// acknowledges at once always wins, without any timing assumption.
TEST(ConcurrentDispatchTest, AnImmediateAckCancelsTheRecordAndItsIdSurvivesARestart) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  constexpr int kEvents = 50;
  std::vector<EventPtr> events;
  for (int i = 0; i < kEvents; ++i) events.push_back(makeEvent(i, 100 + i));
  EventPtr blocker = makeEvent(0, 1);
  {
    RecordingTarget gated("g"), fast("a");
    ReliableFlow flow(reliableConfig(path));
    ASSERT_TRUE(flow.attach(gated).isOk());
    ASSERT_TRUE(flow.attach(fast).isOk());
    ASSERT_TRUE(flow.start().isOk());
    gated.closeGate();
    auto listener = std::make_shared<GatedListener>();
    listener->holdOn(blocker->id(), "g");
    std::vector<DeliveryTarget*> to_gated{&gated}, to_fast{&fast};
    ASSERT_EQ(flow.send(inOnly(blocker, "t", Qos::kReliable, listener), to_gated).queued, 1u);
    ASSERT_TRUE(listener->waitHeld());  // the writer is stuck in its callback
    for (const EventPtr& e : events) {
      ASSERT_EQ(flow.send(inOnly(e, "t", Qos::kReliable, listener), to_fast).queued, 1u);
    }
    ASSERT_TRUE(waitUntil([&] { return fast.delivered() == kEvents; }));
    // The target's OK settled each sender before any commit could.
    for (const EventPtr& e : events) {
      ASSERT_TRUE(
          waitUntil([&] { return listener->count(e->id(), "a", OutcomeKind::kAccepted) == 1; }));
    }
    EXPECT_EQ(flow.reliableMetrics().cancelled, static_cast<uint64_t>(kEvents));
    listener->release();
    gated.openGate();
    ASSERT_TRUE(waitUntil([&] { return gated.delivered() == 1; }));
    flow.stop();
    ReliableMetricsSnapshot m = flow.reliableMetrics();
    EXPECT_EQ(m.journaled, 1u);  // only the blocker was written
    EXPECT_EQ(m.cancelled, static_cast<uint64_t>(kEvents));
    EXPECT_EQ(m.acknowledged, static_cast<uint64_t>(kEvents + 1));
    EXPECT_EQ(m.in_flight, 0u);
    for (const EventPtr& e : events) {
      EXPECT_EQ(listener->count(e->id(), "a", OutcomeKind::kAccepted), 1);
      EXPECT_EQ(listener->count(e->id(), "a", OutcomeKind::kRejected), 0);
    }
    EXPECT_EQ(listener->count(blocker->id(), "g", OutcomeKind::kAccepted), 1);
  }
  EXPECT_TRUE(pendingIn(path).empty());
  std::set<EventId> expected{blocker->id()};
  for (const EventPtr& e : events) expected.insert(e->id());
  EXPECT_EQ(deliveredIn(path), expected);  // cancelled ids are remembered too

  // After a restart the remembered ids still suppress duplicates.
  RecordingTarget fast("a");
  ReliableFlow flow(reliableConfig(path));
  ASSERT_TRUE(flow.attach(fast).isOk());
  ASSERT_TRUE(flow.start().isOk());
  std::vector<DeliveryTarget*> to_fast{&fast};
  auto recorder = std::make_shared<OutcomeRecorder>();
  SendOutcome again = flow.send(inOnly(events[7], "t", Qos::kReliable, recorder), to_fast);
  EXPECT_EQ(again.duplicates, 1u);
  EXPECT_EQ(recorder->count(OutcomeKind::kAccepted), 1u);
  flow.stop();
  EXPECT_EQ(fast.delivered(), 0u);
}

TEST(ConcurrentDispatchTest, AnAckAfterTheCommitDeletesTheRow) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  DeferringTarget a("a");
  ReliableFlow flow(reliableConfig(path));
  ASSERT_TRUE(flow.attach(a).isOk());
  ASSERT_TRUE(flow.start().isOk());
  auto listener = std::make_shared<GatedListener>();
  EventPtr e = makeEvent(1);
  std::vector<DeliveryTarget*> targets{&a};
  ASSERT_EQ(flow.send(inOnly(e, "t", Qos::kReliable, listener), targets).queued, 1u);
  ASSERT_TRUE(waitUntil([&] { return a.waiting() == 1; }));
  // The commit settles the sender: the record is durable.
  ASSERT_TRUE(
      waitUntil([&] { return listener->count(e->id(), "a", OutcomeKind::kAccepted) == 1; }));
  EXPECT_EQ(idsOf(pendingIn(path)), std::set<EventId>{e->id()});
  a.ackOne(Status::ok());
  ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().acknowledged == 1; }));
  flow.stop();
  EXPECT_TRUE(pendingIn(path).empty());
  EXPECT_EQ(deliveredIn(path), std::set<EventId>{e->id()});
  EXPECT_EQ(flow.reliableMetrics().cancelled, 0u);
  EXPECT_EQ(flow.reliableMetrics().journaled, 1u);
  EXPECT_EQ(listener->count(e->id(), "a", OutcomeKind::kAccepted), 1);
}

// The acknowledgement comes after the writer took the record into a
// transaction, before its callback settled it: the target's OK settles the
// sender, the callback stays silent, and the row is written, then deleted.
// Two targets, `gated` (its deliveries wait at a gate) and `d` (acknowledges
// when the test says so), and the journal thread held inside the commit
// callback of a first event `x` to `gated`: what the test sends next waits
// for the writer, which takes it in one batch once `listener` lets go.
class HeldJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(flow.attach(gated).isOk());
    ASSERT_TRUE(flow.attach(d).isOk());
    ASSERT_TRUE(flow.start().isOk());
    gated.closeGate();
    listener->holdOn(x->id(), "g");
    std::vector<DeliveryTarget*> to_gated{&gated};
    ASSERT_EQ(flow.send(inOnly(x, "t", Qos::kReliable, listener), to_gated).queued, 1u);
    ASSERT_TRUE(listener->waitHeld());
  }

  TempDir dir;
  const std::string path = dir.file("r.db");
  RecordingTarget gated{"g"};
  DeferringTarget d{"d"};
  ReliableFlow flow{reliableConfig(path)};
  std::shared_ptr<GatedListener> listener = std::make_shared<GatedListener>();
  EventPtr x = makeEvent(1);
};

TEST_F(HeldJournalTest, AnAckWhileTheRecordIsBeingCommittedSettlesTheSenderOnce) {
  EventPtr e = makeEvent(2);
  std::vector<DeliveryTarget*> both{&gated, &d};
  // Both records of e wait for the writer, so it takes them in one batch.
  ASSERT_EQ(flow.send(inOnly(e, "t", Qos::kReliable, listener), both).queued, 2u);
  ASSERT_TRUE(waitUntil([&] { return d.waiting() == 1; }));
  // Both records ripe (the commit delay, 2 ms, on a 1 ms grid) before the
  // writer moves on: were the second appended across a grid line from the
  // first and not yet ripe, the writer would take the first alone, and d's
  // acknowledgement would then cancel the second (seen once under TSan).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  listener->holdOn(e->id(), "g");  // settled first in e's batch
  listener->release();
  ASSERT_TRUE(listener->waitHeld());
  EXPECT_EQ(listener->count(e->id(), "d", OutcomeKind::kAccepted), 0);
  d.ackOne(Status::ok());
  EXPECT_EQ(listener->count(e->id(), "d", OutcomeKind::kAccepted), 1);
  listener->release();
  gated.openGate();
  ASSERT_TRUE(waitUntil([&] { return gated.delivered() == 2; }));
  flow.stop();
  EXPECT_EQ(listener->count(e->id(), "d", OutcomeKind::kAccepted), 1);
  EXPECT_EQ(listener->count(e->id(), "g", OutcomeKind::kAccepted), 1);
  EXPECT_EQ(listener->count(x->id(), "g", OutcomeKind::kAccepted), 1);
  EXPECT_EQ(listener->count(e->id(), "d", OutcomeKind::kRejected), 0);
  ReliableMetricsSnapshot m = flow.reliableMetrics();
  EXPECT_EQ(m.cancelled, 0u);
  EXPECT_EQ(m.journaled, 3u);
  EXPECT_EQ(m.acknowledged, 3u);
  EXPECT_TRUE(pendingIn(path).empty());
}

// Another connection holds the database's write lock, so commits fail.
class WriteLock {
 public:
  explicit WriteLock(const std::string& path) {
    sqlite3_open(path.c_str(), &db_);
    locked_ = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  ~WriteLock() {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
  }
  bool locked() const { return locked_; }

 private:
  sqlite3* db_ = nullptr;
  bool locked_ = false;
};

TEST_F(HeldJournalTest, AFailedCommitRejectsUnlessTheTargetAcknowledgedFirst) {
  EventPtr e = makeEvent(2), f = makeEvent(3);
  std::vector<DeliveryTarget*> to_d{&d}, both{&gated, &d};
  {
    auto lock = std::make_unique<WriteLock>(path);
    ASSERT_TRUE(lock->locked());
    // e: d acknowledges after the writer took the record, before the failed
    // commit's callback reaches it. The sender heard kAccepted from d's OK.
    ASSERT_EQ(flow.send(inOnly(e, "t", Qos::kReliable, listener), both).queued, 2u);
    ASSERT_TRUE(waitUntil([&] { return d.waiting() == 1; }));
    listener->holdOn(e->id(), "g");
    listener->release();
    ASSERT_TRUE(listener->waitHeld());
    EXPECT_EQ(listener->count(e->id(), "g", OutcomeKind::kRejected), 1);
    d.ackOne(Status::ok());
    listener->release();
    // f: the commit fails first; the delivery is out and carries on.
    ASSERT_EQ(flow.send(inOnly(f, "t", Qos::kReliable, listener), to_d).queued, 1u);
    ASSERT_TRUE(
        waitUntil([&] { return listener->count(f->id(), "d", OutcomeKind::kRejected) == 1; }));
    ASSERT_TRUE(waitUntil([&] { return d.waiting() == 1; }));
    d.ackOne(Status::ok());
    // Still in flight: x and e for the gated target; e and f for d are done.
    ASSERT_TRUE(waitUntil([&] { return flow.reliableMetrics().in_flight == 2; }));
  }
  gated.openGate();
  ASSERT_TRUE(waitUntil([&] { return gated.delivered() == 2; }));
  flow.stop();
  EXPECT_EQ(listener->count(x->id(), "g", OutcomeKind::kAccepted), 1);
  EXPECT_EQ(listener->count(e->id(), "g", OutcomeKind::kRejected), 1);
  EXPECT_EQ(listener->count(e->id(), "g", OutcomeKind::kAccepted), 0);
  EXPECT_EQ(listener->count(e->id(), "d", OutcomeKind::kAccepted), 1);
  EXPECT_EQ(listener->count(e->id(), "d", OutcomeKind::kRejected), 0);
  EXPECT_EQ(listener->count(f->id(), "d", OutcomeKind::kRejected), 1);
  EXPECT_EQ(listener->count(f->id(), "d", OutcomeKind::kAccepted), 0);
  EXPECT_EQ(flow.metrics().rejected, 2u);
  EXPECT_GE(flow.reliableMetrics().journal_errors, 1u);
  EXPECT_TRUE(pendingIn(path).empty());
}

// A delivery that fails before its record is committed does not cancel it:
// the record is written, so a crash cannot lose the event.
TEST(ConcurrentDispatchTest, AFailureBeforeTheCommitStillJournalsTheRecord) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  EventPtr x = makeEvent(1), e = makeEvent(2);
  {
    RecordingTarget gated("g"), failing("f");
    failing.setBehavior(Behavior::kFail);
    ReliableFlow flow(reliableConfig(path));
    ASSERT_TRUE(flow.attach(gated).isOk());
    ASSERT_TRUE(flow.attach(failing).isOk());
    ASSERT_TRUE(flow.start().isOk());
    gated.closeGate();
    auto listener = std::make_shared<GatedListener>();
    listener->holdOn(x->id(), "g");
    std::vector<DeliveryTarget*> to_gated{&gated}, to_failing{&failing};
    ASSERT_EQ(flow.send(inOnly(x, "t", Qos::kReliable, listener), to_gated).queued, 1u);
    ASSERT_TRUE(listener->waitHeld());
    ASSERT_EQ(flow.send(inOnly(e, "t", Qos::kReliable, listener), to_failing).queued, 1u);
    ASSERT_TRUE(waitUntil([&] { return failing.failures() >= 1; }));
    EXPECT_EQ(flow.reliableMetrics().cancelled, 0u);
    listener->release();
    ASSERT_TRUE(
        waitUntil([&] { return listener->count(e->id(), "f", OutcomeKind::kAccepted) == 1; }));
    gated.openGate();
    ASSERT_TRUE(waitUntil([&] { return gated.delivered() == 1; }));
  }
  EXPECT_EQ(idsOf(pendingIn(path)), std::set<EventId>{e->id()});
}

// --- A real crash: a child process journals, then dies without stopping. ---

constexpr char kCrashEnv[] = "CEPBUS_RELIABLE_CRASH_DB";
constexpr char kCrashModeEnv[] = "CEPBUS_RELIABLE_CRASH_CONCURRENT";
constexpr int kCrashEvents = 200;
constexpr int kAckedBeforeCrash = 30;
constexpr int kCrashExitCode = 42;

// Acknowledges the first `limit` events, then hangs (bounded, in case the
// child fails before it can crash on purpose).
class AckThenHang final : public DeliveryTarget {
 public:
  explicit AckThenHang(int limit) : limit_(limit) {}
  const std::string& name() const override { return name_; }
  Status deliver(const Exchange&, DeliveryContext&) override {
    if (acked_.load() < limit_) {
      acked_.fetch_add(1);
      return Status::ok();
    }
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return Status::unavailable("hung");
  }

 private:
  const std::string name_ = "crash.target";
  const int limit_;
  std::atomic<int> acked_{0};
};

TEST(ReliableFlowCrashChild, JournalsThenDiesWithoutStopping) {
  const char* path = std::getenv(kCrashEnv);
  if (path == nullptr) {
    GTEST_SKIP() << "the child half of ReliableFlowTest.RedeliversEverythingAfterACrash";
  }
  ReliableFlowConfig config = reliableConfig(path);
  config.journal.fsync = true;
  const char* mode = std::getenv(kCrashModeEnv);
  config.concurrent_dispatch = mode == nullptr || std::string(mode) != "0";
  AckThenHang target(kAckedBeforeCrash);
  ReliableFlow flow(config);
  ASSERT_TRUE(flow.attach(target).isOk());
  ASSERT_TRUE(flow.start().isOk());
  auto recorder = std::make_shared<OutcomeRecorder>();
  std::vector<DeliveryTarget*> targets{&target};
  for (int i = 0; i < kCrashEvents; ++i) {
    ASSERT_EQ(
        flow.send(inOnly(makeEvent(i, 5000 + i), "t", Qos::kReliable, recorder), targets).queued,
        1u);
  }
  ASSERT_TRUE(waitUntil([&] {
    return recorder->count(OutcomeKind::kAccepted) == kCrashEvents &&
           flow.reliableMetrics().acknowledged == kAckedBeforeCrash;
  }));
  std::_Exit(kCrashExitCode);  // no stop, no destructors, no flush
}

int runCrashChild(const std::string& db) {
  std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=ReliableFlowCrashChild.JournalsThenDiesWithoutStopping";
  std::string env = std::string(kCrashEnv) + "=" + db;
  std::string mode = std::string(kCrashModeEnv) + "=" + (g_concurrent_dispatch ? "1" : "0");
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(env.data());
  envp.push_back(mode.data());
  envp.push_back(nullptr);
  char* argv[] = {exe.data(), filter.data(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_P(ReliableFlowTest, RedeliversEverythingAfterACrashExactlyOnce) {
  TempDir dir;
  const std::string path = dir.file("crash.db");
  ASSERT_EQ(runCrashChild(path), kCrashExitCode);

  // What the crashed process left: every event is either acknowledged
  // (remembered as delivered) or still pending; nothing is lost.
  std::set<EventId> all;
  for (int i = 0; i < kCrashEvents; ++i) all.insert(5000 + i);
  std::set<EventId> pending = idsOf(pendingIn(path));
  std::set<EventId> acknowledged;
  {
    auto journal = Journal::open(path, {});
    auto delivered = (*journal)->delivered();
    ASSERT_TRUE(delivered.isOk());
    for (const DeliveredId& d : *delivered) acknowledged.insert(d.event_id);
  }
  EXPECT_EQ(acknowledged.size(), static_cast<size_t>(kAckedBeforeCrash));
  EXPECT_EQ(pending.size(), static_cast<size_t>(kCrashEvents - kAckedBeforeCrash));
  std::set<EventId> both = pending;
  both.insert(acknowledged.begin(), acknowledged.end());
  EXPECT_EQ(both, all);

  RecordingTarget target("crash.target");
  ReliableFlow flow(reliableConfig(path));
  ASSERT_TRUE(flow.attach(target).isOk());
  ASSERT_TRUE(flow.start().isOk());
  ASSERT_TRUE(waitUntil([&] { return target.delivered() == pending.size(); }));
  flow.stop();
  for (const auto& [id, count] : target.counts()) EXPECT_EQ(count, 1) << id;
  std::vector<EventId> ids = target.ids();
  EXPECT_EQ(std::set<EventId>(ids.begin(), ids.end()), pending);
  EXPECT_TRUE(pendingIn(path).empty());
}

INSTANTIATE_TEST_SUITE_P(Dispatch, ReliableFlowTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Concurrent" : "CommitFirst";
                         });

}  // namespace
}  // namespace cepbus::flows
