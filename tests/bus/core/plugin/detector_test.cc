#include "bus/core/plugin/detector.h"

#include <gtest/gtest.h>

#include <span>

#include "bus/core/pattern/parser.h"

namespace cepbus::plugin {
namespace {

DetectorOptions options(std::map<std::string, std::string, std::less<>> values) {
  return DetectorOptions(std::move(values));
}

TEST(DetectorOptionsTest, RelativePathsResolveAgainstTheBaseFolderEvenAfterWithout) {
  const DetectorOptions options =
      DetectorOptions({{"slack", "3"}, {"time_matrix", "m.csv"}}).withBaseDir("/srv/bus");
  EXPECT_EQ(options.resolvePath("m.csv"), std::filesystem::path("/srv/bus/m.csv"));
  EXPECT_EQ(options.resolvePath("/abs/m.csv"), std::filesystem::path("/abs/m.csv"));
  EXPECT_EQ(options.without("slack").resolvePath("m.csv"), std::filesystem::path("/srv/bus/m.csv"));
  EXPECT_EQ(DetectorOptions().resolvePath("m.csv"), std::filesystem::path("m.csv"));
}

TEST(DetectorOptionsTest, ParsesKeyValueItemsLaterOnesWin) {
  const std::vector<std::string> items = {"construction=per_event", "slack=3", "slack=4", "x="};
  auto o = DetectorOptions::parse(items);
  ASSERT_TRUE(o.isOk());
  EXPECT_EQ(*o->find("construction"), "per_event");
  EXPECT_EQ(*o->find("slack"), "4");
  EXPECT_EQ(*o->find("x"), "");
  EXPECT_EQ(o->find("nothing"), nullptr);
  EXPECT_EQ(o->without("slack").find("slack"), nullptr);
  EXPECT_NE(o->without("slack").find("construction"), nullptr);
}

TEST(DetectorOptionsTest, RejectsItemsWithoutKey) {
  for (const char* bad : {"novalue", "=3"}) {
    const std::vector<std::string> items = {bad};
    auto o = DetectorOptions::parse(items);
    ASSERT_FALSE(o.isOk()) << bad;
    EXPECT_NE(o.status().message().find(bad), std::string::npos);
  }
}

TEST(DetectorOptionsTest, CheckKnownNamesTheUnknownOptionAndTheKnownOnes) {
  DetectorOptions o({{"construction", "batched"}, {"colour", "red"}});
  static constexpr std::string_view kKnown[] = {"construction", "batch_period"};
  Status s = o.checkKnown(kKnown, "nfa");
  EXPECT_EQ(s.message(), "engine 'nfa' has no option 'colour' (known: construction, batch_period)");
  EXPECT_TRUE(options({{"construction", "x"}}).checkKnown(kKnown, "nfa").isOk());
}

class Composer : public MatchComposer {
 public:
  EventPtr compose(const Match& match) const override {
    EventBuilder b("Pair");
    for (size_t i = 0; i < match.size(); ++i) b.constituent(match.event(i));
    return b.build();
  }
};

TEST(MatchTest, ExposesElementsAndBuildsTheCompositeOnDemand) {
  const EventPtr a = EventBuilder("A").at(1).build();
  const EventPtr b1 = EventBuilder("B").at(2).build();
  const EventPtr b2 = EventBuilder("B").at(4).build();
  const EventPtr* events[] = {&a, &b1, &b2};
  const uint32_t ends[] = {1, 3};
  Composer composer;
  Match m(events, ends, &composer);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m.ts(2), 4);
  ASSERT_EQ(m.elementCount(), 2u);
  EXPECT_EQ(m.elementEvents(0).size(), 1u);
  ASSERT_EQ(m.elementEvents(1).size(), 2u);
  EXPECT_EQ(*m.elementEvents(1)[1], b2);
  const EventPtr c = m.composite();
  EXPECT_EQ(c->type().name(), "Pair");
  EXPECT_EQ(c->start(), 1);
  EXPECT_EQ(c->end(), 4);
  EXPECT_EQ(c->constituents().size(), 3u);
}

// Reports every event of the query's first element type as a one-event match;
// refuses queries whose first type is "Bad".
class EchoDetector final : public Detector {
 public:
  EchoDetector(Symbol type, MatchSink& sink) : type_(type), sink_(&sink) {}
  Status onEvent(const EventPtr& event) override {
    if (event->type() != type_) return Status::ok();
    const EventPtr* events[] = {&event};
    const uint32_t ends[] = {1};
    sink_->onMatch(Match(events, ends, &composer_));
    return Status::ok();
  }
  Status flush() override {
    ++flushes;
    return Status::ok();
  }
  static inline int flushes = 0;

 private:
  Symbol type_;
  MatchSink* sink_;
  Composer composer_;
};

class EchoFactory final : public DetectorFactory {
 public:
  Result<std::unique_ptr<Detector>> create(const pattern::Query& query, const DetectorOptions&,
                                           MatchSink& sink) const override {
    const std::string& type = query.pattern->children.empty()
                                  ? query.pattern->type
                                  : query.pattern->children.front()->type;
    if (type == "Bad") return Status::invalidArgument("type Bad is not supported");
    return std::unique_ptr<Detector>(std::make_unique<EchoDetector>(Symbol::intern(type), sink));
  }
};

class LabelSink final : public MultiMatchSink {
 public:
  void onMatch(size_t pattern, const Match& match) override {
    seen.emplace_back(pattern, match.ts(0));
  }
  std::vector<std::pair<size_t, Timestamp>> seen;
};

NamedQuery named(std::string name, const char* text) {
  auto q = pattern::parseQuery(text);
  EXPECT_TRUE(q.isOk()) << q.status().toString();
  return NamedQuery{std::move(name), std::move(q).value()};
}

TEST(DetectorFactoryTest, DefaultCreateManyFansOutAndLabelsEachMatchWithItsQuery) {
  EchoFactory factory;
  const std::vector<NamedQuery> queries = {named("first", "PATTERN SEQ(A a, B b)"),
                                           named("second", "PATTERN SEQ(B b, A a)"),
                                           named("third", "PATTERN SEQ(A a, C c)")};
  LabelSink sink;
  auto d = factory.createMany(queries, DetectorOptions(), sink);
  ASSERT_TRUE(d.isOk()) << d.status().toString();
  ASSERT_TRUE((*d)->onEvent(EventBuilder("A").at(1).build()));
  ASSERT_TRUE((*d)->onEvent(EventBuilder("B").at(2).build()));
  const std::vector<std::pair<size_t, Timestamp>> expected = {{0, 1}, {2, 1}, {1, 2}};
  EXPECT_EQ(sink.seen, expected);
  EchoDetector::flushes = 0;
  ASSERT_TRUE((*d)->flush());
  EXPECT_EQ(EchoDetector::flushes, 3);
  // The fan-out has no model of its own.
  auto model = (*d)->exportModel("dot");
  ASSERT_FALSE(model.isOk());
  EXPECT_EQ(model.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(model.status().message().find("does not export"), std::string::npos);
}

// Records what the default onEvents() offers it; refuses even timestamps.
class OddOnly final : public Detector {
 public:
  Status onEvent(const EventPtr& event) override {
    seen.push_back(event->ts());
    if (event->ts() % 2 == 0) return Status::invalidArgument("even " + std::to_string(event->ts()));
    return Status::ok();
  }
  Status flush() override { return Status::ok(); }
  std::vector<Timestamp> seen;
};

TEST(DetectorTest, DefaultOnEventsOffersEveryEventAndReturnsTheFirstError) {
  OddOnly d;
  const std::vector<EventPtr> events = {
      EventBuilder("A").at(1).build(), EventBuilder("A").at(2).build(),
      EventBuilder("A").at(3).build(), EventBuilder("A").at(4).build()};
  Status s = d.onEvents(events);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "even 2");
  EXPECT_EQ(d.seen, (std::vector<Timestamp>{1, 2, 3, 4}));
  EXPECT_TRUE(d.onEvents(std::span<const EventPtr>(events).first(1)));
  EXPECT_TRUE(d.onEvents({}));
}

TEST(DetectorFactoryTest, FanOutForwardsABatchToEachQueryInTurn) {
  EchoFactory factory;
  const std::vector<NamedQuery> queries = {named("first", "PATTERN SEQ(A a, B b)"),
                                           named("second", "PATTERN SEQ(B b, A a)")};
  LabelSink sink;
  auto d = factory.createMany(queries, DetectorOptions(), sink);
  ASSERT_TRUE(d.isOk()) << d.status().toString();
  const std::vector<EventPtr> events = {
      EventBuilder("A").at(1).build(), EventBuilder("B").at(2).build(),
      EventBuilder("A").at(3).build(), EventBuilder("B").at(4).build()};
  ASSERT_TRUE((*d)->onEvents(events));
  // Query by query, each in event order.
  const std::vector<std::pair<size_t, Timestamp>> expected = {{0, 1}, {0, 3}, {1, 2}, {1, 4}};
  EXPECT_EQ(sink.seen, expected);
}

TEST(DetectorFactoryTest, CreateManyNamesTheQueryThatFailsAndRejectsBadNames) {
  EchoFactory factory;
  LabelSink sink;
  std::vector<NamedQuery> queries = {named("ok", "PATTERN SEQ(A a, B b)"),
                                     named("broken", "PATTERN SEQ(Bad a, B b)")};
  auto d = factory.createMany(queries, DetectorOptions(), sink);
  ASSERT_FALSE(d.isOk());
  EXPECT_NE(d.status().message().find("query 'broken': type Bad"), std::string::npos);

  queries = {named("x", "PATTERN SEQ(A a, B b)"), named("x", "PATTERN SEQ(B a, A b)")};
  d = factory.createMany(queries, DetectorOptions(), sink);
  ASSERT_FALSE(d.isOk());
  EXPECT_NE(d.status().message().find("two queries are named 'x'"), std::string::npos);

  queries = {named("", "PATTERN SEQ(A a, B b)")};
  EXPECT_FALSE(factory.createMany(queries, DetectorOptions(), sink).isOk());
  EXPECT_FALSE(factory.createMany({}, DetectorOptions(), sink).isOk());
}

}  // namespace
}  // namespace cepbus::plugin
