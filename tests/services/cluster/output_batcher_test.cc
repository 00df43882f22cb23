#include "services/cluster/output_batcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <proton/message_id.hpp>
#include <string>
#include <vector>

#include "services/cluster/event_batch.h"
#include "tests/services/cluster/output_test_util.h"

namespace cepbus::services::cluster {
namespace {

using std::chrono::milliseconds;
using testing::composite;
using testing::late;

class OutputBatcherTest : public ::testing::Test {
 protected:
  OutputBatcherTest() {
    spec_.name = "c";
    spec_.node = "n1";
    spec_.partitions = 4;
    queries_.push_back(testing::query("a", "equal"));
    queries_.push_back(testing::query("b", "equal"));  // shares a's routing key
    queries_.push_back(testing::query("c", "rises"));
  }

  static std::vector<nlohmann::json> lines(const proton::message& m) {
    std::vector<nlohmann::json> out;
    std::string body = proton::get<std::string>(m.body());
    for (size_t at = 0; at < body.size();) {
      const size_t end = body.find('\n', at);
      out.push_back(nlohmann::json::parse(body.substr(at, end - at)));
      at = end + 1;
    }
    return out;
  }

  ClusterSpec spec_;
  std::vector<CompiledQuery> queries_;
  const OutputBatcher::TimePoint t0_{};
};

TEST_F(OutputBatcherTest, CompositesOfEveryPartitionShareTheirRoutingKeysBatch) {
  spec_.output.batch_events = 3;
  OutputBatcher batcher(spec_, queries_);
  EXPECT_TRUE(batcher.add(0, composite(1, "a", "equal", 11), t0_).empty());
  EXPECT_TRUE(batcher.add(3, composite(1, "c", "rises", 12), t0_).empty());
  EXPECT_TRUE(batcher.add(1, composite(1, "b", "equal", 13), t0_).empty());
  const std::vector<OutputBatcher::Batch> full =
      batcher.add(0, composite(2, "a", "equal", 14), t0_);
  ASSERT_EQ(full.size(), 1u);
  EXPECT_EQ(batcher.routingKey(full[0]), "equal");
  EXPECT_FALSE(batcher.late(full[0]));

  proton::message m;
  batcher.encode(full[0], m);
  EXPECT_EQ(m.subject(), kCompositeBatchSubject);
  const std::vector<nlohmann::json> got = lines(m);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], nlohmann::json::parse(
                        R"({"id":11,"query":"a","match_ts":[5,7],"partition":0,"node":"n1",
                            "event":{"type":"Equal","ts":7,"attrs":{"price":10.5}}})"));
  EXPECT_EQ(got[1].at("id"), 13);
  EXPECT_EQ(got[1].at("partition"), 1);
  EXPECT_EQ(got[2].at("id"), 14);

  // The other routing key's batch closes on its linger.
  EXPECT_EQ(batcher.nextDeadline(), t0_ + milliseconds(5));
  const std::vector<OutputBatcher::Batch> lingered = batcher.expire(t0_ + milliseconds(5));
  ASSERT_EQ(lingered.size(), 1u);
  EXPECT_EQ(batcher.routingKey(lingered[0]), "rises");

  const std::vector<OutputBatcher::Ref> refs = batcher.confirmed(full[0].id);
  ASSERT_EQ(refs.size(), 3u);
  EXPECT_EQ(refs[0].partition, 0u);
  EXPECT_EQ(refs[0].seq, 1u);
  EXPECT_EQ(refs[2].partition, 0u);
  EXPECT_EQ(refs[2].seq, 2u);
  EXPECT_TRUE(batcher.confirmed(full[0].id).empty()) << "answered once";
}

TEST_F(OutputBatcherTest, LateEventsGoAsAnEventBatchMarkedLate) {
  OutputBatcher batcher(spec_, queries_);
  batcher.add(2, late(4, 77), t0_);
  const std::vector<OutputBatcher::Batch> closed = batcher.expire(t0_ + milliseconds(5));
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_TRUE(batcher.late(closed[0]));
  EXPECT_EQ(batcher.routingKey(closed[0]), "late");
  proton::message m;
  batcher.encode(closed[0], m);
  EXPECT_EQ(m.properties().get("late"), proton::value(true));
  const MappedBatch events = eventsFromBatchMessage(m);
  ASSERT_EQ(events.events.size(), 1u) << events.description;
  EXPECT_EQ(events.events[0]->id(), 77u);
}

TEST_F(OutputBatcherTest, ABatchClosesBeforeItsBytesWouldPassTheBound) {
  OutputBatcher probe(spec_, queries_);
  probe.add(0, composite(1, "a", "equal", 11), t0_);
  const uint64_t line = probe.expire(t0_ + milliseconds(5)).at(0).bytes;
  spec_.output.batch_bytes = 2 * line;
  OutputBatcher batcher(spec_, queries_);
  EXPECT_TRUE(batcher.add(0, composite(1, "a", "equal", 11), t0_).empty());
  EXPECT_EQ(batcher.add(0, composite(2, "a", "equal", 12), t0_).size(), 1u);
}

TEST_F(OutputBatcherTest, ARefusedBatchAnswersEachOutputAsRefused) {
  OutputBatcher batcher(spec_, queries_);
  batcher.add(0, composite(1, "a", "equal", 11), t0_);
  batcher.add(1, composite(5, "a", "equal", 12), t0_);
  const std::vector<OutputBatcher::Batch> closed = batcher.expire(t0_ + milliseconds(5));
  ASSERT_EQ(closed.size(), 1u);
  const std::vector<OutputBatcher::Ref> refs = batcher.refused(closed[0].id);
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs[1].partition, 1u);
  EXPECT_EQ(refs[1].seq, 5u);
}

// A partition's runner is gone (hand-over, takeover elsewhere): the
// answers to its outputs concern nobody; other partitions' still count.
TEST_F(OutputBatcherTest, AForgottenPartitionsOutputsAreNotAnswered) {
  OutputBatcher batcher(spec_, queries_);
  batcher.add(0, composite(1, "a", "equal", 11), t0_);
  batcher.add(1, composite(1, "a", "equal", 12), t0_);
  batcher.forget(0);
  const std::vector<OutputBatcher::Batch> closed = batcher.expire(t0_ + milliseconds(5));
  ASSERT_EQ(closed.size(), 1u);
  const std::vector<OutputBatcher::Ref> refs = batcher.confirmed(closed[0].id);
  ASSERT_EQ(refs.size(), 1u);
  EXPECT_EQ(refs[0].partition, 1u);
}

// batch-events="1": one output per message, in the plain event mapping
// with the composite id as message-id, for subscribers that need it.
TEST_F(OutputBatcherTest, OneOutputPerMessageKeepsThePlainMapping) {
  spec_.output.batch_events = 1;
  OutputBatcher batcher(spec_, queries_);
  const std::vector<OutputBatcher::Batch> closed =
      batcher.add(2, composite(1, "c", "rises", 99), t0_);
  ASSERT_EQ(closed.size(), 1u);
  proton::message m;
  batcher.encode(closed[0], m);
  EXPECT_EQ(m.id(), proton::message_id(uint64_t{99}));
  EXPECT_NE(m.subject(), kCompositeBatchSubject);
  EXPECT_EQ(m.properties().get("query"), proton::value(std::string("c")));
  EXPECT_EQ(m.properties().get("match-ts"), proton::value(std::string("[5,7]")));
  EXPECT_EQ(m.properties().get("partition"), proton::value(uint32_t{2}));
  EXPECT_EQ(m.properties().get("node"), proton::value(std::string("n1")));

  const std::vector<OutputBatcher::Batch> alone = batcher.add(2, late(2, 5), t0_);
  ASSERT_EQ(alone.size(), 1u);
  batcher.encode(alone[0], m);
  EXPECT_EQ(m.properties().get("late"), proton::value(true));
  EXPECT_NE(m.subject(), kEventBatchSubject);
}

}  // namespace
}  // namespace cepbus::services::cluster
