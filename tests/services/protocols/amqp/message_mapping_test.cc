#include "services/protocols/amqp/message_mapping.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <proton/codec/map.hpp>
#include <proton/codec/vector.hpp>
#include <proton/message.hpp>
#include <proton/scalar.hpp>
#include <proton/symbol.hpp>
#include <proton/timestamp.hpp>
#include <proton/types.hpp>
#include <proton/value.hpp>
#include <string>
#include <vector>

#include "bus/core/wire_names.h"

namespace cepbus::services::amqp {
namespace {

TEST(MessageMappingTest, MapsSubjectTsPropertiesAndMapBody) {
  proton::message m;
  m.subject("Stock");
  m.properties().put("ts", int64_t{42});
  m.properties().put("symbol", std::string("IBM"));
  m.properties().put("qty", int32_t{7});
  m.id(proton::message_id(uint64_t{99}));
  m.body(proton::value(std::map<std::string, proton::scalar>{{"price", 10.5}, {"open", true}}));
  MappedEvent e = eventFromMessage(m);
  ASSERT_NE(e.event, nullptr) << e.description;
  EXPECT_EQ(e.event->type().name(), "Stock");
  EXPECT_EQ(e.event->ts(), 42);
  EXPECT_EQ(e.event->id(), 99u);
  ASSERT_NE(e.event->find(Symbol::intern("symbol")), nullptr);
  EXPECT_EQ(e.event->find(Symbol::intern("symbol"))->asString(), "IBM");
  EXPECT_EQ(e.event->find(Symbol::intern("qty"))->asInt(), 7);
  EXPECT_DOUBLE_EQ(e.event->find(Symbol::intern("price"))->asDouble(), 10.5);
  EXPECT_TRUE(e.event->find(Symbol::intern("open"))->asBool());
  EXPECT_EQ(e.event->find(Symbol::intern("ts")), nullptr);
  EXPECT_EQ(e.event->attributes().size(), 4u);
}

TEST(MessageMappingTest, TypePropertyAndCreationTimeWhenNoSubjectOrTs) {
  proton::message m;
  m.properties().put("type", std::string("Order"));
  m.creation_time(proton::timestamp(1700));
  MappedEvent e = eventFromMessage(m);
  ASSERT_NE(e.event, nullptr) << e.description;
  EXPECT_EQ(e.event->type().name(), "Order");
  EXPECT_EQ(e.event->ts(), 1700);
  EXPECT_TRUE(e.event->attributes().empty());
}

TEST(MessageMappingTest, TsPropertyWinsOverCreationTime) {
  proton::message m;
  m.subject("A");
  m.creation_time(proton::timestamp(1700));
  m.properties().put("ts", int64_t{5});
  MappedEvent e = eventFromMessage(m);
  ASSERT_NE(e.event, nullptr);
  EXPECT_EQ(e.event->ts(), 5);
}

TEST(MessageMappingTest, RefusesWhatCannotBeMappedAndSaysWhy) {
  proton::message no_type;
  no_type.properties().put("ts", int64_t{1});
  MappedEvent e = eventFromMessage(no_type);
  EXPECT_EQ(e.event, nullptr);
  EXPECT_EQ(e.condition, kInvalidField);
  EXPECT_NE(e.description.find("type"), std::string::npos);

  proton::message no_ts;
  no_ts.subject("A");
  e = eventFromMessage(no_ts);
  EXPECT_EQ(e.event, nullptr);
  EXPECT_EQ(e.condition, kInvalidField);
  EXPECT_NE(e.description.find("timestamp"), std::string::npos);

  proton::message bad_ts;
  bad_ts.subject("A");
  bad_ts.properties().put("ts", std::string("soon"));
  e = eventFromMessage(bad_ts);
  EXPECT_EQ(e.event, nullptr);
  EXPECT_NE(e.description.find("\"ts\""), std::string::npos);

  proton::message text_body;
  text_body.subject("A");
  text_body.properties().put("ts", int64_t{1});
  text_body.body(proton::value(std::string("hello")));
  e = eventFromMessage(text_body);
  EXPECT_EQ(e.event, nullptr);
  EXPECT_EQ(e.condition, kDecodeError);

  proton::message nested;
  nested.subject("A");
  nested.properties().put("ts", int64_t{1});
  nested.body(proton::value(
      std::map<std::string, proton::value>{{"list", proton::value(std::vector<int32_t>{1, 2})}}));
  e = eventFromMessage(nested);
  EXPECT_EQ(e.event, nullptr);
  EXPECT_EQ(e.condition, kInvalidField);
  EXPECT_NE(e.description.find("list"), std::string::npos);
}

TEST(MessageMappingTest, EventToMessageRoundTrips) {
  EventPtr in =
      EventBuilder("Trade").at(77).set("symbol", "IBM").set("price", 3.5).set("n", 4).build();
  proton::message m = messageFromEvent(*in);
  EXPECT_EQ(m.subject(), "Trade");
  MappedEvent out = eventFromMessage(m);
  ASSERT_NE(out.event, nullptr) << out.description;
  EXPECT_EQ(out.event->type(), in->type());
  EXPECT_EQ(out.event->ts(), 77);
  EXPECT_EQ(out.event->id(), in->id());
  EXPECT_EQ(out.event->find(Symbol::intern("symbol"))->asString(), "IBM");
  EXPECT_DOUBLE_EQ(out.event->find(Symbol::intern("price"))->asDouble(), 3.5);
  EXPECT_EQ(out.event->find(Symbol::intern("n"))->asInt(), 4);
  EXPECT_EQ(out.event->attributes().size(), 3u);
}

// A composite event's interval crosses AMQP: `cepbus subscribe` prints its
// "start", as the replay sink does.
TEST(MessageMappingTest, AStartBeforeTsRoundTripsAndIsNoAttribute) {
  EventPtr in = EventBuilder("EqualPrices").interval(682, 698).set("a_price", 181.68).build();
  proton::message m = messageFromEvent(*in);
  EXPECT_EQ(proton::get<int64_t>(m.properties().get("start")), 682);
  MappedEvent out = eventFromMessage(m);
  ASSERT_NE(out.event, nullptr) << out.description;
  EXPECT_EQ(out.event->start(), 682);
  EXPECT_EQ(out.event->ts(), 698);
  EXPECT_EQ(out.event->attributes().size(), 1u);

  // An atomic event carries no "start".
  EXPECT_FALSE(messageFromEvent(*EventBuilder("A").at(5).build()).properties().exists("start"));

  for (const proton::scalar& bad : {proton::scalar(int64_t{699}), proton::scalar("682")}) {
    proton::message refused;
    refused.subject("EqualPrices");
    refused.properties().put("ts", int64_t{698});
    refused.properties().put("start", bad);
    MappedEvent e = eventFromMessage(refused);
    EXPECT_EQ(e.event, nullptr);
    EXPECT_EQ(e.condition, kInvalidField);
    EXPECT_NE(e.description.find("\"start\" must be an integer not after \"ts\""),
              std::string::npos)
        << e.description;
  }
}

TEST(MessageMappingTest, ProbabilityAndKeyRoundTripAsTheEventsOwn) {
  // An uncertain event crossing AMQP (a cluster partition, a bridge) keeps
  // its probability: the join engine's threshold depends on it.
  EventPtr in = EventBuilder("Reading")
                    .at(5)
                    .set("plate", "AB-1")
                    .probability(0.8)
                    .key(Value("AB-1"))
                    .build();
  MappedEvent out = eventFromMessage(messageFromEvent(*in));
  ASSERT_NE(out.event, nullptr) << out.description;
  EXPECT_DOUBLE_EQ(out.event->probability(), 0.8);
  EXPECT_EQ(out.event->key().asString(), "AB-1");
  EXPECT_EQ(out.event->attributes().size(), 1u);  // prob and key are not attributes

  proton::message bad;
  bad.subject("Reading");
  bad.properties().put("ts", int64_t{1});
  bad.properties().put("prob", 1.5);
  MappedEvent refused = eventFromMessage(bad);
  EXPECT_EQ(refused.event, nullptr);
  EXPECT_EQ(refused.condition, kInvalidField);
  EXPECT_NE(refused.description.find("\"prob\" must be a number in [0, 1]"), std::string::npos)
      << refused.description;
  proton::message bad_key;
  bad_key.subject("Reading");
  bad_key.properties().put("ts", int64_t{1});
  bad_key.properties().put("key", 2.5);  // found by fuzz_amqp_message: encodeEvent aborted on it
  MappedEvent key_refused = eventFromMessage(bad_key);
  EXPECT_EQ(key_refused.event, nullptr);
  EXPECT_NE(key_refused.description.find("\"key\" must be a string or an integer"),
            std::string::npos)
      << key_refused.description;
}

TEST(MessageMappingTest, BodyKeysMayBeSymbolsValuesNullAndABodyEntryWins) {
  proton::message m;
  m.subject("A");
  m.properties().put("ts", int64_t{1});
  m.properties().put("who", std::string("property"));
  m.body(proton::value(std::map<proton::symbol, proton::scalar>{
      {proton::symbol("who"), std::string("body")}, {proton::symbol("none"), proton::scalar()}}));
  MappedEvent e = eventFromMessage(m);
  ASSERT_NE(e.event, nullptr) << e.description;
  EXPECT_EQ(e.event->find(Symbol::intern("who"))->asString(), "body");
  ASSERT_NE(e.event->find(Symbol::intern("none")), nullptr);
  EXPECT_TRUE(e.event->find(Symbol::intern("none"))->isNull());
  EXPECT_EQ(e.event->attributes().size(), 2u);
}

TEST(MessageMappingTest, RefusesABodyWithNonStringKeys) {
  proton::message int_keys;
  int_keys.subject("A");
  int_keys.properties().put("ts", int64_t{1});
  int_keys.body(proton::value(std::map<int32_t, proton::scalar>{{1, std::string("x")}}));
  MappedEvent e = eventFromMessage(int_keys);
  EXPECT_EQ(e.event, nullptr);
  EXPECT_EQ(e.condition, kDecodeError);
  EXPECT_NE(e.description.find("keys must be strings"), std::string::npos) << e.description;
}

TEST(MessageMappingTest, AReusedMessageCarriesOnlyTheLastEvent) {
  EventPtr first = EventBuilder("First")
                       .at(1)
                       .set("a", 1)
                       .set("b", std::string("x"))
                       .probability(0.5)
                       .key(Value(std::string("k")))
                       .build();
  EventPtr second = EventBuilder("Second").at(2).set("c", 3.5).build();
  proton::message reused;
  messageFromEvent(*first, reused);
  messageFromEvent(*second, reused);
  EXPECT_EQ(reused.subject(), "Second");
  EXPECT_FALSE(reused.properties().exists("prob"));
  EXPECT_FALSE(reused.properties().exists("key"));
  std::vector<char> wire;
  reused.encode(wire);
  proton::message decoded;
  decoded.decode(wire);
  MappedEvent out = eventFromMessage(decoded);
  ASSERT_NE(out.event, nullptr) << out.description;
  EXPECT_EQ(out.event->type().name(), "Second");
  EXPECT_EQ(out.event->ts(), 2);
  ASSERT_EQ(out.event->attributes().size(), 1u);
  EXPECT_DOUBLE_EQ(out.event->find(Symbol::intern("c"))->asDouble(), 3.5);
}

// Found by tests/fuzz/amqp_message_fuzz.cc: AMQP strings are UTF-8 by the
// spec but Proton does not check, and an event carrying a bad byte made
// encodeEvent() throw (nlohmann::json) wherever it was first encoded, e.g.
// on the journal thread. Such a message is refused at the mapping.
TEST(MessageMappingTest, RefusesStringsThatAreNotUtf8) {
  const std::string bad = "IB\xff";
  auto expectRefused = [](const proton::message& m, const char* what) {
    const MappedEvent e = eventFromMessage(m);
    EXPECT_EQ(e.event, nullptr) << what;
    EXPECT_EQ(e.condition, kDecodeError) << what;
    EXPECT_NE(e.description.find("UTF-8"), std::string::npos) << what << ": " << e.description;
  };
  {
    proton::message m;
    m.subject(bad);
    m.properties().put("ts", int64_t{1});
    expectRefused(m, "subject");
  }
  {
    proton::message m;
    m.subject("Stock");
    m.properties().put("ts", int64_t{1});
    m.properties().put(bad, int64_t{2});
    expectRefused(m, "property key");
  }
  {
    proton::message m;
    m.subject("Stock");
    m.properties().put("ts", int64_t{1});
    m.body(proton::value(std::map<std::string, proton::scalar>{{"symbol", bad}}));
    expectRefused(m, "body value");
  }
  {
    proton::message m;
    m.subject("Stock");
    m.properties().put("ts", int64_t{1});
    m.body(proton::value(
        std::map<std::string, proton::scalar>{{"symbol", proton::symbol("\xc0\xaf")}}));
    expectRefused(m, "overlong symbol value");
  }
  // Multi-byte UTF-8 is fine.
  proton::message ok;
  ok.subject("B\xc3\xb6rse");
  ok.properties().put("ts", int64_t{1});
  ok.properties().put("w\xc3\xa4hrung", std::string("\xe2\x82\xac"));
  EXPECT_NE(eventFromMessage(ok).event, nullptr);
}

// A client sending ever new property names gets them refused with AMQP's
// resource-limit condition once the budget of names from clients is spent
// (bus/core/wire_names.h), instead of filling the process's symbol table.
TEST(MessageMappingTest, RefusesNewNamesBeyondTheWireBudget) {
  auto message = [](const std::string& type, const std::string& property) {
    proton::message m;
    m.subject(type);
    m.properties().put("ts", int64_t{1});
    m.properties().put(property, int64_t{2});
    return m;
  };
  ASSERT_NE(eventFromMessage(message("WireStock", "wire_known")).event, nullptr);
  setWireNameBudget(wireNameStats().held);  // no new name from now on
  EXPECT_NE(eventFromMessage(message("WireStock", "wire_known")).event, nullptr);
  const MappedEvent property = eventFromMessage(message("WireStock", "wire_new_property"));
  const MappedEvent type = eventFromMessage(message("WireNewType", "wire_known"));
  setWireNameBudget(kDefaultWireNameBudget);
  EXPECT_EQ(property.event, nullptr);
  EXPECT_EQ(property.condition, "amqp:resource-limit-exceeded");
  EXPECT_NE(property.description.find("attribute name 'wire_new_property' refused"),
            std::string::npos)
      << property.description;
  EXPECT_EQ(type.event, nullptr);
  EXPECT_EQ(type.condition, "amqp:resource-limit-exceeded");
}

// With the client's quota, the names only its events carry are charged to
// it while they are held, refused (naming the setting) once it is spent, and
// refunded when the events are gone.
TEST(MessageMappingTest, ChargesNewNamesToTheClientsQuotaWhileHeld) {
  auto refused = std::make_shared<std::atomic<uint64_t>>(0);
  auto quota = std::make_shared<WireNameQuota>(2, "max-names", refused);
  proton::message m;
  m.subject("QuotaStock");
  m.properties().put("ts", int64_t{1});
  m.properties().put("quota_a", int64_t{2});
  MappedEvent first = eventFromMessage(m, quota.get());
  ASSERT_NE(first.event, nullptr);
  EXPECT_EQ(quota->held(), 2u);  // the type and quota_a
  m.properties().put("quota_b", int64_t{3});
  const MappedEvent e = eventFromMessage(m, quota.get());
  EXPECT_EQ(e.event, nullptr);
  EXPECT_EQ(e.condition, kResourceLimitExceeded);
  EXPECT_EQ(e.description,
            "attribute name 'quota_b' refused: names held per client (max-names): 2 reached");
  EXPECT_EQ(refused->load(), 1u);
  EXPECT_NE(eventFromMessage(m).event, nullptr);  // another client's budget is untouched
  first.event.reset();
  EXPECT_EQ(quota->held(), 0u);
  proton::message next;
  next.subject("QuotaStock");
  next.properties().put("ts", int64_t{2});
  next.properties().put("quota_b", int64_t{3});
  const MappedEvent again = eventFromMessage(next, quota.get());
  ASSERT_NE(again.event, nullptr);
  EXPECT_EQ(quota->held(), 2u);  // the type and quota_b
}

// Found by tests/fuzz/amqp_message_fuzz.cc: an application property "type"
// holding a NUL became an event type that the way out (subject, a C string
// in Proton's core) cut short, so the event left under another type.
TEST(MessageMappingTest, RefusesAnEventTypeWithANul) {
  proton::message m;
  m.properties().put("type", std::string("Stock\0Other", 11));
  m.properties().put("ts", int64_t{1});
  const MappedEvent e = eventFromMessage(m);
  EXPECT_EQ(e.event, nullptr);
  EXPECT_EQ(e.condition, kInvalidField);
  EXPECT_NE(e.description.find("NUL"), std::string::npos) << e.description;
}

}  // namespace
}  // namespace cepbus::services::amqp
