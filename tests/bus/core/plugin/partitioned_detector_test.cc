#include "bus/core/plugin/partitioned_detector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "bus/core/pattern/parser.h"

namespace cepbus::plugin {
namespace {

// A fake engine that, like the algebra engine, holds every event back until
// flush() and then reports it as a one-event match; each detector gets a
// number (in creation order) so a test can see which partition ran what.
// An event of type "Open" stands for a partial match that stays open: held
// across flushes, never reported. An event of type "Evict" stands for one a
// cap on its state refused: counted in evicted, not held. What it holds is
// its state(), at 100 bytes an event.
struct EngineLog {
  int created = 0;
  int alive = 0;
  int create_many_calls = 0;
  std::vector<std::string> matches;  // "detector:event ts" in report order
  bool fail_create = false;
  bool snapshots = false;  // its detectors snapshot what they hold
};

class HoldingDetector final : public Detector {
 public:
  HoldingDetector(EngineLog& log, MatchSink& sink) : log_(log), sink_(sink), n_(log.created++) {
    ++log_.alive;
  }
  ~HoldingDetector() override { --log_.alive; }
  Status onEvent(const EventPtr& event) override {
    if (event->type().name() == "Bad") return Status::invalidArgument("bad event");
    if (event->type().name() == "Evict") {
      ++evicted_;
      return Status::ok();
    }
    held_.push_back(event);
    peak_ = std::max(peak_, held_.size());
    return Status::ok();
  }
  Status flush() override {
    std::vector<EventPtr> open;
    for (const EventPtr& e : held_) {
      if (e->type().name() == "Open") {
        open.push_back(e);
        continue;
      }
      const EventPtr* events[] = {&e};
      const uint32_t ends[] = {1};
      log_.matches.push_back(std::to_string(n_) + ":" + std::to_string(e->ts()));
      sink_.onMatch(Match(events, ends, nullptr));
    }
    held_ = std::move(open);
    return Status::ok();
  }
  std::optional<DetectorState> state() const override {
    return DetectorState{held_.size(), peak_, evicted_, held_.size() * 100};
  }
  Result<std::string> exportModel(std::string_view format) const override {
    return "model " + std::string(format);
  }
  uint32_t snapshotVersion() const override { return log_.snapshots ? 1 : 0; }
  Status snapshot(SnapshotWriter& out) const override {
    if (!log_.snapshots) return Detector::snapshot(out);
    out.section("holding", 1);
    out.varint(held_.size());
    for (const EventPtr& e : held_) out.event(e);
    return Status::ok();
  }
  Status restore(SnapshotReader& in) override {
    if (!in.section("holding", 1)) return in.status();
    const uint64_t n = in.count();
    for (uint64_t i = 0; i < n && in.ok(); ++i) held_.push_back(in.event());
    return in.status();
  }

 private:
  EngineLog& log_;
  MatchSink& sink_;
  const int n_;
  std::vector<EventPtr> held_;
  size_t peak_ = 0;
  uint64_t evicted_ = 0;
};

class HoldingFactory final : public DetectorFactory {
 public:
  explicit HoldingFactory(EngineLog& log) : log_(log) {}
  Result<std::unique_ptr<Detector>> create(const pattern::Query& query,
                                           const DetectorOptions& options,
                                           MatchSink& sink) const override {
    if (!query.partition_by.empty()) return createPartitioned(*this, query, options, sink);
    if (log_.fail_create) return Status::invalidArgument("cannot make a partition");
    return std::unique_ptr<Detector>(std::make_unique<HoldingDetector>(log_, sink));
  }
  // One detector for all queries (as the petri engine merges them), its
  // matches labelled with query 0.
  Result<std::unique_ptr<Detector>> createMany(std::span<const NamedQuery> queries,
                                               const DetectorOptions& options,
                                               MultiMatchSink& sink) const override {
    for (const NamedQuery& q : queries) {
      if (!q.query.partition_by.empty())
        return createManyPartitioned(*this, queries, options, sink);
    }
    ++log_.create_many_calls;
    labels_.push_back(std::make_unique<Label>(sink));
    return std::unique_ptr<Detector>(std::make_unique<HoldingDetector>(log_, *labels_.back()));
  }

 private:
  class Label final : public MatchSink {
   public:
    explicit Label(MultiMatchSink& sink) : sink_(sink) {}
    void onMatch(const Match& match) override { sink_.onMatch(0, match); }

   private:
    MultiMatchSink& sink_;
  };
  EngineLog& log_;
  mutable std::vector<std::unique_ptr<Label>> labels_;
};

struct Sink final : MatchSink {
  void onMatch(const Match& match) override { ts.push_back(match.ts(0)); }
  std::vector<Timestamp> ts;
};

pattern::Query query(const std::string& text) {
  auto q = pattern::parseQuery(text);
  EXPECT_TRUE(q.isOk()) << text << ": " << q.status().message();
  return q ? std::move(q).value() : pattern::Query();
}

EventPtr ev(Timestamp ts, Value x, std::string_view type = "A") {
  EventBuilder b(type);
  b.at(ts);
  if (!x.isNull()) b.set("x", std::move(x));
  return b.build();
}

std::unique_ptr<Detector> make(const HoldingFactory& f, const std::string& text, Sink& sink,
                               const std::vector<std::string>& options = {}) {
  auto d = f.create(query(text), *DetectorOptions::parse(options), sink);
  EXPECT_TRUE(d.isOk()) << d.status().message();
  return std::move(d).value();
}

TEST(PartitionedDetectorTest, EachPartitionSeesOnlyItsEvents) {
  EngineLog log;
  HoldingFactory f(log);
  Sink sink;
  auto d = make(f, "PATTERN A a PARTITION BY x", sink);
  EXPECT_EQ(log.created, 1);  // the model, made up front
  // 1 and 1.0 are one key; an event without x is in the null partition.
  for (const EventPtr& e : {ev(1, 1), ev(2, "s"), ev(3, 1.0), ev(4, Value()), ev(5, "s")}) {
    ASSERT_TRUE(d->onEvent(e).isOk());
  }
  ASSERT_TRUE(d->flush().isOk());
  EXPECT_EQ(log.created, 4);
  EXPECT_EQ(log.matches, (std::vector<std::string>{"1:1", "2:2", "1:3", "3:4", "2:5"}));
  EXPECT_EQ(dynamic_cast<PartitionedDetector&>(*d).partitionCount(), 3u);
}

TEST(PartitionedDetectorTest, ByKeyFallsBackToTheEventKey) {
  EngineLog log;
  HoldingFactory f(log);
  Sink sink;
  auto d = make(f, "PATTERN A a PARTITION BY key", sink);
  ASSERT_TRUE(d->onEvent(EventBuilder("A").at(1).key("k").build()).isOk());
  ASSERT_TRUE(d->onEvent(EventBuilder("A").at(2).set("key", "k").build()).isOk());
  ASSERT_TRUE(d->onEvent(EventBuilder("A").at(3).build()).isOk());
  ASSERT_TRUE(d->flush().isOk());
  EXPECT_EQ(log.matches, (std::vector<std::string>{"1:1", "1:2", "2:3"}));
}

// A partition's detector cannot see the stream move on; the partitioned
// detector flushes it when a later timestamp arrives, so its held matches
// come out when the unpartitioned engine's would.
TEST(PartitionedDetectorTest, ClosesATickOfEveryPartitionWhenTimeMovesOn) {
  EngineLog log;
  HoldingFactory f(log);
  Sink sink;
  auto d = make(f, "PATTERN A a PARTITION BY x", sink);
  ASSERT_TRUE(d->onEvent(ev(1, 1)).isOk());
  ASSERT_TRUE(d->onEvent(ev(1, 2)).isOk());
  EXPECT_TRUE(sink.ts.empty());
  ASSERT_TRUE(d->onEvent(ev(2, 3)).isOk());
  EXPECT_EQ(sink.ts, (std::vector<Timestamp>{1, 1}));
  // An event older than the stream's newest is refused, naming both times.
  Status late = d->onEvent(ev(1, 1));
  EXPECT_EQ(late.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(late.message().find("ts 1 arrived after ts 2"), std::string::npos) << late.message();
}

TEST(PartitionedDetectorTest, DropsPartitionsQuietForLongerThanTheWindow) {
  EngineLog log;
  HoldingFactory f(log);
  Sink sink;
  auto d = make(f, "PATTERN A a PARTITION BY x WITHIN 5", sink);
  auto& parts = dynamic_cast<PartitionedDetector&>(*d);
  ASSERT_TRUE(d->onEvent(ev(1, 1)).isOk());
  ASSERT_TRUE(d->onEvent(ev(3, 2)).isOk());
  ASSERT_TRUE(d->onEvent(ev(6, 2)).isOk());  // 1 is 5 behind: it may still pair
  EXPECT_EQ(parts.partitionCount(), 2u);
  ASSERT_TRUE(d->onEvent(ev(7, 2)).isOk());  // no sweep before 11 (one per window)
  EXPECT_EQ(parts.partitionCount(), 2u);
  ASSERT_TRUE(d->onEvent(ev(12, 2)).isOk());
  EXPECT_EQ(parts.partitionCount(), 1u);
  EXPECT_EQ(log.alive, 2);  // the model and partition 2
  // Partition 1's match was reported before its detector went.
  EXPECT_EQ(sink.ts, (std::vector<Timestamp>{1, 3, 6, 7}));
  ASSERT_TRUE(d->onEvent(ev(13, 1)).isOk());  // a fresh partition for key 1
  EXPECT_EQ(parts.partitionCount(), 2u);
}

// Snapshots: the partitions in the order they were made, each with its key
// and its engine detector's state, and the partitions of the open tick.
std::string snapshotOf(const Detector& d) {
  SnapshotWriter out;
  EXPECT_TRUE(d.snapshot(out).isOk());
  return out.finish({.engine = "holding", .engine_version = d.snapshotVersion()}).value();
}

TEST(PartitionedDetectorTest, ARestoredDetectorGoesOnAsTheOriginalWould) {
  EngineLog log;
  log.snapshots = true;
  HoldingFactory f(log);
  const std::string text = "PATTERN A a PARTITION BY x WITHIN 5";
  // Two partitions with events of the open tick (ts 4), a quiet one about
  // to be dropped, and Open events held across flushes.
  const std::vector<EventPtr> before = {ev(1, 3), ev(2, 1, "Open"), ev(4, 2), ev(4, 1)};
  const std::vector<EventPtr> after = {ev(4, 3), ev(9, 2), ev(10, 1), ev(12, 4)};
  Sink whole_sink;
  auto whole = make(f, text, whole_sink);
  for (const auto* part : {&before, &after}) {
    for (const EventPtr& e : *part) ASSERT_TRUE(whole->onEvent(e).isOk());
  }
  ASSERT_TRUE(whole->flush().isOk());

  Sink sink;
  std::string bytes;
  {
    auto first = make(f, text, sink);
    EXPECT_EQ(first->snapshotVersion(), 1u);
    for (const EventPtr& e : before) ASSERT_TRUE(first->onEvent(e).isOk());
    bytes = snapshotOf(*first);
  }
  auto second = make(f, text, sink);
  auto in = SnapshotReader::open(bytes);
  ASSERT_TRUE(in.isOk()) << in.status().message();
  ASSERT_TRUE(second->restore(*in).isOk()) << in->status().message();
  EXPECT_EQ(dynamic_cast<PartitionedDetector&>(*second).partitionCount(), 3u);
  for (const EventPtr& e : after) ASSERT_TRUE(second->onEvent(e).isOk());
  ASSERT_TRUE(second->flush().isOk());
  EXPECT_EQ(sink.ts, whole_sink.ts);
  EXPECT_EQ(dynamic_cast<PartitionedDetector&>(*second).partitionCount(),
            dynamic_cast<PartitionedDetector&>(*whole).partitionCount());
}

TEST(PartitionedDetectorTest, SnapshotsOnlyWhenTheEngineDoesAndRefusesInItsWords) {
  EngineLog log;
  HoldingFactory f(log);
  Sink sink;
  auto d = make(f, "PATTERN A a PARTITION BY x", sink);
  ASSERT_TRUE(d->onEvent(ev(1, 1)).isOk());
  EXPECT_EQ(d->snapshotVersion(), 0u);
  SnapshotWriter out;
  const Status s = d->snapshot(out);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("does not snapshot"), std::string::npos) << s.message();
}

TEST(PartitionedDetectorTest, ARepeatedKeyInASnapshotIsRefused) {
  EngineLog log;
  log.snapshots = true;
  HoldingFactory f(log);
  SnapshotWriter out;
  out.section("partitioned", 2);
  out.signedVarint(4);  // now
  out.signedVarint(9);  // next drop
  out.varint(0);        // evicted by the total cap
  out.varint(2);
  for (int i = 0; i < 2; ++i) {
    out.value(Value(int64_t{1}));
    out.signedVarint(4);
    out.section("holding", 1);
    out.varint(0);
  }
  out.varint(0);
  const std::string bytes = out.finish({.engine = "holding", .engine_version = 1}).value();
  Sink sink;
  auto d = make(f, "PATTERN A a PARTITION BY x WITHIN 5", sink);
  auto in = SnapshotReader::open(bytes);
  ASSERT_TRUE(in.isOk());
  const Status s = d->restore(*in);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("repeats an earlier partition's key"), std::string::npos)
      << s.message();
}

TEST(PartitionedDetectorTest, KeepsEveryPartitionWithoutAWindow) {
  EngineLog log;
  HoldingFactory f(log);
  Sink sink;
  auto d = make(f, "PATTERN A a PARTITION BY x", sink);
  for (Timestamp t = 0; t < 100; ++t) ASSERT_TRUE(d->onEvent(ev(t * 10, t)).isOk());
  EXPECT_EQ(dynamic_cast<PartitionedDetector&>(*d).partitionCount(), 100u);
}

TEST(PartitionedDetectorTest, BatchesGiveTheMatchesOfSingleEventsInTheirOrder) {
  // Runs of one partition within a tick, and an event its detector refuses.
  const std::vector<EventPtr> events = {ev(1, 1),        ev(1, 1), ev(1, 2), ev(2, 1),
                                        ev(3, 1, "Bad"), ev(3, 2), ev(4, 1)};
  EngineLog one_log, batch_log;
  HoldingFactory one_f(one_log), batch_f(batch_log);
  Sink one, batch;
  auto d1 = make(one_f, "PATTERN A a PARTITION BY x", one);
  auto d2 = make(batch_f, "PATTERN A a PARTITION BY x", batch);
  Status first = Status::ok();
  for (const EventPtr& e : events) {
    Status s = d1->onEvent(e);
    if (!s && first) first = s;
  }
  Status batched = d2->onEvents(events);
  EXPECT_EQ(first.message(), "bad event");
  EXPECT_EQ(batched.message(), "bad event");
  ASSERT_TRUE(d1->flush().isOk());
  ASSERT_TRUE(d2->flush().isOk());
  EXPECT_EQ(one.ts, batch.ts);
  EXPECT_EQ(one_log.matches, batch_log.matches);
  EXPECT_EQ(one.ts.size(), 6u);
}

TEST(PartitionedDetectorTest, ExportsTheModelOfOnePartition) {
  EngineLog log;
  HoldingFactory f(log);
  Sink sink;
  auto d = make(f, "PATTERN A a PARTITION BY x", sink);
  auto model = d->exportModel("dot");
  ASSERT_TRUE(model.isOk());
  EXPECT_EQ(*model, "model dot");
}

TEST(PartitionedDetectorTest, ReportsTheEnginesErrors) {
  EngineLog log;
  log.fail_create = true;
  HoldingFactory f(log);
  Sink sink;
  auto refused = f.create(query("PATTERN A a PARTITION BY x"), {}, sink);
  EXPECT_EQ(refused.status().message(), "cannot make a partition");
}

struct MultiSink final : MultiMatchSink {
  void onMatch(size_t pattern, const Match& match) override {
    got.push_back(std::to_string(pattern) + "@" + std::to_string(match.ts(0)));
  }
  std::vector<std::string> got;
};

// Queries partitioned alike share one engine detector per partition (the
// engine's own createMany); queries partitioned differently run apart.
TEST(PartitionedDetectorTest, ManyQueriesPartitionedAlikeShareAPartition) {
  EngineLog log;
  HoldingFactory f(log);
  MultiSink sink;
  const std::vector<NamedQuery> alike = {{"p", query("PATTERN A a PARTITION BY x WITHIN 3")},
                                         {"q", query("PATTERN B b PARTITION BY x")}};
  auto d = f.createMany(alike, {}, sink);
  ASSERT_TRUE(d.isOk()) << d.status().message();
  ASSERT_TRUE((*d)->onEvent(ev(1, 1)).isOk());
  ASSERT_TRUE((*d)->onEvent(ev(2, 2)).isOk());
  ASSERT_TRUE((*d)->flush().isOk());
  EXPECT_EQ(log.create_many_calls, 3);  // the model and two partitions
  EXPECT_EQ(sink.got, (std::vector<std::string>{"0@1", "0@2"}));

  EngineLog apart_log;
  HoldingFactory apart_f(apart_log);
  MultiSink apart_sink;
  const std::vector<NamedQuery> apart = {{"p", query("PATTERN A a PARTITION BY x")},
                                         {"q", query("PATTERN B b")}};
  auto fan = apart_f.createMany(apart, {}, apart_sink);
  ASSERT_TRUE(fan.isOk()) << fan.status().message();
  ASSERT_TRUE((*fan)->onEvent(ev(1, 1)).isOk());
  ASSERT_TRUE((*fan)->flush().isOk());
  EXPECT_EQ(apart_log.create_many_calls, 0);  // one create() per query
  EXPECT_EQ(apart_sink.got, (std::vector<std::string>{"0@1", "1@1"}));
}

TEST(PartitionedDetectorTest, StateSumsTheLivePartitionsAndForgetsDroppedOnes) {
  EngineLog log;
  HoldingFactory f(log);
  Sink sink;
  auto d = make(f, "PATTERN SEQ(A a, B b) WITHIN 5 PARTITION BY x", sink);
  ASSERT_TRUE(d->state().has_value());
  EXPECT_EQ(d->state()->partial_matches, 0u);
  ASSERT_TRUE(d->onEvent(ev(1, Value(int64_t{1}), "Open")));
  ASSERT_TRUE(d->onEvent(ev(1, Value(int64_t{2}))));
  ASSERT_TRUE(d->onEvent(ev(1, Value(int64_t{2}))));
  EXPECT_EQ(d->state()->partial_matches, 3u);
  // Time moves on: partition 2's events are reported, partition 1's stays open.
  ASSERT_TRUE(d->onEvent(ev(2, Value(int64_t{2}))));
  EXPECT_EQ(d->state()->partial_matches, 2u);
  // More than the window later both are quiet and dropped, the open one with
  // its partition; only the new partition's event is held.
  ASSERT_TRUE(d->onEvent(ev(20, Value(int64_t{3}))));
  EXPECT_EQ(static_cast<PartitionedDetector*>(d.get())->partitionCount(), 1u);
  EXPECT_EQ(d->state()->partial_matches, 1u);
  EXPECT_EQ(d->state()->peak_partial_matches, 3u);
  ASSERT_TRUE(d->flush());
  EXPECT_EQ(d->state()->partial_matches, 0u);
  // Batches are sampled too.
  const std::vector<EventPtr> batch = {ev(21, Value(int64_t{4}), "Open"),
                                       ev(21, Value(int64_t{5}), "Open")};
  ASSERT_TRUE(d->onEvents(batch));
  EXPECT_EQ(d->state()->partial_matches, 2u);
}

TEST(PartitionedDetectorTest, EvictionsOfADroppedPartitionStayInTheSumItsBytesLeave) {
  EngineLog log;
  HoldingFactory f(log);
  Sink sink;
  auto d = make(f, "PATTERN SEQ(A a, B b) WITHIN 5 PARTITION BY x", sink);
  ASSERT_TRUE(d->onEvent(ev(1, Value(int64_t{1}), "Open")));
  ASSERT_TRUE(d->onEvent(ev(1, Value(int64_t{1}), "Evict")));
  ASSERT_TRUE(d->onEvent(ev(1, Value(int64_t{2}), "Evict")));
  EXPECT_EQ(d->state()->evicted, 2u);
  EXPECT_EQ(d->state()->bytes, 100u);
  // Both partitions go quiet and are dropped; what they evicted happened.
  ASSERT_TRUE(d->onEvent(ev(20, Value(int64_t{3}), "Open")));
  EXPECT_EQ(static_cast<PartitionedDetector*>(d.get())->partitionCount(), 1u);
  EXPECT_EQ(d->state()->evicted, 2u);
  EXPECT_EQ(d->state()->bytes, 100u);  // partition 3's one event
  ASSERT_TRUE(d->onEvent(ev(21, Value(int64_t{3}), "Evict")));
  EXPECT_EQ(d->state()->evicted, 3u);
}

TEST(PartitionedDetectorTest, StateIsAbsentWhenTheEngineDoesNotCount) {
  class Silent final : public DetectorFactory {
   public:
    Result<std::unique_ptr<Detector>> create(const pattern::Query& query, const DetectorOptions&,
                                             MatchSink& sink) const override {
      if (!query.partition_by.empty()) return createPartitioned(*this, query, {}, sink);
      class Quiet final : public Detector {
        Status onEvent(const EventPtr&) override { return Status::ok(); }
        Status flush() override { return Status::ok(); }
      };
      return std::unique_ptr<Detector>(std::make_unique<Quiet>());
    }
  };
  Silent f;
  Sink sink;
  auto d = f.create(query("PATTERN SEQ(A a, B b) PARTITION BY x"), {}, sink);
  ASSERT_TRUE(d.isOk());
  ASSERT_TRUE((*d)->onEvent(ev(1, Value(int64_t{1}))));
  EXPECT_FALSE((*d)->state().has_value());
}

TEST(PartitionedDetectorTest, DefaultFanOutSumsTheQueriesDetectors) {
  EngineLog log;
  HoldingFactory f(log);
  MultiSink sink;
  const std::vector<NamedQuery> queries = {{"a", query("PATTERN SEQ(A a, B b)")},
                                           {"b", query("PATTERN SEQ(A a, C c)")}};
  auto d = f.DetectorFactory::createMany(queries, {}, sink);
  ASSERT_TRUE(d.isOk()) << d.status().message();
  const std::vector<EventPtr> batch = {ev(1, Value(), "Open"), ev(2, Value())};
  ASSERT_TRUE((*d)->onEvents(batch));
  ASSERT_TRUE((*d)->state().has_value());
  EXPECT_EQ((*d)->state()->partial_matches, 4u);  // two events held by each query
  ASSERT_TRUE((*d)->flush());
  EXPECT_EQ((*d)->state()->partial_matches, 2u);  // each keeps its open one
  EXPECT_EQ((*d)->state()->peak_partial_matches, 4u);
  const std::vector<EventPtr> evictions = {ev(3, Value(), "Evict")};
  ASSERT_TRUE((*d)->onEvents(evictions));
  EXPECT_EQ((*d)->state()->evicted, 2u);  // one by each query
  EXPECT_EQ((*d)->state()->bytes, 200u);
}

// The total cap (max_partial_matches) is the partitioned detector's, for any
// engine that counts its state; the fake engine's "Open" events are its
// partial matches.
TEST(PartitionedDetectorTest, OverTheTotalCapTheLeastRecentlyActivePartitionsGoWhole) {
  EngineLog log;
  HoldingFactory f(log);
  Sink sink;
  auto d =
      make(f, "PATTERN SEQ(A a, B b) WITHIN 100 PARTITION BY x", sink, {"max_partial_matches=3"});
  ASSERT_TRUE(d->onEvent(ev(1, Value(int64_t{1}), "Open")));
  ASSERT_TRUE(d->onEvent(ev(2, Value(int64_t{2}), "Open")));
  ASSERT_TRUE(d->onEvent(ev(2, Value(int64_t{2}), "Open")));
  EXPECT_EQ(log.alive, 3);  // the model and two partitions
  // A fourth partial match: partition 1, the least recently active, goes
  // whole; partition 3 has just received its event and stays.
  ASSERT_TRUE(d->onEvent(ev(3, Value(int64_t{3}), "Open")));
  EXPECT_EQ(log.alive, 3);
  EXPECT_EQ(static_cast<PartitionedDetector*>(d.get())->partitionCount(), 2u);
  EXPECT_EQ(d->state()->partial_matches, 3u);
  EXPECT_EQ(d->state()->evicted, 1u);
  EXPECT_EQ(d->state()->bytes, 300u);
}

TEST(PartitionedDetectorTest, AtTheTotalCapRefuseNewMakesNoPartition) {
  EngineLog log;
  HoldingFactory f(log);
  Sink sink;
  auto d = make(f, "PATTERN SEQ(A a, B b) WITHIN 100 PARTITION BY x", sink,
                {"max_partial_matches=2", "state_policy=refuse_new"});
  ASSERT_TRUE(d->onEvent(ev(1, Value(int64_t{1}), "Open")));
  ASSERT_TRUE(d->onEvent(ev(1, Value(int64_t{2}), "Open")));
  // A new key's event goes nowhere; a live partition still takes its own.
  ASSERT_TRUE(d->onEvent(ev(2, Value(int64_t{3}), "Open")));
  EXPECT_EQ(static_cast<PartitionedDetector*>(d.get())->partitionCount(), 2u);
  EXPECT_EQ(d->state()->evicted, 1u);
  const std::vector<EventPtr> batch = {ev(3, Value(int64_t{1}), "Open"),
                                       ev(3, Value(int64_t{4}), "Open")};
  ASSERT_TRUE(d->onEvents(batch));
  EXPECT_EQ(d->state()->partial_matches, 3u);  // partition 1 grew under its own cap
  EXPECT_EQ(d->state()->evicted, 2u);
  EXPECT_EQ(static_cast<PartitionedDetector*>(d.get())->partitionCount(), 2u);
}

TEST(PartitionedDetectorTest, ABadCapIsRefusedNamingTheOption) {
  EngineLog log;
  HoldingFactory f(log);
  Sink sink;
  auto d =
      f.create(query("PATTERN A a PARTITION BY x"),
               *DetectorOptions::parse(std::vector<std::string>{"max_partial_matches=0"}), sink);
  ASSERT_FALSE(d.isOk());
  EXPECT_EQ(d.status().message(), "option max_partial_matches=0: expected a positive integer");
}

}  // namespace
}  // namespace cepbus::plugin
