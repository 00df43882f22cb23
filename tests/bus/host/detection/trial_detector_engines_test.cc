// TrialDetector on the real engines: random queries and streams
// (tests/plugins/nfa/random_queries.h, as the engine differential tests use)
// run by a trial of petri against nfa or the other way round must report
// exactly the matches of the engine it ends on, run alone: nothing lost or
// doubled where the output moves from one engine to the other, whichever of
// them reports late (the nfa's batched construction), in single-query and
// createMany() detectors, with streams that end during the trial and
// flushes in the middle. Which engine looks cheaper is set by the test (a
// fake clock advanced by a per-event cost), so about half the cases switch.
//
// CEPBUS_TRIAL_CASES=N (and CEPBUS_TRIAL_SEED=S) runs longer.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "bus/host/detection/trial_detector.h"
#include "bus/host/loader/plugin_loader.h"
#include "tests/plugins/built_engines.h"
#include "tests/plugins/nfa/random_queries.h"

namespace cepbus::plugin {
namespace {

using plugins::nfa::testing::Generator;

// (pattern, bound event ids, element sizes) of every match, sorted.
using Matches = std::vector<std::pair<size_t, std::vector<uint64_t>>>;

class Collecting final : public MatchSink, public MultiMatchSink {
 public:
  void onMatch(const Match& match) override { onMatch(0, match); }
  void onMatch(size_t pattern, const Match& match) override {
    // As a publishing output does: the match, its composer included, must
    // be whole while it is handed on.
    EXPECT_NE(match.composite(), nullptr);
    std::vector<uint64_t> key;
    for (size_t i = 0; i < match.size(); ++i) key.push_back(match.event(i)->id());
    for (size_t j = 0; j < match.elementCount(); ++j) key.push_back(match.elementEvents(j).size());
    matches_.emplace_back(pattern, std::move(key));
  }
  Matches sorted() const {
    Matches out = matches_;
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  Matches matches_;
};

// An engine's detector that also advances the trial's fake clock by `cost`
// per event: the test decides which candidate is cheaper.
class Costed final : public Detector {
 public:
  Costed(std::unique_ptr<Detector> inner, double& clock, double cost)
      : inner_(std::move(inner)), clock_(clock), cost_(cost) {}
  Status onEvent(const EventPtr& event) override {
    clock_ += cost_;
    return inner_->onEvent(event);
  }
  Status onEvents(std::span<const EventPtr> events) override {
    clock_ += cost_ * static_cast<double>(events.size());
    return inner_->onEvents(events);
  }
  Status flush() override { return inner_->flush(); }

 private:
  std::unique_ptr<Detector> inner_;
  double& clock_;
  const double cost_;
};

// A detector of `engine` for `queries` (one: create(), several: createMany()).
Result<std::unique_ptr<Detector>> make(const std::string& engine,
                                       const std::vector<NamedQuery>& queries, MatchSink& one,
                                       MultiMatchSink& many) {
  PluginPtr plugin = plugins::testing::loadBuiltEngine(engine);
  if (plugin == nullptr) return Status::notFound(engine);
  auto made = queries.size() == 1
                  ? plugin->createDetector(engine, queries[0].query, DetectorOptions(), one)
                  : plugin->createManyDetectors(engine, queries, DetectorOptions(), many);
  if (!made) return made.status();
  return std::unique_ptr<Detector>(std::move(made).value());
}

std::string describe(const std::vector<std::string>& texts, const std::vector<EventPtr>& events) {
  std::string out;
  for (const std::string& t : texts) out += t + '\n';
  return out + plugins::testing::describeEvents(events);
}

struct Totals {
  int cases = 0;
  int switched = 0;
  int kept_prior = 0;
  int undecided = 0;
};

// One random case; false when an engine refuses the queries.
bool runCase(Generator& gen, Totals& totals) {
  const int count = gen.chance(0.3) ? gen.uniform(2, 3) : 1;
  std::vector<std::string> texts;
  std::vector<NamedQuery> queries;
  bool kleene_any = false;
  for (int i = 0; i < count; ++i) {
    bool kleene = false;
    texts.push_back(gen.query(kleene, /*long_streams=*/true));
    kleene_any |= kleene;
    auto q = pattern::parseQuery(texts.back());
    EXPECT_TRUE(q.isOk()) << texts.back();
    if (!q) return false;
    queries.push_back({"q" + std::to_string(i), std::move(q).value()});
  }
  const auto events = gen.events(gen.uniform(20, kleene_any ? 60 : 120));
  const bool petri_first = gen.chance(0.5);
  const std::string prior = petri_first ? "petri" : "nfa";
  const std::string challenger = petri_first ? "nfa" : "petri";

  // Each engine alone: the truth for the engine the trial ends on.
  std::map<std::string, Matches> alone;
  for (const std::string& engine : {prior, challenger}) {
    Collecting sink;
    auto d = make(engine, queries, sink, sink);
    if (!d) return false;
    for (const EventPtr& e : events) EXPECT_TRUE((*d)->onEvent(e));
    EXPECT_TRUE((*d)->flush());
    alone[engine] = sink.sorted();
  }

  double clock = 0;
  TrialLimits limits;
  limits.events = static_cast<uint64_t>(gen.uniform(1, static_cast<int>(events.size()) + 20));
  limits.min_events = static_cast<uint64_t>(gen.uniform(1, static_cast<int>(limits.events)));
  limits.warmup_events = static_cast<uint64_t>(gen.uniform(0, 3) == 0 ? gen.uniform(1, 30) : 0);
  // Half the trials may also end on agreeing blocks.
  limits.block_events = static_cast<uint64_t>(gen.uniform(1, 40));
  limits.agreeing_blocks = static_cast<uint64_t>(gen.chance(0.5) ? gen.uniform(1, 3) : 0);
  limits.cpu_seconds = 1e18;
  const bool challenger_cheaper = gen.chance(0.6);
  Collecting out;
  auto trial = count == 1 ? std::make_unique<TrialDetector>(static_cast<MatchSink&>(out), limits,
                                                            [&clock] { return clock; })
                          : std::make_unique<TrialDetector>(static_cast<MultiMatchSink&>(out),
                                                            limits, [&clock] { return clock; });
  for (const std::string& engine : {prior, challenger}) {
    const double cost = (engine == challenger) == challenger_cheaper ? 1 : 3;
    const Status added = trial->addCandidate(
        engine, [&](MatchSink& one, MultiMatchSink& many) -> Result<std::unique_ptr<Detector>> {
          auto d = make(engine, queries, one, many);
          if (!d) return d.status();
          return std::unique_ptr<Detector>(std::make_unique<Costed>(std::move(*d), clock, cost));
        });
    EXPECT_TRUE(added) << added.message();
  }
  // Random batches, now and then a flush in the middle (an idle input).
  for (size_t i = 0; i < events.size();) {
    const size_t n = std::min<size_t>(static_cast<size_t>(gen.uniform(1, 9)), events.size() - i);
    EXPECT_TRUE(trial->onEvents(std::span<const EventPtr>(events).subspan(i, n)));
    i += n;
    if (gen.chance(0.1)) {
      EXPECT_TRUE(trial->flush());
    }
  }
  EXPECT_TRUE(trial->flush());

  const auto outcome = trial->outcome();
  const std::string kept = outcome ? outcome->kept : prior;
  ++totals.cases;
  if (!outcome) {
    ++totals.undecided;
  } else if (kept == prior) {
    ++totals.kept_prior;
  } else {
    ++totals.switched;
  }
  if (outcome && alone[prior] == alone[challenger]) {
    // Two engines that agree: the cheaper one is kept.
    EXPECT_EQ(kept, challenger_cheaper ? challenger : prior) << outcome->describe() << '\n'
                                                             << describe(texts, events);
  }
  EXPECT_EQ(out.sorted(), alone[kept])
      << "prior " << prior << ", kept " << kept << ", trial of " << limits.events << " events\n"
      << describe(texts, events);
  return true;
}

TEST(TrialDetectorEnginesTest, TheOutputIsExactlyOneEnginesMatches) {
  Generator gen(static_cast<uint32_t>(plugins::testing::envOr("CEPBUS_TRIAL_SEED", 20261203)));
  const uint64_t cases = plugins::testing::envOr("CEPBUS_TRIAL_CASES", 3000);
  Totals totals;
  for (uint64_t i = 0; i < cases * 4 && static_cast<uint64_t>(totals.cases) < cases; ++i) {
    runCase(gen, totals);
    if (HasFailure()) break;
  }
  std::cout << totals.cases << " cases: " << totals.switched << " switched, " << totals.kept_prior
            << " kept the prior, " << totals.undecided << " ended during the trial\n";
  EXPECT_GE(totals.switched, totals.cases / 4);
  EXPECT_GE(totals.undecided, totals.cases / 40);
}

}  // namespace
}  // namespace cepbus::plugin
