#include "flows/journal/event_record.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "bus/core/event_json.h"
#include "bus/core/plugin/snapshot.h"

namespace cepbus::flows {
namespace {

EventPtr richEvent() {
  EventPtr a = EventBuilder("A").at(3).id(11).set("x", Value(int64_t{1})).build();
  EventPtr b = EventBuilder("B").at(9).id(12).set("s", Value("é")).build();
  return EventBuilder("Pair")
      .constituent(a)
      .constituent(b)
      .interval(2, 10)
      .id(77)
      .probability(0.25)
      .cost(4)
      .key(Value("k1"))
      .source(Symbol::intern("client-7"))
      .set("i", Value(int64_t{-5}))
      .set("d", Value(2.5))
      .set("b", Value(true))
      .set("n", Value())
      .set("s", Value(std::string("with \"quotes\" and \n")))
      .build();
}

// The bytes of `w` framed as a record of `engine` at `version`.
std::string framed(const plugin::SnapshotWriter& w, std::string engine = "journal-event",
                   uint32_t version = kEventRecordVersion) {
  plugin::SnapshotHeader header;
  header.engine = std::move(engine);
  header.engine_version = version;
  return *w.finish(header);
}

// Equal as the journal's reader needs them: the full JSON says every field.
void expectSame(const Event& a, const Event& b) {
  EXPECT_EQ(encodeEvent(a, EventFormat::kFull), encodeEvent(b, EventFormat::kFull));
}

TEST(EventRecordTest, RoundTripsEveryField) {
  EventPtr event = richEvent();
  const std::string bytes = encodeEventRecord(*event);
  ASSERT_TRUE(isBinaryEventRecord(bytes));
  Result<EventPtr> back = decodeEventRecord(bytes);
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  expectSame(*event, **back);
  EXPECT_EQ((*back)->start(), 2);
  EXPECT_EQ((*back)->end(), 10);
  EXPECT_EQ((*back)->constituents().size(), 2u);
}

// A journal written before the binary records holds JSON lines.
TEST(EventRecordTest, ReadsAJsonLine) {
  EventPtr event = richEvent();
  Result<EventPtr> back = decodeEventRecord(encodeEvent(*event, EventFormat::kFull));
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  expectSame(*event, **back);
}

TEST(EventRecordTest, ACorruptedRecordIsRefusedSayingWhy) {
  std::string bytes = encodeEventRecord(*richEvent());
  bytes[bytes.size() / 2] ^= 0x40;
  Result<EventPtr> back = decodeEventRecord(bytes);
  ASSERT_FALSE(back.isOk());
  EXPECT_NE(back.status().message().find("event record"), std::string::npos)
      << back.status().message();
  EXPECT_NE(back.status().message().find("checksum"), std::string::npos) << back.status().message();
}

TEST(EventRecordTest, ATruncatedRecordIsRefusedAtEveryLength) {
  const std::string bytes = encodeEventRecord(*richEvent());
  for (size_t n = 8; n < bytes.size(); ++n) {
    Result<EventPtr> back = decodeEventRecord(std::string_view(bytes).substr(0, n));
    EXPECT_FALSE(back.isOk()) << n;
    EXPECT_NE(back.status().message().find("event record"), std::string::npos)
        << back.status().message();
  }
}

// The fields parse (the checksum is right) but say nothing sensible: refused
// naming where, not restored as a wrong event.
TEST(EventRecordTest, FieldsOutOfRangeAreRefusedNamingWhere) {
  plugin::SnapshotWriter w;
  w.string("A");
  w.signedVarint(9);  // starts after it ends
  w.signedVarint(3);
  Result<EventPtr> back = decodeEventRecord(framed(w));
  ASSERT_FALSE(back.isOk());
  EXPECT_NE(back.status().message().find("at byte"), std::string::npos) << back.status().message();
}

TEST(EventRecordTest, BytesAfterTheEventAreRefused) {
  plugin::SnapshotWriter w;
  plugin::writeEventFields(w, *richEvent());
  w.u8(0);
  Result<EventPtr> back = decodeEventRecord(framed(w));
  ASSERT_FALSE(back.isOk());
  EXPECT_NE(back.status().message().find("bytes after the event"), std::string::npos)
      << back.status().message();
}

TEST(EventRecordTest, ANewerVersionOrAnotherSnapshotIsRefusedByName) {
  plugin::SnapshotWriter w;
  plugin::writeEventFields(w, *richEvent());
  Result<EventPtr> newer = decodeEventRecord(framed(w, "journal-event", kEventRecordVersion + 1));
  ASSERT_FALSE(newer.isOk());
  EXPECT_NE(newer.status().message().find("version 2"), std::string::npos)
      << newer.status().message();
  Result<EventPtr> other = decodeEventRecord(framed(w, "nfa", 1));
  ASSERT_FALSE(other.isOk());
  EXPECT_NE(other.status().message().find("'nfa'"), std::string::npos) << other.status().message();
}

TEST(EventRecordTest, BadJsonIsRefused) {
  EXPECT_FALSE(decodeEventRecord("{not json").isOk());
  EXPECT_FALSE(decodeEventRecord("").isOk());
}

}  // namespace
}  // namespace cepbus::flows
