#include "flows/st_flow.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

#include "tests/flows/flow_test_util.h"

namespace cepbus::flows {
namespace {

using testing::inOnly;
using testing::makeEvent;
using testing::OutcomeRecorder;
using testing::RecordingTarget;
using Behavior = RecordingTarget::Behavior;

class StFlowTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(flow_.start().isOk()); }

  StFlow flow_;
  RecordingTarget a_{"a"}, b_{"b"}, c_{"c"};
  std::vector<DeliveryTarget*> all_{&a_, &b_, &c_};
};

TEST_F(StFlowTest, DeliversToEveryTargetOnTheCallersThread) {
  EventPtr event = makeEvent(1);
  SendOutcome out = flow_.send(inOnly(event), all_);
  EXPECT_TRUE(out.status.isOk());
  EXPECT_EQ(out.targets, 3u);
  EXPECT_EQ(out.delivered, 3u);
  EXPECT_EQ(out.queued + out.rejected + out.failed, 0u);
  for (RecordingTarget* t : {&a_, &b_, &c_}) {
    EXPECT_EQ(t->ids(), std::vector<EventId>{event->id()});
    EXPECT_EQ(t->lastThread(), std::this_thread::get_id());
  }
  FlowMetricsSnapshot m = flow_.metrics();
  EXPECT_EQ(m.name, "st");
  EXPECT_EQ(m.sent, 1u);
  EXPECT_EQ(m.delivered, 3u);
  EXPECT_EQ(m.failed, 0u);
}

// Straight through, every delivery runs inside the publisher's send(): each
// gets its hold, and none is journaled.
TEST_F(StFlowTest, EveryDeliveryGetsThePublishersWakeHold) {
  WakeHold hold;
  ASSERT_EQ(flow_.send(inOnly(makeEvent(1), "t", Qos::kReliable), all_, &hold).delivered, 3u);
  for (RecordingTarget* t : {&a_, &b_, &c_}) {
    EXPECT_EQ(t->lastWakeHold(), &hold);
    EXPECT_FALSE(t->lastJournaled());
  }
  ASSERT_EQ(flow_.send(inOnly(makeEvent(2)), all_).delivered, 3u);
  for (RecordingTarget* t : {&a_, &b_, &c_}) EXPECT_EQ(t->lastWakeHold(), nullptr);
}

TEST_F(StFlowTest, ShowsNoStagesAndNoJournal) {
  const AbstractFlow& any = flow_;
  EXPECT_FALSE(any.journals());
  EXPECT_TRUE(any.stageMetrics().empty());
}

TEST_F(StFlowTest, FailingAndThrowingTargetsAreCountedNotFatal) {
  b_.setBehavior(Behavior::kFail);
  c_.setBehavior(Behavior::kThrow);
  RecordingTarget d("d");
  std::vector<DeliveryTarget*> targets{&a_, &b_, &c_, &d};
  SendOutcome out = flow_.send(inOnly(makeEvent(1)), targets);
  EXPECT_EQ(out.delivered, 2u);
  EXPECT_EQ(out.failed, 2u);
  EXPECT_EQ(out.status.code(), Status::Code::kUnavailable);  // the first failure
  EXPECT_EQ(a_.delivered(), 1u);
  EXPECT_EQ(d.delivered(), 1u);  // after the throwing target
  FlowMetricsSnapshot m = flow_.metrics();
  EXPECT_EQ(m.delivered, 2u);
  EXPECT_EQ(m.failed, 2u);
  // And the flow goes on.
  c_.setBehavior(Behavior::kAccept);
  std::vector<DeliveryTarget*> only_c{&c_};
  EXPECT_EQ(flow_.send(inOnly(makeEvent(2)), only_c).delivered, 1u);
}

TEST_F(StFlowTest, RobustInOnlyReportsDeliveriesAndFaultsToTheSender) {
  auto recorder = std::make_shared<OutcomeRecorder>();
  b_.setBehavior(Behavior::kThrow);
  Exchange ex = inOnly(makeEvent(1), "t", Qos::kBestEffort, recorder);
  ex.pattern = Pattern::kRobustInOnly;
  flow_.send(ex, all_);
  EXPECT_EQ(recorder->count(OutcomeKind::kDelivered), 2u);
  ASSERT_EQ(recorder->count(OutcomeKind::kFault), 1u);
  for (const auto& e : recorder->entries()) {
    if (e.kind == OutcomeKind::kFault) {
      EXPECT_EQ(e.target, "b");
      EXPECT_EQ(e.status.code(), Status::Code::kInternal);
      EXPECT_NE(e.status.message().find("throws on purpose"), std::string::npos);
    }
  }
}

TEST_F(StFlowTest, InOnlyFaultsAreCountedButNotReported) {
  auto recorder = std::make_shared<OutcomeRecorder>();
  a_.setBehavior(Behavior::kFail);
  SendOutcome out = flow_.send(inOnly(makeEvent(1), "t", Qos::kBestEffort, recorder), all_);
  EXPECT_EQ(out.failed, 1u);
  EXPECT_TRUE(recorder->entries().empty());
}

TEST_F(StFlowTest, InvalidExchangesAreRefusedWithoutCallingTargets) {
  Exchange no_event = inOnly(nullptr);
  SendOutcome out = flow_.send(no_event, all_);
  EXPECT_EQ(out.status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(out.rejected, 3u);

  Exchange in_out = inOnly(makeEvent(1));
  in_out.pattern = Pattern::kInOut;  // nobody to reply to
  out = flow_.send(in_out, all_);
  EXPECT_EQ(out.status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(a_.entered(), 0u);
  EXPECT_EQ(flow_.metrics().invalid, 2u);
}

TEST_F(StFlowTest, AStoppedFlowRejectsAndReportsEachTarget) {
  flow_.stop();
  flow_.stop();  // idempotent
  auto recorder = std::make_shared<OutcomeRecorder>();
  SendOutcome out = flow_.send(inOnly(makeEvent(1), "t", Qos::kBestEffort, recorder), all_);
  EXPECT_EQ(out.rejected, 3u);
  EXPECT_EQ(out.status.code(), Status::Code::kUnavailable);
  EXPECT_EQ(recorder->count(OutcomeKind::kRejected), 3u);
  EXPECT_EQ(a_.entered(), 0u);
  EXPECT_EQ(flow_.metrics().rejected, 3u);
  ASSERT_TRUE(flow_.start().isOk());
  EXPECT_EQ(flow_.send(inOnly(makeEvent(2)), all_).delivered, 3u);
}

TEST_F(StFlowTest, AThrowingListenerIsCounted) {
  auto listener =
      makeListener([](const Exchange&, const Outcome&) { throw std::logic_error("x"); });
  Exchange ex = inOnly(makeEvent(1), "t", Qos::kBestEffort, listener);
  ex.pattern = Pattern::kRobustInOnly;
  SendOutcome out = flow_.send(ex, all_);
  EXPECT_EQ(out.delivered, 3u);
  EXPECT_EQ(flow_.metrics().listener_errors, 3u);
}

// A flow whose protocol breaks half-way: the skeleton must account for the
// targets it never reached.
class BrokenFlow final : public AbstractFlow {
 public:
  BrokenFlow() : AbstractFlow("broken") {}

 protected:
  void doSend(const Exchange& exchange, std::span<DeliveryTarget* const> targets,
              WakeHold* wake_hold, SendOutcome& out) override {
    DeliveryContext context(wake_hold);
    if (deliverTo(*targets[0], exchange, context).isOk()) ++out.delivered;
    throw std::runtime_error("protocol error");
  }
};

TEST(AbstractFlowTest, AThrowingDoSendIsContainedAndCounted) {
  BrokenFlow flow;
  ASSERT_TRUE(flow.start().isOk());
  RecordingTarget a("a"), b("b"), c("c");
  std::vector<DeliveryTarget*> targets{&a, &b, &c};
  SendOutcome out = flow.send(inOnly(makeEvent(1)), targets);
  EXPECT_EQ(out.delivered, 1u);
  EXPECT_EQ(out.failed, 2u);
  EXPECT_EQ(out.status.code(), Status::Code::kInternal);
  EXPECT_NE(out.status.message().find("protocol error"), std::string::npos);
  EXPECT_EQ(flow.metrics().failed, 2u);
}

TEST(AbstractFlowTest, DefaultAttachmentHooksAreNoOps) {
  StFlow flow("plain");
  RecordingTarget a("a");
  EXPECT_TRUE(flow.attach(a).isOk());
  EXPECT_EQ(flow.queueLength(a), 0u);
  flow.detach(a);
  EXPECT_EQ(flow.name(), "plain");
  EXPECT_FALSE(flow.running());
}

}  // namespace
}  // namespace cepbus::flows
