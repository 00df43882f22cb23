#include "services/cluster/output_sender.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/services/cluster/output_test_util.h"

namespace cepbus::services::cluster {
namespace {

using std::chrono::milliseconds;
using testing::composite;
using testing::late;

// The node as the sender sees it: links that record what is sent on them,
// a timer that records when it is asked for, and runners that record their
// answers and, as PartitionRunner does, send a refused output again.
class FakeIo final : public OutputSender::Io {
 public:
  struct Sent {
    uint64_t batch;
    std::string routing_key;
    bool late;
    proton::message message;
  };
  struct Answer {
    uint32_t partition;
    uint64_t seq;
    bool accepted;
    bool operator==(const Answer&) const = default;
  };

  bool send(uint64_t batch, const std::string& routing_key, bool late,
            const proton::message& message) override {
    if (!linked) {
      unlinked.push_back(batch);
      return false;
    }
    sent.push_back(Sent{batch, routing_key, late, message});
    return true;
  }
  void wakeAt(OutputSender::TimePoint due) override { wakes.push_back(due); }
  void outputDone(uint32_t partition, uint64_t seq, bool accepted) override {
    answers.push_back(Answer{partition, seq, accepted});
    if (accepted || sender == nullptr) return;
    sender->send(partition, outputs.at({partition, seq}), now);
  }

  // What a runner published, kept to send again when refused.
  void publish(uint32_t partition, const OutputMessage& output) {
    outputs[{partition, output.seq}] = output;
    sender->send(partition, output, now);
  }

  OutputSender* sender = nullptr;
  OutputSender::TimePoint now{};
  bool linked = true;
  std::vector<Sent> sent;
  std::vector<uint64_t> unlinked;  // batches offered with no link to go on
  std::vector<OutputSender::TimePoint> wakes;
  std::vector<Answer> answers;
  std::map<std::pair<uint32_t, uint64_t>, OutputMessage> outputs;
};

class OutputSenderTest : public ::testing::Test {
 protected:
  OutputSenderTest() {
    spec_.name = "c";
    spec_.node = "n1";
    spec_.partitions = 4;
    spec_.output.batch_events = 2;
    spec_.output.linger_ms = 5;
    queries_.push_back(testing::query("a", "equal"));
    queries_.push_back(testing::query("c", "rises"));
  }

  OutputSender& sender() {
    sender_.emplace(spec_, queries_, io_);
    io_.sender = &*sender_;
    return *sender_;
  }

  ClusterSpec spec_;
  std::vector<CompiledQuery> queries_;
  FakeIo io_;
  std::optional<OutputSender> sender_;
  const OutputSender::TimePoint t0_{};
};

TEST_F(OutputSenderTest, AFullBatchGoesAtOnceOnItsRoutingKeysLink) {
  sender();
  io_.publish(0, composite(1, "a", "equal", 11));
  io_.publish(3, composite(1, "c", "rises", 12));
  EXPECT_TRUE(io_.sent.empty());
  io_.publish(1, composite(1, "a", "equal", 13));
  ASSERT_EQ(io_.sent.size(), 1u);
  EXPECT_EQ(io_.sent[0].routing_key, "equal");
  EXPECT_FALSE(io_.sent[0].late);
  EXPECT_EQ(io_.sent[0].message.subject(), kCompositeBatchSubject);
  EXPECT_EQ(testing::compositeIds(io_.sent[0].message), (std::vector<uint64_t>{11, 13}));
}

// The timer is asked for once per deadline, and a batch goes when it comes.
TEST_F(OutputSenderTest, ALingeringBatchGoesWhenTheTimeComes) {
  OutputSender& s = sender();
  io_.publish(0, composite(1, "a", "equal", 11));
  ASSERT_EQ(io_.wakes, (std::vector{t0_ + milliseconds(5)}));
  io_.now = t0_ + milliseconds(1);
  io_.publish(2, late(1, 77));
  EXPECT_EQ(io_.wakes.size(), 1u) << "one timer at a time";

  EXPECT_FALSE(s.lingered(t0_ + milliseconds(4))) << "early: nothing to send";
  EXPECT_TRUE(io_.sent.empty());
  ASSERT_EQ(io_.wakes.size(), 2u) << "asked again";
  EXPECT_EQ(io_.wakes[1], t0_ + milliseconds(5));

  EXPECT_TRUE(s.lingered(t0_ + milliseconds(5)));
  ASSERT_EQ(io_.sent.size(), 1u);
  EXPECT_EQ(io_.sent[0].routing_key, "equal");
  ASSERT_EQ(io_.wakes.size(), 3u) << "the late event's batch still lingers";
  EXPECT_EQ(io_.wakes[2], t0_ + milliseconds(6));

  EXPECT_TRUE(s.lingered(t0_ + milliseconds(6)));
  ASSERT_EQ(io_.sent.size(), 2u);
  EXPECT_TRUE(io_.sent[1].late);
  EXPECT_EQ(io_.sent[1].message.properties().get("late"), proton::value(true));
  EXPECT_EQ(io_.wakes.size(), 3u) << "nothing left to wait for";
}

// The rule the inputs wait on: each output of a confirmed batch is
// accepted, once, for the runner that published it.
TEST_F(OutputSenderTest, AConfirmedBatchAnswersEachOutputToItsRunner) {
  OutputSender& s = sender();
  io_.publish(0, composite(4, "a", "equal", 11));
  io_.publish(3, composite(9, "a", "equal", 12));
  ASSERT_EQ(io_.sent.size(), 1u);
  EXPECT_TRUE(io_.answers.empty()) << "nothing is answered before the broker";
  s.answered(io_.sent[0].batch, true);
  EXPECT_EQ(io_.answers, (std::vector<FakeIo::Answer>{{0, 4, true}, {3, 9, true}}));
  s.answered(io_.sent[0].batch, true);
  EXPECT_EQ(io_.answers.size(), 2u) << "a settle after the accept answers nothing";
}

TEST_F(OutputSenderTest, ARefusedBatchsOutputsGoAgainInALaterBatch) {
  OutputSender& s = sender();
  io_.publish(0, composite(1, "a", "equal", 11));
  io_.publish(1, composite(2, "a", "equal", 12));
  ASSERT_EQ(io_.sent.size(), 1u);
  s.answered(io_.sent[0].batch, false);
  EXPECT_EQ(io_.answers, (std::vector<FakeIo::Answer>{{0, 1, false}, {1, 2, false}}));
  ASSERT_EQ(io_.sent.size(), 2u) << "the runners sent both again";
  EXPECT_NE(io_.sent[1].batch, io_.sent[0].batch);
  EXPECT_EQ(testing::compositeIds(io_.sent[1].message), (std::vector<uint64_t>{11, 12}));
  s.answered(io_.sent[1].batch, true);
  EXPECT_EQ(io_.answers.back(), (FakeIo::Answer{1, 2, true}));
}

// No link: the connection is going, and the runners with it.
TEST_F(OutputSenderTest, ABatchWithNoLinkIsDroppedUnanswered) {
  OutputSender& s = sender();
  io_.linked = false;
  io_.publish(0, composite(1, "a", "equal", 11));
  io_.publish(0, composite(2, "a", "equal", 12));
  ASSERT_EQ(io_.unlinked.size(), 1u);
  EXPECT_TRUE(io_.answers.empty()) << "nobody is told: nothing is sent again";
  s.answered(io_.unlinked[0], true);
  EXPECT_TRUE(io_.answers.empty());
}

TEST_F(OutputSenderTest, AForgottenRunnersOutputsAreNotAnswered) {
  OutputSender& s = sender();
  io_.publish(0, composite(1, "a", "equal", 11));
  io_.publish(1, composite(1, "a", "equal", 12));
  s.forget(0);
  s.answered(io_.sent.at(0).batch, false);
  EXPECT_EQ(io_.answers, (std::vector<FakeIo::Answer>{{1, 1, false}}));
}

TEST_F(OutputSenderTest, AfterTheConnectionWentNoBatchIsAnswered) {
  OutputSender& s = sender();
  io_.publish(0, composite(1, "a", "equal", 11));
  io_.publish(1, composite(1, "a", "equal", 12));
  s.clear();
  s.answered(io_.sent.at(0).batch, true);
  EXPECT_TRUE(io_.answers.empty());
}

}  // namespace
}  // namespace cepbus::services::cluster
