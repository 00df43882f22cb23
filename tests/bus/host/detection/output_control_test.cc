#include "bus/host/detection/output_control.h"

#include <gtest/gtest.h>

#include "bus/core/pattern/parser.h"
#include "tests/bus/host/detection/match_sink_fakes.h"

namespace cepbus::detection {
namespace {

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
