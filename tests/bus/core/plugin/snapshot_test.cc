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
  return {.engine = "nfa",
          .engine_version = 3,
          .fingerprint = 0x0123456789abcdefULL,
          .shape = 0xfedcba9876543210ULL,
          .position = 42};
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
  EXPECT_EQ(in->header().shape, 0xfedcba9876543210ULL);
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

// The sample with another format version word, the checksum made right again.
std::string sampleOfFormat(uint32_t version) {
  std::string file = sample();
  file[8] = static_cast<char>(version);
  const size_t body = file.size() - 4;
  const uint32_t crc = crc32({reinterpret_cast<const unsigned char*>(file.data()), body});
  for (int i = 0; i < 4; ++i) file[body + i] = static_cast<char>(crc >> (8 * i));
  return file;
}

TEST(SnapshotTest, RefusesANewerFormatByName) {
  auto in = SnapshotReader::open(sampleOfFormat(kSnapshotFormatVersion + 1));
  ASSERT_FALSE(in.isOk());
  EXPECT_NE(in.status().message().find("newer cepbus"), std::string::npos) << in.status().message();
  EXPECT_FALSE(SnapshotReader::open("CEPBSNAQ and more bytes").isOk());
}

// Format 1 had no shapes: read as format 2 it would be misread.
TEST(SnapshotTest, RefusesAnOlderFormatByName) {
  auto in = SnapshotReader::open(sampleOfFormat(kSnapshotFormatVersion - 1));
  ASSERT_FALSE(in.isOk());
  EXPECT_NE(in.status().message().find("format version 1 is not read"), std::string::npos)
      << in.status().message();
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

// Sections read into the same query need no shape; carried over into an
// edited query, every section needs one, equal on both sides.
TEST(SnapshotTest, CarryingOverNeedsEverySectionsShapeToMatch) {
  SnapshotWriter out;
  out.section("reorder", 1, 7);
  out.section("nfa", 2, 0x1234);
  out.section("stage", 1);
  const std::string data = out.finish(header()).value();

  auto same = SnapshotReader::open(data);
  EXPECT_TRUE(same->section("reorder", 1, 7));
  EXPECT_TRUE(same->section("nfa", 2, 0x1234));
  EXPECT_TRUE(same->section("stage", 1));

  auto carried = SnapshotReader::open(data);
  carried->carryOver();
  EXPECT_TRUE(carried->section("reorder", 1, 7));
  EXPECT_TRUE(carried->section("nfa", 2, 0x1234));
  EXPECT_FALSE(carried->section("stage", 1));
  EXPECT_NE(carried->status().message().find("'stage' does not carry its state over"),
            std::string::npos)
      << carried->status().message();

  auto changed = SnapshotReader::open(data);
  changed->carryOver();
  EXPECT_TRUE(changed->section("reorder", 1, 7));
  EXPECT_FALSE(changed->section("nfa", 2, 0x4321));
  EXPECT_NE(changed->status().message().find("the edit changes what 'nfa' keeps"),
            std::string::npos)
      << changed->status().message();

  // Without carrying over, a shape that differs is another query's state.
  auto other = SnapshotReader::open(data);
  EXPECT_FALSE(other->section("reorder", 1, 8));
  EXPECT_NE(other->status().message().find("another shape"), std::string::npos)
      << other->status().message();
}

TEST(SnapshotTest, CrcAndFingerprintAreTheFixedFunctions) {
  const std::string text = "123456789";
  EXPECT_EQ(crc32({reinterpret_cast<const unsigned char*>(text.data()), text.size()}),
            0xCBF43926U);  // the CRC-32 check value
  // Eight bytes a step, then byte by byte: every length and offset agrees
  // with the CRC computed a bit at a time.
  auto bitwise = [](std::span<const unsigned char> bytes) {
    uint32_t c = 0xFFFFFFFFU;
    for (unsigned char b : bytes) {
      c ^= b;
      for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? 0xEDB88320U ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xFFFFFFFFU;
  };
  std::vector<unsigned char> data(64);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t from = 0; from < 8; ++from) {
    for (size_t n = 0; from + n <= data.size(); ++n) {
      const std::span<const unsigned char> part(data.data() + from, n);
      ASSERT_EQ(crc32(part), bitwise(part)) << "from " << from << ", " << n << " bytes";
    }
  }
  EXPECT_EQ(snapshotFingerprint(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(snapshotFingerprint("a"), 0xaf63dc4c8601ec8cULL);  // FNV-1a 64
}

}  // namespace
}  // namespace cepbus::plugin
