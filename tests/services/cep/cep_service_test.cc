#include "services/cep/cep_service.h"

#include <Poco/AutoPtr.h>
#include <Poco/Channel.h>
#include <Poco/Logger.h>
#include <Poco/Message.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bus/host/descriptor/parser.h"
#include "bus/host/detection/query_name_watch.h"
#include "flows/source_ends.h"
#include "flows/st_flow.h"
#include "router/broker.h"
#include "router/delivery_policy.h"
#include "router/registry.h"
#include "tests/testing/cep_descriptor.h"
#include "tests/testing/recorder.h"
#include "tests/testing/stats.h"
#include "tests/testing/wait.h"

namespace cepbus::services::cep {
namespace {

using namespace std::chrono_literals;

using testing::CepQuery;
using testing::CepUnit;
using testing::Recorder;
using testing::waitUntil;

const Value* attr(const EventPtr& e, std::string_view name) {
  return e->find(Symbol::intern(name));
}

class CepServiceTest : public ::testing::Test {
 protected:
  CepServiceTest() {
    auto policy = std::make_unique<router::DeliveryPolicy>("st");
    EXPECT_TRUE(policy->addFlow(std::make_unique<flows::StFlow>("st")));
    // "rel.#" lets a sender ask for reliable delivery (on the same flow here).
    router::RouteRule reliable{"rel.#", "st"};
    reliable.allow_reliable = true;
    reliable.reliable_flow = "st";
    EXPECT_TRUE(policy->addRoute(reliable));
    registry_ = std::make_shared<router::Registry>();
    broker_ = std::make_unique<router::Broker>(std::move(policy), registry_);
    EXPECT_TRUE(broker_->start());
    loader_ = std::make_unique<plugin::PluginLoader>(
        std::vector<std::string>{CEPBUS_CEP_TEST_PLUGIN_DIR, CEPBUS_TEST_BUILD_DIR "/plugins"});
    context_ = std::make_unique<ServiceContext>(ServiceContext{*broker_, *registry_, *loader_});
  }
  ~CepServiceTest() override {
    service_.reset();  // services stop before the broker, as the Bus does it
    broker_->stop();
  }

  // Parses `xml` (a <service-assembly> fragment named cep_test.xml) and
  // builds its first unit.
  Result<std::unique_ptr<Service>> build(std::string_view xml) {
    descriptor::ParseReport report;
    auto assembly = descriptor::parseServiceAssembly(xml, "cep_test.xml", &report);
    if (!assembly) return Status::internal("fragment does not parse: " + report.toString());
    return CepServiceFactory().create(*assembly, assembly->units.at(0), *context_);
  }

  // Builds and starts the service of `xml`; the fixture owns it.
  CepService& start(std::string_view xml) {
    auto built = build(xml);
    EXPECT_TRUE(built) << built.status().toString();
    if (!built) throw std::runtime_error(built.status().toString());
    service_.reset(static_cast<CepService*>(built->release()));
    Status started = service_->start();
    EXPECT_TRUE(started) << started.toString();
    return *service_;
  }

  // `source`: the publishing link it comes by (flows::Exchange::source).
  flows::SendOutcome publish(std::string_view address, std::string_view type, Timestamp ts,
                             int64_t x = 0, uint64_t source = 0) {
    flows::Exchange exchange;
    exchange.event = EventBuilder(type).at(ts).set("x", Value(x)).build();
    exchange.address = Symbol::intern(address);
    exchange.source = source;
    return broker_->publish(exchange);
  }

  bool waitConsumed(const CepService& service, std::string_view query, uint64_t n) {
    return waitUntil([&] {
      auto s = service.stats(query);
      return s && s->consumed >= n;
    });
  }

  std::shared_ptr<router::Registry> registry_;
  std::unique_ptr<router::Broker> broker_;
  std::unique_ptr<plugin::PluginLoader> loader_;
  std::unique_ptr<ServiceContext> context_;
  std::unique_ptr<CepService> service_;
};

// A and B make a Pair, from "in.events" to "out.pairs".
CepQuery pairsQuery() { return CepQuery("pairs", "PATTERN SEQ(A a, B b) RETURN Pair(a.x, b.x)"); }

std::string pairsUnit() { return CepUnit().query(pairsQuery()).toXml(); }

TEST_F(CepServiceTest, PublishesEveryMatchAsACompositeEventOnTheOutput) {
  CepService& cep = start(pairsUnit());
  Recorder out(*broker_, "test.out", "out.pairs");
  const int64_t xs[] = {1, 0, 2, 3, 4};
  const char* types[] = {"A", "C", "B", "A", "B"};
  for (int i = 0; i < 5; ++i) {
    const flows::SendOutcome o = publish("in.events", types[i], i + 1, xs[i]);
    EXPECT_EQ(o.delivered, 1u) << o.status.toString();
  }
  ASSERT_TRUE(out.waitFor(2));
  ASSERT_TRUE(waitConsumed(cep, "pairs", 5));
  const auto events = out.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]->type().name(), "Pair");
  EXPECT_EQ(attr(events[0], "a_x")->asInt(), 1);
  EXPECT_EQ(attr(events[0], "b_x")->asInt(), 2);
  ASSERT_EQ(events[0]->constituents().size(), 2u);
  EXPECT_EQ(events[0]->constituents()[0]->ts(), 1);
  EXPECT_EQ(events[0]->constituents()[1]->ts(), 3);
  EXPECT_EQ(events[0]->start(), 1);
  EXPECT_EQ(events[0]->end(), 3);
  EXPECT_EQ(attr(events[1], "a_x")->asInt(), 3);
  EXPECT_EQ(attr(events[1], "b_x")->asInt(), 4);
  for (Symbol sender : out.senders()) EXPECT_EQ(sender.name(), "sa.cep/pairs");

  EXPECT_EQ(cep.matches("pairs"), 2u);
  const QueryStats stats = *cep.stats("pairs");
  EXPECT_EQ(stats.consumed, 5u);
  EXPECT_EQ(stats.errors, 0u);
  EXPECT_EQ(stats.rejected, 0u);
  EXPECT_EQ(stats.queued, 0u);
  EXPECT_TRUE(cep.finished());
  EXPECT_EQ(cep.queries(), std::vector<std::string>{"pairs"});
  EXPECT_EQ(cep.endpointName("pairs"), "sa.cep/pairs");
}

TEST_F(CepServiceTest, ReportsEachQueryInTheRegistry) {
  CepService& cep = start(pairsUnit());
  publish("in.events", "A", 1);
  publish("in.events", "B", 2);
  publish("in.events", "B", 3);
  ASSERT_TRUE(waitConsumed(cep, "pairs", 3));

  auto service = registry_->snapshotOf("sa.cep");
  ASSERT_TRUE(service);
  EXPECT_EQ(service->state, router::ComponentState::kStarted);
  auto endpoint = registry_->snapshotOf("sa.cep/pairs");
  ASSERT_TRUE(endpoint);
  EXPECT_EQ(endpoint->kind, router::ComponentKind::kEndpoint);
  EXPECT_EQ(endpoint->owner, "sa.cep");

  auto query = registry_->snapshotOf("sa.cep/pairs:detector");
  ASSERT_TRUE(query);
  EXPECT_EQ(query->owner, "sa.cep");
  EXPECT_EQ(query->state, router::ComponentState::kStarted);
  EXPECT_EQ(query->delivered, 3u);
  EXPECT_EQ(query->failed, 0u);
  auto meta = [&](std::string_view key) -> std::string {
    for (const auto& [k, v] : query->metadata) {
      if (k == key) return v;
    }
    return "<absent>";
  };
  EXPECT_EQ(meta("engine"), "cepfake");
  EXPECT_EQ(meta("input"), "in.events");
  EXPECT_EQ(meta("output"), "out.pairs");
  EXPECT_EQ(meta("text"), "PATTERN SEQ(A a, B b) RETURN Pair(a.x, b.x)");
  // The numbers are in the stats store, not in the metadata.
  EXPECT_EQ(meta("matches"), "<absent>");
  auto query_stat = [&](std::string_view metric) {
    return testing::statValue(registry_->stats(), "query", {{"name", "sa.cep/pairs:detector"}},
                              metric);
  };
  auto detection_stat = [&](std::string_view metric) {
    return testing::statValue(registry_->stats(), "cep_detection", {{"name", "sa.cep/pairs"}},
                              metric);
  };
  EXPECT_EQ(query_stat("matches"), 1);
  EXPECT_EQ(query_stat("publish_failures"), 0);
  EXPECT_EQ(query_stat("output_held"), 0);
  EXPECT_EQ(detection_stat("consumed"), 3);
  EXPECT_EQ(detection_stat("errors"), 0);
  EXPECT_EQ(detection_stat("queued"), 0);

  cep.stop();
  EXPECT_FALSE(registry_->snapshotOf("sa.cep"));
  EXPECT_FALSE(registry_->snapshotOf("sa.cep/pairs"));
  EXPECT_FALSE(registry_->snapshotOf("sa.cep/pairs:detector"));
  EXPECT_EQ(broker_->endpoint("sa.cep/pairs"), nullptr);
  // A stopped query takes its numbers with it.
  EXPECT_FALSE(query_stat("matches"));
  EXPECT_FALSE(detection_stat("consumed"));
}

TEST_F(CepServiceTest, FeedsTheDetectorInArrivalOrder) {
  // With no max_delay, any event older than the newest one the detector saw
  // is late, so a single reordering would show up as a late event.
  CepService& cep = start(pairsUnit());
  Recorder out(*broker_, "test.out", "out.pairs");
  constexpr int kPairsSent = 1000;
  for (int i = 0; i < kPairsSent; ++i) {
    publish("in.events", "A", 2 * i, i);
    publish("in.events", "B", 2 * i + 1, i);
  }
  ASSERT_TRUE(out.waitFor(kPairsSent));
  ASSERT_TRUE(waitConsumed(cep, "pairs", 2 * kPairsSent));
  EXPECT_EQ(cep.stats("pairs")->errors, 0u);
  EXPECT_EQ(cep.stats("pairs")->late, 0u);
  const auto events = out.events();
  ASSERT_EQ(events.size(), static_cast<size_t>(kPairsSent));
  for (int i = 0; i < kPairsSent; ++i) {
    EXPECT_EQ(attr(events[i], "a_x")->asInt(), i);
    EXPECT_EQ(attr(events[i], "b_x")->asInt(), i);
  }
}

TEST_F(CepServiceTest, AQueryConsumesTheCompositeEventsOfAnother) {
  CepService& cep =
      start(CepUnit()
                .query(pairsQuery())
                .query(CepQuery("quads", "PATTERN SEQ(Pair p, Pair q) RETURN Quad(p.a_x, q.b_x)")
                           .input("out.pairs"))
                .toXml());
  Recorder quads(*broker_, "test.quads", "out.quads");
  for (int i = 1; i <= 4; ++i) publish("in.events", i % 2 == 1 ? "A" : "B", i, i * 10);
  ASSERT_TRUE(quads.waitFor(1));
  const auto events = quads.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]->type().name(), "Quad");
  EXPECT_EQ(attr(events[0], "p_a_x")->asInt(), 10);
  EXPECT_EQ(attr(events[0], "q_b_x")->asInt(), 40);
  ASSERT_EQ(events[0]->constituents().size(), 2u);
  EXPECT_EQ(events[0]->constituents()[0]->type().name(), "Pair");
  EXPECT_EQ(events[0]->constituents()[0]->constituents().size(), 2u);
  EXPECT_EQ(events[0]->start(), 1);
  EXPECT_EQ(events[0]->end(), 4);
  EXPECT_EQ(cep.matches("pairs"), 2u);
  EXPECT_EQ(cep.matches("quads"), 1u);
}

TEST_F(CepServiceTest, StopFlushesProducersBeforeTheirConsumers) {
  // Both detectors hold their matches until flushed (not when idle either).
  // The consumer is listed first: stopping in descriptor order would flush it
  // before its producer and lose the producer's pairs.
  CepService& cep =
      start(CepUnit()
                .query(CepQuery("quads", "PATTERN SEQ(Pair p, Pair q) RETURN Quad(p.a_x, q.b_x)")
                           .input("out.pairs")
                           .option("batched", "true")
                           .option("flush_when_idle", "false"))
                .query(pairsQuery().option("batched", "true").option("flush_when_idle", "false"))
                .toXml());
  Recorder pairs(*broker_, "test.pairs", "out.pairs");
  Recorder quads(*broker_, "test.quads", "out.quads");
  for (int i = 1; i <= 4; ++i) publish("in.events", i % 2 == 1 ? "A" : "B", i, i);
  ASSERT_TRUE(waitConsumed(cep, "pairs", 4));
  EXPECT_EQ(pairs.size(), 0u);

  cep.stop();
  // Straight-through delivery: everything flushed arrived before stop() returned.
  EXPECT_EQ(pairs.size(), 2u);
  ASSERT_EQ(quads.size(), 1u);
  EXPECT_EQ(attr(quads.events()[0], "p_a_x")->asInt(), 1);
  EXPECT_EQ(attr(quads.events()[0], "q_b_x")->asInt(), 4);

  cep.stop();  // idempotent
  EXPECT_EQ(quads.size(), 1u);
  EXPECT_TRUE(cep.queries().empty());
  // Unsubscribed: nothing consumes the input any more.
  EXPECT_EQ(publish("in.events", "A", 9).targets, 0u);
  EXPECT_FALSE(cep.start());
}

descriptor::QuerySpec spec(std::string name, std::string text, std::string input,
                           std::string output, std::vector<descriptor::Param> options = {}) {
  descriptor::QuerySpec q;
  q.name = std::move(name);
  q.engine = "cepfake";
  q.inputs = {std::move(input)};
  q.output = std::move(output);
  q.options = std::move(options);
  q.text = std::move(text);
  q.where = descriptor::Location{"admin", 1};
  q.text_where = descriptor::Location{"admin", 1};
  return q;
}

TEST_F(CepServiceTest, AddsAndRemovesQueriesWhileRunning) {
  CepService& cep = start(pairsUnit());
  Recorder pairs(*broker_, "test.pairs", "out.pairs");
  Recorder bs(*broker_, "test.bs", "out.bs");
  ASSERT_TRUE(cep.addQuery(spec("bs", "PATTERN B b RETURN OnlyB(b.x)", "in.events", "out.bs")));
  EXPECT_EQ(cep.queries(), (std::vector<std::string>{"pairs", "bs"}));
  EXPECT_TRUE(registry_->snapshotOf("sa.cep/bs:detector"));

  publish("in.events", "A", 1, 1);
  publish("in.events", "B", 2, 2);
  ASSERT_TRUE(pairs.waitFor(1));
  ASSERT_TRUE(bs.waitFor(1));
  EXPECT_EQ(attr(bs.events()[0], "b_x")->asInt(), 2);

  ASSERT_TRUE(cep.removeQuery("bs"));
  EXPECT_EQ(cep.removeQuery("bs").code(), Status::Code::kNotFound);
  EXPECT_EQ(cep.queries(), std::vector<std::string>{"pairs"});
  EXPECT_FALSE(registry_->snapshotOf("sa.cep/bs:detector"));
  EXPECT_EQ(broker_->endpoint("sa.cep/bs"), nullptr);
  EXPECT_FALSE(cep.stats("bs"));

  publish("in.events", "A", 3, 3);
  publish("in.events", "B", 4, 4);
  ASSERT_TRUE(pairs.waitFor(2));
  EXPECT_EQ(attr(pairs.events()[1], "a_x")->asInt(), 3);
  EXPECT_EQ(bs.size(), 1u);

  EXPECT_EQ(cep.addQuery(spec("pairs", "PATTERN A a", "in.events", "out.x")).code(),
            Status::Code::kAlreadyExists);
}

TEST_F(CepServiceTest, RemovingAQueryPublishesItsPendingMatches) {
  CepService& cep = start(pairsUnit());
  Recorder bs(*broker_, "test.bs", "out.bs");
  ASSERT_TRUE(cep.addQuery(spec("bs", "PATTERN B b RETURN OnlyB(b.x)", "in.events", "out.bs",
                                {{"batched", "true", {}}, {"flush_when_idle", "false", {}}})));
  publish("in.events", "B", 1, 7);
  ASSERT_TRUE(waitConsumed(cep, "bs", 1));
  EXPECT_EQ(bs.size(), 0u);
  ASSERT_TRUE(cep.removeQuery("bs"));
  ASSERT_EQ(bs.size(), 1u);
  EXPECT_EQ(attr(bs.events()[0], "b_x")->asInt(), 7);
}

// Composites go out best effort unless the query asks for reliable
// delivery; the route decides whether the ask is granted.
TEST_F(CepServiceTest, OutputQosReliableAsksForReliableDelivery) {
  CepService& cep = start(pairsUnit());
  Recorder plain(*broker_, "test.plain", "rel.plain");
  Recorder kept(*broker_, "test.kept", "rel.kept");
  ASSERT_TRUE(cep.addQuery(spec("plain", "PATTERN B b RETURN P(b.x)", "in.events", "rel.plain")));
  ASSERT_TRUE(cep.addQuery(spec("kept", "PATTERN B b RETURN K(b.x)", "in.events", "rel.kept",
                                {{"output_qos", "reliable", {}}})));
  publish("in.events", "B", 1, 7);
  ASSERT_TRUE(plain.waitFor(1));
  ASSERT_TRUE(kept.waitFor(1));
  EXPECT_EQ(plain.qos(), std::vector<flows::Qos>{flows::Qos::kBestEffort});
  EXPECT_EQ(kept.qos(), std::vector<flows::Qos>{flows::Qos::kReliable});
  const Status bad = cep.addQuery(
      spec("bad", "PATTERN B b", "in.events", "rel.bad", {{"output_qos", "always", {}}}));
  EXPECT_EQ(bad.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("output_qos must be best_effort or reliable, not \"always\""),
            std::string::npos)
      << bad.message();
}

// checkpoint_interval keeps the state in the bus's journal: without one, or
// with a value that is no number of milliseconds, the query is refused
// naming its descriptor line.
TEST_F(CepServiceTest, ACheckpointedQueryNeedsAJournalAndANumberOfMilliseconds) {
  CepService& cep = start(pairsUnit());
  const Status no_journal = cep.addQuery(
      spec("kept", "PATTERN B b", "in.events", "out.kept", {{"checkpoint_interval", "100", {}}}));
  EXPECT_EQ(no_journal.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(no_journal.message().find(
                "admin:1: <query name=\"kept\">: option checkpoint_interval needs a <journal>"),
            std::string::npos)
      << no_journal.message();
  const Status bad = cep.addQuery(
      spec("bad", "PATTERN B b", "in.events", "out.bad", {{"checkpoint_interval", "soon", {}}}));
  EXPECT_NE(bad.message().find("option checkpoint_interval=soon: expected a number of "
                               "milliseconds (0: no checkpoints)"),
            std::string::npos)
      << bad.message();
  // 0 asks for none: no journal needed.
  EXPECT_TRUE(cep.addQuery(
      spec("none", "PATTERN B b", "in.events", "out.none", {{"checkpoint_interval", "0", {}}})));
  // With a journal: an engine that does not snapshot, a query run inline.
  context_->journal_path = "journal.db";
  const Status engine = cep.addQuery(
      spec("fake", "PATTERN B b", "in.events", "out.fake", {{"checkpoint_interval", "100", {}}}));
  EXPECT_NE(engine.message().find("admin:1: <query name=\"fake\">: option checkpoint_interval: "
                                  "engine 'cepfake' cannot checkpoint this query"),
            std::string::npos)
      << engine.message();
  const Status inline_run =
      cep.addQuery(spec("inline", "PATTERN B b", "in.events", "out.inline",
                        {{"checkpoint_interval", "100", {}}, {"run_inline", "when_idle", {}}}));
  EXPECT_NE(inline_run.message().find("cannot be combined with run_inline=when_idle"),
            std::string::npos)
      << inline_run.message();
}

// A batching detector on a sparse stream: each time its queue runs empty the
// service flushes it, so matches come out without waiting for stop().
TEST_F(CepServiceTest, AnIdleQueryReportsWhatItsDetectorHolds) {
  CepService& cep = start(CepUnit().query(pairsQuery().option("batched", "true")).toXml());
  Recorder pairs(*broker_, "test.pairs", "out.pairs");
  publish("in.events", "A", 1, 1);
  publish("in.events", "B", 2, 2);
  ASSERT_TRUE(pairs.waitFor(1));
  EXPECT_EQ(attr(pairs.events()[0], "b_x")->asInt(), 2);
  publish("in.events", "A", 3, 3);
  publish("in.events", "B", 4, 4);
  ASSERT_TRUE(pairs.waitFor(2));
  EXPECT_EQ(cep.stats("pairs")->errors, 0u);
}

// A pause in the input is not the end of the stream: the idle flush leaves
// what the slack holds back in place, so an event of a slower producer that
// is older than the newest one, but within the slack, is still in time.
TEST_F(CepServiceTest, AnIdleFlushKeepsWhatTheSlackHoldsBack) {
  CepService& cep = start(CepUnit().query(pairsQuery().option("slack", "5")).toXml());
  Recorder pairs(*broker_, "test.pairs", "out.pairs");
  publish("in.events", "A", 10, 1);
  ASSERT_TRUE(waitConsumed(cep, "pairs", 1));  // its queue ran empty: flushed
  publish("in.events", "A", 8, 2);
  publish("in.events", "B", 20, 3);
  ASSERT_TRUE(waitConsumed(cep, "pairs", 3));
  // Read before stop(), which ends the queries with their stats.
  const std::optional<QueryStats> stats = cep.stats("pairs");
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->errors, 0u);
  EXPECT_EQ(stats->late, 0u);
  cep.stop();  // the end of the stream releases B 20
  std::vector<int64_t> firsts;
  for (const EventPtr& e : pairs.events()) firsts.push_back(attr(e, "a_x")->asInt());
  EXPECT_NE(std::find(firsts.begin(), firsts.end(), 2), firsts.end())
      << "A at ts 8 was refused as late";
}

// The service's own options take only their values, named with the line.
TEST_F(CepServiceTest, HostOptionsRefuseOtherValues) {
  const struct {
    std::string_view option, value, expected;
  } cases[] = {
      {"flush_when_idle", "sometimes", "flush_when_idle must be true or false, not \"sometimes\""},
      {"run_inline", "always", "run_inline must be never or when_idle, not \"always\""},
  };
  for (const auto& c : cases) {
    auto built = build(CepUnit()
                           .query(CepQuery("pairs", "PATTERN SEQ(A a, B b)")
                                      .option(std::string(c.option), std::string(c.value)))
                           .toXml());
    ASSERT_FALSE(built) << c.option;
    const std::string message = built.status().message();
    EXPECT_NE(message.find("cep_test.xml:3"), std::string::npos) << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
}

// run_inline=when_idle: on the synchronous flow of this fixture, the idle
// query detects on the publishing thread, so the match is out before
// publish() returns; a query without the option detects on its worker.
TEST_F(CepServiceTest, RunInlineWhenIdleDetectsOnTheDeliveringThread) {
  CepService& cep =
      start(CepUnit()
                .query(CepQuery("inline", "PATTERN SEQ(A a, B b) RETURN Pair(a.x, b.x)")
                           .option("run_inline", "when_idle"))
                .query(CepQuery("queued", "PATTERN SEQ(A a, B b) RETURN Pair(a.x, b.x)"))
                .toXml());
  Recorder inline_pairs(*broker_, "test.inline", "out.inline");
  Recorder queued_pairs(*broker_, "test.queued", "out.queued");
  publish("in.events", "A", 1, 1);
  publish("in.events", "B", 2, 2);
  EXPECT_EQ(inline_pairs.size(), 1u);  // nothing to wait for
  EXPECT_EQ(cep.stats("inline")->consumed, 2u);
  EXPECT_EQ(cep.stats("inline")->ran_inline, 2u);
  ASSERT_TRUE(queued_pairs.waitFor(1));
  EXPECT_EQ(cep.stats("queued")->ran_inline, 0u);
  EXPECT_EQ(attr(inline_pairs.events()[0], "b_x")->asInt(), 2);
}

TEST_F(CepServiceTest, QueriesAddedBeforeStartRunFromStart) {
  auto built = build(pairsUnit());
  ASSERT_TRUE(built) << built.status().toString();
  service_.reset(static_cast<CepService*>(built->release()));
  ASSERT_TRUE(service_->addQuery(spec("bs", "PATTERN B b", "in.events", "out.bs")));
  // Not started: nothing subscribes yet.
  EXPECT_EQ(publish("in.events", "B", 1).targets, 0u);
  ASSERT_TRUE(service_->start());
  Recorder bs(*broker_, "test.bs", "out.bs");
  publish("in.events", "B", 2);
  ASSERT_TRUE(bs.waitFor(1));
  EXPECT_EQ(bs.events()[0]->type().name(), "Match");  // no RETURN
}

TEST_F(CepServiceTest, DetectorErrorsAreCountedAndTheQueryKeepsRunning) {
  CepService& cep =
      start(CepUnit()
                .query(pairsQuery().option("fail_type", "Bad").option("throw_type", "Boom"))
                .toXml());
  Recorder out(*broker_, "test.out", "out.pairs");
  // One at a time, so that each is a batch of its own and counts its error.
  const std::tuple<const char*, Timestamp, int64_t> inputs[] = {
      {"A", 1, 1}, {"Bad", 2, 0}, {"Boom", 3, 0},
      {"B", 4, 4}, {"A", 0, 99},  // out of order: late, not an error
      {"A", 5, 5}, {"B", 6, 6}};
  uint64_t sent = 0;
  for (const auto& [type, ts, x] : inputs) {
    publish("in.events", type, ts, x);
    ASSERT_TRUE(waitConsumed(cep, "pairs", ++sent));
  }
  ASSERT_TRUE(out.waitFor(2));
  const auto events = out.events();
  EXPECT_EQ(attr(events[0], "a_x")->asInt(), 1);
  EXPECT_EQ(attr(events[1], "a_x")->asInt(), 5);
  const QueryStats stats = *cep.stats("pairs");
  EXPECT_EQ(stats.errors, 2u);
  EXPECT_EQ(stats.late, 1u);
  EXPECT_EQ(stats.matches, 2u);
  auto entry = registry_->snapshotOf("sa.cep/pairs:detector");
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->failed, 2u);
  EXPECT_EQ(entry->delivered, 7u);
}

TEST_F(CepServiceTest, CompositeEventsASubscriberRefusesAreCounted) {
  CepService& cep = start(pairsUnit());
  ASSERT_TRUE(
      broker_->addEndpoint("test.refuser", [](const flows::Exchange&, flows::DeliveryContext&) {
        return Status::unavailable("not today");
      }));
  ASSERT_TRUE(broker_->subscribe("test.refuser", "out.pairs"));
  publish("in.events", "A", 1);
  publish("in.events", "B", 2);
  ASSERT_TRUE(waitConsumed(cep, "pairs", 2));
  const QueryStats stats = *cep.stats("pairs");
  EXPECT_EQ(stats.matches, 1u);
  EXPECT_EQ(stats.publish_failures, 1u);
  EXPECT_EQ(stats.errors, 0u);
  (void)broker_->removeEndpoint("test.refuser");  // clean-up
}

// An endpoint that refuses everything as a full buffer would (Rejected)
// while closed, and records what it takes while open.
class Gatekeeper {
 public:
  Gatekeeper(router::Broker& broker, std::string_view address) : broker_(broker) {
    EXPECT_TRUE(broker_.addEndpoint(
        "test.gatekeeper", [this](const flows::Exchange& exchange, flows::DeliveryContext&) {
          std::lock_guard lock(mu_);
          if (!open_) {
            ++refused_;
            return Status::rejected("buffer full");
          }
          taken_.push_back(attr(exchange.event, "a_x")->asInt());
          return Status::ok();
        }));
    EXPECT_TRUE(broker_.subscribe("test.gatekeeper", address));
  }
  ~Gatekeeper() { (void)broker_.removeEndpoint("test.gatekeeper"); }  // clean-up
  void setOpen(bool open) {
    std::lock_guard lock(mu_);
    open_ = open;
  }
  size_t refused() const {
    std::lock_guard lock(mu_);
    return refused_;
  }
  std::vector<int64_t> taken() const {
    std::lock_guard lock(mu_);
    return taken_;
  }

 private:
  router::Broker& broker_;
  mutable std::mutex mu_;
  bool open_ = false;
  size_t refused_ = 0;
  std::vector<int64_t> taken_;
};

std::string reliablePairs(std::string_view run_inline) {
  return CepUnit()
      .query(pairsQuery()
                 .output("rel.pairs")
                 .option("output_qos", "reliable")
                 .option("run_inline", std::string(run_inline)))
      .toXml();
}

// A reliable query's composites that the bus refuses for now are held, in
// order, and the query takes no more events until the bus takes them: its
// input waits in its stage instead. Nothing is lost. On the worker, and
// when the delivering thread runs the detector inline (which must not wait:
// it hands the wait to the worker).
TEST_F(CepServiceTest, ReliableCompositesTheBusRefusesWaitAndHoldTheInputBack) {
  for (const char* run_inline : {"never", "when_idle"}) {
    SCOPED_TRACE(run_inline);
    Gatekeeper out(*broker_, "rel.pairs");
    CepService& cep = start(reliablePairs(run_inline));
    publish("in.events", "A", 1, 1);
    publish("in.events", "B", 2, 1);
    ASSERT_TRUE(waitUntil([&] { return cep.stats("pairs")->output_held == 1; }));
    // More pairs while the first waits: the detector does not see them.
    for (int64_t i = 2; i <= 4; ++i) {
      publish("in.events", "A", 2 * i - 1, i);
      publish("in.events", "B", 2 * i, i);
    }
    std::this_thread::sleep_for(50ms);
    QueryStats stats = *cep.stats("pairs");
    EXPECT_EQ(stats.consumed, 2u);
    EXPECT_GE(stats.queued, 6u);  // the six events (and the worker's wait, when queued)
    EXPECT_EQ(stats.output_held, 1u);
    EXPECT_GE(out.refused(), 2u);  // tried again while waiting

    out.setOpen(true);
    ASSERT_TRUE(waitUntil([&] { return out.taken().size() == 4; }));
    EXPECT_EQ(out.taken(), (std::vector<int64_t>{1, 2, 3, 4}));
    ASSERT_TRUE(waitConsumed(cep, "pairs", 8));
    stats = *cep.stats("pairs");
    EXPECT_EQ(stats.publish_failures, 0u);
    EXPECT_EQ(stats.output_held, 0u);
    EXPECT_EQ(stats.matches, 4u);
    service_.reset();
  }
}

// What Poco logs under "cepbus.cep" while it lives.
class CapturedCepLog {
 public:
  CapturedCepLog()
      : logger_(Poco::Logger::get("cepbus.cep")), before_(logger_.getChannel()), lines_(new Lines) {
    logger_.setChannel(lines_);
  }
  ~CapturedCepLog() { logger_.setChannel(before_); }
  CapturedCepLog(const CapturedCepLog&) = delete;
  CapturedCepLog& operator=(const CapturedCepLog&) = delete;

  std::vector<std::string> containing(std::string_view text) const {
    return lines_->containing(text);
  }

 private:
  class Lines : public Poco::Channel {
   public:
    void log(const Poco::Message& message) override {
      std::lock_guard lock(mu_);
      lines_.push_back(message.getText());
    }
    std::vector<std::string> containing(std::string_view text) const {
      std::lock_guard lock(mu_);
      std::vector<std::string> found;
      std::copy_if(
          lines_.begin(), lines_.end(), std::back_inserter(found),
          [text](const std::string& line) { return line.find(text) != std::string::npos; });
      return found;
    }

   private:
    mutable std::mutex mu_;
    std::vector<std::string> lines_;
  };

  Poco::Logger& logger_;
  Poco::AutoPtr<Poco::Channel> before_;
  Poco::AutoPtr<Lines> lines_;
};

// A query naming an attribute its events never carry is said once, after
// the first QueryNameWatch::kSampleEvents events, and each event of its
// types lacking it is counted (by the host: the engine is nfa only because
// the fake engine takes no WHERE).
TEST_F(CepServiceTest, NamesTheEventsNeverHadAreLoggedOnceAndCounted) {
  CapturedCepLog log;
  CepService& cep = start(R"(<service-assembly name="sa">
  <service-unit name="cep" type="cep">
    <query name="pairs" engine="nfa" input="in.events" output="out.pairs">
      <text>PATTERN SEQ(A a, B b) WHERE b.xx > a.x RETURN Pair(a.x, b.x)</text>
    </query>
  </service-unit>
</service-assembly>)");
  const uint64_t n = detection::QueryNameWatch::kSampleEvents;
  for (uint64_t i = 1; i <= n + 2; ++i) {
    publish("in.events", i % 2 == 1 ? "A" : "B", static_cast<Timestamp>(i));
  }
  ASSERT_TRUE(waitConsumed(cep, "pairs", n + 2));
  const std::vector<std::string> warnings = log.containing("never occurred");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "query sa.cep/pairs: line 1, column 29: attribute 'xx' never occurred on "
            "a B event in the first " +
                std::to_string(n) + " events on its inputs; did you mean 'x'? (in the query text)");
  // Every B event lacks b.xx; the A events have a.x.
  EXPECT_EQ(cep.stats("pairs")->missing_attribute, n / 2 + 1);
  EXPECT_EQ(testing::statValue(registry_->stats(), "query", {{"name", "sa.cep/pairs:detector"}},
                               "missing_attribute"),
            static_cast<double>(n / 2 + 1));
}

// A query's time is the slowest live source's newest ts: an event of the
// slow source behind the fast one's is no late event, and the fast one's
// events wait for it. Once the slow source is silent for idle_timeout it
// holds nothing back, and the service's ticker releases them with no
// event arriving.
TEST_F(CepServiceTest, TheSlowestLiveSourceSetsTheTimeUntilItIsIdle) {
  CepService& cep = start(CepUnit().query(pairsQuery().option("idle_timeout", "300")).toXml());
  Recorder pairs(*broker_, "test.pairs", "out.pairs");
  publish("in.events", "A", 10, 1, /*source=*/1);
  publish("in.events", "B", 50, 2, /*source=*/2);
  publish("in.events", "B", 20, 3, /*source=*/1);  // 30 behind 50, not behind source 1
  ASSERT_TRUE(waitConsumed(cep, "pairs", 3));
  // In ts order the A pairs with the B at 20 (the fake engine binds the next B).
  ASSERT_TRUE(pairs.waitFor(1));
  EXPECT_EQ(attr(pairs.events()[0], "b_x")->asInt(), 3);
  const QueryStats stats = *cep.stats("pairs");
  EXPECT_EQ(stats.late, 0u);
  EXPECT_EQ(stats.sources, 2u);
  // Both idle: the time is the newest of any, moved by the ticker alone.
  EXPECT_TRUE(waitUntil([&] {
    const QueryStats s = *cep.stats("pairs");
    return s.idle_sources == 2u && s.watermark == std::optional<Timestamp>(50);
  }));
}

// A source that ended (its link closed by its client, its replay done)
// holds nothing back from the next tick on, long before its idle timeout;
// what it sent before it ended is in order before that.
TEST_F(CepServiceTest, AnEndedSourceStopsHoldingTheTimeBackAtTheNextTick) {
  CepService& cep = start(CepUnit().query(pairsQuery().option("idle_timeout", "600000")).toXml());
  Recorder pairs(*broker_, "test.pairs", "out.pairs");
  const uint64_t slow = flows::newSource();
  const uint64_t fast = flows::newSource();
  publish("in.events", "A", 10, 1, slow);
  publish("in.events", "B", 50, 2, fast);
  ASSERT_TRUE(waitConsumed(cep, "pairs", 2));
  ASSERT_TRUE(
      waitUntil([&] { return cep.stats("pairs")->watermark == std::optional<Timestamp>(10); }));
  publish("in.events", "B", 20, 3, slow);
  flows::sourceEnds().end(slow);
  EXPECT_TRUE(waitUntil([&] {
    const QueryStats s = *cep.stats("pairs");
    return s.sources == 1u && s.watermark == std::optional<Timestamp>(50);
  })) << cep.stats("pairs")->watermark.value_or(-1);
  EXPECT_EQ(cep.stats("pairs")->late, 0u);
  ASSERT_TRUE(pairs.waitFor(1));
  EXPECT_EQ(attr(pairs.events()[0], "b_x")->asInt(), 3);
}

// A bad idle_timeout is refused at deployment, naming the option.
TEST_F(CepServiceTest, AnIdleTimeoutMustBeAPositiveNumberOfMilliseconds) {
  for (const char* bad : {"0", "-5", "2s", ""}) {
    auto built = build(CepUnit().query(pairsQuery().option("idle_timeout", bad)).toXml());
    ASSERT_FALSE(built) << bad;
    EXPECT_NE(built.status().message().find("option idle_timeout=" + std::string(bad) +
                                            ": expected a positive number of milliseconds"),
              std::string::npos)
        << built.status().message();
  }
}

// An event more than max_delay behind the newest one is late: it matches
// nothing, is no error, goes out as it came on the query's late address
// (<query>.late), is counted (stats, the query's "late" metric) and logged;
// the watermark is the newest ts minus the delay.
TEST_F(CepServiceTest, LateEventsArePublishedCountedLoggedAndMatchNothing) {
  CapturedCepLog log;
  CepService& cep = start(CepUnit().query(pairsQuery().option("max_delay", "2")).toXml());
  Recorder pairs(*broker_, "test.pairs", "out.pairs");
  Recorder late(*broker_, "test.late", "pairs.late");
  EXPECT_FALSE(cep.stats("pairs")->watermark);
  publish("in.events", "A", 10, 1);
  publish("in.events", "A", 7, 2);  // 3 behind 10: late
  publish("in.events", "A", 9, 3);  // 1 behind: in time
  publish("in.events", "B", 12, 4);
  ASSERT_TRUE(waitConsumed(cep, "pairs", 4));
  ASSERT_TRUE(late.waitFor(1));
  EXPECT_EQ(late.events()[0]->ts(), 7);
  EXPECT_EQ(attr(late.events()[0], "x")->asInt(), 2);
  EXPECT_EQ(late.senders()[0], Symbol::intern("sa.cep/pairs"));
  const QueryStats stats = *cep.stats("pairs");
  EXPECT_EQ(stats.late, 1u);
  EXPECT_EQ(stats.errors, 0u);
  EXPECT_EQ(stats.publish_failures, 0u);
  EXPECT_EQ(stats.watermark, std::optional<Timestamp>(10));
  EXPECT_EQ(
      testing::statValue(registry_->stats(), "query", {{"name", "sa.cep/pairs:detector"}}, "late"),
      1.0);
  const std::vector<std::string> warnings = log.containing("late event");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("late event (1 so far, not matched): type A at ts 7 arrived after "
                             "ts 10"),
            std::string::npos)
      << warnings[0];
  cep.stop();
  std::vector<int64_t> firsts;
  for (const EventPtr& e : pairs.events()) firsts.push_back(attr(e, "a_x")->asInt());
  // The fake engine pairs the first A with the next B: A 9 (x 3) in ts
  // order, where the late A 7 (x 2) would have come first.
  EXPECT_EQ(firsts, (std::vector<int64_t>{3}));
}

// late_output names the late address; each query sharing a detector
// publishes the late events on its own, a removed one no more.
TEST_F(CepServiceTest, LateOutputNamesTheLateAddressOfEachQuery) {
  CepService& cep =
      start(CepUnit()
                .query(pairsQuery().option("late_output", "late.all"))
                .query(CepQuery("other", "PATTERN SEQ(A a, B b) RETURN Pair(a.x, b.x)")
                           .option("late_output", "late.other"))
                .toXml());
  Recorder all(*broker_, "test.late.all", "late.#");
  publish("in.events", "A", 10, 1);
  publish("in.events", "A", 9, 2);  // late: no max_delay
  ASSERT_TRUE(all.waitFor(2));
  std::vector<Symbol> senders = all.senders();
  std::sort(senders.begin(), senders.end(), [](Symbol a, Symbol b) { return a.name() < b.name(); });
  EXPECT_EQ(senders,
            (std::vector<Symbol>{Symbol::intern("sa.cep/other"), Symbol::intern("sa.cep/pairs")}));
  ASSERT_TRUE(cep.removeQuery("other"));
  publish("in.events", "A", 8, 3);
  ASSERT_TRUE(waitConsumed(cep, "pairs", 3));
  ASSERT_TRUE(all.waitFor(3));
  EXPECT_EQ(all.senders().back(), Symbol::intern("sa.cep/pairs"));
  cep.stop();
  EXPECT_EQ(all.size(), 3u);

  auto bad = build(CepUnit().query(pairsQuery().option("late_output", "late.#")).toXml());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("option late_output: "), std::string::npos)
      << bad.status().message();
}

// A subscriber that keeps refusing now and then is logged when the
// composites held reach 1, 2, 4, 8 ... — seen again later, not once per
// composite.
TEST_F(CepServiceTest, HeldCompositesAreLoggedAtPowersOfTwo) {
  CapturedCepLog log;
  Gatekeeper out(*broker_, "rel.pairs");
  CepService& cep = start(reliablePairs("never"));
  for (int64_t i = 1; i <= 5; ++i) {
    out.setOpen(false);
    publish("in.events", "A", 2 * i - 1, i);
    publish("in.events", "B", 2 * i, i);
    ASSERT_TRUE(waitUntil([&] { return cep.stats("pairs")->output_held == 1; }));
    out.setOpen(true);
    ASSERT_TRUE(waitUntil([&] { return out.taken().size() == static_cast<size_t>(i); }));
  }
  const std::vector<std::string> warnings = log.containing("refused a composite event");
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_NE(warnings[0].find("(1 held so far)"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("(2 held so far)"), std::string::npos) << warnings[1];
  EXPECT_NE(warnings[2].find("(4 held so far)"), std::string::npos) << warnings[2];
  EXPECT_NE(warnings[2].find("pairs"), std::string::npos) << warnings[2];
}

// Stopping gives held composites a few seconds to go out, then gives them
// up (counted in publish_failures, which a stopped service no longer
// lists): a refusing subscriber cannot hold a stop forever.
TEST_F(CepServiceTest, AStopGivesUpOnCompositesTheBusKeepsRefusing) {
  Gatekeeper out(*broker_, "rel.pairs");
  CepService& cep = start(reliablePairs("never"));
  publish("in.events", "A", 1, 1);
  publish("in.events", "B", 2, 1);
  publish("in.events", "A", 3, 2);
  publish("in.events", "B", 4, 2);
  ASSERT_TRUE(waitUntil([&] { return cep.stats("pairs")->output_held >= 1; }));
  const auto start = std::chrono::steady_clock::now();
  cep.stop();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 4s);
  EXPECT_LT(took, 15s);
  EXPECT_TRUE(out.taken().empty());
}

// The gate of the fake engine's block_type option, found in the loaded plugin.
class Gate {
 public:
  explicit Gate(const std::string& library) {
    handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (handle_ == nullptr) return;
    close_ = reinterpret_cast<void (*)()>(dlsym(handle_, "cepfake_close_gate"));
    open_ = reinterpret_cast<void (*)()>(dlsym(handle_, "cepfake_open_gate"));
    blocked_ = reinterpret_cast<int (*)()>(dlsym(handle_, "cepfake_blocked"));
    largest_batch_ = reinterpret_cast<size_t (*)()>(dlsym(handle_, "cepfake_largest_batch"));
    reset_batches_ = reinterpret_cast<void (*)()>(dlsym(handle_, "cepfake_reset_batches"));
  }
  ~Gate() {
    if (open_ != nullptr) open_();
    if (handle_ != nullptr) dlclose(handle_);
  }
  bool valid() const {
    return close_ != nullptr && open_ != nullptr && blocked_ != nullptr &&
           largest_batch_ != nullptr && reset_batches_ != nullptr;
  }
  void close() { close_(); }
  void open() { open_(); }
  int blocked() { return blocked_(); }
  // The largest batch a detector was handed since resetBatches().
  size_t largestBatch() { return largest_batch_(); }
  void resetBatches() { reset_batches_(); }

 private:
  void* handle_ = nullptr;
  void (*close_)() = nullptr;
  void (*open_)() = nullptr;
  int (*blocked_)() = nullptr;
  size_t (*largest_batch_)() = nullptr;
  void (*reset_batches_)() = nullptr;
};

// Closes the cepfake gate, resets its batch record and publishes an event of
// `type` (the query's block_type), which keeps the query's worker inside its
// detector until the gate opens; null when the gate cannot be found or the
// worker never gets there.
std::unique_ptr<Gate> holdDetector(plugin::PluginLoader& loader, router::Broker& broker,
                                   std::string_view type = "Hold") {
  auto plugin = loader.load("cepfake");
  if (!plugin) return nullptr;
  auto gate = std::make_unique<Gate>((*plugin)->path());
  if (!gate->valid()) return nullptr;
  gate->close();
  gate->resetBatches();
  flows::Exchange exchange;
  exchange.event = EventBuilder(type).at(0).build();
  exchange.address = Symbol::intern("in.events");
  (void)broker.publish(exchange);
  if (!waitUntil([&] { return gate->blocked() == 1; })) return nullptr;
  return gate;
}

TEST_F(CepServiceTest, AFullStageRefusesEventsAsFaults) {
  CepService& cep = start(
      CepUnit().param("capacity", "2").query(pairsQuery().option("block_type", "Block")).toXml());
  Recorder out(*broker_, "test.out", "out.pairs");
  std::unique_ptr<Gate> held = holdDetector(*loader_, *broker_, "Block");
  ASSERT_TRUE(held);
  // The worker is held inside the detector: the next two fill the queue.
  EXPECT_EQ(publish("in.events", "A", 2, 2).delivered, 1u);
  EXPECT_EQ(publish("in.events", "B", 3, 3).delivered, 1u);
  EXPECT_FALSE(cep.finished());

  std::vector<flows::OutcomeKind> kinds;
  Status fault;
  flows::Exchange exchange;
  exchange.event = EventBuilder("A").at(4).build();
  exchange.address = Symbol::intern("in.events");
  exchange.pattern = flows::Pattern::kRobustInOnly;
  exchange.listener = flows::makeListener([&](const flows::Exchange&, const flows::Outcome& o) {
    kinds.push_back(o.kind);
    fault = o.status;
  });
  const flows::SendOutcome refused = broker_->publish(exchange);
  EXPECT_EQ(refused.failed, 1u);
  ASSERT_EQ(kinds, std::vector<flows::OutcomeKind>{flows::OutcomeKind::kFault});
  EXPECT_EQ(fault.code(), Status::Code::kRejected);
  EXPECT_EQ(cep.stats("pairs")->rejected, 1u);
  EXPECT_EQ(registry_->snapshotOf("sa.cep/pairs:detector")->rejected, 1u);

  held->open();
  ASSERT_TRUE(waitUntil([&] { return cep.finished(); }));
  ASSERT_TRUE(out.waitFor(1));
  EXPECT_EQ(cep.stats("pairs")->consumed, 3u);
  EXPECT_EQ(attr(out.events()[0], "b_x")->asInt(), 3);
}

// Pairs of A and B, a Hold event blocking the detector at the gate.
CepQuery heldPairsQuery() { return pairsQuery().option("block_type", "Hold"); }

std::string heldPairs(int batch, const CepQuery& query = heldPairsQuery()) {
  return CepUnit().param("batch_size", std::to_string(batch)).query(query).toXml();
}

// A burst offered while the worker is inside the detector queues up; the
// worker then hands it on in batches (at most batch_size), and the matches
// are those of per-event delivery.
TEST_F(CepServiceTest, ABurstQueuedWhileTheDetectorIsBusyArrivesInBatches) {
  for (int batch : {16, 1}) {
    SCOPED_TRACE("batch_size " + std::to_string(batch));
    CepService& cep = start(heldPairs(batch));
    Recorder out(*broker_, "test.out", "out.pairs");
    std::unique_ptr<Gate> held = holdDetector(*loader_, *broker_);
    ASSERT_TRUE(held);
    Gate& gate = *held;
    constexpr int kPairs = 100;
    for (int i = 0; i < kPairs; ++i) {
      publish("in.events", "A", 1 + 2 * i, i);
      publish("in.events", "B", 2 + 2 * i, i);
    }
    gate.open();
    ASSERT_TRUE(waitConsumed(cep, "pairs", 1 + 2 * kPairs));
    ASSERT_TRUE(out.waitFor(kPairs));
    EXPECT_EQ(gate.largestBatch(), static_cast<size_t>(batch));
    const auto events = out.events();
    ASSERT_EQ(events.size(), static_cast<size_t>(kPairs));
    for (int i = 0; i < kPairs; ++i) {
      EXPECT_EQ(attr(events[i], "a_x")->asInt(), i);
      EXPECT_EQ(attr(events[i], "b_x")->asInt(), i);
    }
    const QueryStats stats = *cep.stats("pairs");
    EXPECT_EQ(stats.consumed, 1u + 2 * kPairs);
    EXPECT_EQ(stats.matches, static_cast<uint64_t>(kPairs));
    EXPECT_EQ(registry_->snapshotOf("sa.cep/pairs:detector")->delivered, 1u + 2 * kPairs);
    service_.reset();
  }
}

// A flush request queued between events splits their batch: the events
// before it are flushed, the ones after it wait (flush_when_idle off).
TEST_F(CepServiceTest, AFlushInTheMiddleOfABatchSplitsIt) {
  CepService& cep = start(
      heldPairs(64, heldPairsQuery().option("batched", "true").option("flush_when_idle", "false")));
  Recorder out(*broker_, "test.out", "out.pairs");
  std::unique_ptr<Gate> held = holdDetector(*loader_, *broker_);
  ASSERT_TRUE(held);
  Gate& gate = *held;
  publish("in.events", "A", 1, 1);
  publish("in.events", "B", 2, 1);
  cep.flush();
  publish("in.events", "A", 3, 2);
  publish("in.events", "B", 4, 2);
  gate.open();
  ASSERT_TRUE(waitUntil([&] { return cep.finished(); }));
  EXPECT_EQ(gate.largestBatch(), 2u);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(attr(out.events()[0], "a_x")->asInt(), 1);
  cep.stop();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(attr(out.events()[1], "a_x")->asInt(), 2);
}

// A detector refusing an event of a batch counts one error for the batch
// (onEvents() reports the first); the other events are still detected.
TEST_F(CepServiceTest, ARefusedEventInABatchCountsOneErrorAndTheRestAreDetected) {
  CepService& cep = start(heldPairs(64, heldPairsQuery().option("fail_type", "Bad")));
  Recorder out(*broker_, "test.out", "out.pairs");
  std::unique_ptr<Gate> held = holdDetector(*loader_, *broker_);
  ASSERT_TRUE(held);
  Gate& gate = *held;
  publish("in.events", "A", 1, 1);
  publish("in.events", "Bad", 2);
  publish("in.events", "Bad", 3);
  publish("in.events", "B", 4, 1);
  gate.open();
  ASSERT_TRUE(waitConsumed(cep, "pairs", 5));
  ASSERT_TRUE(out.waitFor(1));
  EXPECT_EQ(attr(out.events()[0], "b_x")->asInt(), 1);
  const QueryStats stats = *cep.stats("pairs");
  EXPECT_EQ(stats.errors, 1u);
  EXPECT_EQ(registry_->snapshotOf("sa.cep/pairs:detector")->failed, 1u);
  EXPECT_EQ(registry_->snapshotOf("sa.cep/pairs:detector")->delivered, 5u);
}

// On a quiet stream a batch is one event, detected and flushed at once: the
// composite of a lone event does not wait for more input. The bound is a
// functional one (a match held for the next batch would never come).
TEST_F(CepServiceTest, ALoneEventIsDetectedWithoutWaitingForABatch) {
  CepService& cep = start(heldPairs(64, heldPairsQuery().option("batched", "true")));
  Recorder out(*broker_, "test.out", "out.pairs");
  publish("in.events", "A", 1, 7);
  ASSERT_TRUE(waitConsumed(cep, "pairs", 1));
  std::this_thread::sleep_for(50ms);  // the worker is idle when B comes
  const auto sent = std::chrono::steady_clock::now();
  publish("in.events", "B", 2, 7);
  ASSERT_TRUE(out.waitFor(1));
  EXPECT_LT(std::chrono::steady_clock::now() - sent, 200ms);
  EXPECT_EQ(attr(out.events()[0], "b_x")->asInt(), 7);
}

TEST_F(CepServiceTest, EventCostsDoNotReorderADetectorsInput) {
  // A stage serves cheap events first by default; a detector must see its
  // events in arrival order whatever they cost.
  CepService& cep = start(CepUnit().query(pairsQuery().option("block_type", "Block")).toXml());
  Recorder out(*broker_, "test.out", "out.pairs");
  std::unique_ptr<Gate> held = holdDetector(*loader_, *broker_, "Block");
  ASSERT_TRUE(held);
  for (const auto& [type, ts, cost] : {std::tuple{"A", 2, 500}, std::tuple{"B", 3, 0}}) {
    flows::Exchange exchange;
    exchange.event = EventBuilder(type).at(ts).cost(cost).set("x", Value(ts)).build();
    exchange.address = Symbol::intern("in.events");
    EXPECT_EQ(broker_->publish(exchange).delivered, 1u);
  }
  held->open();
  ASSERT_TRUE(waitConsumed(cep, "pairs", 3));
  EXPECT_EQ(cep.stats("pairs")->errors, 0u);
  ASSERT_TRUE(out.waitFor(1));
  EXPECT_EQ(attr(out.events()[0], "a_x")->asInt(), 2);
}

// --- errors at deployment --------------------------------------------------

TEST_F(CepServiceTest, ABadQueryNamesTheDescriptorLineOfTheError) {
  // Line 5 holds the first line of the text; the error is on the text's line 2.
  auto built =
      build(CepUnit()
                .query(CepQuery("broken",
                                "\n        PATTERN SEQ(A a, B b)\n        WHERE a.x = = 3\n      ")
                           .output("out.x"))
                .query(CepQuery("also-broken", "PATTERN SEQ(A a, B b) WITHIN 0").output("out.y"))
                .toXml());
  ASSERT_FALSE(built);
  const std::string& message = built.status().message();
  EXPECT_NE(message.find("cep_test.xml:6: <query name=\"broken\">: "), std::string::npos)
      << message;
  EXPECT_NE(message.find("line 2, column"), std::string::npos) << message;
  // Every broken query is reported, one per line.
  EXPECT_NE(message.find("\ncep_test.xml:10: <query name=\"also-broken\">: "), std::string::npos)
      << message;
}

TEST_F(CepServiceTest, AnUnknownEngineIsNamedWithItsQuery) {
  auto built =
      build(CepUnit()
                .query(CepQuery("q", "PATTERN SEQ(A a, B b)").engine("nosuch").output("out.x"))
                .toXml());
  ASSERT_FALSE(built);
  const std::string& message = built.status().message();
  EXPECT_NE(message.find("cep_test.xml:3: <query name=\"q\">: unknown engine \"nosuch\""),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("libcepbus_plugin_nosuch.so"), std::string::npos) << message;
}

TEST_F(CepServiceTest, AQueryTheEngineCannotRunIsNamedWithItsLine) {
  auto built = build(
      CepUnit()
          .query(CepQuery("q", "PATTERN SEQ(A a, B b)").output("out.x").option("colour", "red"))
          .toXml());
  ASSERT_FALSE(built);
  const std::string& message = built.status().message();
  EXPECT_NE(message.find("cep_test.xml:3: <query name=\"q\">: engine \"cepfake\" cannot run the "
                         "query: "),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("colour"), std::string::npos) << message;
}

TEST_F(CepServiceTest, TheFactoryChecksTheUnit) {
  auto unknown_param = build(
      CepUnit().param("capacty", "3").query(CepQuery("q", "PATTERN A a").output("out.x")).toXml());
  ASSERT_FALSE(unknown_param);
  EXPECT_NE(unknown_param.status().message().find("cep_test.xml:3: cep: unknown param \"capacty\""),
            std::string::npos)
      << unknown_param.status().message();

  const std::tuple<std::string, std::string> bad_sizes[] = {
      {"capacity", "0"},   {"capacity", "1.5"},     {"capacity", "many"},
      {"batch_size", "0"}, {"batch_size", "65537"}, {"batch_size", "-1"}};
  for (const auto& [param, bad] : bad_sizes) {
    auto bad_size = build(
        CepUnit().param(param, bad).query(CepQuery("q", "PATTERN A a").output("out.x")).toXml());
    ASSERT_FALSE(bad_size) << param << "=" << bad;
    EXPECT_NE(bad_size.status().message().find("cep_test.xml:3: <param name=\"" + param +
                                               "\">: expected an integer in [1, "),
              std::string::npos)
        << bad_size.status().message();
  }

  auto no_query = build(R"(<service-assembly name="sa">
  <service-unit name="cep" type="cep">
    <subscribe address="in.events"/>
  </service-unit>
</service-assembly>)");
  ASSERT_FALSE(no_query);
  EXPECT_NE(no_query.status().message().find("cep_test.xml:2: cep \"cep\": expected one or more "
                                             "<query>"),
            std::string::npos)
      << no_query.status().message();
}

// --- the real NFA engine ---------------------------------------------------

TEST_F(CepServiceTest, RunsTheNfaPlugin) {
  if (!std::filesystem::exists(CEPBUS_TEST_BUILD_DIR "/plugins/libcepbus_plugin_nfa.so")) {
    GTEST_SKIP() << "the nfa plugin is not built";
  }
  CepService& cep =
      start(CepUnit()
                .query(CepQuery("equal",
                                "<![CDATA[\n        PATTERN SEQ(Stock a, Stock b)\n        WHERE "
                                "a.price = b.price AND a.symbol != b.symbol\n        WITHIN 10\n   "
                                "     RETURN EqualPrices(a.symbol, b.symbol, a.price)\n      ]]>")
                           .engine("nfa")
                           .input("stocks.ticks")
                           .output("stocks.equal"))
                .toXml());
  Recorder out(*broker_, "test.out", "stocks.equal");
  const struct {
    const char* symbol;
    int64_t price;
  } ticks[] = {{"IBM", 10}, {"MSFT", 11}, {"ORCL", 10}};
  for (int i = 0; i < 3; ++i) {
    flows::Exchange exchange;
    exchange.event = EventBuilder("Stock")
                         .at(i + 1)
                         .set("symbol", Value(ticks[i].symbol))
                         .set("price", Value(ticks[i].price))
                         .build();
    exchange.address = Symbol::intern("stocks.ticks");
    broker_->publish(exchange);
  }
  // The engine constructs in batches by default; the match comes out when
  // the query's queue runs empty, without waiting for stop().
  ASSERT_TRUE(out.waitFor(1));
  EXPECT_EQ(cep.stats("equal")->errors, 0u);
  cep.stop();
  const auto events = out.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]->type().name(), "EqualPrices");
  EXPECT_EQ(attr(events[0], "a_symbol")->asString(), "IBM");
  EXPECT_EQ(attr(events[0], "b_symbol")->asString(), "ORCL");
  EXPECT_EQ(attr(events[0], "a_price")->asInt(), 10);
}

// time-unit="ms" lets the query write WITHIN 2 s for WITHIN 2000.
TEST_F(CepServiceTest, AQueryWithATimeUnitTakesDurationsWithUnits) {
  if (!std::filesystem::exists(CEPBUS_TEST_BUILD_DIR "/plugins/libcepbus_plugin_nfa.so")) {
    GTEST_SKIP() << "the nfa plugin is not built";
  }
  CepService& cep = start(
      CepUnit()
          .query(CepQuery("pairs", "PATTERN SEQ(A a, B b) WITHIN 2 s").engine("nfa").timeUnit("ms"))
          .toXml());
  Recorder out(*broker_, "test.out", "out.pairs");
  publish("in.events", "A", 1000);
  publish("in.events", "B", 2500);
  publish("in.events", "B", 3000);
  publish("in.events", "B", 3001);
  ASSERT_TRUE(out.waitFor(2));
  cep.stop();
  // B at 2500 and 3000 are within 2000 of A at 1000; B at 3001 is not.
  EXPECT_EQ(out.events().size(), 2u);
}

TEST_F(CepServiceTest, AUnitOnAQueryWithoutATimeUnitIsNamedWithItsLine) {
  auto built = build(
      CepUnit().query(CepQuery("pairs", "PATTERN SEQ(A a, B b) WITHIN 2 s").engine("nfa")).toXml());
  ASSERT_FALSE(built);
  EXPECT_EQ(built.status().message(),
            "cep_test.xml:4: <query name=\"pairs\">: WITHIN 2 s: the input's ts has no declared "
            "time unit, so a duration is a number of ts units; declare the unit "
            "(time-unit=\"ms\" on the query, --time-unit ms with cepbus match) or drop the unit "
            "(line 1, column 32 of the query text)");
}

// --- what a detector holds ----------------------------------------------------

TEST_F(CepServiceTest, ReportsThePartialMatchesItsDetectorHolds) {
  if (!std::filesystem::exists(CEPBUS_TEST_BUILD_DIR "/plugins/libcepbus_plugin_petri.so")) {
    GTEST_SKIP() << "the petri plugin is not built";
  }
  CepService& cep =
      start(CepUnit()
                .query(CepQuery("ab", "PATTERN SEQ(A a, B b) WITHIN 1000").engine("petri"))
                .query(CepQuery("fake", "PATTERN SEQ(A a, B b)").output("out.pairs"))
                .toXml());
  publish("in.events", "A", 1);
  publish("in.events", "A", 2);
  publish("in.events", "B", 3);
  ASSERT_TRUE(waitConsumed(cep, "ab", 3));
  ASSERT_TRUE(waitConsumed(cep, "fake", 3));
  // Two A tokens wait for a later B; a match holds nothing.
  const std::optional<plugin::DetectorState> held = cep.stats("ab")->partial_matches;
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->partial_matches, 2u);
  EXPECT_EQ(held->peak_partial_matches, 2u);
  // An engine that does not count says so rather than 0.
  EXPECT_FALSE(cep.stats("fake")->partial_matches.has_value());

  EXPECT_EQ(testing::statValue(registry_->stats(), "query", {{"name", "sa.cep/ab:detector"}},
                               "partial_matches"),
            2);
  EXPECT_EQ(testing::statValue(registry_->stats(), "query", {{"name", "sa.cep/ab:detector"}},
                               "partial_matches_peak"),
            2);
  EXPECT_FALSE(testing::statValue(registry_->stats(), "query", {{"name", "sa.cep/fake:detector"}},
                                  "partial_matches"));
}

// --- exporting a detector's model ---------------------------------------------

TEST_F(CepServiceTest, ExportsThePetriNetOfAQueryWhileEventsFlow) {
  if (!std::filesystem::exists(CEPBUS_TEST_BUILD_DIR "/plugins/libcepbus_plugin_petri.so")) {
    GTEST_SKIP() << "the petri plugin is not built";
  }
  CepService& cep = start(
      CepUnit()
          .query(
              CepQuery("ab", "PATTERN SEQ(A a, B b) WHERE a.x = b.x WITHIN 1000").engine("petri"))
          .query(CepQuery("fake", "PATTERN SEQ(A a, B b)").output("out.pairs"))
          .toXml());
  // Exports race with detection on the query's worker; the detector's lock
  // keeps them apart (ThreadSanitizer checks it).
  std::thread exporter([&cep] {
    for (int i = 0; i < 50; ++i) {
      auto json = cep.exportModel("ab", "json");
      ASSERT_TRUE(json.isOk()) << json.status().toString();
    }
  });
  for (int i = 1; i <= 200; ++i) publish("in.events", i % 2 == 1 ? "A" : "B", i, i / 2);
  exporter.join();
  ASSERT_TRUE(waitConsumed(cep, "ab", 200));

  auto dot = cep.exportModel("ab", "dot");
  ASSERT_TRUE(dot.isOk()) << dot.status().toString();
  EXPECT_TRUE(dot->starts_with("digraph petri {")) << *dot;
  EXPECT_NE(dot->find("\"in:A\""), std::string::npos) << *dot;
  EXPECT_NE(dot->find("a.x = b.x"), std::string::npos) << *dot;
  auto json = cep.exportModel("ab", "json");
  ASSERT_TRUE(json.isOk());
  EXPECT_NE(json->find("\"transitions\""), std::string::npos) << *json;

  auto bad_format = cep.exportModel("ab", "svg");
  ASSERT_FALSE(bad_format.isOk());
  EXPECT_EQ(bad_format.status().code(), Status::Code::kInvalidArgument);
  auto no_model = cep.exportModel("fake", "dot");
  ASSERT_FALSE(no_model.isOk());
  EXPECT_EQ(no_model.status().code(), Status::Code::kInvalidArgument);
  auto unknown = cep.exportModel("nosuch", "dot");
  ASSERT_FALSE(unknown.isOk());
  EXPECT_EQ(unknown.status().code(), Status::Code::kNotFound);
  cep.stop();
}

// --- queries sharing a detector -------------------------------------------------

std::string metaOf(const router::ComponentSnapshot& entry, std::string_view key) {
  for (const auto& [k, v] : entry.metadata) {
    if (k == key) return v;
  }
  return "<absent>";
}

// A composite event as text: its type, attributes and constituents' ts.
std::string render(const EventPtr& e) {
  std::string out(e->type().name());
  for (const Attribute& a : e->attributes()) {
    out += " " + std::string(a.name.name()) + "=" + a.value.toString();
  }
  out += " @";
  for (const EventPtr& c : e->constituents()) out += " " + std::to_string(c->ts());
  return out;
}

std::vector<std::string> rendered(const Recorder& recorder) {
  std::vector<std::string> out;
  for (const EventPtr& e : recorder.events()) out.push_back(render(e));
  std::sort(out.begin(), out.end());
  return out;
}

// What auto's reason adds when its pick goes on trial against `engine`.
std::string trialAgainst(const std::string& engine) {
  return "; trial against " + engine + " over 4096 events after the first 256, or 10 ms of CPU";
}

bool pluginsBuilt(std::initializer_list<const char*> engines) {
  for (const char* engine : engines) {
    if (!std::filesystem::exists(std::string(CEPBUS_TEST_BUILD_DIR "/plugins/libcepbus_plugin_") +
                                 engine + ".so")) {
      return false;
    }
  }
  return true;
}

std::string threeOnOneInput() {
  return CepUnit()
      .query(CepQuery("ab", "PATTERN SEQ(A a, B b) RETURN AB(a.x, b.x)"))
      .query(CepQuery("ac", "PATTERN SEQ(A a, C c) RETURN AC(a.x, c.x)"))
      .query(CepQuery("bc", "PATTERN SEQ(B b, C c) RETURN BC(b.x, c.x)")
                 .output("rel.bc")
                 .option("output_qos", "reliable"))
      .toXml();
}

TEST_F(CepServiceTest, QueriesOnOneInputShareADetectorAndEachPublishesItsOwnMatches) {
  CepService& cep = start(threeOnOneInput());
  const std::string shared = "sa.cep/shared-1:ab..bc";
  for (const char* q : {"ab", "ac", "bc"}) EXPECT_EQ(cep.endpointName(q), shared) << q;
  ASSERT_NE(broker_->endpoint(shared), nullptr);
  EXPECT_EQ(broker_->endpoint("sa.cep/ab"), nullptr);

  Recorder ab(*broker_, "test.ab", "out.ab");
  Recorder ac(*broker_, "test.ac", "out.ac");
  Recorder bc(*broker_, "test.bc", "rel.bc");
  const char* types[] = {"A", "B", "C", "A", "C"};
  for (int i = 0; i < 5; ++i) {
    // One delivery per event for the three queries.
    EXPECT_EQ(publish("in.events", types[i], i + 1, i + 1).delivered, 1u);
  }
  ASSERT_TRUE(ac.waitFor(2));
  ASSERT_TRUE(waitConsumed(cep, "ab", 5));
  EXPECT_EQ(rendered(ab), std::vector<std::string>{"AB a_x=1 b_x=2 @ 1 2"});
  EXPECT_EQ(rendered(ac),
            (std::vector<std::string>{"AC a_x=1 c_x=3 @ 1 3", "AC a_x=4 c_x=5 @ 4 5"}));
  EXPECT_EQ(rendered(bc), std::vector<std::string>{"BC b_x=2 c_x=3 @ 2 3"});
  // Each composite comes from its own query, with its own qos.
  for (Symbol sender : ac.senders()) EXPECT_EQ(sender.name(), "sa.cep/ac");
  EXPECT_EQ(bc.senders().at(0).name(), "sa.cep/bc");
  EXPECT_EQ(bc.qos().at(0), flows::Qos::kReliable);
  EXPECT_EQ(ab.qos().at(0), flows::Qos::kBestEffort);

  const std::pair<const char*, uint64_t> expected[] = {{"ab", 1}, {"ac", 2}, {"bc", 1}};
  for (const auto& [q, matches] : expected) {
    EXPECT_EQ(cep.matches(q), matches) << q;
    const QueryStats stats = *cep.stats(q);
    EXPECT_EQ(stats.consumed, 5u) << q;
    auto entry = registry_->snapshotOf("sa.cep/" + std::string(q) + ":detector");
    ASSERT_TRUE(entry) << q;
    EXPECT_EQ(testing::statValue(registry_->stats(), "query",
                                 {{"name", "sa.cep/" + std::string(q) + ":detector"}}, "matches"),
              matches)
        << q;
    EXPECT_EQ(metaOf(*entry, "engine"), "cepfake") << q;
    EXPECT_EQ(metaOf(*entry, "endpoint"), shared) << q;
    EXPECT_EQ(metaOf(*entry, "shared_by"), "3") << q;
    EXPECT_EQ(entry->delivered, 5u) << q;
  }
  // The detection's numbers once, under its endpoint.
  EXPECT_EQ(testing::statValue(registry_->stats(), "cep_detection", {{"name", shared}}, "consumed"),
            5);
  cep.stop();
  EXPECT_EQ(broker_->endpoint(shared), nullptr);
  EXPECT_FALSE(registry_->snapshotOf("sa.cep/ab:detector"));
}

TEST_F(CepServiceTest, QueriesThatSeeOtherEventsOrNeedOtherOptionsHaveTheirOwnDetector) {
  CepService& cep = start(
      CepUnit()
          .query(CepQuery("a1", "PATTERN SEQ(A a, B b)").input("in.a"))
          .query(CepQuery("b", "PATTERN SEQ(A a, B b)").input("in.b"))
          .query(CepQuery("slack", "PATTERN SEQ(A a, B b)").input("in.a").option("slack", "2"))
          .query(
              CepQuery("batched", "PATTERN SEQ(A a, B b)").input("in.a").option("batched", "true"))
          .query(CepQuery("no-idle-flush", "PATTERN SEQ(A a, B b)")
                     .input("in.a")
                     .output("out.nif")
                     .option("flush_when_idle", "false"))
          .query(CepQuery("inline", "PATTERN SEQ(A a, B b)")
                     .input("in.a")
                     .option("run_inline", "when_idle"))
          .query(CepQuery("alone", "PATTERN SEQ(A a, B b)")
                     .input("in.a")
                     .option("share_detector", "false"))
          .query(CepQuery("xy", "PATTERN SEQ(A a, B b)").input("in.x,in.y"))
          .query(CepQuery("a2", "PATTERN SEQ(A a, B b)")
                     .input("in.a")
                     .option("output_qos", "reliable"))
          .query(CepQuery("yx", "PATTERN SEQ(A a, B b)").input("in.y,in.x"))
          .toXml());
  // output_qos is the query's own; the inputs are compared in any order.
  EXPECT_EQ(cep.endpointName("a1"), "sa.cep/shared-1:a1..a2");
  EXPECT_EQ(cep.endpointName("a2"), "sa.cep/shared-1:a1..a2");
  EXPECT_EQ(cep.endpointName("xy"), "sa.cep/shared-2:xy..yx");
  EXPECT_EQ(cep.endpointName("yx"), "sa.cep/shared-2:xy..yx");
  for (const char* q : {"b", "slack", "batched", "no-idle-flush", "inline", "alone"}) {
    EXPECT_EQ(cep.endpointName(q), "sa.cep/" + std::string(q)) << q;
    auto entry = registry_->snapshotOf("sa.cep/" + std::string(q) + ":detector");
    ASSERT_TRUE(entry) << q;
    EXPECT_EQ(metaOf(*entry, "shared_by"), "<absent>") << q;
  }

  Recorder a1(*broker_, "test.a1", "out.a1");
  Recorder b(*broker_, "test.b", "out.b");
  publish("in.b", "A", 1);
  publish("in.b", "B", 2);
  ASSERT_TRUE(b.waitFor(1));
  ASSERT_TRUE(waitUntil([&] { return cep.finished(); }));
  EXPECT_EQ(a1.size(), 0u);
  EXPECT_EQ(cep.stats("a1")->consumed, 0u);
}

// Removing a query from a shared detector whose worker waits for the bus
// to take a held composite does not hang on it: the removal returns after
// a few seconds, and the query is muted once the worker gets there.
TEST_F(CepServiceTest, RemovingAQueryDoesNotWaitForeverForASharedDetectorsHeldOutput) {
  CepService& cep = start(CepUnit()
                              .query(CepQuery("ab", "PATTERN SEQ(A a, B b) RETURN AB(a.x, b.x)")
                                         .output("rel.ab")
                                         .option("output_qos", "reliable"))
                              .query(CepQuery("ac", "PATTERN SEQ(A a, C c) RETURN AC(a.x, c.x)"))
                              .toXml());
  ASSERT_EQ(cep.endpointName("ab"), cep.endpointName("ac"));
  Gatekeeper ab(*broker_, "rel.ab");
  Recorder ac(*broker_, "test.ac", "out.ac");
  publish("in.events", "A", 1, 1);
  publish("in.events", "B", 2, 2);
  ASSERT_TRUE(waitUntil([&] { return cep.stats("ab")->output_held == 1; }));

  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(cep.removeQuery("ac"));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 4s);
  EXPECT_LT(took, 15s);
  EXPECT_EQ(cep.queries(), std::vector<std::string>{"ab"});

  ab.setOpen(true);
  ASSERT_TRUE(waitUntil([&] { return ab.taken() == std::vector<int64_t>{1}; }));
  publish("in.events", "C", 3, 3);
  ASSERT_TRUE(waitConsumed(cep, "ab", 3));
  EXPECT_EQ(ac.size(), 0u);  // muted before C came
  EXPECT_EQ(cep.stats("ab")->publish_failures, 0u);
}

// Removing a query from a shared detector keeps the detector, and with it
// the other queries' partial matches; a query added later gets a detector
// of its own.
TEST_F(CepServiceTest, ARemovedQueryLeavesTheSharedDetectorToTheOthers) {
  CepService& cep = start(CepUnit()
                              .query(CepQuery("ab", "PATTERN SEQ(A a, B b) RETURN AB(a.x, b.x)")
                                         .option("batched", "true")
                                         .option("flush_when_idle", "false"))
                              .query(CepQuery("ac", "PATTERN SEQ(A a, C c) RETURN AC(a.x, c.x)")
                                         .option("batched", "true")
                                         .option("flush_when_idle", "false"))
                              .toXml());
  const std::string shared = "sa.cep/shared-1:ab..ac";
  ASSERT_EQ(cep.endpointName("ab"), shared);
  Recorder ab(*broker_, "test.ab", "out.ab");
  Recorder ac(*broker_, "test.ac", "out.ac");
  publish("in.events", "A", 1, 1);
  publish("in.events", "B", 2, 2);
  ASSERT_TRUE(waitConsumed(cep, "ab", 2));
  EXPECT_EQ(ab.size(), 0u);  // held by the batched detector

  // Its pending match is published as it leaves.
  ASSERT_TRUE(cep.removeQuery("ab"));
  EXPECT_EQ(rendered(ab), std::vector<std::string>{"AB a_x=1 b_x=2 @ 1 2"});
  EXPECT_FALSE(registry_->snapshotOf("sa.cep/ab:detector"));
  EXPECT_FALSE(cep.stats("ab"));
  EXPECT_EQ(cep.queries(), std::vector<std::string>{"ac"});
  EXPECT_NE(broker_->endpoint(shared), nullptr);

  // The detector kept A@1 for ac (a rebuilt one would have lost it); ab's
  // pattern still runs but its matches go nowhere.
  publish("in.events", "C", 3, 3);
  publish("in.events", "A", 4, 4);
  publish("in.events", "B", 5, 5);
  ASSERT_TRUE(waitConsumed(cep, "ac", 5));
  cep.flush();
  ASSERT_TRUE(ac.waitFor(1));
  ASSERT_TRUE(waitUntil([&] { return cep.finished(); }));
  EXPECT_EQ(rendered(ac), std::vector<std::string>{"AC a_x=1 c_x=3 @ 1 3"});
  EXPECT_EQ(ab.size(), 1u);
  EXPECT_EQ(cep.matches("ac"), 1u);

  // A query added while the service runs consumes through an endpoint of
  // its own, even when it could share.
  ASSERT_TRUE(
      cep.addQuery(spec("ab", "PATTERN SEQ(A a, B b) RETURN AB(a.x, b.x)", "in.events", "out.ab")));
  EXPECT_EQ(cep.endpointName("ab"), "sa.cep/ab");
  publish("in.events", "A", 6, 6);
  publish("in.events", "B", 7, 7);
  ASSERT_TRUE(ab.waitFor(2));
  EXPECT_EQ(render(ab.events()[1]), "AB a_x=6 b_x=7 @ 6 7");
  EXPECT_EQ(cep.matches("ab"), 1u);
  ASSERT_TRUE(waitConsumed(cep, "ac", 7));

  // The last query of a shared detector takes it down with it.
  ASSERT_TRUE(cep.removeQuery("ac"));
  EXPECT_EQ(broker_->endpoint(shared), nullptr);
  EXPECT_FALSE(registry_->snapshotOf(shared));
  EXPECT_NE(broker_->endpoint("sa.cep/ab"), nullptr);
}

// A query removed while events wait for its shared detector still gets
// their matches, as a query of its own does (its stage drains before it
// goes). Muting it at once would lose them only when the removal gets the
// detector before the worker does, hence the rounds.
TEST_F(CepServiceTest, ARemovedSharedQueryGetsTheMatchesOfTheEventsQueuedBeforeIt) {
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    CepService& cep = start(CepUnit()
                                .query(CepQuery("ab", "PATTERN SEQ(A a, B b) RETURN AB(a.x, b.x)")
                                           .option("block_type", "Hold"))
                                .query(CepQuery("ac", "PATTERN SEQ(A a, C c) RETURN AC(a.x, c.x)")
                                           .option("block_type", "Hold"))
                                .toXml());
    ASSERT_EQ(cep.endpointName("ab"), cep.endpointName("ac"));
    Recorder ab(*broker_, "test.ab", "out.ab");
    std::unique_ptr<Gate> held = holdDetector(*loader_, *broker_);
    ASSERT_TRUE(held);
    publish("in.events", "A", 1, 1);
    publish("in.events", "B", 2, 2);
    Status removed = Status::internal("not yet");
    std::thread remover([&] { removed = cep.removeQuery("ab"); });
    // The removal waits for the worker, which the gate holds.
    std::this_thread::sleep_for(5ms);
    EXPECT_EQ(ab.size(), 0u);
    held->open();
    remover.join();
    ASSERT_TRUE(removed) << removed.toString();
    ASSERT_EQ(rendered(ab), std::vector<std::string>{"AB a_x=1 b_x=2 @ 1 2"});
    EXPECT_EQ(cep.queries(), std::vector<std::string>{"ac"});
  }
}

TEST_F(CepServiceTest, QueriesAddedInOneCallShareADetector) {
  CepService& cep = start(pairsUnit());
  const descriptor::QuerySpec specs[] = {
      spec("b1", "PATTERN B b RETURN B1(b.x)", "in.events", "out.b1"),
      spec("b2", "PATTERN B b RETURN B2(b.x)", "in.events", "out.b2")};
  ASSERT_TRUE(cep.addQueries(specs));
  EXPECT_EQ(cep.endpointName("pairs"), "sa.cep/pairs");
  EXPECT_EQ(cep.endpointName("b1"), "sa.cep/shared-1:b1..b2");
  EXPECT_EQ(cep.endpointName("b2"), "sa.cep/shared-1:b1..b2");
  Recorder b2(*broker_, "test.b2", "out.b2");
  publish("in.events", "B", 1, 5);
  ASSERT_TRUE(b2.waitFor(1));
  EXPECT_EQ(render(b2.events()[0]), "B2 b_x=5 @ 1");

  // All or none: a name taken, or a query that cannot run, adds nothing.
  const descriptor::QuerySpec taken[] = {spec("c1", "PATTERN C c", "in.events", "out.c1"),
                                         spec("b1", "PATTERN C c", "in.events", "out.c2")};
  EXPECT_EQ(cep.addQueries(taken).code(), Status::Code::kAlreadyExists);
  const descriptor::QuerySpec broken[] = {
      spec("c1", "PATTERN C c", "in.events", "out.c1"),
      spec("c2", "PATTERN C c WHERE c.x = 1", "in.events", "out.c2")};
  const Status refused = cep.addQueries(broken);
  EXPECT_EQ(refused.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.message().find("<query name=\"c2\">: engine \"cepfake\" cannot run the query: "
                                   "cepfake does not support WHERE"),
            std::string::npos)
      << refused.message();
  EXPECT_EQ(refused.message().find("c1"), std::string::npos) << refused.message();
  EXPECT_EQ(cep.queries(), (std::vector<std::string>{"pairs", "b1", "b2"}));
  EXPECT_EQ(broker_->endpoint("sa.cep/c1"), nullptr);
}

// A query the engine refuses in a set is named alone, at its line; the
// others would have run.
TEST_F(CepServiceTest, AQueryTheEngineRefusesInASharedSetIsNamedAtItsLine) {
  auto built =
      build(CepUnit()
                .query(CepQuery("ok1", "PATTERN SEQ(A a, B b)").output("out.x"))
                .query(CepQuery("bad", "PATTERN SEQ(A a, B b) WHERE a.x = 1").output("out.y"))
                .query(CepQuery("ok2", "PATTERN SEQ(A a, C c)").output("out.z"))
                .toXml());
  ASSERT_FALSE(built);
  const std::string& message = built.status().message();
  EXPECT_EQ(message,
            "cep_test.xml:6: <query name=\"bad\">: engine \"cepfake\" cannot run the query: "
            "cepfake does not support WHERE");
}

// The queries of a unit, in one detector, report exactly the composite
// events each reports on a detector of its own: auto runs the set of six on
// the merged Petri net, and each alone on the engine it picks for it alone
// (nfa, or one Petri net for a filtered start).
TEST_F(CepServiceTest, AUnitOfQueriesOnOneDetectorFindsWhatEachFindsAlone) {
  if (!pluginsBuilt({"nfa", "petri"})) GTEST_SKIP() << "the nfa and petri plugins are not built";
  const std::vector<std::string> texts = {
      "PATTERN SEQ(A a, B b) WHERE a.x = b.x WITHIN 10 RETURN R0(a.x, b.x)",
      "PATTERN SEQ(A a, B b) WITHIN 4 RETURN R1(a.x, b.x)",
      "PATTERN SEQ(A a, C c) WITHIN 5 RETURN R2(a.x, c.x)",
      "PATTERN SEQ(B b, C c, D d) WHERE b.x = 1 WITHIN 20 RETURN R3(b.x, d.x)",
      "PATTERN SEQ(A a, NOT(C n), B b) WITHIN 8 RETURN R4(a.x, b.x)",
      "PATTERN SEQ(D d, A a) WHERE d.x < a.x WITHIN 6 RETURN R5(d.x, a.x)"};
  auto unit = [](const std::string& name, const std::vector<std::pair<int, std::string>>& qs) {
    std::string xml =
        "<service-assembly name=\"" + name + "\"><service-unit name=\"cep\" type=\"cep\">";
    for (const auto& [i, text] : qs) {
      xml += "<query name=\"q" + std::to_string(i) + "\" engine=\"auto\" input=\"in.events\" " +
             "output=\"out.q" + std::to_string(i) + "\"><text><![CDATA[" + text +
             "]]></text></query>";
    }
    return xml + "</service-unit></service-assembly>";
  };
  // The stream, replayed once per run: 300 events of 4 types, x in 0..3.
  std::vector<std::pair<std::string, int64_t>> stream;
  uint32_t seed = 12345;
  for (int i = 0; i < 300; ++i) {
    seed = seed * 1103515245u + 12345u;
    stream.emplace_back(std::string(1, static_cast<char>('A' + (seed >> 16) % 4)),
                        (seed >> 20) % 4);
  }
  // The composites of each query, after running the units of `assemblies` together.
  auto run = [&](const std::vector<std::string>& assemblies) {
    std::vector<std::unique_ptr<Service>> services;
    for (const std::string& xml : assemblies) {
      auto built = build(xml);
      EXPECT_TRUE(built) << built.status().toString();
      if (!built) return std::vector<std::vector<std::string>>{};
      EXPECT_TRUE((*built)->start());
      services.push_back(std::move(*built));
    }
    std::vector<std::unique_ptr<Recorder>> recorders;
    for (size_t i = 0; i < texts.size(); ++i) {
      recorders.push_back(std::make_unique<Recorder>(*broker_, "test.q" + std::to_string(i),
                                                     "out.q" + std::to_string(i)));
    }
    for (size_t i = 0; i < stream.size(); ++i) {
      publish("in.events", stream[i].first, static_cast<Timestamp>(i + 1), stream[i].second);
    }
    for (auto& s : services) s->stop();  // flushes every detector
    std::vector<std::vector<std::string>> out;
    for (const auto& r : recorders) out.push_back(rendered(*r));
    return out;
  };

  std::vector<std::pair<int, std::string>> all;
  for (size_t i = 0; i < texts.size(); ++i) all.emplace_back(static_cast<int>(i), texts[i]);
  {
    // The set: one petri detector, chosen for six patterns.
    auto built = build(unit("set", all));
    ASSERT_TRUE(built) << built.status().toString();
    auto& cep = static_cast<CepService&>(**built);
    ASSERT_TRUE(cep.start());
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string q = "q" + std::to_string(i);
      EXPECT_EQ(cep.endpointName(q), "set.cep/shared-1:q0..q5");
      auto entry = registry_->snapshotOf("set.cep/" + q + ":detector");
      ASSERT_TRUE(entry);
      EXPECT_EQ(metaOf(*entry, "engine"), "petri");
      EXPECT_EQ(metaOf(*entry, "engine_choice"),
                "auto: 6 patterns, merged Petri net from 2 patterns" + trialAgainst("nfa"));
    }
  }
  std::vector<std::string> alone;
  for (const auto& q : all) alone.push_back(unit("alone" + std::to_string(q.first), {q}));
  const auto shared = run({unit("set", all)});
  const auto separate = run(alone);
  ASSERT_EQ(shared.size(), texts.size());
  ASSERT_EQ(separate.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_FALSE(separate[i].empty()) << texts[i];
    EXPECT_EQ(shared[i], separate[i]) << texts[i];
  }
}

TEST_F(CepServiceTest, AutoDecidesOverTheUnitsQueriesAsASet) {
  if (!pluginsBuilt({"nfa", "petri", "algebra"})) {
    GTEST_SKIP() << "the nfa, petri and algebra plugins are not built";
  }
  CepService& cep = start(
      CepUnit()
          .query(CepQuery("s1", "PATTERN SEQ(A a, B b) WITHIN 5").engine("auto").input("in.a"))
          .query(CepQuery("recent", "PATTERN SEQ(A a, B b) WITHIN 5 CONTEXT recent")
                     .engine("auto")
                     .input("in.a"))
          .query(CepQuery("s2", "PATTERN SEQ(A a, C c) WITHIN 5").engine("auto").input("in.a"))
          .query(CepQuery("s3", "PATTERN SEQ(B b, C c) WITHIN 5").engine("auto").input("in.a"))
          .query(CepQuery("named", "PATTERN SEQ(A a, B b) WITHIN 5").engine("nfa").input("in.a"))
          .query(CepQuery("one", "PATTERN SEQ(A a, B b) WITHIN 5").engine("auto").input("in.b"))
          .toXml());
  auto entry = [&](const char* q) {
    auto e = registry_->snapshotOf("sa.cep/" + std::string(q) + ":detector");
    EXPECT_TRUE(e) << q;
    return e ? *e : router::ComponentSnapshot{};
  };
  // The three the merged net runs go to it, counted as a set of three.
  for (const char* q : {"s1", "s2", "s3"}) {
    EXPECT_EQ(metaOf(entry(q), "engine"), "petri") << q;
    EXPECT_EQ(metaOf(entry(q), "engine_choice"),
              "auto: 3 patterns, merged Petri net from 2 patterns" + trialAgainst("nfa"))
        << q;
    EXPECT_EQ(metaOf(entry(q), "shared_by"), "3") << q;
    EXPECT_EQ(cep.endpointName(q), cep.endpointName("s1")) << q;
  }
  // Only algebra runs CONTEXT recent: that query alone goes there.
  EXPECT_EQ(metaOf(entry("recent"), "engine"), "algebra");
  EXPECT_TRUE(metaOf(entry("recent"), "engine_choice").ends_with("; algebra runs it"));
  EXPECT_EQ(cep.endpointName("recent"), "sa.cep/recent");
  // A query naming nfa does not join the petri set.
  EXPECT_EQ(metaOf(entry("named"), "engine"), "nfa");
  EXPECT_EQ(cep.endpointName("named"), "sa.cep/named");
  // Alone on its input, a query is a set of one: one NFA.
  EXPECT_EQ(metaOf(entry("one"), "engine"), "nfa");
  EXPECT_EQ(
      metaOf(entry("one"), "engine_choice"),
      "auto: 1 pattern with no filter on its first variable, one NFA" + trialAgainst("petri"));

  // The merged net is what the queries of the set export.
  auto model = cep.exportModel("s2", "json");
  ASSERT_TRUE(model) << model.status().toString();
  for (const char* q : {"s1", "s2", "s3"}) {
    EXPECT_NE(model->find(std::string("\"") + q + "\""), std::string::npos) << q << *model;
  }
}

// Past its trial, an auto set runs on one engine, which the registry names
// with the trial's figures, and its composites are what that engine finds
// alone (nfa and petri agree on these, so either will do).
TEST_F(CepServiceTest, AutosTrialKeepsOneEngineAndTheRegistrySaysWhich) {
  if (!pluginsBuilt({"nfa", "petri"})) GTEST_SKIP() << "the nfa and petri plugins are not built";
  auto unit = [](const std::string& name, const std::string& engine) {
    return "<service-assembly name=\"" + name + "\"><service-unit name=\"cep\" type=\"cep\">" +
           "<query name=\"eq\" engine=\"" + engine + "\" input=\"in.t\" output=\"out." + name +
           ".eq\"><text><![CDATA[PATTERN SEQ(A a, A b) WHERE a.x = b.x WITHIN 6 RETURN Eq(a.x)]]>" +
           "</text>" + "</query><query name=\"lt\" engine=\"" + engine +
           "\" input=\"in.t\" output=\"out." + name +
           ".lt\"><text><![CDATA[PATTERN SEQ(A a, B b) WHERE a.x < b.x WITHIN 4 RETURN " +
           "Lt(a.x)]]></text></query></service-unit></service-assembly>";
  };
  auto built = build(unit("auto", "auto"));
  ASSERT_TRUE(built) << built.status().toString();
  auto reference = build(unit("ref", "nfa"));
  ASSERT_TRUE(reference) << reference.status().toString();
  auto& cep = static_cast<CepService&>(**built);
  ASSERT_TRUE(cep.start());
  ASSERT_TRUE((*reference)->start());
  Recorder eq(*broker_, "test.eq", "out.auto.eq"), lt(*broker_, "test.lt", "out.auto.lt");
  Recorder ref_eq(*broker_, "test.ref.eq", "out.ref.eq"),
      ref_lt(*broker_, "test.ref.lt", "out.ref.lt");
  const uint64_t kEvents = 6000;  // past the trial's 4096
  for (uint64_t i = 1; i <= kEvents; ++i) {
    publish("in.t", i % 3 == 0 ? "B" : "A", static_cast<Timestamp>(i),
            static_cast<int64_t>(i * 7 % 5));
    // In steps the stages take without refusing any.
    if (i % 200 == 0) {
      ASSERT_TRUE(waitConsumed(cep, "eq", i));
      ASSERT_TRUE(waitConsumed(static_cast<CepService&>(**reference), "eq", i));
    }
  }
  ASSERT_TRUE(waitConsumed(cep, "eq", kEvents));
  auto entry = registry_->snapshotOf("auto.cep/eq:detector");
  ASSERT_TRUE(entry);
  const std::string engine = metaOf(*entry, "engine");
  EXPECT_TRUE(engine == "nfa" || engine == "petri") << engine;
  const std::string choice = metaOf(*entry, "engine_choice");
  EXPECT_TRUE(choice.starts_with("auto: 2 patterns, merged Petri net from 2 patterns" +
                                 trialAgainst("nfa") + "; by trial: kept " + engine + ": petri "))
      << choice;
  EXPECT_NE(choice.find(" CPU on "), std::string::npos) << choice;
  cep.stop();
  (*reference)->stop();
  EXPECT_FALSE(rendered(ref_eq).empty());
  EXPECT_EQ(rendered(eq), rendered(ref_eq));
  EXPECT_EQ(rendered(lt), rendered(ref_lt));
}

// Queries naming an engine share with each other and with the auto queries
// that went to it.
TEST_F(CepServiceTest, QueriesNamingAnEngineShareWithAutosChoiceOfIt) {
  if (!pluginsBuilt({"nfa", "petri"})) GTEST_SKIP() << "the nfa and petri plugins are not built";
  CepService& cep = start(
      CepUnit()
          .query(CepQuery("p1", "PATTERN SEQ(A a, B b) WITHIN 5").engine("petri").input("in.a"))
          .query(CepQuery("a1", "PATTERN SEQ(A a, C c) WITHIN 5").engine("auto").input("in.a"))
          .query(CepQuery("a2", "PATTERN SEQ(B b, C c) WITHIN 5").engine("auto").input("in.a"))
          .query(CepQuery("p2", "PATTERN SEQ(C c, A a) WITHIN 5").engine("petri").input("in.a"))
          .query(CepQuery("n1", "PATTERN SEQ(A a, B b) WITHIN 5").engine("nfa").input("in.a"))
          .query(CepQuery("n2", "PATTERN SEQ(B b, A a) WITHIN 5").engine("nfa").input("in.a"))
          .toXml());
  for (const char* q : {"p1", "a1", "a2", "p2"}) {
    EXPECT_EQ(cep.endpointName(q), "sa.cep/shared-1:p1..p2") << q;
  }
  for (const char* q : {"n1", "n2"}) EXPECT_EQ(cep.endpointName(q), "sa.cep/shared-2:n1..n2") << q;
  auto a1 = registry_->snapshotOf("sa.cep/a1:detector");
  ASSERT_TRUE(a1);
  EXPECT_EQ(metaOf(*a1, "engine"), "petri");
  EXPECT_EQ(metaOf(*a1, "shared_by"), "4");
  auto p1 = registry_->snapshotOf("sa.cep/p1:detector");
  ASSERT_TRUE(p1);
  EXPECT_EQ(metaOf(*p1, "engine_choice"), "<absent>");

  Recorder out_p2(*broker_, "test.p2", "out.p2");
  Recorder out_n2(*broker_, "test.n2", "out.n2");
  publish("in.a", "C", 1);
  publish("in.a", "B", 2);
  publish("in.a", "A", 3);
  ASSERT_TRUE(out_p2.waitFor(1));
  ASSERT_TRUE(out_n2.waitFor(1));
  ASSERT_TRUE(waitUntil([&] { return cep.finished(); }));
  EXPECT_EQ(cep.matches("p1"), 0u);
  EXPECT_EQ(cep.matches("p2"), 1u);
  EXPECT_EQ(cep.matches("n2"), 1u);
  EXPECT_EQ(cep.matches("a2"), 0u);
}

// --- queries edited at run time ---------------------------------------------------

// The one <query> of `query`, read as a descriptor's (file edit.xml).
descriptor::QuerySpec specOf(const CepQuery& query) {
  descriptor::ParseReport report;
  auto assembly =
      descriptor::parseServiceAssembly(CepUnit().query(query).toXml(), "edit.xml", &report);
  EXPECT_TRUE(assembly) << report.toString();
  return assembly->units.at(0).queries.at(0);
}

// What a redeploy compares with the running queries: a unit's queries with
// the unit's checkpoint_interval as their default and the assembly's folder.
TEST_F(CepServiceTest, AUnitsQueriesTakeTheUnitsDefaultAndTheAssemblysFolder) {
  CepService& cep = start(pairsUnit());
  auto assembly = descriptor::parseServiceAssembly(R"(<service-assembly name="plant">
  <service-unit name="u" type="cep">
    <param name="checkpoint_interval" value="250"/>
    <query name="own" engine="nfa" input="in" output="out">
      <option name="checkpoint_interval" value="50"/><text>PATTERN A a</text>
    </query>
    <query name="unit" engine="nfa" input="in" output="out"><text>PATTERN A a</text></query>
  </service-unit>
</service-assembly>)",
                                                   "plant.xml", nullptr, "/srv/plant");
  ASSERT_TRUE(assembly) << assembly.status().toString();
  const std::vector<descriptor::QuerySpec> queries =
      cep.unitQueries(*assembly, *assembly->unit("u"));
  ASSERT_EQ(queries.size(), 2u);
  EXPECT_EQ(queries[0].option("checkpoint_interval")->value, "50");
  EXPECT_EQ(queries[0].options.size(), 1u);
  ASSERT_NE(queries[1].option("checkpoint_interval"), nullptr);
  EXPECT_EQ(queries[1].option("checkpoint_interval")->value, "250");
  for (const auto& q : queries) EXPECT_EQ(q.base_dir, "/srv/plant");
}

// A then B within `within`, on the nfa engine, composites of type `type`.
CepQuery nfaPairs(const std::string& within, const std::string& type) {
  return CepQuery("pairs",
                  "PATTERN SEQ(A a, B b) WITHIN " + within + " RETURN " + type + "(a.x, b.x)")
      .engine("nfa");
}

TEST_F(CepServiceTest, AWiderWithinTakesOverThePartialMatchesOfTheNarrowerOne) {
  if (!pluginsBuilt({"nfa"})) GTEST_SKIP() << "the nfa plugin is not built";
  CepService& cep = start(CepUnit().query(nfaPairs("10", "Narrow")).toXml());
  Recorder out(*broker_, "test.out", "out.pairs");
  publish("in.events", "A", 1, 1);
  ASSERT_TRUE(waitConsumed(cep, "pairs", 1));
  const Result<QueryEdit> edit = cep.replaceQuery(specOf(nfaPairs("100", "Wide")));
  ASSERT_TRUE(edit) << edit.status().toString();
  EXPECT_TRUE(edit->carried_over) << edit->why_not;
  EXPECT_EQ(edit->from, "PATTERN SEQ(A a, B b) WITHIN 10 RETURN Narrow(a.x, b.x)");
  // 49 after the A: beyond the narrower WITHIN, within the wider one, whose
  // state holds the A the narrower one kept.
  publish("in.events", "B", 50, 2);
  ASSERT_TRUE(out.waitFor(1));
  EXPECT_EQ(rendered(out), std::vector<std::string>{"Wide a_x=1 b_x=2 @ 1 50"});
  const std::optional<QueryStats> stats = cep.stats("pairs");
  ASSERT_TRUE(stats && stats->edited);
  EXPECT_TRUE(stats->edited->carried_over);
  EXPECT_GT(stats->edited->at_ms, 0);
  auto entry = registry_->snapshotOf("sa.cep/pairs:detector");
  ASSERT_TRUE(entry);
  EXPECT_EQ(metaOf(*entry, "text"), "PATTERN SEQ(A a, B b) WITHIN 100 RETURN Wide(a.x, b.x)");
  EXPECT_EQ(cep.endpointName("pairs"), "sa.cep/pairs");  // the same endpoint and stage
}

// The edit is queued behind the events delivered before it: each of them
// is detected once, by the replaced query, and each after it by the edited one.
TEST_F(CepServiceTest, EventsDeliveredBeforeAnEditAreTheReplacedQuerysAndAfterItTheEditedOnes) {
  if (!pluginsBuilt({"nfa"})) GTEST_SKIP() << "the nfa plugin is not built";
  CepService& cep = start(CepUnit().query(nfaPairs("2", "Old")).toXml());
  Recorder out(*broker_, "test.out", "out.pairs");
  constexpr int kPairs = 50;
  for (int i = 0; i < 2 * kPairs; ++i) publish("in.events", i % 2 == 0 ? "A" : "B", i, i);
  ASSERT_TRUE(cep.replaceQuery(specOf(nfaPairs("2", "New"))));
  for (int i = 2 * kPairs; i < 4 * kPairs; ++i) {
    publish("in.events", i % 2 == 0 ? "A" : "B", i, i);
  }
  ASSERT_TRUE(out.waitFor(2 * kPairs));
  ASSERT_TRUE(waitConsumed(cep, "pairs", 4 * kPairs));
  // The query's numbers go on across the edit: both versions' events and
  // matches.
  const std::optional<QueryStats> stats = cep.stats("pairs");
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->consumed, uint64_t{4 * kPairs});
  EXPECT_EQ(stats->matches, uint64_t{2 * kPairs});
  const std::vector<EventPtr> events = out.events();
  ASSERT_EQ(events.size(), size_t{2 * kPairs});
  std::set<int64_t> firsts;
  for (const EventPtr& e : events) {
    const int64_t a = attr(e, "a_x")->asInt();
    EXPECT_EQ(attr(e, "b_x")->asInt(), a + 1);
    EXPECT_EQ(e->type().name(), a < 2 * kPairs ? "Old" : "New") << render(e);
    firsts.insert(a);
  }
  EXPECT_EQ(firsts.size(), size_t{2 * kPairs});  // none twice
}

TEST_F(CepServiceTest, AnEditOfThePatternStartsEmptyAndSaysWhy) {
  if (!pluginsBuilt({"nfa"})) GTEST_SKIP() << "the nfa plugin is not built";
  CepService& cep = start(CepUnit().query(nfaPairs("100", "AB")).toXml());
  Recorder out(*broker_, "test.out", "out.pairs");
  publish("in.events", "A", 1, 1);
  ASSERT_TRUE(waitConsumed(cep, "pairs", 1));
  const CepQuery ac("pairs", "PATTERN SEQ(A a, C c) WITHIN 100 RETURN AC(a.x, c.x)");
  const Result<QueryEdit> edit = cep.replaceQuery(specOf(CepQuery(ac).engine("nfa")));
  ASSERT_TRUE(edit) << edit.status().toString();
  EXPECT_FALSE(edit->carried_over);
  EXPECT_NE(edit->why_not.find("an edit keeps the state only when it changes WITHIN"),
            std::string::npos)
      << edit->why_not;
  // The A before the edit is not in the new state; the A after it is.
  publish("in.events", "C", 5, 5);
  publish("in.events", "A", 6, 6);
  publish("in.events", "C", 7, 7);
  ASSERT_TRUE(out.waitFor(1));
  ASSERT_TRUE(waitConsumed(cep, "pairs", 3));
  EXPECT_EQ(rendered(out), std::vector<std::string>{"AC a_x=6 c_x=7 @ 6 7"});
  EXPECT_FALSE(cep.stats("pairs")->edited->carried_over);
}

// A then B within 10 under `strategy`, on the nfa engine, composites of
// type `type`: another strategy changes what the nfa keeps.
CepQuery strategyPairs(const std::string& strategy, const std::string& type) {
  return CepQuery("pairs", "PATTERN SEQ(A a, B b) WITHIN 10 STRATEGY " + strategy + " RETURN " +
                               type + "(a.x, b.x)")
      .engine("nfa");
}

// Another STRATEGY changes what the nfa keeps: the edited query starts
// empty, and the replaced one runs beside it for the match open at the edit
// (publishing those alone) until event time passes the A's ts + WITHIN.
TEST_F(CepServiceTest, AnEditThatCannotTakeTheStateOverRunsBesideTheReplacedQueryUntilItsWithin) {
  if (!pluginsBuilt({"nfa"})) GTEST_SKIP() << "the nfa plugin is not built";
  CepService& cep = start(CepUnit().query(strategyPairs("skip_till_next_match", "Old")).toXml());
  Recorder out(*broker_, "test.out", "out.pairs");
  publish("in.events", "A", 1, 1);
  ASSERT_TRUE(waitConsumed(cep, "pairs", 1));
  const Result<QueryEdit> edit =
      cep.replaceQuery(specOf(strategyPairs("skip_till_any_match", "New")));
  ASSERT_TRUE(edit) << edit.status().toString();
  EXPECT_FALSE(edit->carried_over);
  EXPECT_EQ(edit->side_by_side_until, std::optional<int64_t>(11));
  publish("in.events", "B", 5, 5);  // closes the old A: the replaced query's
  publish("in.events", "A", 6, 6);  // begins after the edit: the edited query's
  publish("in.events", "B", 7, 7);
  publish("in.events", "A", 30, 30);  // past 11: the replaced query retires
  publish("in.events", "B", 31, 31);
  ASSERT_TRUE(out.waitFor(3));
  ASSERT_TRUE(waitConsumed(cep, "pairs", 5));
  EXPECT_EQ(rendered(out),
            (std::vector<std::string>{"New a_x=30 b_x=31 @ 30 31", "New a_x=6 b_x=7 @ 6 7",
                                      "Old a_x=1 b_x=5 @ 1 5"}));
  EXPECT_EQ(cep.stats("pairs")->edited->side_by_side_until, std::optional<int64_t>(11));
}

// With a maximum delay, an event after the edit may come before the newest
// one the replaced query had seen: both versions then find the match, which
// goes out once (the edited query's, whose detection runs first).
TEST_F(CepServiceTest, AMatchBothVersionsFindIsPublishedOnce) {
  if (!pluginsBuilt({"nfa"})) GTEST_SKIP() << "the nfa plugin is not built";
  CepService& cep =
      start(CepUnit()
                .query(strategyPairs("skip_till_next_match", "Old").option("max_delay", "5"))
                .toXml());
  Recorder out(*broker_, "test.out", "out.pairs");
  publish("in.events", "A", 10, 10);
  ASSERT_TRUE(waitConsumed(cep, "pairs", 1));
  const Result<QueryEdit> edit = cep.replaceQuery(
      specOf(strategyPairs("skip_till_any_match", "New").option("max_delay", "5")));
  ASSERT_TRUE(edit) << edit.status().toString();
  ASSERT_FALSE(edit->carried_over);
  EXPECT_EQ(edit->side_by_side_until, std::optional<int64_t>(20));
  publish("in.events", "A", 8, 8);  // within the delay of the newest, 10
  publish("in.events", "B", 9, 9);
  publish("in.events", "C", 30, 30);  // releases them, and retires the replaced query
  ASSERT_TRUE(out.waitFor(1));
  ASSERT_TRUE(waitConsumed(cep, "pairs", 3));
  cep.stop();
  EXPECT_EQ(rendered(out), std::vector<std::string>{"New a_x=8 b_x=9 @ 8 9"});
}

TEST_F(CepServiceTest, AnEngineThatCannotHandItsStateOverStartsTheEditedQueryEmpty) {
  CepService& cep = start(pairsUnit());
  const Result<QueryEdit> edit =
      cep.replaceQuery(specOf(CepQuery("pairs", "PATTERN SEQ(A a, B b) RETURN Other(a.x)")));
  ASSERT_TRUE(edit) << edit.status().toString();
  EXPECT_FALSE(edit->carried_over);
  EXPECT_NE(edit->why_not.find("engine 'cepfake' cannot hand its state over"), std::string::npos)
      << edit->why_not;
}

TEST_F(CepServiceTest, AnEditThatCannotReplaceTheQueryInPlaceIsRefusedAndNamesWhy) {
  CepService& cep = start(threeOnOneInput());
  auto refused = [&](const CepQuery& query, Status::Code code, const std::string& why) {
    const Result<QueryEdit> edit = cep.replaceQuery(specOf(query));
    EXPECT_FALSE(edit);
    if (edit) return;
    EXPECT_EQ(edit.status().code(), code) << edit.status().toString();
    EXPECT_NE(edit.status().message().find(why), std::string::npos) << edit.status().toString();
  };
  refused(CepQuery("nope", "PATTERN SEQ(A a, B b)"), Status::Code::kNotFound,
          "no query \"nope\" to replace");
  refused(CepQuery("ab", "PATTERN SEQ(A a, B b) RETURN X(a.x)"), Status::Code::kRejected,
          "shares its detector with other queries");
  refused(CepQuery("ab", "PATTERN SEQ(A a"), Status::Code::kInvalidArgument, "edit.xml:");
  // Nothing changed.
  EXPECT_EQ(cep.queries(), (std::vector<std::string>{"ab", "ac", "bc"}));
  EXPECT_FALSE(cep.stats("ab")->edited);
}

TEST_F(CepServiceTest, AnEditOfItsInputOrOfHowItIsFedIsRefused) {
  CepService& cep = start(pairsUnit());
  const Result<QueryEdit> input =
      cep.replaceQuery(specOf(CepQuery(pairsQuery()).input("in.other")));
  ASSERT_FALSE(input);
  EXPECT_EQ(input.status().code(), Status::Code::kRejected);
  EXPECT_NE(input.status().message().find("the edit changes its input"), std::string::npos);
  const Result<QueryEdit> fed =
      cep.replaceQuery(specOf(CepQuery(pairsQuery()).option("flush_when_idle", "false")));
  ASSERT_FALSE(fed);
  EXPECT_NE(fed.status().message().find("flush_when_idle"), std::string::npos);
}

}  // namespace
}  // namespace cepbus::services::cep
