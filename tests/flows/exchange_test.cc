#include "flows/exchange.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "tests/flows/flow_test_util.h"

namespace cepbus::flows {
namespace {

using testing::makeEvent;

TEST(ExchangeTest, NamesAreStable) {
  EXPECT_STREQ(patternName(Pattern::kInOnly), "in-only");
  EXPECT_STREQ(patternName(Pattern::kRobustInOnly), "robust-in-only");
  EXPECT_STREQ(patternName(Pattern::kInOut), "in-out");
  EXPECT_STREQ(qosName(Qos::kBestEffort), "best-effort");
  EXPECT_STREQ(qosName(Qos::kReliable), "reliable");
  EXPECT_STREQ(outcomeName(OutcomeKind::kAccepted), "accepted");
  EXPECT_STREQ(outcomeName(OutcomeKind::kTimeout), "timeout");
}

TEST(ExchangeTest, ReportWithoutListenerIsFalse) {
  Exchange ex;
  ex.event = makeEvent(1);
  EXPECT_FALSE(ex.report(Outcome{OutcomeKind::kDelivered, "t", {}, nullptr}));
  EXPECT_FALSE(ex.reply(makeEvent(2)));
}

TEST(ExchangeTest, ReportReachesTheListenerWithTheExchange) {
  Exchange seen;
  Outcome got;
  Exchange ex;
  ex.event = makeEvent(1);
  ex.correlation_id = 42;
  ex.listener = makeListener([&](const Exchange& e, const Outcome& o) {
    seen = e;
    got = o;
  });
  ASSERT_TRUE(ex.report(Outcome{OutcomeKind::kFault, "svc", Status::internal("x"), nullptr}));
  EXPECT_EQ(seen.correlation_id, 42u);
  EXPECT_EQ(got.kind, OutcomeKind::kFault);
  EXPECT_EQ(got.status.code(), Status::Code::kInternal);
}

TEST(ExchangeTest, ReplyCarriesTheAnswer) {
  EventPtr answer = makeEvent(7);
  EventPtr got;
  Exchange ex;
  ex.event = makeEvent(1);
  ex.listener = makeListener([&](const Exchange&, const Outcome& o) {
    EXPECT_EQ(o.kind, OutcomeKind::kReply);
    got = o.reply;
  });
  ASSERT_TRUE(ex.reply(answer));
  EXPECT_EQ(got, answer);
}

TEST(ExchangeTest, AThrowingListenerIsContained) {
  Exchange ex;
  ex.event = makeEvent(1);
  ex.listener =
      makeListener([](const Exchange&, const Outcome&) { throw std::runtime_error("x"); });
  EXPECT_FALSE(ex.report(Outcome{}));
}

}  // namespace
}  // namespace cepbus::flows
