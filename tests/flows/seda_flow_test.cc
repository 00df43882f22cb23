#include "flows/seda_flow.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "tests/flows/flow_test_util.h"

namespace cepbus::flows {
namespace {

using testing::inOnly;
using testing::makeEvent;
using testing::OutcomeRecorder;
using testing::RecordingTarget;
using testing::waitUntil;
using Behavior = RecordingTarget::Behavior;

SedaFlowConfig smallConfig(size_t capacity = 64) {
  SedaFlowConfig config;
  config.stage.capacity = capacity;
  config.stage.batch_size = 1;
  config.stage.admission.soft_threshold = 0.25;
  config.stage.admission.static_threshold = 0.5;
  config.stage.admission.saturation_threshold = 0.9;
  return config;
}

TEST(SedaFlowTest, DeliversOnStageThreadsAndCountsWhenDone) {
  RecordingTarget a("a"), b("b");
  SedaFlow flow(smallConfig(256));
  ASSERT_TRUE(flow.attach(a).isOk());
  ASSERT_TRUE(flow.attach(b).isOk());
  EXPECT_EQ(flow.attach(a).code(), Status::Code::kAlreadyExists);
  ASSERT_TRUE(flow.start().isOk());
  std::vector<DeliveryTarget*> targets{&a, &b};
  for (int i = 0; i < 100; ++i) {
    SendOutcome out = flow.send(inOnly(makeEvent(i)), targets);
    ASSERT_EQ(out.queued, 2u) << out.status.toString();
    ASSERT_EQ(out.delivered, 0u);
  }
  ASSERT_TRUE(waitUntil([&] { return a.delivered() == 100 && b.delivered() == 100; }));
  EXPECT_NE(a.lastThread(), std::this_thread::get_id());
  ASSERT_TRUE(waitUntil([&] { return flow.metrics().delivered == 200; }));
  // What it shows as any flow: its stages, no journal.
  const AbstractFlow& any = flow;
  std::set<std::string> names;
  for (const auto& m : any.stageMetrics()) names.insert(m.name);
  EXPECT_EQ(names, (std::set<std::string>{"seda/a", "seda/b"}));
  EXPECT_FALSE(any.journals());
}

// The publisher's hold is only for what runs inside its send(): a run
// inline gets it, a worker's run never does.
TEST(SedaFlowTest, ARunInlineGetsThePublishersWakeHoldAWorkersRunDoesNot) {
  WakeHold hold;
  RecordingTarget inline_target("inline");
  SedaFlowConfig config = smallConfig();
  config.stage.run_inline_when_idle = true;
  SedaFlow inline_flow(config);
  ASSERT_TRUE(inline_flow.attach(inline_target).isOk());
  ASSERT_TRUE(inline_flow.start().isOk());
  std::vector<DeliveryTarget*> targets{&inline_target};
  ASSERT_EQ(inline_flow.send(inOnly(makeEvent(1)), targets, &hold).queued, 1u);
  ASSERT_EQ(inline_target.delivered(), 1u);  // idle: handled before send() returned
  EXPECT_EQ(inline_target.lastThread(), std::this_thread::get_id());
  EXPECT_EQ(inline_target.lastWakeHold(), &hold);
  EXPECT_FALSE(inline_target.lastJournaled());

  RecordingTarget queued_target("queued");
  SedaFlow queued_flow(smallConfig());
  ASSERT_TRUE(queued_flow.attach(queued_target).isOk());
  ASSERT_TRUE(queued_flow.start().isOk());
  targets = {&queued_target};
  ASSERT_EQ(queued_flow.send(inOnly(makeEvent(2)), targets, &hold).queued, 1u);
  ASSERT_TRUE(waitUntil([&] { return queued_target.delivered() == 1; }));
  EXPECT_NE(queued_target.lastThread(), std::this_thread::get_id());
  EXPECT_EQ(queued_target.lastWakeHold(), nullptr);
}

TEST(SedaFlowTest, AnUnattachedTargetIsRejectedAndReported) {
  SedaFlow flow(smallConfig());
  ASSERT_TRUE(flow.start().isOk());
  RecordingTarget stranger("stranger");
  auto recorder = std::make_shared<OutcomeRecorder>();
  std::vector<DeliveryTarget*> targets{&stranger};
  SendOutcome out = flow.send(inOnly(makeEvent(1), "t", Qos::kBestEffort, recorder), targets);
  EXPECT_EQ(out.rejected, 1u);
  EXPECT_EQ(out.status.code(), Status::Code::kNotFound);
  ASSERT_EQ(recorder->count(OutcomeKind::kRejected), 1u);
  EXPECT_EQ(recorder->entries()[0].target, "stranger");
}

TEST(SedaFlowTest, FaultsOfRobustInOnlyGoBackToTheSender) {
  RecordingTarget failing("failing"), throwing("throwing"), fine("fine");
  SedaFlow flow(smallConfig());
  failing.setBehavior(Behavior::kFail);
  throwing.setBehavior(Behavior::kThrow);
  for (RecordingTarget* t : {&failing, &throwing, &fine}) ASSERT_TRUE(flow.attach(*t).isOk());
  ASSERT_TRUE(flow.start().isOk());
  auto recorder = std::make_shared<OutcomeRecorder>();
  Exchange ex = inOnly(makeEvent(1), "t", Qos::kBestEffort, recorder);
  ex.pattern = Pattern::kRobustInOnly;
  std::vector<DeliveryTarget*> targets{&failing, &throwing, &fine};
  EXPECT_EQ(flow.send(ex, targets).queued, 3u);
  ASSERT_TRUE(waitUntil([&] { return recorder->entries().size() == 3; }));
  std::set<std::string> faulted;
  for (const auto& e : recorder->entries()) {
    if (e.kind == OutcomeKind::kFault) faulted.insert(e.target);
  }
  EXPECT_EQ(faulted, (std::set<std::string>{"failing", "throwing"}));
  EXPECT_EQ(recorder->count(OutcomeKind::kDelivered), 1u);
  ASSERT_TRUE(waitUntil([&] { return flow.metrics().failed == 2; }));
  EXPECT_EQ(flow.metrics().delivered, 1u);
}

TEST(SedaFlowTest, OverloadDegradesThenRejectsAndNothingAcceptedIsLost) {
  RecordingTarget slow("slow");
  SedaFlow flow(smallConfig(20));
  ASSERT_TRUE(flow.attach(slow).isOk());
  ASSERT_TRUE(flow.start().isOk());
  slow.closeGate();  // the subscriber stalls: its queue can only grow
  auto recorder = std::make_shared<OutcomeRecorder>();
  std::vector<DeliveryTarget*> targets{&slow};
  std::set<EventId> queued, degraded, rejected;
  for (int i = 0; i < 200 && rejected.empty(); ++i) {
    EventPtr event = makeEvent(i);
    SendOutcome out = flow.send(inOnly(event, "t", Qos::kReliable, recorder), targets);
    ASSERT_EQ(out.accounted(), 1u);
    if (out.queued == 1) queued.insert(event->id());
    if (out.degraded == 1) degraded.insert(event->id());
    if (out.rejected == 1) rejected.insert(event->id());
  }
  EXPECT_FALSE(degraded.empty());
  ASSERT_FALSE(rejected.empty());
  // The full queue, plus the item stuck in the handler if the worker took it early.
  EXPECT_GE(queued.size(), 20u);
  EXPECT_LE(queued.size(), 21u);
  // Every degradation and rejection was reported to the sender, by event.
  EXPECT_EQ(recorder->idsWith(OutcomeKind::kDegraded),
            std::multiset<EventId>(degraded.begin(), degraded.end()));
  EXPECT_EQ(recorder->idsWith(OutcomeKind::kRejected),
            std::multiset<EventId>(rejected.begin(), rejected.end()));

  slow.openGate();
  ASSERT_TRUE(waitUntil([&] { return slow.delivered() == queued.size(); }));
  flow.stop();
  std::set<EventId> delivered;
  for (const auto& [id, count] : slow.counts()) {
    EXPECT_EQ(count, 1) << "event " << id;
    delivered.insert(id);
  }
  EXPECT_EQ(delivered, queued);
  FlowMetricsSnapshot m = flow.metrics();
  EXPECT_EQ(m.rejected, rejected.size());
  EXPECT_EQ(m.degraded, degraded.size());
}

TEST(SedaFlowTest, StopDrainsWhatWasQueued) {
  RecordingTarget a("a");
  SedaFlow flow(smallConfig(1024));
  ASSERT_TRUE(flow.attach(a).isOk());
  ASSERT_TRUE(flow.start().isOk());
  std::vector<DeliveryTarget*> targets{&a};
  for (int i = 0; i < 500; ++i) ASSERT_EQ(flow.send(inOnly(makeEvent(i)), targets).queued, 1u);
  flow.stop();
  EXPECT_EQ(a.delivered(), 500u);
  EXPECT_EQ(flow.send(inOnly(makeEvent(1)), targets).rejected, 1u);
  // A restart gets fresh stages.
  ASSERT_TRUE(flow.start().isOk());
  EXPECT_EQ(flow.send(inOnly(makeEvent(2)), targets).queued, 1u);
  ASSERT_TRUE(waitUntil([&] { return a.delivered() == 501; }));
}

TEST(SedaFlowTest, DetachDrainsThenRefusesTheTarget) {
  RecordingTarget a("a");
  SedaFlow flow(smallConfig(1024));
  ASSERT_TRUE(flow.attach(a).isOk());
  ASSERT_TRUE(flow.start().isOk());
  std::vector<DeliveryTarget*> targets{&a};
  for (int i = 0; i < 100; ++i) flow.send(inOnly(makeEvent(i)), targets);
  flow.detach(a);
  EXPECT_EQ(a.delivered(), 100u);
  EXPECT_EQ(flow.queueLength(a), 0u);
  EXPECT_EQ(flow.send(inOnly(makeEvent(1)), targets).rejected, 1u);
}

TEST(SedaFlowTest, QueueLengthShowsWaitingExchanges) {
  RecordingTarget a("a");
  SedaFlow flow(smallConfig(64));
  ASSERT_TRUE(flow.attach(a).isOk());
  ASSERT_TRUE(flow.start().isOk());
  a.closeGate();
  std::vector<DeliveryTarget*> targets{&a};
  for (int i = 0; i < 5; ++i) flow.send(inOnly(makeEvent(i)), targets);
  ASSERT_TRUE(waitUntil([&] { return a.entered() == 1; }));
  EXPECT_EQ(flow.queueLength(a), 4u);
  a.openGate();
}

}  // namespace
}  // namespace cepbus::flows
