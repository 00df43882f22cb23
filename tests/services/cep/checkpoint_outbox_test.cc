#include "services/cep/checkpoint_outbox.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bus/core/event_json.h"

namespace cepbus::services::cep {
namespace {

TEST(PublishedWindowTest, AnIdIsPublishedOnceWhileTheWindowHoldsIt) {
  PublishedWindow window(3);
  EXPECT_TRUE(window.insert(10));
  EXPECT_FALSE(window.insert(10));
  EXPECT_TRUE(window.insert(11));
  EXPECT_TRUE(window.insert(12));
  EXPECT_TRUE(window.insert(13));  // 10 leaves the window
  EXPECT_EQ(window.size(), 3u);
  EXPECT_TRUE(window.insert(10));
  EXPECT_FALSE(window.insert(13));
}

TEST(PublishedWindowTest, TheWindowSurvivesItsEncoding) {
  PublishedWindow window(4);
  for (uint64_t id : {5ULL, 0xffffffffffffffffULL, 7ULL}) window.insert(id);
  PublishedWindow restored(4);
  ASSERT_TRUE(restored.decode(window.encode()));
  EXPECT_EQ(restored.size(), 3u);
  EXPECT_FALSE(restored.insert(0xffffffffffffffffULL));
  EXPECT_FALSE(restored.insert(5));
  EXPECT_TRUE(restored.insert(6));
}

TEST(PublishedWindowTest, BytesThatAreNoWindowAreRefusedAndChangeNothing) {
  PublishedWindow window(4);
  window.insert(1);
  const std::string good = window.encode();
  EXPECT_FALSE(window.decode(good.substr(0, good.size() - 1)));  // truncated
  EXPECT_FALSE(window.decode("ab"));
  EXPECT_FALSE(window.decode(std::string("\x05\0\0\0", 4)));  // a count beyond the bytes
  EXPECT_FALSE(window.insert(1));                             // still there
}

EventPtr tick(Timestamp ts, int64_t price) {
  return EventBuilder("Tick").at(ts).set("price", Value(price)).build();
}

// A composite whose fields all differ from their defaults, its interval
// wider than its constituents'.
EventPtr composite(const std::vector<EventPtr>& parts, int64_t n) {
  EventBuilder b("Pair");
  for (const EventPtr& part : parts) b.constituent(part);
  return b.set("n", Value(n))
      .set("ratio", Value(0.25))
      .set("flag", Value(true))
      .set("name", Value(std::string("a \"b\"")))
      .set("none", Value())
      .probability(0.5)
      .cost(-3)
      .key(Value(std::string("k")))
      .source(Symbol::intern("svc.q"))
      .interval(-7, 40)
      .build();
}

std::string json(const EventPtr& event) { return encodeEvent(*event, EventFormat::kFull); }

// The bytes an outbox had before kOutboxVersion: a u32-length-prefixed
// window, a u32 count, each composite as a u32 member and a u32-length JSON
// line, then the clock's time and newest as 8 bytes each.
std::string legacyBytes(const PublishedWindow& window, uint32_t member, const EventPtr& event,
                        Timestamp time, Timestamp newest) {
  auto le = [](std::string& out, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
  };
  std::string out;
  const std::string w = window.encode();
  le(out, w.size(), 4);
  out += w;
  le(out, 1, 4);
  le(out, member, 4);
  const std::string line = json(event);
  le(out, line.size(), 4);
  out += line;
  le(out, static_cast<uint64_t>(time), 8);
  le(out, static_cast<uint64_t>(newest), 8);
  return out;
}

TEST(CheckpointOutboxTest, CompositesClockAndWindowSurviveTheirEncoding) {
  const EventPtr a = tick(1, 10);
  const EventPtr b = tick(5, 11);
  const EventPtr c = tick(9, 12);
  PublishedWindow window(8);
  window.insert(41);
  window.insert(42);
  const std::vector<OutboxEntry> held{{0, composite({a, b}, 1)}, {2, composite({a, c}, 2)}};
  Result<std::string> bytes = encodeOutbox(window, held, plugin::SourceClock::Saved{30, 35});
  ASSERT_TRUE(bytes.isOk()) << bytes.status().message();

  Outbox restored(8);
  ASSERT_TRUE(decodeOutbox(*bytes, 3, restored).isOk());
  ASSERT_EQ(restored.held.size(), 2u);
  for (size_t i = 0; i < held.size(); ++i) {
    EXPECT_EQ(restored.held[i].member, held[i].member);
    EXPECT_EQ(json(restored.held[i].composite), json(held[i].composite));
  }
  // A constituent that two composites share is read back as one event.
  EXPECT_EQ(restored.held[0].composite->constituents()[0],
            restored.held[1].composite->constituents()[0]);
  ASSERT_TRUE(restored.clock.has_value());
  EXPECT_EQ(restored.clock->time, 30);
  EXPECT_EQ(restored.clock->newest, 35);
  EXPECT_FALSE(restored.published.insert(41));
  EXPECT_TRUE(restored.published.insert(43));
}

TEST(CheckpointOutboxTest, AnEmptyOutboxWithoutAClockSurvivesItsEncoding) {
  Result<std::string> bytes = encodeOutbox(PublishedWindow(4), {}, std::nullopt);
  ASSERT_TRUE(bytes.isOk());
  Outbox restored(4);
  ASSERT_TRUE(decodeOutbox(*bytes, 1, restored).isOk());
  EXPECT_TRUE(restored.held.empty());
  EXPECT_FALSE(restored.clock.has_value());
  EXPECT_EQ(restored.published.size(), 0u);
}

TEST(CheckpointOutboxTest, SharedConstituentsAreWrittenOnce) {
  // As on P2: many composites of few events. Their JSON lines repeat each
  // constituent; the outbox writes it once.
  std::vector<EventPtr> events;
  for (int i = 0; i < 10; ++i) events.push_back(tick(i, i));
  std::vector<OutboxEntry> held;
  size_t json_bytes = 0;
  for (int i = 0; i < 1000; ++i) {
    held.push_back(OutboxEntry{
        0, EventBuilder("Match").constituent(events[i % 10]).constituent(events[i / 100]).build()});
    json_bytes += json(held.back().composite).size();
  }
  Result<std::string> bytes = encodeOutbox(PublishedWindow(1), held, std::nullopt);
  ASSERT_TRUE(bytes.isOk());
  EXPECT_LT(bytes->size() * 4, json_bytes);
}

TEST(CheckpointOutboxTest, AnOutboxOfAnOlderCepbusIsStillRead) {
  PublishedWindow window(4);
  window.insert(7);
  const EventPtr held = composite({tick(1, 10), tick(2, 11)}, 3);
  Outbox restored(4);
  ASSERT_TRUE(decodeOutbox(legacyBytes(window, 1, held, 20, 25), 2, restored).isOk());
  ASSERT_EQ(restored.held.size(), 1u);
  EXPECT_EQ(restored.held[0].member, 1u);
  EXPECT_EQ(json(restored.held[0].composite), json(held));
  ASSERT_TRUE(restored.clock.has_value());
  EXPECT_EQ(restored.clock->newest, 25);
  EXPECT_FALSE(restored.published.insert(7));
}

TEST(CheckpointOutboxTest, DamagedBytesAreRefusedNamingWhat) {
  const std::vector<OutboxEntry> held{{0, composite({tick(1, 10)}, 1)}};
  const std::string good = *encodeOutbox(PublishedWindow(4), held, std::nullopt);

  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x20;
  Outbox a(4);
  const Status corrupted = decodeOutbox(flipped, 1, a);
  EXPECT_NE(corrupted.message().find("its outbox: snapshot corrupted or truncated"),
            std::string::npos)
      << corrupted.message();

  Outbox b(4);
  EXPECT_FALSE(decodeOutbox(good.substr(0, good.size() - 5), 1, b).isOk());

  // Well formed, but for a detection of more queries than this one has.
  const std::vector<OutboxEntry> foreign{{3, composite({tick(1, 10)}, 1)}};
  Outbox c(4);
  const Status member =
      decodeOutbox(*encodeOutbox(PublishedWindow(4), foreign, std::nullopt), 2, c);
  EXPECT_NE(member.message().find("composite 0 is of query 3; the detection has 2"),
            std::string::npos)
      << member.message();

  const std::string legacy = legacyBytes(PublishedWindow(4), 0, held[0].composite, 1, 2);
  Outbox d(4);
  const Status old = decodeOutbox(legacy.substr(0, legacy.size() - 20), 1, d);
  EXPECT_NE(old.message().find("(the format before outbox version 1) do not decode"),
            std::string::npos)
      << old.message();
}

}  // namespace
}  // namespace cepbus::services::cep
