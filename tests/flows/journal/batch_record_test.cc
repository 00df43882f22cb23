#include "flows/journal/batch_record.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bus/core/plugin/snapshot.h"
#include "flows/journal/event_record.h"
#include "tests/flows/flow_test_util.h"

namespace cepbus::flows {
namespace {

using testing::makeEvent;

JournalRecord record(uint64_t seq, std::string_view target) {
  return JournalRecord{seq,
                       Symbol::intern(target),
                       1000 + seq,
                       Symbol::intern("batch.topic"),
                       Symbol::intern("sender"),
                       Pattern::kInOut,
                       seq * 3,
                       {},
                       makeEvent(static_cast<int64_t>(seq), 1000 + seq)};
}

std::string encode(const std::vector<JournalRecord>& records) {
  std::vector<const JournalRecord*> pointers;
  for (const JournalRecord& r : records) pointers.push_back(&r);
  return encodeBatchRecord(pointers);
}

TEST(BatchRecordTest, RecordsComeBackWithTheirFieldsAndEventBytes) {
  std::vector<JournalRecord> records{record(5, "a"), record(9, "b")};
  // Bytes stored already (an older record's JSON line) are kept as they are.
  records[1].stored_event = R"({"type":"Tick","ts":9,"id":1009,"attrs":{}})";
  records[1].event = nullptr;
  Result<std::vector<JournalRecord>> decoded = decodeBatchRecord(encode(records));
  ASSERT_TRUE(decoded.isOk()) << decoded.status().toString();
  ASSERT_EQ(decoded->size(), 2u);
  const JournalRecord& a = (*decoded)[0];
  EXPECT_EQ(a.seq, 5u);
  EXPECT_EQ(a.target.name(), "a");
  EXPECT_EQ(a.event_id, 1005u);
  EXPECT_EQ(a.address.name(), "batch.topic");
  EXPECT_EQ(a.sender.name(), "sender");
  EXPECT_EQ(a.pattern, Pattern::kInOut);
  EXPECT_EQ(a.correlation_id, 15u);
  // An event written as its fields comes back as one; stored bytes as those.
  ASSERT_NE(a.event, nullptr);
  EXPECT_TRUE(a.stored_event.empty());
  EXPECT_EQ(a.event->id(), 1005u);
  EXPECT_EQ(a.event->find(Symbol::intern("n"))->asInt(), 5);
  EXPECT_EQ((*decoded)[1].event, nullptr);
  EXPECT_EQ((*decoded)[1].stored_event, records[1].stored_event);
}

TEST(BatchRecordTest, ADamagedRowIsRefusedSayingWhere) {
  std::string bytes = encode({record(1, "a"), record(2, "a")});
  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x20;
  Result<std::vector<JournalRecord>> damaged = decodeBatchRecord(flipped);
  ASSERT_FALSE(damaged.isOk());
  EXPECT_EQ(damaged.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(damaged.status().message().find("batch record"), std::string::npos);
  EXPECT_NE(damaged.status().message().find("checksum"), std::string::npos)
      << damaged.status().message();
  Result<std::vector<JournalRecord>> truncated =
      decodeBatchRecord(std::string_view(bytes).substr(0, bytes.size() - 9));
  EXPECT_FALSE(truncated.isOk());
  EXPECT_FALSE(decodeBatchRecord("").isOk());
}

// A checksum that holds over a body that does not parse: the record past
// which it stops is named.
TEST(BatchRecordTest, ABodyThatDoesNotParseNamesTheRecord) {
  plugin::SnapshotWriter w;
  w.varint(2);
  w.varint(1);
  w.string("a");
  w.varint(7);
  w.string("addr");
  w.string("sender");
  w.u8(0);
  w.varint(0);
  w.u8(1);  // the event as bytes
  w.string("{}");
  w.varint(2);
  w.string("a");  // then nothing: the second record ends early
  w.varint(1);
  w.varint(1);
  w.varint(1);
  w.varint(1);
  w.varint(1);
  w.varint(1);
  w.varint(100);  // an event of 100 bytes, past the end
  plugin::SnapshotHeader header;
  header.engine = "journal-batch";
  header.engine_version = kBatchRecordVersion;
  Result<std::vector<JournalRecord>> decoded = decodeBatchRecord(*w.finish(header));
  ASSERT_FALSE(decoded.isOk());
  EXPECT_NE(decoded.status().message().find("record 2 of 2"), std::string::npos)
      << decoded.status().message();
}

// A constituent the snapshot's event table cannot hold exactly (a string
// that is not valid UTF-8): the row stores each event's own record instead.
TEST(BatchRecordTest, AnEventTheFieldsCannotHoldIsStoredAsItsRecord) {
  EventPtr odd = EventBuilder("Odd").at(1).id(5).set("s", Value(std::string("\xff\xfe"))).build();
  EventPtr pair = EventBuilder("Pair").constituent(odd).at(2).id(6).build();
  std::vector<JournalRecord> records{record(1, "a")};
  records[0].event = pair;
  Result<std::vector<JournalRecord>> decoded = decodeBatchRecord(encode(records));
  ASSERT_TRUE(decoded.isOk()) << decoded.status().toString();
  ASSERT_EQ(decoded->size(), 1u);
  ASSERT_FALSE((*decoded)[0].stored_event.empty());
  Result<EventPtr> event = decodeEventRecord((*decoded)[0].stored_event);
  ASSERT_TRUE(event.isOk()) << event.status().toString();
  EXPECT_EQ((*event)->id(), 6u);
}

TEST(BatchRecordTest, ANewerVersionOrAnotherEngineIsRefusedByName) {
  plugin::SnapshotWriter w;
  w.varint(0);
  plugin::SnapshotHeader header;
  header.engine = "journal-batch";
  header.engine_version = kBatchRecordVersion + 1;
  Result<std::vector<JournalRecord>> newer = decodeBatchRecord(*w.finish(header));
  ASSERT_FALSE(newer.isOk());
  EXPECT_NE(newer.status().message().find("version 2"), std::string::npos)
      << newer.status().message();
  header.engine = "journal-event";
  header.engine_version = 1;
  EXPECT_FALSE(decodeBatchRecord(*w.finish(header)).isOk());
}

}  // namespace
}  // namespace cepbus::flows
