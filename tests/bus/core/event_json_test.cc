#include "bus/core/event_json.h"

#include <gtest/gtest.h>

#include <sstream>

namespace cepbus {
namespace {

TEST(EventJsonTest, DecodesTheContractExample) {
  auto e = decodeEvent(R"({"type":"A","ts":17,"attrs":{"price":10.5,"symbol":"IBM"}})");
  ASSERT_TRUE(e.isOk()) << e.status().toString();
  EXPECT_EQ((*e)->type().name(), "A");
  EXPECT_EQ((*e)->ts(), 17);
  EXPECT_EQ((*e)->find(Symbol::intern("price"))->asDouble(), 10.5);
  EXPECT_EQ((*e)->find(Symbol::intern("symbol"))->asString(), "IBM");
}

TEST(EventJsonTest, DecodesOptionalFields) {
  auto e = decodeEvent(R"({"type":"P","ts":3,"prob":0.25,"key":"12345","cost":7,"attrs":{}})");
  ASSERT_TRUE(e.isOk()) << e.status().toString();
  EXPECT_EQ((*e)->probability(), 0.25);
  EXPECT_EQ((*e)->key().asString(), "12345");
  EXPECT_EQ((*e)->cost(), 7);
}

TEST(EventJsonTest, RoundTripsCompactAndFull) {
  EventPtr part = EventBuilder("A").at(1).set("x", 1).build();
  EventPtr e = EventBuilder("AB")
                   .constituent(part)
                   .interval(1, 4)
                   .set("n", "q")
                   .probability(0.5)
                   .key(9)
                   .cost(2)
                   .source(Symbol::intern("amqp"))
                   .build();
  auto back = decodeEvent(encodeEvent(*e, EventFormat::kFull));
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ((*back)->start(), 1);
  EXPECT_EQ((*back)->end(), 4);
  EXPECT_EQ((*back)->id(), e->id());
  EXPECT_EQ((*back)->key().asInt(), 9);
  EXPECT_EQ((*back)->source().name(), "amqp");
  ASSERT_EQ((*back)->constituents().size(), 1u);
  EXPECT_EQ((*back)->constituents()[0]->find(Symbol::intern("x"))->asInt(), 1);
  EXPECT_EQ(encodeEvent(**back, EventFormat::kFull), encodeEvent(*e, EventFormat::kFull));

  EXPECT_EQ(encodeEvent(*EventBuilder("A").at(17).set("price", 10.5).build()),
            R"({"attrs":{"price":10.5},"ts":17,"type":"A"})");
}

struct BadLine {
  const char* line;
  const char* reason;
};

class EventJsonBadLineTest : public testing::TestWithParam<BadLine> {};

TEST_P(EventJsonBadLineTest, IsRejectedWithItsReason) {
  auto e = decodeEvent(GetParam().line);
  ASSERT_FALSE(e.isOk());
  EXPECT_EQ(e.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(e.status().message().find(GetParam().reason), std::string::npos)
      << e.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, EventJsonBadLineTest,
    testing::Values(BadLine{R"({"type":"A","ts":1)", "malformed JSON"},
                    BadLine{R"([1,2])", "expected a JSON object"},
                    BadLine{R"({"ts":1})", "missing field \"type\""},
                    BadLine{R"({"type":"","ts":1})", "non-empty string"},
                    BadLine{R"({"type":"A"})", "missing field \"ts\""},
                    BadLine{R"({"type":"A","ts":1.5})", "\"ts\": expected an integer"},
                    BadLine{R"({"type":"A","ts":"1"})", "\"ts\": expected an integer"},
                    BadLine{R"({"type":"A","ts":1,"attrs":[1]})", "\"attrs\": expected an object"},
                    BadLine{R"({"type":"A","ts":1,"attrs":{"x":{"y":1}}})", "attrs.x"},
                    BadLine{R"({"type":"A","ts":1,"prob":1.5})", "probability in [0,1]"},
                    BadLine{R"({"type":"A","ts":1,"key":[1]})", "\"key\""},
                    BadLine{R"({"type":"A","ts":1,"timestamp":1})", "unknown field \"timestamp\""},
                    BadLine{R"({"type":"A","ts":1,"start":5})", "\"start\" is after \"ts\""}));

TEST(EventLineReaderTest, NamesTheLineOfABadEventAndReadsOn) {
  std::istringstream in(
      "{\"type\":\"A\",\"ts\":1}\n"
      "\n"
      "{\"type\":\"B\"}\n"
      "{\"type\":\"C\",\"ts\":3}\n");
  EventLineReader reader(in);
  auto first = reader.next();
  ASSERT_TRUE(first.isOk()) << first.status().toString();
  EXPECT_EQ((*first)->type().name(), "A");
  auto bad = reader.next();
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(), "line 3: missing field \"ts\"");
  auto third = reader.next();
  ASSERT_TRUE(third.isOk());
  EXPECT_EQ((*third)->type().name(), "C");
  EXPECT_EQ(reader.lineNumber(), 4u);
  EXPECT_EQ(reader.next().status().code(), Status::Code::kNotFound);
}

// An event that carries a byte that is not UTF-8 (a decoder that forgot to
// check, see utf8.h) is still encoded, with a replacement character, instead
// of throwing from nlohmann::json on whichever thread encodes it.
TEST(EventJsonTest, EncodingTextThatIsNotUtf8DoesNotThrow) {
  EventPtr e = EventBuilder("A").at(1).set("s", Value(std::string("x\xff"))).build();
  std::string line;
  ASSERT_NO_THROW(line = encodeEvent(*e));
  EXPECT_NE(line.find("x\xef\xbf\xbd"), std::string::npos) << line;  // U+FFFD
  EXPECT_NO_THROW((void)Value(std::string("\xc3")).toString());
}

// Found by tests/fuzz/event_json_fuzz.cc: nlohmann::json reports a number
// too large for a double as out_of_range, not parse_error, so a replay line
// or an event POSTed to the admin API with such a number escaped
// decodeEvent() as an exception (std::terminate in `cepbus match`).
TEST(EventJsonTest, ANumberTooLargeForADoubleIsABadLineNotAnException) {
  Result<EventPtr> e = Status::internal("not decoded");
  ASSERT_NO_THROW(e = decodeEvent(R"({"type":"A","ts":1,"attrs":{"p":1e999}})"));
  ASSERT_FALSE(e);
  EXPECT_EQ(e.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(e.status().message().find("number overflow"), std::string::npos)
      << e.status().message();
  ASSERT_NO_THROW(e = decodeEvent(R"({"type":"A","ts":-1e400})"));
  EXPECT_FALSE(e);
}

// Found by tests/fuzz/event_json_fuzz.cc in a 30-minute run: simdjson types
// a value by its first letter, so "n48" passed for a null until is_null()
// refused it, and that refusal, read as a plain bool, was thrown out of
// decodeEvent() (std::terminate in `cepbus match`, a replay source or
// POST /api/events).
TEST(EventJsonTest, AValueThatOnlyStartsLikeNullIsABadLineNotAnException) {
  // Known names: the fast decoder declines lines with new ones.
  Symbol::intern("A");
  Symbol::intern("p");
  for (const char* line :
       {R"({"type":"A","ts":1,"attrs":{"p":n48}})", R"({"type":"A","ts":1,"attrs":{"p":nul}})",
        R"({"type":"A","ts":1,"attrs":{"p":nulll}})"}) {
    Result<EventPtr> e = Status::internal("not decoded");
    ASSERT_NO_THROW(e = decodeEvent(line)) << line;
    ASSERT_FALSE(e) << line;
    EXPECT_EQ(e.status().code(), Status::Code::kInvalidArgument) << line;
  }
}

// Found by tests/fuzz/event_json_fuzz.cc (its fast-path invariant): the
// fast decoder read a number with a 99-digit mantissa, or any decimal of 19
// digits, as 0.
TEST(EventJsonTest, ANumberWithALongMantissaKeepsItsValue) {
  Symbol::intern("A");
  Symbol::intern("p");
  Result<EventPtr> e = decodeEvent(
      R"({"type":"A","ts":1,"attrs":{"p":104444444444444444444444444444444444444444444444444444444444444444444444444444444444444444444444449.66}})");
  ASSERT_TRUE(e) << e.status().message();
  EXPECT_DOUBLE_EQ((*e)->find(Symbol::intern("p"))->asDouble(), 1.0444444444444444e+98);
  e = decodeEvent(R"({"type":"A","ts":1,"attrs":{"p":12345678901234567.5}})");
  ASSERT_TRUE(e) << e.status().message();
  EXPECT_DOUBLE_EQ((*e)->find(Symbol::intern("p"))->asDouble(), 12345678901234567.5);
  e = decodeEvent(R"({"type":"A","ts":1,"attrs":{"p":10444444444444444.66}})");
  ASSERT_TRUE(e) << e.status().message();
  EXPECT_DOUBLE_EQ((*e)->find(Symbol::intern("p"))->asDouble(), 10444444444444444.66);
}

// An event type travels as an AMQP subject, a C string in Proton's core: a
// type with a NUL would leave the bus cut short, so it is refused on the way in.
TEST(EventJsonTest, RefusesAnEventTypeWithANul) {
  auto e = decodeEvent(R"({"type":"Stock\u0000Other","ts":1})");
  ASSERT_FALSE(e);
  EXPECT_NE(e.status().message().find("NUL"), std::string::npos) << e.status().message();
}

}  // namespace
TEST(EventJsonTest, ExactEncodingRefusesWhatWouldComeBackAltered) {
  EventPtr bad = EventBuilder("A").at(1).set("note", Value(std::string("\xff\xfe"))).build();
  EXPECT_NE(encodeEvent(*bad).find("attrs"), std::string::npos);  // replaced, not thrown
  auto exact = encodeEventExactly(*bad);
  ASSERT_FALSE(exact.isOk());
  EXPECT_NE(exact.status().message().find("cannot be encoded as JSON exactly"), std::string::npos);
  EventPtr good = EventBuilder("A").at(1).set("note", Value("ok")).build();
  auto line = encodeEventExactly(*good);
  ASSERT_TRUE(line.isOk());
  EXPECT_EQ(*line, encodeEvent(*good));
}

}  // namespace cepbus
