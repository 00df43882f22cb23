#include "services/amqp/listener/listener_stats.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "router/registry.h"
#include "services/amqp/listener/admission.h"

namespace cepbus::services::amqp {
namespace {

// Each counter a different value, so that a counter copied into the wrong
// field shows.
void fill(ListenerCounters& c) {
  uint64_t n = 0;
  for (std::atomic<uint64_t>* counter : {&c.connections,
                                         &c.published,
                                         &c.accepted,
                                         &c.released,
                                         &c.malformed,
                                         &c.credit_pauses,
                                         &c.sent,
                                         &c.acknowledged,
                                         &c.not_acknowledged,
                                         &c.buffer_full,
                                         &c.paused_links,
                                         &c.subscriber_links,
                                         &c.redelivered,
                                         &c.parked_subscriptions,
                                         &c.parked_overflow,
                                         &c.subscriber_waits,
                                         &c.subscriber_stalls,
                                         &c.awaiting_commit,
                                         &c.unsettled,
                                         &c.requests,
                                         &c.answers,
                                         &c.faults,
                                         &c.answers_unroutable,
                                         &c.provider_requests,
                                         &c.provider_replies,
                                         &c.late_replies,
                                         &c.rejected,
                                         &c.durable_restored,
                                         &c.durable_not_restored,
                                         &c.handshake_timeouts}) {
    counter->store(++n);
  }
  c.publish_credit.store(100);
}

// One refusal of each kind but messages_too_large, which gets two.
AmqpAdmission refusing() {
  AmqpLimits limits;
  limits.max_connections = 1;
  limits.max_sessions = 0;
  limits.max_links = 0;
  limits.max_durable = 0;
  limits.max_pending_requests = 0;
  limits.max_message_size = 10;
  return AmqpAdmission(limits);
}

void refuseEach(AmqpAdmission& admission) {
  ASSERT_FALSE(admission.admitConnection(1).has_value());
  EXPECT_TRUE(admission.admitConnection(2).has_value());
  EXPECT_TRUE(admission.admitSession(1).has_value());
  EXPECT_TRUE(admission.admitLink(1).has_value());
  EXPECT_TRUE(admission.admitDurable("alice").has_value());
  EXPECT_TRUE(admission.admitRequest(1).has_value());
  EXPECT_TRUE(admission.admitMessage(11).has_value());
  EXPECT_TRUE(admission.admitMessage(12).has_value());
}

std::optional<std::string> metadata(const router::ComponentSnapshot& s, const std::string& key) {
  for (const auto& [k, v] : s.metadata) {
    if (k == key) return v;
  }
  return std::nullopt;
}

TEST(ListenerStatsTest, CopiesEveryCounterAndTheRefusalsIntoTheirFields) {
  ListenerCounters counters;
  fill(counters);
  AmqpAdmission admission = refusing();
  refuseEach(admission);

  const std::map<std::string, uint64_t> expected = {{"connections", 1},
                                                    {"published", 2},
                                                    {"accepted", 3},
                                                    {"released", 4},
                                                    {"malformed", 5},
                                                    {"credit_pauses", 6},
                                                    {"sent", 7},
                                                    {"acknowledged", 8},
                                                    {"not_acknowledged", 9},
                                                    {"buffer_full", 10},
                                                    {"paused_links", 11},
                                                    {"subscriber_links", 12},
                                                    {"redelivered", 13},
                                                    {"parked_subscriptions", 14},
                                                    {"parked_overflow", 15},
                                                    {"subscriber_waits", 16},
                                                    {"subscriber_stalls", 17},
                                                    {"awaiting_commit", 18},
                                                    {"unsettled", 19},
                                                    {"requests", 20},
                                                    {"answers", 21},
                                                    {"faults", 22},
                                                    {"answers_unroutable", 23},
                                                    {"provider_requests", 24},
                                                    {"provider_replies", 25},
                                                    {"late_replies", 26},
                                                    {"rejected", 27},
                                                    {"durable_restored", 28},
                                                    {"durable_not_restored", 29},
                                                    {"handshake_timeouts", 30},
                                                    {"publish_credit", 100},
                                                    {"connections_refused", 1},
                                                    {"sessions_refused", 1},
                                                    {"links_refused", 1},
                                                    {"durable_refused", 1},
                                                    {"requests_refused", 1},
                                                    {"messages_too_large", 2}};
  const auto fields = statsFields(counters.stats(admission));
  std::map<std::string, uint64_t> actual(fields.begin(), fields.end());
  EXPECT_EQ(actual.size(), fields.size()) << "a field name appears twice";
  EXPECT_EQ(actual, expected);
}

TEST(ListenerStatsTest, PublishCreditIsTheNetOfTheChangesAdded) {
  ListenerCounters counters;
  counters.publish_credit.fetch_add(100);
  counters.publish_credit.fetch_add(-60);
  const AmqpAdmission admission{AmqpLimits{}};
  EXPECT_EQ(counters.stats(admission).publish_credit, 40u);
}

TEST(ListenerStatsTest, RegistryEntryShowsTheCountersWhenSnapshotted) {
  router::Registry registry;
  auto counters = std::make_shared<ListenerCounters>();
  auto admission = std::make_shared<AmqpAdmission>(AmqpLimits{});
  auto entry = reportListener(registry, "amqp", "127.0.0.1:5672", counters, admission);
  ASSERT_TRUE(entry) << entry.status().message();

  counters->sent.store(7);
  counters->released.store(3);
  counters->rejected.store(2);
  counters->malformed.store(4);
  counters->awaiting_commit.store(5);
  EXPECT_TRUE(admission->admitMessage(AmqpLimits{}.max_message_size + 1).has_value());

  auto s = registry.snapshotOf("amqp");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->kind, router::ComponentKind::kService);
  EXPECT_EQ(s->state, router::ComponentState::kStarted);
  EXPECT_EQ(metadata(*s, "type"), "amqp-listener");
  EXPECT_EQ(metadata(*s, "address"), "127.0.0.1:5672");
  EXPECT_EQ(s->delivered, 7u);
  EXPECT_EQ(s->failed, 3u);
  EXPECT_EQ(s->rejected, 2u + 4u + 1u);  // rejected + malformed + messages_too_large
  EXPECT_EQ(s->queue_length, 5u);
  for (const auto& [key, value] : statsFields(counters->stats(*admission))) {
    EXPECT_EQ(metadata(*s, key), std::to_string(value)) << key;
  }

  // Refreshed by each snapshot.
  counters->sent.store(8);
  s = registry.snapshotOf("amqp");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->delivered, 8u);
  EXPECT_EQ(metadata(*s, "sent"), "8");
}

TEST(ListenerStatsTest, RegistryEntryFailsWhenTheNameIsTaken) {
  router::Registry registry;
  ASSERT_TRUE(registry.add("amqp", router::ComponentKind::kService));
  auto entry =
      reportListener(registry, "amqp", "127.0.0.1:5672", std::make_shared<ListenerCounters>(),
                     std::make_shared<AmqpAdmission>(AmqpLimits{}));
  ASSERT_FALSE(entry);
  EXPECT_EQ(entry.status().code(), Status::Code::kAlreadyExists);
}

TEST(ListenerStatsTest, LinkEntryShowsTheLinksCountersWhenSnapshotted) {
  router::Registry registry;
  auto counters = std::make_shared<LinkCounters>();
  auto entry = reportLink(registry, "amqp-link:c/l", "amqp", "subscribe", "orders.*", counters);
  ASSERT_TRUE(entry) << entry.status().message();

  counters->delivered.store(5);
  counters->accepted.store(2);
  counters->rejected.store(3);
  counters->released.store(4);
  bump(counters->parked_overflow);

  auto s = registry.snapshotOf("amqp-link:c/l");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->kind, router::ComponentKind::kEndpoint);
  EXPECT_EQ(s->owner, "amqp");
  EXPECT_EQ(s->state, router::ComponentState::kStarted);
  EXPECT_EQ(metadata(*s, "role"), "subscribe");
  EXPECT_EQ(metadata(*s, "address"), "orders.*");
  EXPECT_EQ(s->delivered, 5u + 2u);  // delivered + accepted
  EXPECT_EQ(s->rejected, 3u);
  EXPECT_EQ(s->failed, 4u);
  EXPECT_EQ(metadata(*s, "parked_overflow"), "1");
  for (const auto& [key, value] : counters->fields()) {
    EXPECT_EQ(metadata(*s, key), std::to_string(value)) << key;
  }
}

TEST(ListenerStatsTest, LinkEntryFailsWhenTheNameIsTaken) {
  router::Registry registry;
  ASSERT_TRUE(reportLink(registry, "amqp-link:c/l", "amqp", "publish", "a",
                         std::make_shared<LinkCounters>()));
  auto again = reportLink(registry, "amqp-link:c/l", "amqp", "publish", "a",
                          std::make_shared<LinkCounters>());
  ASSERT_FALSE(again);
  EXPECT_EQ(again.status().code(), Status::Code::kAlreadyExists);
}

}  // namespace
}  // namespace cepbus::services::amqp
