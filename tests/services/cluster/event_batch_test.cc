#include "services/cluster/event_batch.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "bus/core/event_json.h"
#include "bus/core/wire_names.h"
#include "services/cluster/cluster_publisher.h"

namespace cepbus::services::cluster {
namespace {

EventPtr event(const std::string& line) {
  Result<EventPtr> e = decodeEvent(line);
  EXPECT_TRUE(e) << line;
  return e ? std::move(e).value() : nullptr;
}

TEST(EventBatchTest, RoundTripsEventsWithTheirIdsInOrder) {
  const std::vector<EventPtr> events = {
      event(R"({"type":"Stock","ts":1,"id":11,"attrs":{"price":2.5,"symbol":"IBM"}})"),
      event(R"({"type":"Stock","ts":2,"id":12,"prob":0.5,"key":"k","attrs":{"n":3}})")};
  proton::message m;
  messageFromEventBatch(events, m);
  EXPECT_EQ(m.subject(), kEventBatchSubject);
  const MappedBatch batch = eventsFromBatchMessage(m);
  ASSERT_EQ(batch.events.size(), 2u) << batch.description;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(encodeEvent(*batch.events[i], EventFormat::kFull),
              encodeEvent(*events[i], EventFormat::kFull));
  }
  EXPECT_EQ(batch.events[1]->id(), events[1]->id());
}

// Cluster input is a door for names too: a batch read from a partition's
// queue holds the new names its events carry only while they live. (Read
// on a thread of its own, whose decoder, with the names it keeps for
// reuse, goes when the thread ends.)
TEST(EventBatchTest, TheNewNamesOfABatchAreHeldWhileItsEventsLiveAndGivenBack) {
  std::string lines;
  for (int i = 0; i < 100; ++i) {
    const std::string n = std::to_string(i);
    lines += R"({"type":"BatchNameType)" + n + R"(","ts":1,"attrs":{"batch_name_)" + n +
             R"(":1}})" + "\n";
  }
  proton::message m;
  m.subject(kEventBatchSubject);
  m.body(lines);
  const WireNameStats before = wireNameStats();
  uint64_t held_while_read = 0;
  std::thread reader([&] {
    const MappedBatch batch = eventsFromBatchMessage(m);
    EXPECT_EQ(batch.events.size(), 100u) << batch.description;
    held_while_read = wireNameStats().held;
  });
  reader.join();
  EXPECT_GE(held_while_read, before.held + 200);  // a type and an attribute each
  EXPECT_LE(wireNameStats().held, before.held);  // given back (kept idle, for reuse)
}

TEST(EventBatchTest, ABadLineRefusesTheWholeBatchNamingTheLine) {
  proton::message m;
  m.subject(kEventBatchSubject);
  m.body(std::string(R"({"type":"A","ts":1})"
                     "\n\n"
                     R"({"type":"A"})"
                     "\n"));
  const MappedBatch batch = eventsFromBatchMessage(m);
  EXPECT_TRUE(batch.events.empty());
  EXPECT_EQ(batch.condition, amqp::kInvalidField);
  EXPECT_NE(batch.description.find("batch line 3: "), std::string::npos) << batch.description;
}

TEST(EventBatchTest, RefusesABodyThatIsNotAStringAndAnEmptyBatch) {
  proton::message m;
  m.subject(kEventBatchSubject);
  m.body(int64_t{5});
  EXPECT_EQ(eventsFromBatchMessage(m).condition, amqp::kDecodeError);
  m.body(std::string("\n\n"));
  const MappedBatch empty = eventsFromBatchMessage(m);
  EXPECT_TRUE(empty.events.empty());
  EXPECT_EQ(empty.condition, amqp::kInvalidField);
}

std::vector<size_t> eventsOf(const MessagePlan& m) { return m.events; }

// The plan of events whose partitions are `partition_of`.
std::vector<MessagePlan> planOf(const std::vector<uint32_t>& partition_of, uint32_t partitions,
                                const PublishOptions& options) {
  std::vector<EventPtr> events;
  for (size_t i = 0; i < partition_of.size(); ++i) {
    events.push_back(
        event(R"({"type":"Stock","ts":)" + std::to_string(i) + R"(,"attrs":{"price":1}})"));
  }
  return planMessages(events, partition_of, partitions, options);
}

TEST(PlanMessagesTest, BatchesEachPartitionInPublishOrderUpToTheBatchSize) {
  PublishOptions options;
  options.batch = 2;
  options.end_of_stream = true;
  const std::vector<MessagePlan> plan = planOf({0, 1, 0, 0, 1, 0, 0}, 2, options);
  // Closed when full, then what is open at the end (oldest first), then markers.
  ASSERT_EQ(plan.size(), 6u);
  EXPECT_EQ(eventsOf(plan[0]), (std::vector<size_t>{0, 2}));
  EXPECT_EQ(eventsOf(plan[1]), (std::vector<size_t>{1, 4}));
  EXPECT_EQ(eventsOf(plan[2]), (std::vector<size_t>{3, 5}));
  EXPECT_EQ(eventsOf(plan[3]), (std::vector<size_t>{6}));
  EXPECT_EQ(plan[3].partition, 0u);
  EXPECT_EQ(plan[3].due, 6u);
  EXPECT_TRUE(plan[4].events.empty());
  EXPECT_TRUE(plan[5].events.empty());
  EXPECT_EQ(plan[5].partition, 1u);
}

TEST(PlanMessagesTest, BatchOfOneIsOneMessagePerEvent) {
  PublishOptions options;
  options.batch = 1;
  const std::vector<MessagePlan> plan = planOf({2, 0, 1}, 3, options);
  ASSERT_EQ(plan.size(), 3u);
  for (size_t i = 0; i < plan.size(); ++i) EXPECT_EQ(eventsOf(plan[i]), (std::vector<size_t>{i}));
}

TEST(PlanMessagesTest, WithARateABatchLingersNoLongerThanTheLingerInTheSchedule) {
  PublishOptions options;
  options.batch = 100;
  options.rate = 1000;  // 10 ms linger: 10 events of the schedule
  options.linger_ms = 10;
  std::vector<uint32_t> partition_of(25, 1);
  partition_of[0] = 0;  // partition 0 gets one event, then nothing for a long while
  const std::vector<MessagePlan> plan = planOf(partition_of, 2, options);
  ASSERT_GE(plan.size(), 3u);
  EXPECT_EQ(eventsOf(plan[0]), (std::vector<size_t>{0}));
  EXPECT_EQ(plan[0].partition, 0u);
  EXPECT_EQ(plan[1].events.front(), 1u);
  EXPECT_LE(plan[1].events.size(), 10u);
  size_t total = 0;
  for (const MessagePlan& m : plan) total += m.events.size();
  EXPECT_EQ(total, 25u);
}

TEST(PlanMessagesTest, ABatchClosesBeforeItsBodyWouldPassBatchBytes) {
  PublishOptions options;
  options.batch = 100;
  // Each event's line is the same length: room for exactly two.
  const size_t line =
      encodeEvent(*event(R"({"type":"Stock","ts":0,"attrs":{"price":1}})"), EventFormat::kFull)
          .size() +
      1;
  options.batch_bytes = 2 * line + 1;
  const std::vector<MessagePlan> plan = planOf({0, 0, 0, 0, 0}, 1, options);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(eventsOf(plan[0]), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(eventsOf(plan[1]), (std::vector<size_t>{2, 3}));
  EXPECT_EQ(eventsOf(plan[2]), (std::vector<size_t>{4}));
}

}  // namespace
}  // namespace cepbus::services::cluster
