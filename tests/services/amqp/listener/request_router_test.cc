#include "services/amqp/listener/request_router.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <proton/duration.hpp>
#include <proton/scalar.hpp>
#include <string>

#include "bus/core/event.h"
#include "flows/exchange.h"
#include "services/protocols/amqp/message_mapping.h"

namespace cepbus::services::amqp {
namespace {

using namespace std::chrono_literals;

std::string property(const proton::message& m, const std::string& name) {
  return proton::coerce<std::string>(m.properties().get(name));
}

proton::message replyMessage(uint64_t correlation, int64_t ts) {
  proton::message m;
  m.subject("Square");
  m.properties().put("ts", ts);
  m.correlation_id(proton::message_id(correlation));
  return m;
}

// What a requester heard about one in-out request sent to a provider.
struct Heard {
  std::optional<flows::OutcomeKind> kind;
  std::string status;
  EventPtr reply;
};

flows::Exchange providerRequest(uint64_t correlation, std::shared_ptr<Heard> heard) {
  flows::Exchange ex;
  ex.event = EventBuilder("Number").at(1).build();
  ex.address = Symbol::intern("math.square");
  ex.pattern = flows::Pattern::kInOut;
  ex.correlation_id = correlation;
  ex.listener = flows::makeListener([heard](const flows::Exchange&, const flows::Outcome& o) {
    heard->kind = o.kind;
    heard->status = std::string(o.status.message());
    heard->reply = o.reply;
  });
  return ex;
}

struct RequestRouterTest : ::testing::Test {
  std::shared_ptr<ListenerCounters> counters = std::make_shared<ListenerCounters>();
  RequestRouter router{counters, /*max_open_requests=*/3};

  // Sends an in-out request to a provider as the listener does.
  std::shared_ptr<Heard> send(uint64_t correlation) {
    auto heard = std::make_shared<Heard>();
    proton::message m;
    router.sendingToProvider(providerRequest(correlation, heard), m);
    return heard;
  }
};

TEST_F(RequestRouterTest, ARequestWaitsItsTtlElseTheDefault) {
  proton::message m;
  EXPECT_EQ(RequestRouter::timeoutOf(m, 30000ms), 30000ms);
  m.ttl(proton::duration(250));
  EXPECT_EQ(RequestRouter::timeoutOf(m, 30000ms), 250ms);
}

TEST_F(RequestRouterTest, TheAnswerCarriesTheCorrelationIdElseTheMessageId) {
  proton::message m;
  m.id(proton::message_id("m-1"));
  EXPECT_EQ(RequestRouter::correlationOf(m), proton::message_id("m-1"));
  m.correlation_id(proton::message_id("r-1"));
  EXPECT_EQ(RequestRouter::correlationOf(m), proton::message_id("r-1"));
}

TEST_F(RequestRouterTest, AReplyGoesToTheLinkWithItsReplyToAddress) {
  router.assignReplyAddress("$cepbus.reply.7", 7);
  auto answer =
      router.answer("$cepbus.reply.7", proton::message_id("r-1"), flows::OutcomeKind::kReply,
                    Status::ok(), EventBuilder("Square").at(5).build());
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->link, 7u);
  EXPECT_EQ(answer->message.subject(), "Square");
  EXPECT_EQ(answer->message.to(), "$cepbus.reply.7");
  EXPECT_EQ(answer->message.correlation_id(), proton::message_id("r-1"));
  EXPECT_EQ(counters->answers.value(), 1u);
  EXPECT_EQ(counters->faults.value(), 0u);
}

TEST_F(RequestRouterTest, AnythingButAReplyComesBackAsAFaultMessage) {
  router.assignReplyAddress("replies", 3);
  auto answer =
      router.answer("replies", proton::message_id(uint64_t{9}), flows::OutcomeKind::kTimeout,
                    Status::timeout("no answer in 5 s"), nullptr);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->message.subject(), kFaultSubject);
  EXPECT_EQ(property(answer->message, kFaultProperty), "timeout");
  EXPECT_EQ(property(answer->message, kFaultDescriptionProperty), "no answer in 5 s");
  EXPECT_EQ(answer->message.correlation_id(), proton::message_id(uint64_t{9}));
  EXPECT_EQ(counters->faults.value(), 1u);
  // A kReply without an event is no reply either.
  ASSERT_TRUE(router.answer("replies", proton::message_id(uint64_t{10}), flows::OutcomeKind::kReply,
                            Status::ok(), nullptr));
  EXPECT_EQ(counters->faults.value(), 2u);
  EXPECT_EQ(counters->answers.value(), 0u);
}

TEST_F(RequestRouterTest, AnAnswerNoLinkTakesIsCountedUnroutable) {
  EXPECT_FALSE(router.answer("nowhere", proton::message_id("r"), flows::OutcomeKind::kFault,
                             Status::internal("x"), nullptr));
  EXPECT_EQ(counters->answers_unroutable.value(), 1u);
  EXPECT_EQ(counters->faults.value(), 1u);
}

TEST_F(RequestRouterTest, APlainReplyAddressIsFirstComeAndReleasedOnlyByItsLink) {
  router.offerReplyAddress("alerts", 1);
  router.offerReplyAddress("alerts", 2);  // second subscriber of the address
  auto routed = [&] {
    auto a = router.answer("alerts", proton::message_id("r"), flows::OutcomeKind::kFault,
                           Status::internal("x"), nullptr);
    return a ? a->link : 0;
  };
  EXPECT_EQ(routed(), 1u);
  router.releaseReplyAddress("alerts", 2);  // not its address
  EXPECT_EQ(routed(), 1u);
  router.releaseReplyAddress("alerts", 1);
  EXPECT_EQ(routed(), 0u);
  router.offerReplyAddress("alerts", 2);
  EXPECT_EQ(routed(), 2u);
}

TEST_F(RequestRouterTest, DynamicAddressesAreNamedByTheLinkAndTakeOver) {
  EXPECT_EQ(RequestRouter::dynamicAddress(42), "$cepbus.reply.42");
  router.offerReplyAddress("$cepbus.reply.42", 5);
  router.assignReplyAddress("$cepbus.reply.42", 42);
  auto a = router.answer("$cepbus.reply.42", proton::message_id("r"), flows::OutcomeKind::kFault,
                         Status::internal("x"), nullptr);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->link, 42u);
}

TEST_F(RequestRouterTest, ARequestToAProviderAsksForAnAnswerOnTheRepliesAddress) {
  auto heard = std::make_shared<Heard>();
  proton::message m;
  router.sendingToProvider(providerRequest(17, heard), m);
  EXPECT_EQ(m.reply_to(), kReplyAddress);
  EXPECT_EQ(m.correlation_id(), proton::message_id(uint64_t{17}));
  EXPECT_EQ(router.openRequests(), 1u);
  EXPECT_EQ(counters->provider_requests.value(), 1u);
}

TEST_F(RequestRouterTest, TheProvidersReplyCompletesTheRequestOnce) {
  auto heard = send(17);
  EXPECT_FALSE(router.providerReply(replyMessage(17, 99)).has_value());
  ASSERT_EQ(heard->kind, flows::OutcomeKind::kReply);
  ASSERT_NE(heard->reply, nullptr);
  EXPECT_EQ(heard->reply->type().name(), "Square");
  EXPECT_EQ(heard->reply->ts(), 99);
  EXPECT_EQ(router.openRequests(), 0u);
  EXPECT_EQ(counters->provider_replies.value(), 1u);

  auto again = router.providerReply(replyMessage(17, 100));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->name(), kNotFound);
  EXPECT_EQ(counters->late_replies.value(), 1u);
  EXPECT_EQ(counters->rejected.value(), 1u);
}

TEST_F(RequestRouterTest, AFaultPropertyFailsTheRequest) {
  auto heard = send(4);
  proton::message m;
  m.correlation_id(proton::message_id(uint64_t{4}));
  m.properties().put(kFaultProperty, "overloaded");
  m.properties().put(kFaultDescriptionProperty, "try later");
  EXPECT_FALSE(router.providerReply(m).has_value());
  EXPECT_EQ(heard->kind, flows::OutcomeKind::kFault);
  EXPECT_EQ(heard->status, "overloaded: try later");
  EXPECT_EQ(router.openRequests(), 0u);
}

TEST_F(RequestRouterTest, AReplyWithoutAUlongCorrelationIdIsRejected) {
  send(4);
  proton::message m = replyMessage(4, 1);
  m.correlation_id(proton::message_id("4"));
  auto rejection = router.providerReply(m);
  ASSERT_TRUE(rejection.has_value());
  EXPECT_EQ(rejection->name(), kInvalidField);
  EXPECT_EQ(router.openRequests(), 1u);
  EXPECT_EQ(counters->rejected.value(), 1u);
}

TEST_F(RequestRouterTest, AnUnmappableReplyIsRejectedAndTheRequestStaysOpen) {
  auto heard = send(4);
  proton::message m;  // no subject, no ts: no event
  m.correlation_id(proton::message_id(uint64_t{4}));
  auto rejection = router.providerReply(m);
  ASSERT_TRUE(rejection.has_value());
  EXPECT_EQ(rejection->name(), kInvalidField);
  EXPECT_EQ(counters->malformed.value(), 1u);
  EXPECT_FALSE(heard->kind.has_value());
  EXPECT_EQ(router.openRequests(), 1u);
  EXPECT_FALSE(router.providerReply(replyMessage(4, 2)).has_value());
  EXPECT_EQ(heard->kind, flows::OutcomeKind::kReply);
}

TEST_F(RequestRouterTest, BeyondTheBoundTheOldestOpenRequestIsForgotten) {
  auto first = send(1);
  send(2);
  send(3);
  send(4);
  EXPECT_EQ(router.openRequests(), 3u);
  auto late = router.providerReply(replyMessage(1, 1));
  ASSERT_TRUE(late.has_value());
  EXPECT_EQ(late->name(), kNotFound);
  EXPECT_FALSE(first->kind.has_value());  // the broker times it out, not this
  EXPECT_FALSE(router.providerReply(replyMessage(4, 1)).has_value());
}

}  // namespace
}  // namespace cepbus::services::amqp
