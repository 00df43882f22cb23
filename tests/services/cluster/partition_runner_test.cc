#include "services/cluster/partition_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <proton/message.hpp>
#include <string>
#include <vector>

#include "bus/host/detection/composite_id.h"
#include "bus/host/loader/plugin_loader.h"
#include "services/cluster/output_sender.h"
#include "tests/services/cluster/output_test_util.h"

namespace cepbus::services::cluster {
namespace {

using std::chrono::milliseconds;
using Tags = std::vector<uint64_t>;

Tags sorted(Tags tags) {
  std::sort(tags.begin(), tags.end());
  return tags;
}

// The broker as a runner sees it: records every call, answers nothing by
// itself (a test answers through outputDone() and leaseTokenDone()).
class FakePartitionIo final : public PartitionIo {
 public:
  struct Rejected {
    uint64_t tag;
    std::string condition;
  };

  void accept(uint64_t tag) override { accepted.push_back(tag); }
  void reject(uint64_t tag, const std::string& condition, const std::string&) override {
    rejected.push_back({tag, condition});
  }
  void send(const OutputMessage& output) override { sent.push_back(output); }
  std::optional<std::string> sendLeaseToken(const LeaseMark& mark) override {
    if (!lease_open) return std::nullopt;
    tokens_sent.push_back(mark);
    return "token-" + std::to_string(tokens_sent.size());
  }
  void settleLeaseToken(uint64_t tag) override { tokens_settled.push_back(tag); }

  // The composites sent, in order (resends included).
  std::vector<OutputMessage> composites() const {
    std::vector<OutputMessage> out;
    for (const OutputMessage& m : sent) {
      if (m.composite) out.push_back(m);
    }
    return out;
  }

  Tags accepted;
  std::vector<Rejected> rejected;
  std::vector<OutputMessage> sent;
  bool lease_open = true;
  std::vector<LeaseMark> tokens_sent;
  Tags tokens_settled;
};

// The node's output path before the fake broker: a runner's outputs go
// through the node's OutputSender (output_sender.h) into batches, and the
// test answers whole batches, as the broker does; the sender hands each
// output's answer back to the runner. The runner runs partition 2.
class BatchedPartitionIo final : public PartitionIo, private OutputSender::Io {
 public:
  BatchedPartitionIo(const ClusterSpec& spec, std::span<const CompiledQuery> queries)
      : sender_(spec, queries, *this) {}

  void accept(uint64_t tag) override { accepted.push_back(tag); }
  void reject(uint64_t, const std::string&, const std::string&) override {}
  void send(const OutputMessage& output) override { sender_.send(2, output, now); }
  std::optional<std::string> sendLeaseToken(const LeaseMark&) override { return std::nullopt; }
  void settleLeaseToken(uint64_t) override {}

  // The linger of the open batches ends.
  void linger() { sender_.lingered(now + std::chrono::hours(1)); }
  // The broker's answer to the sent batch `index`, for `runner`.
  void answer(size_t index, bool accepted_by_broker, PartitionRunner& runner) {
    runner_ = &runner;
    sender_.answered(batches[index].first, accepted_by_broker);
  }
  // The partition's runner is gone.
  void forget() { sender_.forget(2); }
  // The composite ids batch `index` carries, in order.
  std::vector<uint64_t> ids(size_t index) const {
    EXPECT_EQ(batches[index].second.subject(), kCompositeBatchSubject);
    return testing::compositeIds(batches[index].second);
  }

  Tags accepted;
  std::vector<std::pair<uint64_t, proton::message>> batches;  // sent, in order, by batch number
  OutputSender::TimePoint now{};

 private:
  // OutputSender::Io
  bool send(uint64_t batch, const std::string&, bool, const proton::message& message) override {
    batches.emplace_back(batch, message);
    return true;
  }
  void wakeAt(OutputSender::TimePoint) override {}
  void outputDone(uint32_t partition, uint64_t seq, bool accepted_by_broker) override {
    EXPECT_EQ(partition, 2u);
    runner_->outputDone(seq, accepted_by_broker);
  }

  OutputSender sender_;
  PartitionRunner* runner_ = nullptr;
};

// One query, "rise": a stock whose next price, within 10, is higher.
constexpr char kRise[] =
    "PATTERN SEQ(Stock a, Stock b) WHERE a.symbol = b.symbol AND b.price > a.price "
    "WITHIN 10 RETURN Rise(a.symbol, a.price, b.price)";

// One query, "flat": a stock whose price does not rise within 1,000 (a
// trailing negation: decided only once event time passes the window).
constexpr char kFlat[] =
    "PATTERN SEQ(Stock a, NOT(Stock b)) WHERE b.symbol = a.symbol AND b.price > a.price "
    "WITHIN 1000 RETURN Flat(a.symbol, a.price)";

// A ts in milliseconds since the epoch, and the wall-clock time it stands for.
constexpr Timestamp kT = 1'700'000'000'000;
std::chrono::system_clock::time_point wallAt(Timestamp ms) {
  return std::chrono::system_clock::time_point(milliseconds(ms));
}

class PartitionRunnerTest : public ::testing::Test {
 protected:
  PartitionRunnerTest() : loader_({std::string(CEPBUS_TEST_BUILD_DIR) + "/plugins"}) {
    spec_.name = "c";
    spec_.node = "n1";
    spec_.partitions = 4;
    spec_.key = {"symbol"};
    spec_.max_unsettled = 100;
    descriptor::QuerySpec query;
    query.name = "rise";
    query.engine = "nfa";
    query.output = "rises";
    query.text = kRise;
    spec_.queries.push_back(query);
  }

  // A runner of partition 2 with the cluster's max-delay `max_delay`; with `lease`,
  // of stream input.
  std::unique_ptr<PartitionRunner> runner(Timestamp max_delay, PartitionIo& io,
                                          std::optional<LeaseMark> lease = std::nullopt) {
    spec_.max_delay = max_delay;
    if (queries_.empty()) {
      auto compiled = compileClusterQueries(spec_, loader_);
      EXPECT_TRUE(compiled.isOk()) << compiled.status().message();
      if (compiled) queries_ = std::move(*compiled);
    }
    auto made = PartitionRunner::create(spec_, 2, queries_, io, counters_, lease);
    EXPECT_TRUE(made.isOk()) << made.status().message();
    return made ? std::move(*made) : nullptr;
  }

  static EventPtr stock(EventId id, Timestamp ts, double price) {
    return EventBuilder("Stock")
        .id(id)
        .at(ts)
        .set("symbol", Value("IBM"))
        .set("price", Value(price))
        .build();
  }
  static PartitionInput input(std::vector<EventPtr> events, bool redelivered = false) {
    PartitionInput in;
    in.events = std::move(events);
    in.redelivered = redelivered;
    return in;
  }
  static PartitionInput endOfStream() {
    PartitionInput in;
    in.end_of_stream = true;
    return in;
  }
  static PartitionInput at(uint64_t offset, EventPtr event,
                           std::optional<StreamSequencer::Tag> sequence = std::nullopt) {
    PartitionInput in = input({std::move(event)});
    in.offset = offset;
    in.sequence = sequence;
    return in;
  }
  static uint64_t idOf(std::initializer_list<EventId> ids) {
    return detection::compositeId("rise", std::vector<EventId>(ids));
  }
  // Runs "flat" instead of "rise", on events whose ts is in `unit`
  // (kNone: no declared unit), quiet after 2 s.
  void runFlat(pattern::TimeUnit unit) {
    spec_.queries[0].name = "flat";
    spec_.queries[0].text = kFlat;
    spec_.queries[0].ts_unit = unit;
    spec_.ts_unit = unit;
    spec_.source_idle_timeout_ms = 2000;
  }
  std::vector<std::string> compositesTs() const {
    std::vector<std::string> out;
    for (const OutputMessage& m : io_.composites()) out.push_back(m.composite->match_ts);
    return out;
  }
  // Starts r_, running on io_.
  void start(Timestamp max_delay, std::optional<LeaseMark> lease = std::nullopt) {
    r_ = runner(max_delay, io_, lease);
    ASSERT_NE(r_, nullptr);
  }
  // The node's output path, batches of up to 8 composites, before the fake broker.
  BatchedPartitionIo& batched() {
    spec_.output.batch_events = 8;
    EXPECT_NE(runner(0, io_), nullptr);  // compiles the queries
    return batched_.emplace(spec_, queries_);
  }
  PartitionStats stats(const PartitionRunner& r) const {
    PartitionStats s;
    r.describe(s);
    return s;
  }

  services::cluster::ClusterSpec spec_;
  plugin::PluginLoader loader_;
  std::vector<CompiledQuery> queries_;
  ClusterStats counters_;
  FakePartitionIo io_;
  std::optional<BatchedPartitionIo> batched_;
  std::unique_ptr<PartitionRunner> r_;
  const PartitionRunner::Time t0_{};
  const PartitionRunner::WallTime wall0_{};
};

TEST_F(PartitionRunnerTest, PublishesEachCompositeWithItsDeterministicId) {
  ASSERT_NO_FATAL_FAILURE(start(0));
  r_->onQueueInput(0, input({stock(1, 1, 10)}), t0_);
  r_->onQueueInput(1, input({stock(2, 2, 11)}), t0_);
  const std::vector<OutputMessage> composites = io_.composites();
  ASSERT_EQ(composites.size(), 1u);
  const OutputMessage& out = composites[0];
  EXPECT_EQ(out.composite->query, "rise");
  EXPECT_EQ(out.composite->output, "rises");
  EXPECT_EQ(out.composite->id, idOf({1, 2}));
  EXPECT_EQ(out.composite->match_ts, "[1,2]");
  EXPECT_EQ(out.event->type().name(), "Rise");
  EXPECT_EQ(counters_.composites, 1u);
  EXPECT_EQ(counters_.received, 2u);
}

TEST_F(PartitionRunnerTest, InputsAreAcceptedOnlyOnceOutOfEveryWindowAndTheirCompositeAccepted) {
  ASSERT_NO_FATAL_FAILURE(start(0));
  r_->onQueueInput(0, input({stock(1, 1, 10)}), t0_);
  r_->onQueueInput(1, input({stock(2, 2, 11)}), t0_);
  // ts 11 is within WITHIN 10 of ts 1: both may still match a later event.
  r_->onQueueInput(2, input({stock(3, 11, 1)}), t0_);
  EXPECT_EQ(io_.accepted, Tags{});
  // Event time 30 leaves 1 and 2 out of every window, but the composite
  // they made is not accepted yet: a successor would need them to make it.
  r_->onQueueInput(3, input({stock(4, 30, 1)}), t0_);
  EXPECT_EQ(io_.accepted, Tags{});
  EXPECT_EQ(stats(*r_).unaccepted_outputs, 1u);
  r_->outputDone(io_.composites()[0].seq, true);
  EXPECT_EQ(io_.accepted, (Tags{0, 1, 2}));
  EXPECT_EQ(counters_.settled, 3u);
  EXPECT_EQ(stats(*r_).held, 1u);  // ts 30 is still in its window
  EXPECT_EQ(stats(*r_).held_messages_peak, 4u);
}

TEST_F(PartitionRunnerTest, ARejectedCompositeIsSentAgainAndItsInputsWait) {
  ASSERT_NO_FATAL_FAILURE(start(0));
  r_->onQueueInput(0, input({stock(1, 1, 10)}), t0_);
  r_->onQueueInput(1, input({stock(2, 2, 11)}), t0_);
  r_->onQueueInput(2, input({stock(3, 30, 1)}), t0_);
  ASSERT_EQ(io_.composites().size(), 1u);
  const uint64_t seq = io_.composites()[0].seq;
  r_->outputDone(seq, false);
  ASSERT_EQ(io_.composites().size(), 2u);
  EXPECT_EQ(io_.composites()[1].seq, seq);
  EXPECT_EQ(io_.composites()[1].composite->id, idOf({1, 2}));
  EXPECT_EQ(io_.accepted, Tags{});
  r_->outputDone(seq, true);
  EXPECT_EQ(io_.accepted, (Tags{0, 1}));
  // An answer for an output already accepted changes nothing.
  r_->outputDone(seq, false);
  EXPECT_EQ(io_.composites().size(), 2u);
}

TEST_F(PartitionRunnerTest, EventsOutOfOrderWithinTheSlackReachTheDetectorsInOrder) {
  ASSERT_NO_FATAL_FAILURE(start(5));
  EXPECT_EQ(stats(*r_).watermark, std::nullopt) << "no event yet";
  // In arrival order the price falls (11, then 10): no rise. In event-time
  // order it rises from 10 at ts 1 to 11 at ts 3.
  r_->onQueueInput(0, input({stock(1, 3, 11)}), t0_);
  r_->onQueueInput(1, input({stock(2, 1, 10)}), t0_);
  EXPECT_TRUE(io_.composites().empty()) << "released before the max-delay let them go";
  EXPECT_EQ(stats(*r_).watermark, -2) << "the newest ts (3) minus the max-delay";
  r_->onQueueInput(2, input({stock(3, 9, 1)}), t0_);  // 9 - 5 >= 3: both go
  EXPECT_EQ(stats(*r_).watermark, 4);
  ASSERT_EQ(io_.composites().size(), 1u);
  EXPECT_EQ(io_.composites()[0].composite->match_ts, "[1,3]");
  EXPECT_EQ(io_.composites()[0].composite->id, idOf({2, 1}));
  EXPECT_EQ(counters_.late, 0u);
}

TEST_F(PartitionRunnerTest, ALateEventIsPublishedAsLateAndAcceptedOnceThatIs) {
  ASSERT_NO_FATAL_FAILURE(start(2));
  r_->onQueueInput(0, input({stock(1, 10, 10)}), t0_);
  r_->onQueueInput(1, input({stock(2, 5, 20)}), t0_);  // 5 behind, the max-delay is 2
  EXPECT_EQ(counters_.late, 1u);
  ASSERT_EQ(io_.sent.size(), 1u);
  EXPECT_FALSE(io_.sent[0].composite);
  EXPECT_EQ(io_.sent[0].event->id(), 2u);
  EXPECT_EQ(io_.accepted, Tags{});
  r_->outputDone(io_.sent[0].seq, true);
  EXPECT_EQ(io_.accepted, Tags{1});
  // It reached no detector: a later rise pairs with ts 10 only.
  r_->onQueueInput(2, input({stock(3, 14, 30)}), t0_);
  r_->onQueueInput(3, input({stock(4, 30, 1)}), t0_);
  ASSERT_EQ(io_.composites().size(), 1u);
  EXPECT_EQ(io_.composites()[0].composite->id, idOf({1, 3}));
}

TEST_F(PartitionRunnerTest, AResentEventIsDroppedAndItsMessageLetGo) {
  ASSERT_NO_FATAL_FAILURE(start(0));
  r_->onQueueInput(0, input({stock(1, 1, 10)}), t0_);
  r_->onQueueInput(1, input({stock(1, 1, 10)}), t0_);  // the same event id again
  EXPECT_EQ(counters_.duplicates, 1u);
  EXPECT_EQ(io_.accepted, Tags{1});  // no output was pending
  r_->onQueueInput(2, input({stock(2, 2, 11)}), t0_);
  // One rise, not two: the copy reached no detector.
  EXPECT_EQ(io_.composites().size(), 1u);
}

TEST_F(PartitionRunnerTest, ABatchIsAcceptedWithItsLastEvent) {
  ASSERT_NO_FATAL_FAILURE(start(0));
  r_->onQueueInput(0, input({stock(1, 1, 1), stock(2, 20, 1)}), t0_);
  r_->onQueueInput(1, input({stock(3, 25, 1)}), t0_);
  // ts 1 left every window, ts 20 has not: the batch waits for it.
  EXPECT_EQ(io_.accepted, Tags{});
  EXPECT_EQ(counters_.settled, 1u);
  r_->onQueueInput(2, input({stock(4, 40, 1)}), t0_);
  EXPECT_EQ(io_.accepted, (Tags{0, 1}));
}

TEST_F(PartitionRunnerTest, AMessageThatIsNoEventIsRejectedWithItsCondition) {
  ASSERT_NO_FATAL_FAILURE(start(0));
  PartitionInput bad;
  bad.condition = "amqp:invalid-field";
  bad.description = "no type";
  r_->onQueueInput(7, bad, t0_);
  ASSERT_EQ(io_.rejected.size(), 1u);
  EXPECT_EQ(io_.rejected[0].tag, 7u);
  EXPECT_EQ(io_.rejected[0].condition, "amqp:invalid-field");
  EXPECT_EQ(counters_.rejected, 1u);
  EXPECT_EQ(stats(*r_).held, 0u);
}

TEST_F(PartitionRunnerTest, TheEndOfAStreamClosesEveryWindowAndTheNextStreamStartsAfresh) {
  ASSERT_NO_FATAL_FAILURE(start(1));
  r_->onQueueInput(0, input({stock(1, 1, 10)}), t0_);
  r_->onQueueInput(1, input({stock(2, 2, 11)}), t0_);
  EXPECT_TRUE(io_.composites().empty()) << "the max-delay holds ts 2 back";
  r_->onQueueInput(2, endOfStream(), t0_);
  ASSERT_EQ(io_.composites().size(), 1u);
  EXPECT_EQ(counters_.streams_ended, 1u);
  EXPECT_TRUE(stats(*r_).stream_ended);
  EXPECT_EQ(io_.accepted, Tags{});
  r_->outputDone(io_.composites()[0].seq, true);
  EXPECT_EQ(sorted(io_.accepted), (Tags{0, 1, 2}));

  // A new stream: its events never pair with the last stream's (ts 5 would
  // rise from both)...
  r_->onQueueInput(3, input({stock(3, 5, 50)}), t0_);
  EXPECT_FALSE(stats(*r_).stream_ended);
  EXPECT_EQ(sorted(io_.accepted), (Tags{0, 1, 2})) << "its window needs ts 5";
  r_->onQueueInput(4, endOfStream(), t0_);
  EXPECT_EQ(io_.composites().size(), 1u);
  // ... and its time may start below the last one's without being late.
  r_->onQueueInput(5, input({stock(4, 0, 1)}), t0_);
  r_->onQueueInput(6, endOfStream(), t0_);
  EXPECT_EQ(counters_.late, 0u);
  EXPECT_EQ(counters_.streams_ended, 3u);
  EXPECT_EQ(sorted(io_.accepted), (Tags{0, 1, 2, 3, 4, 5, 6}));
}

TEST_F(PartitionRunnerTest, ANodeTakingOverReplaysTheUnsettledInputsAndRepeatsTheSameComposite) {
  FakePartitionIo first;
  auto a = runner(0, first);
  ASSERT_NE(a, nullptr);
  a->onQueueInput(0, input({stock(1, 1, 10)}), t0_);
  a->onQueueInput(1, input({stock(2, 2, 11)}), t0_);
  ASSERT_EQ(first.composites().size(), 1u);
  // The node dies before the broker accepted its composite: nothing was
  // accepted, so the broker redelivers both inputs to the next node.
  EXPECT_EQ(first.accepted, Tags{});
  a.reset();

  FakePartitionIo second;
  auto b = runner(0, second);
  ASSERT_NE(b, nullptr);
  b->onQueueInput(0, input({stock(1, 1, 10)}, /*redelivered=*/true), t0_);
  b->onQueueInput(1, input({stock(2, 2, 11)}, /*redelivered=*/true), t0_);
  b->onQueueInput(2, input({stock(3, 4, 12)}), t0_);
  EXPECT_EQ(counters_.replayed, 2u);
  // The rebuilt partial match goes on, and the repeated composite carries
  // the id the first node gave it: a consumer drops it as a duplicate.
  std::vector<uint64_t> ids;
  for (const OutputMessage& m : second.composites()) ids.push_back(m.composite->id);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], first.composites()[0].composite->id);
  EXPECT_EQ(sorted(ids), sorted({idOf({1, 2}), idOf({1, 3}), idOf({2, 3})}));
}

// Three composites of three inputs leave in one batch message; the inputs
// wait for the batch, not for a message per composite.
TEST_F(PartitionRunnerTest, CompositesLeaveInOneBatchAndTheirInputsWaitForIt) {
  BatchedPartitionIo& io = batched();
  auto r = runner(0, io);
  r->onQueueInput(0, input({stock(1, 1, 10)}), t0_);
  r->onQueueInput(1, input({stock(2, 2, 11)}), t0_);
  r->onQueueInput(2, input({stock(3, 3, 12)}), t0_);
  r->onQueueInput(3, input({stock(4, 30, 1)}), t0_);  // ts 1-3 leave every window
  EXPECT_TRUE(io.batches.empty()) << "the batch lingers for more composites";
  io.linger();
  ASSERT_EQ(io.batches.size(), 1u);
  EXPECT_EQ(sorted(io.ids(0)), sorted({idOf({1, 2}), idOf({1, 3}), idOf({2, 3})}));
  EXPECT_EQ(io.accepted, Tags{});
  io.answer(0, true, *r);
  EXPECT_EQ(io.accepted, (Tags{0, 1, 2}));
}

// The broker refuses a batch: each of its composites is sent again, in a
// new batch, and the inputs wait until that one is accepted.
TEST_F(PartitionRunnerTest, ARefusedCompositeBatchIsSentAgainAndItsInputsWaitForIt) {
  BatchedPartitionIo& io = batched();
  auto r = runner(0, io);
  r->onQueueInput(0, input({stock(1, 1, 10)}), t0_);
  r->onQueueInput(1, input({stock(2, 2, 11)}), t0_);
  r->onQueueInput(2, input({stock(3, 30, 1)}), t0_);
  io.linger();
  ASSERT_EQ(io.batches.size(), 1u);
  io.answer(0, false, *r);
  io.linger();
  ASSERT_EQ(io.batches.size(), 2u);
  EXPECT_EQ(io.ids(1), std::vector<uint64_t>{idOf({1, 2})});
  EXPECT_EQ(io.accepted, Tags{});
  EXPECT_EQ(stats(*r).unaccepted_outputs, 1u);
  io.answer(1, true, *r);
  EXPECT_EQ(io.accepted, (Tags{0, 1}));
  EXPECT_EQ(stats(*r).unaccepted_outputs, 0u);
}

// A node dies with its batch unanswered; the next replays the inputs and
// its batch carries the same composite id, which a consumer drops as a
// duplicate. The dead runner's batch answers nobody.
TEST_F(PartitionRunnerTest, AReplayedCompositeInABatchCarriesTheSameId) {
  BatchedPartitionIo& io = batched();
  auto a = runner(0, io);
  a->onQueueInput(0, input({stock(1, 1, 10)}), t0_);
  a->onQueueInput(1, input({stock(2, 2, 11)}), t0_);
  io.linger();
  a.reset();
  io.forget();

  auto b = runner(0, io);
  b->onQueueInput(0, input({stock(1, 1, 10)}, /*redelivered=*/true), t0_);
  b->onQueueInput(1, input({stock(2, 2, 11)}, /*redelivered=*/true), t0_);
  b->onQueueInput(2, input({stock(3, 30, 1)}), t0_);
  io.linger();
  ASSERT_EQ(io.batches.size(), 2u);
  EXPECT_EQ(io.ids(0), std::vector<uint64_t>{idOf({1, 2})});
  EXPECT_EQ(io.ids(1), io.ids(0));
  io.answer(0, true, *b);
  EXPECT_EQ(io.accepted, Tags{}) << "the batch of a runner gone answers nobody";
  io.answer(1, true, *b);
  EXPECT_EQ(io.accepted, (Tags{0, 1}));
}

TEST_F(PartitionRunnerTest, HoldingMaxUnsettledMessagesIsCounted) {
  spec_.max_unsettled = 2;
  ASSERT_NO_FATAL_FAILURE(start(0));
  r_->onQueueInput(0, input({stock(1, 1, 1)}), t0_);
  EXPECT_EQ(counters_.window_full, 0u);
  r_->onQueueInput(1, input({stock(2, 2, 1)}), t0_);
  EXPECT_EQ(counters_.window_full, 1u);
}

TEST_F(PartitionRunnerTest, StreamInputMovesTheLeaseToTheOldestOffsetAWindowHolds) {
  ASSERT_NO_FATAL_FAILURE(start(0, LeaseMark{100, 102}));
  r_->holdLeaseToken(7, "");  // the token the node took the partition with
  r_->onStreamInput(at(100, stock(1, 1, 10)), t0_);
  r_->onStreamInput(at(101, stock(2, 2, 9)), t0_);
  r_->onStreamInput(at(102, stock(3, 30, 1)), t0_);
  EXPECT_EQ(counters_.replayed, 2u) << "offsets below 102 were read by the previous owner";
  EXPECT_EQ(io_.accepted, Tags{}) << "a stream's messages are never accepted one by one";
  EXPECT_EQ(r_->readTo(), 103u);
  PartitionStats s = stats(*r_);
  EXPECT_EQ(s.resume_from, 102u);  // 100 and 101 left every window
  EXPECT_EQ(s.lease_offset, 100u);

  r_->tick(t0_, wall0_);
  ASSERT_EQ(io_.tokens_sent.size(), 1u);
  EXPECT_EQ(io_.tokens_sent[0].resume_from, 102u);
  EXPECT_EQ(io_.tokens_sent[0].read_to, 103u);
  r_->tick(t0_, wall0_);
  EXPECT_EQ(io_.tokens_sent.size(), 1u) << "one token on its way at a time";

  // The new token comes back to its owner before the broker's answer.
  r_->holdLeaseToken(8, "token-1");
  r_->leaseTokenDone("token-1", true);
  EXPECT_EQ(io_.tokens_settled, Tags{7});
  EXPECT_EQ(stats(*r_).lease_offset, 102u);
  EXPECT_EQ(counters_.checkpoints, 1u);
  r_->tick(t0_, wall0_);
  EXPECT_EQ(io_.tokens_sent.size(), 1u) << "nothing new to say";

  r_->onStreamInput(at(103, stock(4, 50, 1)), t0_);
  r_->tick(t0_, wall0_);
  ASSERT_EQ(io_.tokens_sent.size(), 2u);
  EXPECT_EQ(io_.tokens_sent[1].resume_from, 103u);
  r_->leaseTokenDone("token-2", false);  // refused: offered again
  EXPECT_EQ(io_.tokens_settled, Tags{7});
  r_->tick(t0_, wall0_);
  ASSERT_EQ(io_.tokens_sent.size(), 3u);
  EXPECT_EQ(io_.tokens_sent[2].resume_from, 103u);
}

TEST_F(PartitionRunnerTest, StreamInputWaitsForTheLeaseToTakeAToken) {
  io_.lease_open = false;
  ASSERT_NO_FATAL_FAILURE(start(0, LeaseMark{0, 0}));
  r_->onStreamInput(at(0, stock(1, 1, 1)), t0_);
  r_->onStreamInput(at(1, stock(2, 20, 1)), t0_);
  r_->tick(t0_, wall0_);
  EXPECT_TRUE(io_.tokens_sent.empty());
  io_.lease_open = true;
  r_->tick(t0_, wall0_);
  ASSERT_EQ(io_.tokens_sent.size(), 1u);
  EXPECT_EQ(io_.tokens_sent[0].resume_from, 1u);
}

TEST_F(PartitionRunnerTest, StreamMessagesAheadOfTheirPublishersGapWaitForIt) {
  ASSERT_NO_FATAL_FAILURE(start(0, LeaseMark{10, 10}));
  // The broker stored the publisher's third message (ts 3) before its
  // second (ts 2). Read in stream order with max-delay 0, ts 2 would be late.
  r_->onStreamInput(at(10, stock(1, 1, 10), StreamSequencer::Tag{9, 0}), t0_);
  r_->onStreamInput(at(11, stock(3, 3, 12), StreamSequencer::Tag{9, 2}), t0_);
  EXPECT_EQ(counters_.out_of_order, 1u);
  EXPECT_EQ(io_.composites().size(), 0u) << "ts 3 waits for ts 2";
  r_->onStreamInput(at(12, stock(2, 2, 11), StreamSequencer::Tag{9, 1}), t0_);
  EXPECT_EQ(counters_.late, 0u);
  std::vector<std::string> matches;
  for (const OutputMessage& m : io_.composites()) matches.push_back(m.composite->match_ts);
  std::sort(matches.begin(), matches.end());
  EXPECT_EQ(matches, (std::vector<std::string>{"[1,2]", "[1,3]", "[2,3]"}));
}

TEST_F(PartitionRunnerTest, AGapWaitedOnTooLongIsGivenUp) {
  ASSERT_NO_FATAL_FAILURE(start(0, LeaseMark{10, 10}));
  r_->onStreamInput(at(10, stock(1, 1, 10), StreamSequencer::Tag{9, 0}), t0_);
  r_->onStreamInput(at(11, stock(3, 3, 12), StreamSequencer::Tag{9, 2}), t0_);
  r_->tick(t0_ + milliseconds(1000), wall0_);
  EXPECT_TRUE(io_.composites().empty());
  r_->tick(t0_ + std::chrono::minutes(5), wall0_);
  EXPECT_EQ(counters_.sequence_gaps, 1u);
  ASSERT_EQ(io_.composites().size(), 1u);
  EXPECT_EQ(io_.composites()[0].composite->match_ts, "[1,3]");
}

TEST_F(PartitionRunnerTest, OffsetsTheStreamNoLongerHoldsAreCountedAsRetentionGaps) {
  ASSERT_NO_FATAL_FAILURE(start(0, LeaseMark{100, 100}));
  r_->onStreamInput(at(105, stock(1, 1, 1)), t0_);
  EXPECT_EQ(counters_.retention_gaps, 5u);
  PartitionInput unstamped = input({stock(2, 2, 1)});
  r_->onStreamInput(unstamped, t0_);
  EXPECT_EQ(counters_.rejected, 1u);
  EXPECT_EQ(r_->readTo(), 106u);
}

TEST_F(PartitionRunnerTest, AStreamMessageThatIsNoEventStopsHoldingTheLeaseBack) {
  ASSERT_NO_FATAL_FAILURE(start(0, LeaseMark{0, 0}));
  PartitionInput bad;
  bad.condition = "amqp:decode-error";
  bad.offset = 0;
  r_->onStreamInput(bad, t0_);
  EXPECT_TRUE(io_.rejected.empty()) << "a stream keeps its messages";
  EXPECT_EQ(counters_.rejected, 1u);
  EXPECT_EQ(stats(*r_).resume_from, 1u);
}

using TsList = std::vector<std::string>;

// Two stocks whose price never rises and no later event: the partition goes
// quiet, and after the idle timeout its time follows the wall clock, which
// closes each window once it passes it by the max-delay — not before — and
// settles the input once the composite is accepted.
TEST_F(PartitionRunnerTest, ATrailingNegationFiresOnceTheQuietPartitionFollowsTheWallClock) {
  runFlat(pattern::TimeUnit::kMilliseconds);
  ASSERT_NO_FATAL_FAILURE(start(100));
  r_->onQueueInput(0, input({stock(1, kT, 10)}), t0_);
  r_->onQueueInput(1, input({stock(2, kT + 100, 9)}), t0_);
  r_->tick(t0_ + milliseconds(1500), wallAt(kT + 5000));
  EXPECT_TRUE(io_.composites().empty()) << "not idle yet: the time stays at the newest event";
  EXPECT_EQ(stats(*r_).watermark, kT);

  r_->tick(t0_ + milliseconds(2001), wallAt(kT + 1050));
  EXPECT_EQ(stats(*r_).watermark, kT + 950);
  EXPECT_TRUE(io_.composites().empty()) << "the first window closes at " << kT + 1000;

  r_->tick(t0_ + milliseconds(2200), wallAt(kT + 1150));
  EXPECT_EQ(compositesTs(), TsList{"[" + std::to_string(kT) + "]"});
  EXPECT_TRUE(io_.accepted.empty()) << "held until its composite is accepted";
  r_->outputDone(io_.composites()[0].seq, true);
  EXPECT_EQ(io_.accepted, Tags{0});

  r_->tick(t0_ + milliseconds(2400), wallAt(kT + 1300));
  EXPECT_EQ(compositesTs(),
            (TsList{"[" + std::to_string(kT) + "]", "[" + std::to_string(kT + 100) + "]"}));
  r_->outputDone(io_.composites()[1].seq, true);
  EXPECT_EQ(io_.accepted, (Tags{0, 1}));
  EXPECT_EQ(stats(*r_).held, 0u);
}

TEST_F(PartitionRunnerTest, WithoutATimeUnitAQuietPartitionKeepsItsTime) {
  runFlat(pattern::TimeUnit::kNone);
  ASSERT_NO_FATAL_FAILURE(start(100));
  r_->onQueueInput(0, input({stock(1, kT, 10)}), t0_);
  r_->tick(t0_ + std::chrono::hours(1), wallAt(kT + 3'600'000));
  EXPECT_TRUE(io_.composites().empty());
  EXPECT_EQ(stats(*r_).watermark, kT - 100);
  EXPECT_EQ(stats(*r_).held, 1u);
  // A later event moves it as ever: the watermark it makes (kT + 1100)
  // closes the window, though the max-delay still holds that event back.
  r_->onQueueInput(1, input({stock(2, kT + 1200, 1)}), t0_ + std::chrono::hours(1));
  EXPECT_EQ(compositesTs(), TsList{"[" + std::to_string(kT) + "]"});
}

// Time that followed the wall clock stays: an event more than the max-delay
// behind it is late (re-published, counted), one within it is not, and a
// wall clock set back moves nothing.
TEST_F(PartitionRunnerTest, AnEventBehindTheWallClocksTimeIsLate) {
  runFlat(pattern::TimeUnit::kMilliseconds);
  ASSERT_NO_FATAL_FAILURE(start(100));
  r_->onQueueInput(0, input({stock(1, kT, 10)}), t0_);
  r_->tick(t0_ + milliseconds(2001), wallAt(kT + 5000));
  EXPECT_EQ(stats(*r_).watermark, kT + 4900);
  EXPECT_EQ(io_.composites().size(), 1u);

  r_->tick(t0_ + milliseconds(2500), wallAt(kT + 3000));
  EXPECT_EQ(stats(*r_).watermark, kT + 4900) << "never back";

  r_->onQueueInput(1, input({stock(2, kT + 4800, 20)}), t0_ + milliseconds(2600));
  EXPECT_EQ(counters_.late, 1u);
  ASSERT_EQ(io_.sent.size(), 2u);
  EXPECT_FALSE(io_.sent[1].composite);
  EXPECT_EQ(io_.sent[1].event->ts(), kT + 4800);
  r_->onQueueInput(2, input({stock(3, kT + 4950, 20)}), t0_ + milliseconds(2600));
  EXPECT_EQ(counters_.late, 1u) << "within the max-delay of the wall clock's time";
}

// While a stream's messages wait for a publisher's missing one, the
// partition's time waits too: the missing one may precede them.
TEST_F(PartitionRunnerTest, AStreamWaitingForAPublishersGapKeepsItsTime) {
  runFlat(pattern::TimeUnit::kMilliseconds);
  ASSERT_NO_FATAL_FAILURE(start(0, LeaseMark{10, 10}));
  r_->onStreamInput(at(10, stock(1, kT, 10), StreamSequencer::Tag{9, 0}), t0_);
  r_->onStreamInput(at(11, stock(3, kT + 300, 5), StreamSequencer::Tag{9, 2}), t0_);
  r_->tick(t0_ + milliseconds(5000), wallAt(kT + 10'000));
  EXPECT_EQ(stats(*r_).watermark, kT);
  EXPECT_TRUE(io_.composites().empty());
  r_->onStreamInput(at(12, stock(2, kT + 200, 9), StreamSequencer::Tag{9, 1}),
                    t0_ + milliseconds(5000));
  EXPECT_EQ(counters_.late, 0u);
  r_->tick(t0_ + milliseconds(7001), wallAt(kT + 10'000));
  EXPECT_EQ(compositesTs().size(), 3u);
}

}  // namespace
}  // namespace cepbus::services::cluster
