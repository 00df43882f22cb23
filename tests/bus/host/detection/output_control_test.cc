#include "bus/host/detection/output_control.h"

#include <gtest/gtest.h>

#include "bus/core/pattern/parser.h"
#include "tests/bus/host/detection/match_sink_fakes.h"
#include "tests/testing/snapshot_bytes.h"

namespace cepbus::detection {
namespace {

using cepbus::testing::refusedCorruptions;
using cepbus::testing::restoreBytes;
using cepbus::testing::snapshotBytes;
using match_fakes::reading;
using match_fakes::report;
using Ts = std::vector<std::vector<Timestamp>>;

// An engine for SEQ(T a, T b) under skip_till_any_match: each event ends a
// match with every earlier one, reported to every member.
class PairsEngine final : public plugin::Detector {
 public:
  explicit PairsEngine(plugin::MultiMatchSink& sink, size_t members)
      : sink_(sink), members_(members) {}
  Status onEvent(const EventPtr& event) override {
    for (const EventPtr& earlier : seen_) {
      for (size_t m = 0; m < members_; ++m) {
        Forward to(sink_, m);
        report(to, {earlier, event});
      }
    }
    seen_.push_back(event);
    return Status::ok();
  }
  Status flush() override { return Status::ok(); }
  // Its events so far, so that the rules in front of it can be checkpointed.
  uint32_t snapshotVersion() const override { return 1; }
  Status snapshot(plugin::SnapshotWriter& out) const override {
    out.varint(seen_.size());
    for (const EventPtr& e : seen_) out.event(e);
    return Status::ok();
  }
  Status restore(plugin::SnapshotReader& in) override {
    const uint64_t n = in.count();
    for (uint64_t i = 0; i < n && in.ok(); ++i) {
      seen_.push_back(in.event());
      if (seen_.back() == nullptr) in.fail("an event seen is missing");
    }
    return in.status();
  }

 private:
  class Forward final : public plugin::MatchSink {
   public:
    Forward(plugin::MultiMatchSink& sink, size_t member) : sink_(sink), member_(member) {}
    void onMatch(const plugin::Match& match) override { sink_.onMatch(member_, match); }

   private:
    plugin::MultiMatchSink& sink_;
    size_t member_;
  };
  plugin::MultiMatchSink& sink_;
  size_t members_;
  std::vector<EventPtr> seen_;
};

class Members final : public MemberSink {
 public:
  void onMatch(size_t member, const plugin::Match& match) override {
    std::vector<Timestamp> ts;
    for (size_t i = 0; i < match.size(); ++i) ts.push_back(match.ts(i));
    got[member].push_back(ts);
  }
  Ts got[2];
};

plugin::NamedQuery named(const char* name, const char* text) {
  Result<pattern::Query> q = pattern::parseQuery(text);
  EXPECT_TRUE(q.isOk()) << q.status().toString();
  return {name, q.isOk() ? *q : pattern::Query{}};
}

TEST(OutputControlTest, EachMemberGoesThroughItsOwnRulesAsEventTimePasses) {
  const std::vector<plugin::NamedQuery> queries = {
      named("first", "PATTERN SEQ(T a, T b) EMIT FIRST EVERY 10"),
      named("all", "PATTERN SEQ(T a, T b)"),
  };
  MemberRelay relay;
  Members members;
  relay.attach(members);
  auto control = OutputControl::create(queries, relay);
  ASSERT_TRUE(control.isOk()) << control.status().toString();
  OutputControl* rules = control->get();
  auto engine = std::make_unique<PairsEngine>(*rules, 2);
  auto detector = OutputControl::wrap(std::move(control).value(), std::move(engine));
  for (Timestamp ts : {1, 2, 3}) {
    ASSERT_TRUE(detector->onEvent(reading(ts)).isOk());
    ASSERT_TRUE(detector->onWatermark(ts - 1).isOk());
  }
  // (1, 2) waits for time to pass 2; every match of "all" is out at once.
  EXPECT_EQ(members.got[0], (Ts{{1, 2}}));
  EXPECT_EQ(members.got[1], (Ts{{1, 2}, {1, 3}, {2, 3}}));
  ASSERT_TRUE(detector->onEvent(reading(12)).isOk());
  ASSERT_TRUE(detector->onWatermark(plugin::Detector::kEndOfTime).isOk());
  EXPECT_EQ(members.got[0], (Ts{{1, 2}, {1, 12}}));
  // (2, 3), (2, 12) and (3, 12) as reported, (1, 3) once time passed it.
  EXPECT_EQ(rules->suppressed(0), 4u);
  EXPECT_EQ(rules->suppressed(1), 0u);
}

// Output control of `queries` around a PairsEngine, reporting to `members`.
std::unique_ptr<plugin::GuardedDetector> controlled(const std::vector<plugin::NamedQuery>& queries,
                                                    MemberRelay& relay, Members& members) {
  relay.attach(members);
  auto control = OutputControl::create(queries, relay);
  EXPECT_TRUE(control.isOk()) << control.status().toString();
  auto engine = std::make_unique<PairsEngine>(**control, queries.size());
  return OutputControl::wrap(std::move(control).value(), std::move(engine));
}

TEST(OutputControlTest, ASnapshotCarriesHeldMatchesAndGatesIntoANewControl) {
  const std::vector<plugin::NamedQuery> queries = {
      named("first", "PATTERN SEQ(T a, T b) EMIT FIRST EVERY 4 PER a.sensor"),
      named("last", "PATTERN SEQ(T a, T b) AFTER MATCH SKIP PAST LAST EVENT EMIT LAST EVERY 3"),
  };
  const std::vector<EventPtr> events = {reading(1, "s1"), reading(2, "s2"),  reading(2, "s1"),
                                        reading(4, "s2"), reading(5, "s1"),  reading(7, "s1"),
                                        reading(8, "s2"), reading(11, "s1"), reading(12, "s2")};
  auto feed = [&](plugin::Detector& d, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      ASSERT_TRUE(d.onEvent(events[i]).isOk());
      ASSERT_TRUE(d.onWatermark(events[i]->ts() - 2).isOk());
    }
  };
  MemberRelay whole_relay;
  Members whole;
  auto one = controlled(queries, whole_relay, whole);
  feed(*one, 0, events.size());
  ASSERT_TRUE(one->onWatermark(plugin::Detector::kEndOfTime).isOk());
  ASSERT_FALSE(whole.got[0].empty());
  ASSERT_FALSE(whole.got[1].empty());
  EXPECT_EQ(one->snapshotVersion(), 1u);  // the engine's
  for (size_t split = 0; split <= events.size(); ++split) {
    MemberRelay relay_a, relay_b;
    Members a, b;
    auto first = controlled(queries, relay_a, a);
    feed(*first, 0, split);
    auto bytes = snapshotBytes(*first);
    ASSERT_TRUE(bytes.isOk()) << bytes.status().toString();
    auto second = controlled(queries, relay_b, b);
    const Status restored = restoreBytes(*second, *bytes);
    ASSERT_TRUE(restored.isOk()) << restored.toString();
    feed(*second, split, events.size());
    ASSERT_TRUE(second->onWatermark(plugin::Detector::kEndOfTime).isOk());
    for (size_t m = 0; m < 2; ++m) {
      Ts got = a.got[m];
      got.insert(got.end(), b.got[m].begin(), b.got[m].end());
      EXPECT_EQ(got, whole.got[m]) << queries[m].name << " split after " << split;
    }
  }
}

TEST(OutputControlTest, ACorruptedSnapshotIsRefusedOrHarmlessNeverACrash) {
  const std::vector<plugin::NamedQuery> queries = {
      named("first", "PATTERN SEQ(T a, T b) EMIT FIRST EVERY 4 PER a.sensor"),
      named("last", "PATTERN SEQ(T a, T b) EMIT LAST EVERY 3")};
  MemberRelay relay;
  Members members;
  auto d = controlled(queries, relay, members);
  for (Timestamp ts : {1, 2, 3, 5, 6}) ASSERT_TRUE(d->onEvent(reading(ts)).isOk());
  auto bytes = snapshotBytes(*d);
  ASSERT_TRUE(bytes.isOk());
  const size_t refused = refusedCorruptions(*bytes, 0x21, [&](const std::string& bad) {
    MemberRelay r;
    Members m;
    auto fresh = controlled(queries, r, m);
    if (!restoreBytes(*fresh, bad).isOk()) return false;
    (void)fresh->onEvent(reading(9));
    (void)fresh->onWatermark(plugin::Detector::kEndOfTime);
    return true;
  });
  EXPECT_GT(refused, 0u);
}

TEST(OutputControlTest, AnUnusablePerExpressionNamesTheQuery) {
  pattern::Query q = named("q", "PATTERN SEQ(T a, T b) EMIT FIRST EVERY 10 PER a.x").query;
  q.variables.clear();  // a tree the compiler cannot resolve
  MemberRelay relay;
  auto control = OutputControl::create(std::vector<plugin::NamedQuery>{{"q", q}}, relay);
  ASSERT_FALSE(control.isOk());
  EXPECT_NE(control.status().message().find("query 'q': EMIT ... PER:"), std::string::npos)
      << control.status().message();
}

}  // namespace
}  // namespace cepbus::detection
