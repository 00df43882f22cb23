#include "services/amqp/listener/listener_stats.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "bus/core/wire_names.h"
#include "router/registry.h"
#include "services/amqp/listener/admission.h"

namespace cepbus::services::amqp {
namespace {

// Each counter and gauge a different value, so that one registered or
// copied under the wrong name shows.
void fill(ListenerCounters& c) {
  uint64_t n = 0;
  for (stats::Counter* counter : {&c.connections,
                                  &c.published,
                                  &c.accepted,
                                  &c.released,
                                  &c.malformed,
                                  &c.credit_pauses,
                                  &c.sent,
                                  &c.acknowledged,
                                  &c.not_acknowledged,
                                  &c.buffer_full,
                                  &c.redelivered,
                                  &c.parked_overflow,
                                  &c.subscriber_waits,
                                  &c.subscriber_stalls,
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
                                  &c.handshake_timeouts,
                                  &c.unsettled_refused,
                                  &c.bytes_in_flight_refused,
                                  &c.user_unsettled_refused,
                                  &c.user_bytes_in_flight_refused}) {
    counter->add(++n);
  }
  for (stats::Gauge* gauge : {&c.paused_links, &c.subscriber_links, &c.parked_subscriptions,
                              &c.awaiting_commit, &c.unsettled}) {
    gauge->set(static_cast<int64_t>(++n));
  }
  c.publish_credit.set(100);
}

// What fill() and refuseEach() leave, by name.
const std::map<std::string, uint64_t> kFilled = {{"connections", 1},
                                                 {"published", 2},
                                                 {"accepted", 3},
                                                 {"released", 4},
                                                 {"malformed", 5},
                                                 {"credit_pauses", 6},
                                                 {"sent", 7},
                                                 {"acknowledged", 8},
                                                 {"not_acknowledged", 9},
                                                 {"buffer_full", 10},
                                                 {"redelivered", 11},
                                                 {"parked_overflow", 12},
                                                 {"subscriber_waits", 13},
                                                 {"subscriber_stalls", 14},
                                                 {"requests", 15},
                                                 {"answers", 16},
                                                 {"faults", 17},
                                                 {"answers_unroutable", 18},
                                                 {"provider_requests", 19},
                                                 {"provider_replies", 20},
                                                 {"late_replies", 21},
                                                 {"rejected", 22},
                                                 {"durable_restored", 23},
                                                 {"durable_not_restored", 24},
                                                 {"handshake_timeouts", 25},
                                                 {"unsettled_refused", 26},
                                                 {"bytes_in_flight_refused", 27},
                                                 {"user_unsettled_refused", 28},
                                                 {"user_bytes_in_flight_refused", 29},
                                                 {"paused_links", 30},
                                                 {"subscriber_links", 31},
                                                 {"parked_subscriptions", 32},
                                                 {"awaiting_commit", 33},
                                                 {"unsettled", 34},
                                                 {"publish_credit", 100},
                                                 {"connections_refused", 1},
                                                 {"sessions_refused", 1},
                                                 {"links_refused", 1},
                                                 {"durable_refused", 1},
                                                 {"requests_refused", 1},
                                                 {"user_sessions_refused", 1},
                                                 {"user_links_refused", 1},
                                                 {"names_refused", 1},
                                                 {"user_names_refused", 1},
                                                 {"messages_too_large", 2}};

// Every field of a copy, by name.
std::map<std::string, uint64_t> fieldsOf(const AmqpListenerStats& s) {
  return {{"connections", s.connections},
          {"published", s.published},
          {"accepted", s.accepted},
          {"released", s.released},
          {"malformed", s.malformed},
          {"credit_pauses", s.credit_pauses},
          {"sent", s.sent},
          {"acknowledged", s.acknowledged},
          {"not_acknowledged", s.not_acknowledged},
          {"buffer_full", s.buffer_full},
          {"redelivered", s.redelivered},
          {"parked_overflow", s.parked_overflow},
          {"subscriber_waits", s.subscriber_waits},
          {"subscriber_stalls", s.subscriber_stalls},
          {"requests", s.requests},
          {"answers", s.answers},
          {"faults", s.faults},
          {"answers_unroutable", s.answers_unroutable},
          {"provider_requests", s.provider_requests},
          {"provider_replies", s.provider_replies},
          {"late_replies", s.late_replies},
          {"rejected", s.rejected},
          {"durable_restored", s.durable_restored},
          {"durable_not_restored", s.durable_not_restored},
          {"handshake_timeouts", s.handshake_timeouts},
          {"unsettled_refused", s.unsettled_refused},
          {"bytes_in_flight_refused", s.bytes_in_flight_refused},
          {"user_unsettled_refused", s.user_unsettled_refused},
          {"user_bytes_in_flight_refused", s.user_bytes_in_flight_refused},
          {"paused_links", s.paused_links},
          {"subscriber_links", s.subscriber_links},
          {"parked_subscriptions", s.parked_subscriptions},
          {"awaiting_commit", s.awaiting_commit},
          {"unsettled", s.unsettled},
          {"publish_credit", s.publish_credit},
          {"connections_refused", s.connections_refused},
          {"sessions_refused", s.sessions_refused},
          {"links_refused", s.links_refused},
          {"durable_refused", s.durable_refused},
          {"requests_refused", s.requests_refused},
          {"user_sessions_refused", s.user_sessions_refused},
          {"user_links_refused", s.user_links_refused},
          {"names_refused", s.names_refused},
          {"user_names_refused", s.user_names_refused},
          {"messages_too_large", s.messages_too_large}};
}

// Limits at which refuseEach() is refused once of each kind but
// messages_too_large, which gets two.
AmqpLimits refusingLimits() {
  AmqpLimits limits;
  limits.max_connections = 3;
  limits.max_sessions = 1;
  limits.max_links = 1;
  limits.max_user_sessions = 1;
  limits.max_user_links = 1;
  limits.max_names = 1;
  limits.max_user_names = 1;
  limits.max_durable = 0;
  limits.max_pending_requests = 0;
  limits.max_message_size = 10;
  return limits;
}

// A name no test interned before (the symbol table is the process's).
std::string newName() {
  static int n = 0;
  return "listener-stats-test-name-" + std::to_string(++n);
}

// Connections 1 and 2 are alice's, 3 is anonymous: each limit is met once.
void refuseEach(AmqpAdmission& admission) {
  ASSERT_FALSE(admission.admitConnection(1, "alice").has_value());
  ASSERT_FALSE(admission.admitConnection(2, "alice").has_value());
  ASSERT_FALSE(admission.admitConnection(3).has_value());
  EXPECT_TRUE(admission.admitConnection(4).has_value());
  ASSERT_FALSE(admission.admitSession(1).has_value());
  EXPECT_TRUE(admission.admitSession(1).has_value());  // max-sessions
  EXPECT_TRUE(admission.admitSession(2).has_value());  // max-user-sessions
  ASSERT_FALSE(admission.admitLink(1).has_value());
  EXPECT_TRUE(admission.admitLink(1).has_value());  // max-links
  EXPECT_TRUE(admission.admitLink(2).has_value());  // max-user-links
  const std::optional<NameHold> anonymous = holdWireName(newName(), admission.names(3).get());
  ASSERT_TRUE(anonymous);
  EXPECT_FALSE(holdWireName(newName(), admission.names(3).get()));  // max-names
  const std::optional<NameHold> alice = holdWireName(newName(), admission.names(1).get());
  ASSERT_TRUE(alice);
  EXPECT_FALSE(holdWireName(newName(), admission.names(2).get()));  // max-user-names
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

// The metrics of the only scope of `component` in `store`, by name.
std::map<std::string, uint64_t> scopeOf(const stats::Store& store, std::string_view component) {
  const std::vector<stats::ScopeSnapshot> scopes = store.scopes(component);
  EXPECT_EQ(scopes.size(), 1u) << component;
  std::map<std::string, uint64_t> out;
  if (scopes.empty()) return out;
  for (const stats::MetricValue& m : scopes[0].metrics) {
    EXPECT_TRUE(out.emplace(m.name, static_cast<uint64_t>(m.value)).second) << m.name;
  }
  return out;
}

TEST(ListenerStatsTest, StatsCopiesEveryCounterAndTheRefusalsIntoTheirFields) {
  ListenerCounters counters;
  fill(counters);
  AmqpAdmission admission(refusingLimits());
  refuseEach(admission);
  EXPECT_EQ(fieldsOf(counters.stats(admission)), kFilled);
}

// The scope "amqp" {name} has every counter and refusal under its name: the
// families of /metrics and the "stats" of /api/components/<listener>.
TEST(ListenerStatsTest, TheListenersScopeHasEveryCounterAndRefusalByName) {
  router::Registry registry;
  ListenerCounters counters(registry.stats().scope(kAmqpSchema, {{"name", "amqp"}}));
  auto admission = std::make_shared<AmqpAdmission>(refusingLimits());
  reportRefusals(*counters.scope, admission);
  fill(counters);
  refuseEach(*admission);
  EXPECT_EQ(scopeOf(registry.stats(), "amqp"), kFilled);
  EXPECT_EQ(std::size(amqp_stats::kAll), kFilled.size());
  EXPECT_EQ(registry.stats().scopes("amqp")[0].labels, (stats::Labels{{"name", "amqp"}}));
}

TEST(ListenerStatsTest, PublishCreditIsTheNetOfTheChangesAdded) {
  ListenerCounters counters;
  counters.publish_credit.add(100);
  counters.publish_credit.add(-60);
  const AmqpAdmission admission{AmqpLimits{}};
  EXPECT_EQ(counters.stats(admission).publish_credit, 40u);
}

TEST(ListenerStatsTest, RegistryEntryShowsTheLiveNumbersWhenSnapshotted) {
  router::Registry registry;
  auto counters = std::make_shared<ListenerCounters>();
  auto admission = std::make_shared<AmqpAdmission>(AmqpLimits{});
  auto entry = reportListener(registry, "amqp", "127.0.0.1:5672", counters, admission);
  ASSERT_TRUE(entry) << entry.status().message();

  counters->sent.add(7);
  counters->released.add(3);
  counters->rejected.add(2);
  counters->malformed.add(4);
  counters->awaiting_commit.set(5);
  EXPECT_TRUE(admission->admitMessage(AmqpLimits{}.max_message_size + 1).has_value());

  auto s = registry.snapshotOf("amqp");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->kind, router::ComponentKind::kService);
  EXPECT_EQ(s->state, router::ComponentState::kStarted);
  EXPECT_EQ(metadata(*s, "type"), "amqp-listener");
  EXPECT_EQ(metadata(*s, "address"), "127.0.0.1:5672");
  EXPECT_EQ(s->metadata.size(), 2u);  // the numbers are in the stats scope, not strings here
  EXPECT_EQ(s->delivered, 7u);
  EXPECT_EQ(s->failed, 3u);
  EXPECT_EQ(s->rejected, 2u + 4u + 1u);  // rejected + malformed + messages_too_large
  EXPECT_EQ(s->queue_length, 5u);

  // Refreshed by each snapshot.
  counters->sent.inc();
  s = registry.snapshotOf("amqp");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->delivered, 8u);
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

TEST(ListenerStatsTest, ALinksEntryAndScopeShowItsCounters) {
  router::Registry registry;
  auto counters = std::make_shared<LinkCounters>();
  auto scope = reportLink(registry, "amqp-link:c/l", "amqp", "subscribe", "orders.*", counters);
  ASSERT_TRUE(scope) << scope.status().message();

  uint64_t n = 0;
  for (std::atomic<uint64_t>* counter :
       {&counters->accepted, &counters->rejected, &counters->released, &counters->credit_withheld,
        &counters->delivered, &counters->acknowledged, &counters->not_acknowledged,
        &counters->redelivered, &counters->parked_overflow}) {
    counter->store(++n);
  }

  auto s = registry.snapshotOf("amqp-link:c/l");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->kind, router::ComponentKind::kEndpoint);
  EXPECT_EQ(s->owner, "amqp");
  EXPECT_EQ(s->state, router::ComponentState::kStarted);
  EXPECT_EQ(metadata(*s, "role"), "subscribe");
  EXPECT_EQ(metadata(*s, "address"), "orders.*");
  EXPECT_EQ(s->delivered, 5u + 1u);  // delivered + accepted
  EXPECT_EQ(s->rejected, 2u);
  EXPECT_EQ(s->failed, 3u);
  EXPECT_EQ(scopeOf(registry.stats(), "amqp_link"),
            (std::map<std::string, uint64_t>{{"accepted", 1},
                                             {"rejected", 2},
                                             {"released", 3},
                                             {"credit_withheld", 4},
                                             {"delivered", 5},
                                             {"acknowledged", 6},
                                             {"not_acknowledged", 7},
                                             {"redelivered", 8},
                                             {"parked_overflow", 9}}));
  EXPECT_EQ(registry.stats().scopes("amqp_link")[0].labels,
            (stats::Labels{{"name", "amqp-link:c/l"}}));
  // The caller drops the scope when the link goes: its numbers go with it.
  scope->reset();
  EXPECT_TRUE(registry.stats().scopes("amqp_link").empty());
}

TEST(ListenerStatsTest, LinkEntryFailsWhenTheNameIsTaken) {
  router::Registry registry;
  auto first = reportLink(registry, "amqp-link:c/l", "amqp", "publish", "a",
                          std::make_shared<LinkCounters>());
  ASSERT_TRUE(first);
  auto again = reportLink(registry, "amqp-link:c/l", "amqp", "publish", "a",
                          std::make_shared<LinkCounters>());
  ASSERT_FALSE(again);
  EXPECT_EQ(again.status().code(), Status::Code::kAlreadyExists);
  EXPECT_EQ(registry.stats().scopes("amqp_link").size(), 1u);
}

}  // namespace
}  // namespace cepbus::services::amqp
