#include "bus/core/plugin/snapshot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "bus/core/event_json.h"

namespace cepbus::plugin {
namespace {

EventPtr event(std::string_view line) { return decodeEvent(line).value(); }

constexpr std::string_view kSampleEvent =
    R"({"type":"A","ts":5,"attrs":{"x":1.5,"s":"q"},"prob":0.5,"key":"k"})";

// The event sample() writes, made once so that its id is known.
const EventPtr& sampleEvent() {
  static const EventPtr kEvent = event(kSampleEvent);
  return kEvent;
}

SnapshotHeader header() {
  return {
      .engine = "nfa", .engine_version = 3, .fingerprint = 0x0123456789abcdefULL, .position = 42};
}

std::string sample() {
  SnapshotWriter out;
  out.section("test", 2);
  out.varint(0);
  out.varint(300);
  out.varint(UINT64_MAX);
  out.signedVarint(-1);
  out.signedVarint(INT64_MIN);
  out.signedVarint(INT64_MAX);
  out.real(-2.5);
  out.flag(true);
  out.string("héllo");
  out.value(Value());
  out.value(Value(true));
  out.value(Value(int64_t{-7}));
  out.value(Value(1.25));
  out.value(Value("IBM"));
  const EventPtr& a = sampleEvent();
  out.event(a);
  out.event(nullptr);
  out.event(a);  // shared: one entry in the table
  return out.finish(header()).value();
}

TEST(SnapshotTest, ReadsBackWhatWasWritten) {
  auto in = SnapshotReader::open(sample());
  ASSERT_TRUE(in.isOk()) << in.status().message();
  EXPECT_EQ(in->header().engine, "nfa");
  EXPECT_EQ(in->header().engine_version, 3u);
  EXPECT_EQ(in->header().fingerprint, 0x0123456789abcdefULL);
  EXPECT_EQ(in->header().position, 42u);
  EXPECT_EQ(in->header().format_version, kSnapshotFormatVersion);
  EXPECT_TRUE(in->section("test", 2));
  EXPECT_EQ(in->varint(), 0u);
  EXPECT_EQ(in->varint(), 300u);
  EXPECT_EQ(in->varint(), UINT64_MAX);
  EXPECT_EQ(in->signedVarint(), -1);
  EXPECT_EQ(in->signedVarint(), INT64_MIN);
  EXPECT_EQ(in->signedVarint(), INT64_MAX);
  EXPECT_EQ(in->real(), -2.5);
  EXPECT_TRUE(in->flag());
  EXPECT_EQ(in->string(), "héllo");
  EXPECT_TRUE(in->value().isNull());
  EXPECT_TRUE(in->value().asBool());
  EXPECT_EQ(in->value().asInt(), -7);
  EXPECT_EQ(in->value().asDouble(), 1.25);
  EXPECT_EQ(in->value().asString(), "IBM");
  const EventPtr a = in->event();
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ts(), 5);
  EXPECT_EQ(a->probability(), 0.5);
  EXPECT_EQ(encodeEvent(*a, EventFormat::kFull), encodeEvent(*sampleEvent(), EventFormat::kFull))
      << "type, ts, attributes, probability, key and id";
  EXPECT_EQ(in->event(), nullptr);
  EXPECT_EQ(in->event().get(), a.get()) << "a shared event is restored as one";
  EXPECT_TRUE(in->atEnd());
  EXPECT_TRUE(in->ok());
}

TEST(SnapshotTest, RefusesEveryFlippedByteAndEveryTruncation) {
  const std::string good = sample();
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    EXPECT_FALSE(SnapshotReader::open(bad).isOk()) << "byte " << i;
  }
  for (size_t n = 0; n < good.size(); ++n) {
    auto in = SnapshotReader::open(good.substr(0, n));
    ASSERT_FALSE(in.isOk()) << "length " << n;
  }
  const std::string checksum =
      SnapshotReader::open(good.substr(0, good.size() - 1)).status().message();
  EXPECT_NE(checksum.find("checksum"), std::string::npos) << checksum;
}

// A file as a newer cepbus would write it: the version word raised and the
// checksum made right again.
TEST(SnapshotTest, RefusesANewerFormatByName) {
  std::string newer = sample();
  newer[8] = static_cast<char>(kSnapshotFormatVersion + 1);
  const size_t body = newer.size() - 4;
  const uint32_t crc = crc32({reinterpret_cast<const unsigned char*>(newer.data()), body});
  for (int i = 0; i < 4; ++i) newer[body + i] = static_cast<char>(crc >> (8 * i));
  auto in = SnapshotReader::open(newer);
  ASSERT_FALSE(in.isOk());
  EXPECT_NE(in.status().message().find("newer cepbus"), std::string::npos) << in.status().message();
  EXPECT_FALSE(SnapshotReader::open("CEPBSNAQ and more bytes").isOk());
}

TEST(SnapshotTest, AReaderThatRunsOutFailsOnceAndReadsZeros) {
  SnapshotWriter out;
  out.varint(1'000'000);  // a count far beyond the bytes that follow
  out.string("x");
  auto in = SnapshotReader::open(out.finish(header()).value());
  ASSERT_TRUE(in.isOk());
  EXPECT_EQ(in->count(), 0u);
  EXPECT_FALSE(in->ok());
  EXPECT_NE(in->status().message().find("exceeds"), std::string::npos);
  EXPECT_EQ(in->string(), "");
  EXPECT_EQ(in->event(), nullptr);
}

TEST(SnapshotTest, ASectionOfAnotherNameOrVersionIsRefusedByName) {
  SnapshotWriter out;
  out.section("window", 1);
  const std::string data = out.finish(header()).value();
  auto other = SnapshotReader::open(data);
  EXPECT_FALSE(other->section("nfa", 1));
  EXPECT_NE(other->status().message().find("'nfa', found 'window'"), std::string::npos)
      << other->status().message();
  auto version = SnapshotReader::open(data);
  EXPECT_FALSE(version->section("window", 2));
  EXPECT_NE(version->status().message().find("version 1; this build reads 2"), std::string::npos)
      << version->status().message();
}

TEST(SnapshotTest, CrcAndFingerprintAreTheFixedFunctions) {
  const std::string text = "123456789";
  EXPECT_EQ(crc32({reinterpret_cast<const unsigned char*>(text.data()), text.size()}),
            0xCBF43926U);  // the CRC-32 check value
  EXPECT_EQ(snapshotFingerprint(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(snapshotFingerprint("a"), 0xaf63dc4c8601ec8cULL);  // FNV-1a 64
}

}  // namespace
}  // namespace cepbus::plugin
