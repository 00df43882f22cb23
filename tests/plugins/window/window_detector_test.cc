// The window engine on hand-computed cases: when each kind of window closes,
// what its result holds, HAVING, group keys, the group cap, and what it
// refuses. The random comparison with a brute-force reference is
// window_differential_test.cc.

#include "plugins/window/window_detector.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "plugins/window/window_plan.h"
#include "tests/plugins/window/window_test_support.h"

namespace cepbus::plugins::window {
namespace {

using testing::describeAll;
using testing::ResultSink;

struct WindowRun {
  explicit WindowRun(std::string_view query, std::vector<std::string> options = {}) {
    auto q = pattern::parseQuery(query);
    EXPECT_TRUE(q.isOk()) << q.status().message();
    auto opts = plugin::DetectorOptions::parse(options);
    EXPECT_TRUE(opts.isOk());
    auto plan = compilePlan(*q, *opts);
    EXPECT_TRUE(plan.isOk()) << plan.status().message();
    detector = std::make_unique<WindowDetector>(*plan, sink);
  }
  // Feeds one event and returns how many results are out so far.
  size_t feed(std::string_view type, Timestamp ts,
              const std::vector<std::pair<std::string, Value>>& attrs) {
    EventBuilder b(type);
    b.at(ts);
    for (const auto& [name, value] : attrs) b.set(name, value);
    EXPECT_TRUE(detector->onEvent(b.build()).isOk());
    return sink.results.size();
  }
  // The end of the input, as the host gives it: time passes to the end,
  // then the detector is flushed.
  std::vector<std::string> flush() {
    EXPECT_TRUE(detector->onWatermark(plugin::Detector::kEndOfTime).isOk());
    EXPECT_TRUE(detector->flush().isOk());
    return describeAll(sink.results);
  }

  ResultSink sink;
  std::unique_ptr<WindowDetector> detector;
};

// The bus flushes a detector whenever its input pauses: that must close
// nothing, or the events after the pause would give a window a second
// result. The watermark closes what ends by it; the end of time the rest.
TEST(WindowDetectorTest, APauseClosesNothingAndTheWatermarkClosesWhatEndsByIt) {
  WindowRun run("FROM Temp t WINDOW TUMBLING 10 RETURN N(count(t) AS n)");
  run.feed("Temp", 3, {});
  run.feed("Temp", 12, {});
  ASSERT_TRUE(run.detector->flush().isOk());
  EXPECT_EQ(run.sink.results.size(), 1u) << "a pause closed [10, 20)";
  run.feed("Temp", 15, {});
  ASSERT_TRUE(run.detector->onWatermark(18).isOk());
  EXPECT_EQ(run.sink.results.size(), 1u) << "ts 19 may still come";
  ASSERT_TRUE(run.detector->onWatermark(19).isOk());
  EXPECT_EQ(describeAll(run.sink.results),
            (std::vector<std::string>{"N [0,9] n=1", "N [10,19] n=2"}));
}

TEST(WindowDetectorTest, TumblingWindowsCloseWhenTimePassesTheirEnd) {
  WindowRun run(
      "FROM Temp t WINDOW TUMBLING 10 GROUP BY t.sensor "
      "RETURN Mean(t.sensor AS sensor, avg(t.v) AS mean, count(t) AS n)");
  EXPECT_EQ(run.feed("Temp", 1, {{"sensor", "a"}, {"v", 10}}), 0u);
  EXPECT_EQ(run.feed("Temp", 9, {{"sensor", "a"}, {"v", 20}}), 0u);
  EXPECT_EQ(run.feed("Temp", 9, {{"sensor", "b"}, {"v", 5}}), 0u);
  // ts 10 is in [10, 20): it closes [0, 10) for both groups, in order of first appearance.
  EXPECT_EQ(run.feed("Temp", 10, {{"sensor", "a"}, {"v", 1}}), 2u);
  EXPECT_EQ(run.flush(), (std::vector<std::string>{
                             "Mean [0,9] mean=15.0 n=2 sensor=\"a\"",
                             "Mean [0,9] mean=5.0 n=1 sensor=\"b\"",
                             "Mean [10,19] mean=1.0 n=1 sensor=\"a\"",
                         }));
}

// A result computed again from the same events (a cluster node replaying a
// partition after a takeover) must be recognisable as the duplicate it is.
TEST(WindowDetectorTest, AResultsIdNamesItsGroupAndWindow) {
  const char* query = "FROM Temp t WINDOW TUMBLING 10 GROUP BY t.sensor RETURN N(count(t) AS n)";
  auto ids = [&] {
    WindowRun run(query);
    run.feed("Temp", 1, {{"sensor", "a"}});
    run.feed("Temp", 2, {{"sensor", "b"}});
    run.feed("Temp", 12, {{"sensor", "a"}});
    run.flush();
    std::vector<EventId> out;
    for (const EventPtr& r : run.sink.results) out.push_back(r->id());
    return out;
  };
  const std::vector<EventId> first = ids();
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(ids(), first);
  EXPECT_NE(first[0], first[1]);  // another group, the same window
  EXPECT_NE(first[0], first[2]);  // the same group, another window
}

TEST(WindowDetectorTest, OtherEventsMoveTimeToo) {
  WindowRun run("FROM Temp t WINDOW TUMBLING 10 RETURN N(count(t))");
  run.feed("Temp", 3, {});
  EXPECT_EQ(run.feed("Other", 12, {}), 1u);
}

TEST(WindowDetectorTest, SlidingWindowsShareTheirPanes) {
  // Windows [5k, 5k + 10): ts 7 is in [0,10) and [5,15); ts 12 in [5,15) and [10,20).
  WindowRun run(
      "FROM T t WINDOW SLIDING 10 EVERY 5 RETURN S(sum(t.v) AS s, first(t.v) AS f, "
      "last(t.v) AS l, min(t.v) AS lo, max(t.v) AS hi)");
  run.feed("T", 7, {{"v", 1}});
  run.feed("T", 12, {{"v", 2}});
  EXPECT_EQ(run.feed("T", 15, {{"v", 4}}), 2u);  // [0,10) and [5,15) are out
  EXPECT_EQ(run.flush(), (std::vector<std::string>{
                             "S [0,9] f=1 hi=1 l=1 lo=1 s=1",
                             "S [5,14] f=1 hi=2 l=2 lo=1 s=3",
                             "S [10,19] f=2 hi=4 l=4 lo=2 s=6",
                             "S [15,24] f=4 hi=4 l=4 lo=4 s=4",
                         }));
}

TEST(WindowDetectorTest, SlidingResultsStayInOrderAsPanesLeaveAndEnter) {
  // L = 3, S = 1: each pane is in three windows, so the group's panes leave
  // one by one while new ones enter, across several refills of the pane
  // queue's front, and a gap leaves windows with no pane. first/last and
  // min/max show that every window merges exactly its panes, oldest first.
  WindowRun run(
      "FROM T t WINDOW SLIDING 3 EVERY 1 RETURN S(sum(t.v) AS s, first(t.v) AS f, "
      "last(t.v) AS l, min(t.v) AS lo, max(t.v) AS hi)");
  const std::pair<Timestamp, int> events[] = {{0, 5}, {1, 2}, {2, 9}, {3, 4}, {4, 1}, {10, 7}};
  for (const auto& [ts, v] : events) run.feed("T", ts, {{"v", v}});
  EXPECT_EQ(run.flush(), (std::vector<std::string>{
                             "S [-2,0] f=5 hi=5 l=5 lo=5 s=5",
                             "S [-1,1] f=5 hi=5 l=2 lo=2 s=7",
                             "S [0,2] f=5 hi=9 l=9 lo=2 s=16",
                             "S [1,3] f=2 hi=9 l=4 lo=2 s=15",
                             "S [2,4] f=9 hi=9 l=1 lo=1 s=14",
                             "S [3,5] f=4 hi=4 l=1 lo=1 s=5",
                             "S [4,6] f=1 hi=1 l=1 lo=1 s=1",
                             "S [8,10] f=7 hi=7 l=7 lo=7 s=7",
                             "S [9,11] f=7 hi=7 l=7 lo=7 s=7",
                             "S [10,12] f=7 hi=7 l=7 lo=7 s=7",
                         }));
}

// Results of several groups come out in time order whichever way they close:
// as they close, when time moves less than S past the first window due
// (ts 3 and 4); collected and sorted, when it jumps further (ts 20 closes
// a's [2,6) and [4,8) and b's [2,6)); round by round at the end of time
// (both groups' [18,22) before their [20,24)). Group a had nothing open
// when ts 4 came (its last window out), so it was forgotten and comes back
// after b: b's [2,6) comes out before a's. RETURN reads first(t.g) twice,
// so the first of the two items must not take the string from the second.
TEST(WindowDetectorTest, GroupsResultsComeOutInTimeOrderHoweverTheyClose) {
  WindowRun run(
      "FROM T t WINDOW SLIDING 4 EVERY 2 GROUP BY t.g "
      "RETURN C(t.g AS g, count(t) AS n, first(t.g) AS x, first(t.g) AS y)");
  run.feed("T", 0, {{"g", "a"}});
  run.feed("T", 1, {{"g", "b"}});
  EXPECT_EQ(run.feed("T", 3, {{"g", "b"}}), 2u);
  EXPECT_EQ(run.feed("T", 4, {{"g", "a"}}), 4u);
  EXPECT_EQ(run.feed("T", 20, {{"g", "a"}}), 7u);
  run.feed("T", 21, {{"g", "b"}});
  EXPECT_EQ(run.flush(), (std::vector<std::string>{
                             "C [-2,1] g=\"a\" n=1 x=\"a\" y=\"a\"",
                             "C [-2,1] g=\"b\" n=1 x=\"b\" y=\"b\"",
                             "C [0,3] g=\"a\" n=1 x=\"a\" y=\"a\"",
                             "C [0,3] g=\"b\" n=2 x=\"b\" y=\"b\"",
                             "C [2,5] g=\"b\" n=1 x=\"b\" y=\"b\"",
                             "C [2,5] g=\"a\" n=1 x=\"a\" y=\"a\"",
                             "C [4,7] g=\"a\" n=1 x=\"a\" y=\"a\"",
                             "C [18,21] g=\"a\" n=1 x=\"a\" y=\"a\"",
                             "C [18,21] g=\"b\" n=1 x=\"b\" y=\"b\"",
                             "C [20,23] g=\"a\" n=1 x=\"a\" y=\"a\"",
                             "C [20,23] g=\"b\" n=1 x=\"b\" y=\"b\"",
                         }));
}

TEST(WindowDetectorTest, SlidingWithASlideThatDoesNotDivideTheLength) {
  // L = 6, S = 4: panes of gcd 2; windows [4k, 4k + 6).
  WindowRun run("FROM T t WINDOW SLIDING 6 EVERY 4 RETURN C(count(t) AS n)");
  for (Timestamp ts : {1, 3, 5, 7}) run.feed("T", ts, {});
  EXPECT_EQ(run.flush(), (std::vector<std::string>{
                             "C [-4,1] n=1",
                             "C [0,5] n=3",
                             "C [4,9] n=2",
                         }));
}

// EMIT EVERY 4 on [0, 10): partial results at 4 and 8 over the events
// before each, then the final one; [10, 20) has its first event at 13, so
// its first partial is at 16.
TEST(WindowDetectorTest, EmitEveryGivesPartialResultsThenTheFinalOne) {
  WindowRun run("FROM T t WINDOW TUMBLING 10 RETURN S(sum(t.v) AS s) EMIT EVERY 4");
  run.feed("T", 1, {{"v", 1}});
  EXPECT_EQ(run.feed("T", 3, {{"v", 2}}), 0u);
  EXPECT_EQ(run.feed("T", 4, {{"v", 4}}), 1u);   // 4 passed: [0, 4) so far
  EXPECT_EQ(run.feed("T", 13, {{"v", 8}}), 3u);  // 8 and the end passed
  ASSERT_TRUE(run.detector->onWatermark(15).isOk());
  EXPECT_EQ(run.sink.results.size(), 4u) << "the watermark 15 passes 16";
  EXPECT_EQ(run.flush(), (std::vector<std::string>{
                             "S [0,3] partial=true s=3",
                             "S [0,7] partial=true s=7",
                             "S [0,9] partial=false s=7",
                             "S [10,15] partial=true s=8",
                             "S [10,19] partial=false s=8",
                         }));
}

// A session's partial results end at its last event so far; one comes at
// every multiple of d until the gap runs out, HAVING filtering each.
TEST(WindowDetectorTest, EmitEveryOnSessionsAndHaving) {
  WindowRun run(
      "FROM T t WINDOW SESSION GAP 5 HAVING count(t) >= 2 RETURN N(count(t) AS n) EMIT EVERY 3");
  run.feed("T", 1, {});
  run.feed("T", 4, {});  // 3 passed with one event: HAVING drops it
  EXPECT_EQ(run.sink.results.size(), 0u);
  EXPECT_EQ(run.flush(), (std::vector<std::string>{
                             "N [1,4] n=2 partial=true",  // at 6
                             "N [1,4] n=2 partial=true",  // at 9: the gap runs out after 9
                             "N [1,4] n=2 partial=false",
                         }));
}

TEST(WindowDetectorTest, WindowsAlignToTsZeroBeforeItToo) {
  WindowRun run("FROM T t WINDOW TUMBLING 5 RETURN C(count(t) AS n)");
  run.feed("T", -3, {});
  run.feed("T", -1, {});
  run.feed("T", 0, {});
  EXPECT_EQ(run.flush(), (std::vector<std::string>{"C [-5,-1] n=2", "C [0,4] n=1"}));
}

TEST(WindowDetectorTest, SessionsEndAfterAGapLongerThanG) {
  WindowRun run(
      "FROM Trade x WINDOW SESSION GAP 2 GROUP BY x.sym "
      "RETURN Burst(x.sym AS sym, count(x) AS n, stddev(x.p) AS sd)");
  run.feed("Trade", 1, {{"sym", "A"}, {"p", 1}});
  run.feed("Trade", 3, {{"sym", "A"}, {"p", 3}});  // a gap of exactly 2 keeps the session
  EXPECT_EQ(run.feed("Trade", 5, {{"sym", "B"}, {"p", 1}}), 0u);
  EXPECT_EQ(run.feed("Trade", 6, {{"sym", "B"}, {"p", 1}}), 1u);  // 6 - 3 > 2 ends A's
  EXPECT_EQ(run.flush(), (std::vector<std::string>{
                             "Burst [1,3] n=2 sd=1.4142135623730951 sym=\"A\"",
                             "Burst [5,6] n=2 sd=0.0 sym=\"B\"",
                         }));
}

// The session that ends first is the one whose last event is oldest, not
// the one that started first: A starts before B but its later events make
// B's session the one an event at 5 ends.
TEST(WindowDetectorTest, TheSessionWithTheOldestLastEventEndsFirst) {
  WindowRun run(
      "FROM Trade x WINDOW SESSION GAP 2 GROUP BY x.sym RETURN Burst(x.sym AS sym, count(x) AS n)");
  run.feed("Trade", 1, {{"sym", "A"}});
  run.feed("Trade", 2, {{"sym", "B"}});
  run.feed("Trade", 3, {{"sym", "A"}});
  run.feed("Trade", 4, {{"sym", "A"}});
  EXPECT_EQ(run.feed("Trade", 5, {{"sym", "C"}}), 1u) << "5 - 2 > 2 ends B's session";
  EXPECT_EQ(run.feed("Trade", 6, {{"sym", "C"}}), 1u) << "A's last event is 4";
  EXPECT_EQ(run.flush(), (std::vector<std::string>{
                             "Burst [2,2] n=1 sym=\"B\"",
                             "Burst [1,4] n=3 sym=\"A\"",
                             "Burst [5,6] n=2 sym=\"C\"",
                         }));
}

TEST(WindowDetectorTest, WhereFiltersEventsAndHavingFiltersResults) {
  WindowRun run(
      "FROM T t WHERE t.v > 0 WINDOW TUMBLING 10 GROUP BY t.g HAVING count(t) >= 2 "
      "RETURN R(t.g AS g, count(t.v) AS n, stddev(t.v) AS sd)");
  run.feed("T", 1, {{"g", 1}, {"v", 5}});
  run.feed("T", 2, {{"g", 1}, {"v", -5}});  // fails WHERE
  run.feed("T", 3, {{"g", 2}, {"v", 5}});
  run.feed("T", 4, {{"g", 2}, {"v", 7}});
  run.feed("T", 5, {{"g", 1}, {"v", -1}});
  // Group 1 has one WHERE-passing event: HAVING drops it. A window with none gives nothing.
  EXPECT_EQ(run.flush(), (std::vector<std::string>{"R [0,9] g=2 n=2 sd=1.4142135623730951"}));
}

// A RETURN whose items are aggregates and group keys as they are copies them
// into the result without building the row; with a HAVING (here always
// true) it evaluates RETURN over the row. Both give the same results: the
// same attributes (none for a Missing aggregate or an absent key), values
// of the same kind, the same ids.
TEST(WindowDetectorTest, ReturnCopiedAsItIsEqualsReturnEvaluatedOverTheRow) {
  const std::string returns =
      "RETURN R(t.g AS g, t.h AS h, count(t) AS n, avg(t.v) AS a, min(t.v) AS lo, "
      "last(t.v) AS l, stddev(t.v) AS sd)";
  const std::string query = "FROM T t WINDOW SLIDING 10 EVERY 5 GROUP BY t.g, t.h ";
  auto results = [&](const std::string& text, bool direct) {
    WindowRun run(text);
    auto plan = compilePlan(*pattern::parseQuery(text), {});
    EXPECT_EQ((*plan)->direct_returns.has_value(), direct) << text;
    run.feed("T", 1, {{"g", "a"}, {"h", 1}, {"v", 2}});
    run.feed("T", 3, {{"g", "a"}, {"h", 1}, {"v", 2.5}});
    run.feed("T", 4, {{"g", "b"}, {"v", "n/a"}});
    run.feed("T", 8, {{"h", true}});
    run.feed("T", 12, {{"g", "a"}, {"h", 1.0}});
    std::vector<std::string> out = run.flush();
    for (size_t i = 0; i < out.size(); ++i)
      out[i] += " id=" + std::to_string(run.sink.results[i]->id());
    return out;
  };
  const std::vector<std::string> copied = results(query + returns, true);
  ASSERT_EQ(copied.size(), 8u);
  EXPECT_EQ(copied[0].substr(0, copied[0].find(" id=")),
            "R [-5,4] a=2.25 g=\"a\" h=1 l=2.5 lo=2 n=2 sd=0.3535533905932738");
  EXPECT_EQ(results(query + "HAVING true " + returns, false), copied);
}

// onEvents() looks ahead to prefetch groups, which may be forgotten (a
// session closes) or made before the event's turn: a batch gives what the
// same events one by one give.
TEST(WindowDetectorTest, ABatchGivesWhatEventsOneByOneGive) {
  for (const char* window : {"SESSION GAP 3", "SLIDING 6 EVERY 2", "TUMBLING 5"}) {
    const std::string query = std::string("FROM T t WINDOW ") + window +
                              " GROUP BY t.g RETURN R(t.g AS g, count(t) AS n, sum(t.v) AS s)";
    std::vector<EventPtr> events;
    for (int i = 0; i < 400; ++i) {
      EventBuilder b(i % 9 == 0 ? "Other" : "T");  // another type moves time too
      b.at(i / 4 + (i / 100) * 5);                 // gaps that close sessions
      b.set("g", static_cast<int64_t>((i * 7) % 23));
      b.set("v", i);
      events.push_back(b.build());
    }
    WindowRun one_by_one(query);
    for (const EventPtr& e : events) ASSERT_TRUE(one_by_one.detector->onEvent(e).isOk());
    WindowRun batched(query);
    ASSERT_TRUE(batched.detector->onEvents(events).isOk());
    ASSERT_GT(one_by_one.sink.results.size(), 20u) << window;
    EXPECT_EQ(batched.flush(), one_by_one.flush()) << window;
  }
}

TEST(WindowDetectorTest, MissingAndNonNumericValuesAreSkipped) {
  WindowRun run(
      "FROM T t WINDOW TUMBLING 10 RETURN R(count(t) AS all, count(t.v) AS has, "
      "sum(t.v) AS s, avg(t.v) AS a, stddev(t.v) AS sd, first(t.v) AS f)");
  run.feed("T", 1, {{"v", "n/a"}});
  run.feed("T", 2, {});
  run.feed("T", 3, {{"v", 2.5}});
  // stddev of one number is Missing, so the attribute is absent; first is the first present value.
  EXPECT_EQ(run.flush(), (std::vector<std::string>{"R [0,9] a=2.5 all=3 f=\"n/a\" has=2 s=2.5"}));
  // "n/a" was skipped by sum, avg and stddev (count and first take it): three skips, counted.
  const auto counters =
      plugin::parseEngineCounters(*run.detector->exportModel(plugin::kCountersFormat));
  ASSERT_TRUE(counters.isOk());
  EXPECT_EQ((*counters)[3], (std::pair<std::string, uint64_t>{"non_numeric", 3}));
}

// min and max keep ints as ints and compare them exactly (two ints a double
// cannot tell apart), and compare an int with a double as numbers, in a
// pane and across the panes a sliding window merges.
TEST(WindowDetectorTest, MinAndMaxCompareIntsExactlyAndMixedKindsAsNumbers) {
  WindowRun run("FROM T t WINDOW SLIDING 4 EVERY 2 RETURN R(min(t.v) AS lo, max(t.v) AS hi)");
  run.feed("T", 0, {{"v", int64_t{9007199254740992}}});
  run.feed("T", 1, {{"v", int64_t{9007199254740993}}});
  run.feed("T", 2, {{"v", 2.5}});
  run.feed("T", 3, {{"v", int64_t{3}}});
  run.feed("T", 4, {{"v", int64_t{2}}});
  EXPECT_EQ(run.flush(), (std::vector<std::string>{
                             "R [-2,1] hi=9007199254740993 lo=9007199254740992",
                             "R [0,3] hi=9007199254740993 lo=2.5",
                             "R [2,5] hi=3 lo=2",
                             "R [4,7] hi=2 lo=2",
                         }));
}

TEST(WindowDetectorTest, KeysEqualAsValuesAreOneGroup) {
  // 1 and 1.0 are one group, events without the key share the null group,
  // and every NaN is one group (not one per event, which would fill the cap).
  WindowRun run("FROM T t WINDOW TUMBLING 10 GROUP BY t.g RETURN R(count(t) AS n)",
                {"max_groups=3"});
  run.feed("T", 1, {{"g", 1}});
  run.feed("T", 2, {{"g", 1.0}});
  run.feed("T", 3, {});
  run.feed("T", 4, {});
  run.feed("T", 5, {{"g", std::nan("")}});
  run.feed("T", 6, {{"g", std::nan("")}});
  EXPECT_EQ(run.flush(), (std::vector<std::string>{"R [0,9] n=2", "R [0,9] n=2", "R [0,9] n=2"}));
  EXPECT_EQ(*run.detector->exportModel("json"),
            "{\"groups\":0,\"max_groups\":3,\"refused_events\":0,\"non_numeric\":0,"
            "\"open\":0}");
}

TEST(WindowDetectorTest, GroupsBeyondTheCapAreRefusedAndCounted) {
  WindowRun run("FROM T t WINDOW TUMBLING 10 GROUP BY t.g RETURN R(t.g AS g, count(t) AS n)",
                {"max_groups=2"});
  run.feed("T", 1, {{"g", 1}});
  run.feed("T", 2, {{"g", 2}});
  run.feed("T", 3, {{"g", 3}});  // a third group while two are open
  run.feed("T", 4, {{"g", 1}});
  EXPECT_EQ(*run.detector->exportModel("json"),
            "{\"groups\":2,\"max_groups\":2,\"refused_events\":1,\"non_numeric\":0,"
            "\"open\":2}");
  EXPECT_EQ(*run.detector->exportModel(plugin::kCountersFormat),
            "groups 2\nmax_groups 2\nrefused_events 1\nnon_numeric 0\nopen 2\n");
  EXPECT_EQ(run.detector->state()->partial_matches, 2u);
  // Once [0,10) closes the groups are forgotten, and a new one fits.
  run.feed("T", 11, {{"g", 3}});
  EXPECT_EQ(run.flush(),
            (std::vector<std::string>{"R [0,9] g=1 n=2", "R [0,9] g=2 n=1", "R [10,19] g=3 n=1"}));
  EXPECT_EQ(run.detector->state()->partial_matches, 0u);
}

// A flood of distinct groups (each event a new one, all in one window) is
// bounded by the cap: the map never grows past it, and the rest is counted.
TEST(WindowDetectorTest, AFloodOfDistinctGroupsStaysWithinTheCap) {
  WindowRun run("FROM T t WINDOW TUMBLING 1000000 GROUP BY t.g RETURN R(count(t) AS n)",
                {"max_groups=1000"});
  for (int64_t g = 0; g < 200000; ++g) {
    EventBuilder b("T");
    b.at(g % 1000);
    b.set("g", Value(g));
    ASSERT_TRUE(run.detector->onEvent(b.build()).isOk());
  }
  const auto counters =
      plugin::parseEngineCounters(*run.detector->exportModel(plugin::kCountersFormat));
  ASSERT_TRUE(counters.isOk());
  EXPECT_EQ((*counters)[0], (std::pair<std::string, uint64_t>{"groups", 1000}));
  EXPECT_EQ((*counters)[2], (std::pair<std::string, uint64_t>{"refused_events", 199000}));
  EXPECT_EQ(run.detector->state()->peak_partial_matches, 1000u);
  EXPECT_EQ(run.flush().size(), 1000u);
}

TEST(WindowDetectorTest, RefusesPatternsAndBadOptions) {
  auto pattern = pattern::parseQuery("PATTERN SEQ(A a, B b)");
  auto refused = compilePlan(*pattern, {});
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.status().message().find("runs window queries"), std::string::npos);
  auto window = pattern::parseQuery("FROM T t WINDOW TUMBLING 1 RETURN R(count(t))");
  const std::vector<std::string> bad = {"max_groups=0"};
  auto cap = compilePlan(*window, *plugin::DetectorOptions::parse(bad));
  ASSERT_FALSE(cap.isOk());
  EXPECT_EQ(cap.status().message(), "window engine: option max_groups=0: expected an integer >= 1");
}

}  // namespace
}  // namespace cepbus::plugins::window
