#include "bus/core/fast_event_decoder.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "bus/core/event_json.h"

namespace cepbus {
namespace {

std::optional<EventPtr> fastDecode(FastEventDecoder& decoder, const std::string& line) {
  std::string padded = line;
  padded.resize(line.size() + FastEventDecoder::kPadding, 'x');  // padding content is ignored
  return decoder.decode(std::string_view(padded.data(), line.size()), padded.size());
}

TEST(FastEventDecoderTest, ReadsTheCommonLinesLikeTheReference) {
  Symbol::intern("Reading");
  Symbol::intern("plate");
  Symbol::intern("camera");
  Symbol::intern("speed");
  Symbol::intern("ok");
  Symbol::intern("none");
  Symbol::intern("amqp");
  FastEventDecoder decoder;
  for (const std::string line : {
           R"({"type":"Reading","ts":17,"attrs":{"plate":"AB-123-CD","camera":4,"speed":87.5}})",
           R"({"ts":-3,"type":"Reading","attrs":{"ok":true,"none":null,"speed":1e2}})",
           R"({"type":"Reading","ts":5,"prob":0.25,"key":"k\u00e9","cost":-2,"start":1})",
           R"({"type":"Reading","ts":5,"prob":1,"key":42,"id":77,"source":"amqp"})",
           R"({"type":"Reading","ts":5,"attrs":{"speed":1,"speed":2.5}})",
           R"({"type":"Reading","ts":5,"attrs":{"speed":-0,"plate":"\ud83d\ude00"}})",
           " \t{\"type\":\"Reading\",\"ts\":1}\r",
       }) {
    std::optional<EventPtr> fast = fastDecode(decoder, line);
    ASSERT_TRUE(fast.has_value()) << line;
    Result<EventPtr> ref = decodeEventReference(line);
    ASSERT_TRUE(ref.isOk()) << line;
    EXPECT_EQ(encodeEvent(**fast), encodeEvent(**ref)) << line;
    EXPECT_EQ((*fast)->source(), (*ref)->source()) << line;
    if (line.find("\"id\"") != std::string::npos) {
      EXPECT_EQ((*fast)->id(), (*ref)->id()) << line;
    }
  }
}

// What the fast path cannot vouch for goes to the reference decoder, which
// alone words the errors.
TEST(FastEventDecoderTest, DeclinesWhatTheReferenceMustDecide) {
  Symbol::intern("Reading");
  Symbol::intern("plate");
  FastEventDecoder decoder;
  for (
      const std::string line : {
          R"({"type":"Reading","ts":1)",
          R"({"type":"Reading","ts":1} {})",
          R"({"type":"Reading","ts":1,})",
          R"([1,2])",
          R"({"ts":1})",
          R"({"type":"","ts":1})",
          R"({"type":"Reading","ts":1.5})",
          R"({"type":"Reading","ts":1,"ts":2})",
          R"({"type":"Reading","ts":1,"attrs":{"plate":{"y":1}}})",
          R"({"type":"Reading","ts":1,"attrs":{"plate":18446744073709551615}})",
          R"({"type":"Reading","ts":1,"attrs":{"plate":1e999}})",
          R"({"type":"Reading","ts":1,"attrs":{"plate":"\ud800"}})",
          R"({"type":"Reading","ts":1,"attrs":{"plate":n48}})",
          R"({"type":"Reading","ts":1,"attrs":{"plate":104444444444444444444444444444444444444444444444444444444444444444444444444444444444444444444444449.66}})",
          R"({"type":"Reading","ts":1,"attrs":{"plate":10444444444444444.66}})",
          "{\"type\":\"Reading\",\"ts\":1,\"attrs\":{\"plate\":\"a\tb\"}}",
          "{\"type\":\"Reading\",\"ts\":1,\"attrs\":{\"plate\":\"\xff\"}}",
          R"({"type":"Reading","ts":1,"prob":1.5})",
          R"({"type":"Reading","ts":1,"id":0})",
          R"({"type":"Reading","ts":1,"start":5})",
          R"({"type":"Reading","ts":1,"timestamp":1})",
          R"({"type":"Reading","ts":1,"events":[]})",
          R"({"type":"Reading\u0000x","ts":1})",
      }) {
    EXPECT_FALSE(fastDecode(decoder, line).has_value()) << line;
  }
}

// Names no query knows are held as the reference decoder holds them (the
// same symbols); a caller charging a client's quota has the reference
// decoder take them instead.
TEST(FastEventDecoderTest, HoldsNewNamesUnlessAQuotaMustBeCharged) {
  FastEventDecoder decoder;
  const std::string line = R"({"type":"NeverSeenBeforeFastType","ts":1,"attrs":{"fast_new":1}})";
  std::string padded = line;
  padded.resize(line.size() + FastEventDecoder::kPadding);
  const std::string_view text(padded.data(), line.size());
  EXPECT_FALSE(decoder.decode(text, padded.size(), /*hold_new_names=*/false).has_value());
  std::optional<EventPtr> fast = decoder.decode(text, padded.size());
  ASSERT_TRUE(fast.has_value());
  EXPECT_TRUE((*fast)->type().held());
  Result<EventPtr> ref = decodeEventReference(line);
  ASSERT_TRUE(ref.isOk());
  EXPECT_EQ((*fast)->type(), (*ref)->type());
  EXPECT_EQ(encodeEvent(**fast), encodeEvent(**ref));
  EXPECT_FALSE(decoder.decode(text, padded.size(), /*hold_new_names=*/false).has_value());
}

TEST(FastEventDecoderTest, RefusesTooLittlePadding) {
  FastEventDecoder decoder;
  const std::string line = R"({"type":"A","ts":1})";
  EXPECT_FALSE(decoder.decode(line, line.size()).has_value());
}

// The reader's block buffer: lines across block boundaries, a line longer
// than a block, CRLF endings and a last line without a newline.
TEST(FastEventDecoderTest, TheReaderSplitsLinesAcrossBlocks) {
  std::string text;
  const int kLines = 120000;  // about 3 MB: several blocks
  for (int i = 1; i <= kLines; ++i) {
    text += "{\"type\":\"A\",\"ts\":" + std::to_string(i) + "}" + (i % 7 == 0 ? "\r\n" : "\n");
  }
  text += R"({"type":"A","ts":0,"attrs":{"long":")" + std::string(3 << 20, 'z') + "\"}}\n";
  text += R"({"type":"A","ts":-1})";
  std::istringstream in(text);
  EventLineReader reader(in);
  for (int i = 1; i <= kLines; ++i) {
    Result<EventPtr> e = reader.next();
    ASSERT_TRUE(e.isOk()) << i << ": " << e.status().toString();
    ASSERT_EQ((*e)->ts(), i);
  }
  Result<EventPtr> long_line = reader.next();
  ASSERT_TRUE(long_line.isOk()) << long_line.status().toString();
  EXPECT_EQ((*long_line)->find(Symbol::intern("long"))->asString().size(), 3u << 20);
  Result<EventPtr> last = reader.next();
  ASSERT_TRUE(last.isOk());
  EXPECT_EQ((*last)->ts(), -1);
  EXPECT_EQ(reader.lineNumber(), static_cast<size_t>(kLines + 2));
  EXPECT_EQ(reader.next().status().code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace cepbus
