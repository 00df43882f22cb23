// Request/response over AMQP (reply-to + correlation-id <-> in-out
// exchanges) and the listener's registry entry.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <proton/codec/map.hpp>
#include <proton/duration.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/scalar.hpp>
#include <string>
#include <vector>

#include "flows/st_flow.h"
#include "router/broker.h"
#include "router/delivery_policy.h"
#include "router/registry.h"
#include "services/amqp/listener/amqp_listener.h"
#include "services/amqp/listener/listener_stats.h"
#include "services/protocols/amqp/listener_config.h"
#include "services/protocols/amqp/message_mapping.h"
#include "tests/testing/amqp_test_client.h"
#include "tests/testing/stats.h"
#include "tests/testing/wait.h"

namespace cepbus::services::amqp {
namespace {

using cepbus::testing::statValue;

using namespace std::chrono_literals;
using cepbus::testing::AmqpTestClient;

proton::message requestMessage(int64_t x, std::string reply_to) {
  proton::message m;
  m.subject("Question");
  m.properties().put("ts", int64_t{1000});
  m.body(proton::value(std::map<std::string, proton::scalar>{{"x", x}}));
  m.reply_to(std::move(reply_to));
  return m;
}

std::string propertyOf(const proton::message& m, const std::string& key) {
  proton::message copy = m;
  auto& props = copy.properties();
  return props.exists(key) ? proton::coerce<std::string>(props.get(key)) : std::string();
}

int64_t bodyInt(const proton::message& m, const std::string& key) {
  std::map<std::string, proton::scalar> body;
  proton::get(m.body(), body);
  return proton::coerce<int64_t>(body.at(key));
}

// Every test runs with one container thread and with several: a
// connection's work must not depend on which thread serves it.
class AmqpRequestTest : public ::testing::TestWithParam<unsigned> {
 protected:
  AmqpRequestTest() {
    auto policy = std::make_unique<router::DeliveryPolicy>("st");
    EXPECT_TRUE(policy->addFlow(std::make_unique<flows::StFlow>("st")));
    registry_ = std::make_shared<router::Registry>();
    broker_ = std::make_unique<router::Broker>(std::move(policy), registry_);
    EXPECT_TRUE(broker_->start());
    context_ = std::make_unique<ServiceContext>(ServiceContext{*broker_, *registry_, loader_});
    services::amqp::AmqpListenerConfig config;
    config.port = 0;
    config.allow_anonymous = true;
    AmqpListenerOptions options;
    options.name = "amqp-listener";
    options.threads = GetParam();
    service_ = std::make_unique<AmqpListenerService>(config, options, *context_);
    Status started = service_->start();
    EXPECT_TRUE(started) << started.toString();
  }
  ~AmqpRequestTest() override {
    service_->stop();
    broker_->stop();
  }

  // An in-process provider of `address`: answers {y = 2x}, or with a fault
  // when x < 0, or not at all when x == 0.
  void provideDoubler(const std::string& address) {
    ASSERT_TRUE(
        broker_->addEndpoint("doubler", [](const flows::Exchange& ex, flows::DeliveryContext&) {
          const int64_t x = ex.event->find(Symbol::intern("x"))->asInt();
          if (x == 0) return Status::ok();
          if (x < 0) {
            ex.report(flows::Outcome{flows::OutcomeKind::kFault, "doubler",
                                     Status::invalidArgument("x must be positive"), nullptr});
            return Status::ok();
          }
          ex.reply(EventBuilder("Answer").at(2000).set("y", x * 2).build());
          return Status::ok();
        }));
    ASSERT_TRUE(broker_->provide(address, "doubler"));
  }

  // The client's dynamic reply address, once attached.
  static std::string dynamicAddress(AmqpTestClient& client, const std::string& name) {
    client.receive(name, "");
    EXPECT_TRUE(client.waitFor([&] { return client.addresses.count(name) > 0; }));
    return client.replyAddress(name);
  }

  plugin::PluginLoader loader_{std::vector<std::string>{}};
  std::shared_ptr<router::Registry> registry_;
  std::unique_ptr<router::Broker> broker_;
  std::unique_ptr<ServiceContext> context_;
  std::unique_ptr<AmqpListenerService> service_;
};

TEST_P(AmqpRequestTest, RequestToInProcessProviderAnswersOnDynamicReplyAddress) {
  provideDoubler("svc.double");
  AmqpTestClient client(service_->port(), "requester");
  ASSERT_TRUE(client.waitOpen());
  const std::string reply_to = dynamicAddress(client, "replies");
  ASSERT_FALSE(reply_to.empty());

  proton::message with_correlation = requestMessage(21, reply_to);
  with_correlation.correlation_id("req-1");
  with_correlation.id(proton::message_id(uint64_t{77}));
  proton::message with_id_only = requestMessage(5, reply_to);
  with_id_only.id("msg-2");
  client.send("svc.double", {with_correlation, with_id_only});

  ASSERT_TRUE(client.waitFor([&] { return client.received["replies"].size() == 2; }));
  ASSERT_TRUE(client.waitFor([&] { return client.accepted == 2; }));
  std::map<std::string, int64_t> answers;  // by correlation id
  client.read<int>([&] {
    for (const proton::message& m : client.received["replies"]) {
      EXPECT_EQ(m.subject(), "Answer");
      answers[proton::coerce<std::string>(m.correlation_id())] = bodyInt(m, "y");
    }
    return 0;
  });
  EXPECT_EQ(answers, (std::map<std::string, int64_t>{{"req-1", 42}, {"msg-2", 10}}));
  const AmqpListenerStats stats = service_->stats();
  EXPECT_EQ(stats.requests, 2u);
  EXPECT_EQ(stats.answers, 2u);
  EXPECT_EQ(stats.faults, 0u);
}

TEST_P(AmqpRequestTest, AnswerGoesToANamedReplyAddress) {
  provideDoubler("svc.double");
  AmqpTestClient client(service_->port(), "requester");
  ASSERT_TRUE(client.waitOpen());
  client.receive("mine", "replies.requester");
  ASSERT_TRUE(client.waitFor([&] { return client.addresses.count("mine") > 0; }));
  proton::message m = requestMessage(4, "replies.requester");
  m.correlation_id(proton::message_id(uint64_t{9}));
  client.send("svc.double", {m});
  ASSERT_TRUE(client.waitFor([&] { return client.received["mine"].size() == 1; }));
  client.read<int>([&] {
    const proton::message& answer = client.received["mine"][0];
    EXPECT_EQ(proton::coerce<uint64_t>(answer.correlation_id()), 9u);
    EXPECT_EQ(bodyInt(answer, "y"), 8);
    return 0;
  });
}

TEST_P(AmqpRequestTest, FaultsTimeoutsAndMissingProvidersComeBack) {
  provideDoubler("svc.double");
  AmqpTestClient client(service_->port(), "requester");
  ASSERT_TRUE(client.waitOpen());
  const std::string reply_to = dynamicAddress(client, "replies");

  proton::message fault = requestMessage(-1, reply_to);
  fault.correlation_id("fault");
  proton::message silent = requestMessage(0, reply_to);  // the provider never answers
  silent.correlation_id("silent");
  silent.ttl(proton::duration(50));
  client.send("svc.double", {fault, silent});
  ASSERT_TRUE(client.waitFor([&] { return client.received["replies"].size() == 2; }));
  std::map<std::string, std::string> faults;
  client.read<int>([&] {
    for (const proton::message& m : client.received["replies"]) {
      EXPECT_EQ(m.subject(), kFaultSubject);
      faults[proton::coerce<std::string>(m.correlation_id())] = propertyOf(m, kFaultProperty);
      if (propertyOf(m, kFaultProperty) == "fault") {
        EXPECT_NE(propertyOf(m, kFaultDescriptionProperty).find("x must be positive"),
                  std::string::npos);
      }
    }
    return 0;
  });
  EXPECT_EQ(faults,
            (std::map<std::string, std::string>{{"fault", "fault"}, {"silent", "timeout"}}));

  // Nobody provides svc.none: an unsettled request is rejected with
  // amqp:not-found, a pre-settled one hears it as a fault message.
  proton::message none = requestMessage(1, reply_to);
  none.correlation_id("none");
  client.send("svc.none", {none});
  ASSERT_TRUE(client.waitFor([&] { return client.rejected == 1; }));
  client.read<int>([&] {
    EXPECT_EQ(client.rejections[0].name(), "amqp:not-found");
    EXPECT_NE(client.rejections[0].description().find("svc.none"), std::string::npos);
    return 0;
  });
  client.send("svc.none", {none}, /*presettled=*/true);
  ASSERT_TRUE(client.waitFor([&] { return client.received["replies"].size() == 3; }));
  client.read<int>([&] {
    const proton::message& m = client.received["replies"][2];
    EXPECT_EQ(proton::coerce<std::string>(m.correlation_id()), "none");
    EXPECT_EQ(propertyOf(m, kFaultProperty), "rejected");
    return 0;
  });
  EXPECT_EQ(service_->stats().faults, 3u);
}

TEST_P(AmqpRequestTest, AmqpSubscriberAnswersInProcessRequests) {
  AmqpTestClient provider(service_->port(), "provider");
  ASSERT_TRUE(provider.waitOpen());
  provider.receive("calc", "svc.calc", [](const proton::message& request) {
    const int64_t x = bodyInt(request, "x");
    if (x < 0) return std::optional<proton::message>(faultMessage("bad-input", "negative x"));
    proton::message answer;
    answer.subject("Result");
    answer.properties().put("ts", int64_t{3000});
    answer.body(proton::value(std::map<std::string, proton::scalar>{{"y", x + 1}}));
    return std::optional<proton::message>(answer);
  });
  ASSERT_TRUE(provider.waitFor([&] { return provider.addresses.count("calc") > 0; }));

  std::mutex mu;
  std::vector<flows::Outcome> outcomes;
  auto ask = [&](int64_t x) {
    flows::Exchange ex;
    ex.event = EventBuilder("Question").at(1).set("x", x).build();
    ex.address = Symbol::intern("svc.calc");
    auto id = broker_->request(ex, 20s, [&](const flows::Outcome& o) {
      std::lock_guard lock(mu);
      outcomes.push_back(o);
    });
    EXPECT_TRUE(id) << id.status().toString();
  };
  ask(41);
  ask(-3);
  ASSERT_TRUE(cepbus::testing::waitUntil([&] {
    std::lock_guard lock(mu);
    return outcomes.size() == 2;
  }));
  std::lock_guard lock(mu);
  ASSERT_EQ(outcomes[0].kind, flows::OutcomeKind::kReply);
  EXPECT_EQ(outcomes[0].reply->type().name(), "Result");
  EXPECT_EQ(outcomes[0].reply->find(Symbol::intern("y"))->asInt(), 42);
  ASSERT_EQ(outcomes[1].kind, flows::OutcomeKind::kFault);
  EXPECT_NE(outcomes[1].status.message().find("bad-input: negative x"), std::string::npos);
  provider.read<int>([&] {
    // The request carried the bus's reply address and a correlation id.
    EXPECT_EQ(provider.received["calc"][0].reply_to(), "$cepbus.replies");
    EXPECT_EQ(provider.received["calc"][0].correlation_id().type(), proton::ULONG);
    return 0;
  });
  // The listener counts a reply after it hands the outcome on, so the count
  // may trail the outcomes a moment (seen under ThreadSanitizer).
  EXPECT_TRUE(cepbus::testing::waitUntil([&] { return service_->stats().provider_replies == 2; }))
      << service_->stats().provider_replies;
  EXPECT_EQ(service_->stats().provider_requests, 2u);
}

TEST_P(AmqpRequestTest, AmqpRequesterToAmqpProviderAndLateReplies) {
  AmqpTestClient provider(service_->port(), "provider");
  ASSERT_TRUE(provider.waitOpen());
  provider.receive("calc", "svc.calc", [](const proton::message& request) {
    proton::message answer;
    answer.subject("Result");
    answer.properties().put("ts", int64_t{3000});
    answer.body(
        proton::value(std::map<std::string, proton::scalar>{{"y", bodyInt(request, "x") * 10}}));
    return std::optional<proton::message>(answer);
  });
  ASSERT_TRUE(provider.waitFor([&] { return provider.addresses.count("calc") > 0; }));

  AmqpTestClient requester(service_->port(), "requester");
  ASSERT_TRUE(requester.waitOpen());
  const std::string reply_to = dynamicAddress(requester, "replies");
  proton::message m = requestMessage(7, reply_to);
  m.correlation_id("r7");
  requester.send("svc.calc", {m});
  ASSERT_TRUE(requester.waitFor([&] { return requester.received["replies"].size() == 1; }));
  requester.read<int>([&] {
    const proton::message& answer = requester.received["replies"][0];
    EXPECT_EQ(proton::coerce<std::string>(answer.correlation_id()), "r7");
    EXPECT_EQ(bodyInt(answer, "y"), 70);
    return 0;
  });

  // An answer nobody waits for (unknown correlation id) is rejected.
  proton::message late;
  late.subject("Result");
  late.properties().put("ts", int64_t{1});
  late.correlation_id(proton::message_id(uint64_t{999999}));
  provider.send("$cepbus.replies", {late});
  ASSERT_TRUE(provider.waitFor([&] { return provider.rejected == 1; }));
  provider.read<int>([&] {
    EXPECT_EQ(provider.rejections[0].name(), "amqp:not-found");
    return 0;
  });
  EXPECT_EQ(service_->stats().late_replies, 1u);
}

// The listener's counters are in the registry's stats store, scope "amqp"
// {name}, and each link's in "amqp_link" {name}, while they are attached.
TEST_P(AmqpRequestTest, TheRegistryHasTheListenersAndTheLinksCounters) {
  auto listener = [&](const std::string& key) {
    return statValue(registry_->stats(), kAmqpSchema.component, {{"name", "amqp-listener"}}, key)
        .value_or(-1);
  };
  ASSERT_TRUE(registry_->snapshotOf("amqp-listener").has_value());
  EXPECT_EQ(registry_->snapshotOf("amqp-listener")->state, router::ComponentState::kStarted);
  EXPECT_EQ(listener("accepted"), 0);

  {
    AmqpTestClient client(service_->port(), "c");
    ASSERT_TRUE(client.waitOpen());
    client.receive("ticks", "ticks");
    ASSERT_TRUE(client.waitFor([&] { return client.addresses.count("ticks") > 0; }));
    proton::message tick;
    tick.subject("Tick");
    tick.properties().put("ts", int64_t{5});
    proton::message bad;  // no type: rejected
    bad.properties().put("ts", int64_t{5});
    client.send("ticks", {tick, tick, bad});
    ASSERT_TRUE(client.waitFor([&] {
      return client.accepted == 2 && client.rejected == 1 && client.received["ticks"].size() == 2;
    }));
    ASSERT_TRUE(cepbus::testing::waitUntil([&] { return listener("acknowledged") == 2; }));
    EXPECT_EQ(listener("accepted"), 2);
    EXPECT_EQ(listener("malformed"), 1);
    EXPECT_EQ(listener("sent"), 2);
    EXPECT_EQ(listener("connections"), 1);
    EXPECT_EQ(listener("subscriber_links"), 1);
    auto snap = registry_->snapshotOf("amqp-listener");
    EXPECT_EQ(snap->delivered, 2u);
    EXPECT_EQ(snap->rejected, 1u);

    // Per link: the subscribing link and the publishing link have entries.
    std::map<std::string, std::string> links;  // name by role
    for (const auto& c : registry_->snapshot()) {
      if (c.name.rfind("amqp-link:c/", 0) != 0) continue;
      EXPECT_EQ(c.owner, "amqp-listener");
      std::map<std::string, std::string> m(c.metadata.begin(), c.metadata.end());
      EXPECT_EQ(m["address"], "ticks");
      links[m["role"]] = c.name;
    }
    ASSERT_EQ(links.size(), 2u);
    auto link = [&](const std::string& role, const std::string& key) {
      return statValue(registry_->stats(), kAmqpLinkSchema.component, {{"name", links[role]}}, key)
          .value_or(-1);
    };
    EXPECT_EQ(link("subscribe", "delivered"), 2);
    EXPECT_EQ(link("subscribe", "acknowledged"), 2);
    EXPECT_EQ(link("subscribe", "redelivered"), 0);
    EXPECT_EQ(link("publish", "accepted"), 2);
    EXPECT_EQ(link("publish", "rejected"), 1);
    EXPECT_EQ(link("publish", "released"), 0);
    EXPECT_EQ(link("publish", "credit_withheld"), 0);
  }

  // The client's links are gone with it, their numbers too.
  ASSERT_TRUE(cepbus::testing::waitUntil([&] {
    for (const auto& c : registry_->snapshot()) {
      if (c.name.rfind("amqp-link:", 0) == 0) return false;
    }
    return true;
  }));
  EXPECT_TRUE(registry_->stats().scopes(kAmqpLinkSchema.component).empty());
  service_->stop();
  EXPECT_FALSE(registry_->snapshotOf("amqp-listener").has_value());
}

INSTANTIATE_TEST_SUITE_P(Threads, AmqpRequestTest, ::testing::Values(1u, 2u, 4u),
                         [](const ::testing::TestParamInfo<unsigned>& info) {
                           return std::to_string(info.param) + "_threads";
                         });

}  // namespace
}  // namespace cepbus::services::amqp
