// The petri plugin's entry points: one engine, "petri". create() runs one
// query in a PetriNet of its own; createMany() merges every query into one
// PetriNet (prefix and middle joins, see petri_net.h), each match labelled
// with its query. PARTITION BY runs one such net per partition
// (plugin::PartitionedDetector): the queries of a set partitioned alike
// share one net per partition; a set partitioned in different ways runs
// each query in nets of its own. skip_till_next_match and strict_contiguity
// run natively in the net of a plain sequence (CompiledPattern::strategy);
// elsewhere, and for sets of queries, a StrategyFactory selects them from
// skip_till_any_match's matches.

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "bus/core/plugin/partitioned_detector.h"
#include "bus/core/plugin/plugin_export.h"
#include "bus/core/plugin/state_caps.h"
#include "bus/core/plugin/strategy.h"
#include "plugins/petri/petri_net.h"

namespace cepbus::plugins::petri {
namespace {

// Every match is reported as soon as its last event arrives, so flush() has
// nothing left to report.
class PetriDetector final : public plugin::Detector {
 public:
  Status onEvent(const EventPtr& event) override { return net_.onEvent(event); }
  Status flush() override { return Status::ok(); }
  Result<std::string> exportModel(std::string_view format) const override {
    return net_.exportModel(format);
  }
  // Partial matches: the tokens in the net's places.
  std::optional<plugin::DetectorState> state() const override {
    return plugin::DetectorState{net_.heldTokens(), net_.peakHeldTokens(), net_.evicted(),
                                 net_.heldBytes()};
  }
  // The net's marking; nothing waits for a flush.
  uint32_t snapshotVersion() const override { return PetriNet::kSnapshotVersion; }
  Status snapshot(plugin::SnapshotWriter& out) const override {
    net_.snapshot(out);
    return Status::ok();
  }
  Status restore(plugin::SnapshotReader& in) override { return net_.restore(in); }

  PetriNet& net() { return net_; }
  // A sink labelling the matches of query `index` for `sink`; kept as long
  // as the net (which refers to it).
  plugin::MatchSink& label(size_t index, plugin::MultiMatchSink& sink) {
    labels_.push_back(std::make_unique<Label>(index, sink));
    return *labels_.back();
  }

 private:
  class Label final : public plugin::MatchSink {
   public:
    Label(size_t index, plugin::MultiMatchSink& sink) : index_(index), sink_(&sink) {}
    void onMatch(const plugin::Match& match) override { sink_->onMatch(index_, match); }

   private:
    size_t index_;
    plugin::MultiMatchSink* sink_;
  };

  std::vector<std::unique_ptr<Label>> labels_;  // declared before net_: outlive it
  PetriNet net_;
};

// What compilePattern() in pattern_compiler.cc accepts.
constexpr plugin::OptionInfo kOptions[] = {
    {"policy",
     "feedback|conflict|concurrency: how the net resolves competing tokens "
     "(default feedback)"},
    plugin::kStateCapOptionInfo[0],
    plugin::kStateCapOptionInfo[1],
    plugin::kStateCapOptionInfo[2],
};

class PetriFactory final : public plugin::DetectorFactory {
  static Result<std::unique_ptr<plugin::Detector>> netOf(CompiledPatternPtr pattern,
                                                         plugin::MatchSink& sink) {
    auto detector = std::make_unique<PetriDetector>();
    detector->net().setCap(pattern->caps.perDetector(), pattern->caps.refuseNew());
    if (Status s = detector->net().addPattern("query", std::move(pattern), sink); !s) return s;
    return std::unique_ptr<plugin::Detector>(std::move(detector));
  }

 public:
  std::span<const plugin::OptionInfo> options() const override { return kOptions; }

  Result<std::unique_ptr<plugin::Detector>> create(const pattern::Query& query,
                                                   const plugin::DetectorOptions& options,
                                                   plugin::MatchSink& sink) const override {
    pattern::Query unpartitioned = query;
    unpartitioned.partition_by.clear();
    auto compiled = compilePattern(unpartitioned, options);
    if (!compiled) return compiled.status();
    return create(query, *compiled, sink);
  }

  // The detector of `query` compiled as `compiled` (without its PARTITION BY).
  static Result<std::unique_ptr<plugin::Detector>> create(const pattern::Query& query,
                                                          const CompiledPatternPtr& compiled,
                                                          plugin::MatchSink& sink) {
    if (query.partition_by.empty()) return netOf(compiled, sink);
    // Compiled once: a partition's net is built from the shared pattern.
    auto made = plugin::PartitionedDetector::create(
        query.partition_by, query.within,
        [pattern = compiled, &sink] { return netOf(pattern, sink); }, compiled->caps);
    if (!made) return made.status();
    return std::unique_ptr<plugin::Detector>(std::move(made).value());
  }

  Result<std::unique_ptr<plugin::Detector>> createMany(
      std::span<const plugin::NamedQuery> queries, const plugin::DetectorOptions& options,
      plugin::MultiMatchSink& sink) const override {
    if (Status s = plugin::checkNamedQueries(queries); !s) return s;
    if (std::any_of(queries.begin(), queries.end(),
                    [](const auto& q) { return !q.query.partition_by.empty(); })) {
      return plugin::createManyPartitioned(*this, queries, options, sink);
    }
    auto detector = std::make_unique<PetriDetector>();
    for (size_t i = 0; i < queries.size(); ++i) {
      auto compiled = compilePattern(queries[i].query, options);
      if (!compiled) {
        return Status::invalidArgument("query '" + queries[i].name +
                                       "': " + compiled.status().message());
      }
      // One net, one cap: the options are the set's.
      detector->net().setCap((*compiled)->caps.perDetector(), (*compiled)->caps.refuseNew());
      Status s = detector->net().addPattern(queries[i].name, std::move(compiled).value(),
                                            detector->label(i, sink));
      if (!s) return s;
    }
    return std::unique_ptr<plugin::Detector>(std::move(detector));
  }
};

// What the plugin registers: a query whose strategy the net runs natively
// goes to PetriFactory as it is, any other with another strategy (and every
// set of queries) through a StrategyFactory, which hands PetriFactory the
// query under skip_till_any_match and selects the strategy's matches.
class StrategiesFactory final : public plugin::DetectorFactory {
 public:
  std::span<const plugin::OptionInfo> options() const override { return kOptions; }
  std::vector<std::string> notices(const pattern::Query& query) const override {
    return selecting_.notices(query);
  }

  Result<std::unique_ptr<plugin::Detector>> create(const pattern::Query& query,
                                                   const plugin::DetectorOptions& options,
                                                   plugin::MatchSink& sink) const override {
    if (query.strategy == pattern::Strategy::kSkipTillAnyMatch) {
      return native_.create(query, options, sink);
    }
    // Refused as StrategyFactory refuses it where the strategy is not defined.
    if (auto defined = plugin::StrategySelector::create(query, "petri"); !defined) {
      return defined.status();
    }
    pattern::Query unpartitioned = query;
    unpartitioned.partition_by.clear();
    auto compiled = compilePattern(unpartitioned, options);
    if (!compiled || (*compiled)->strategy != query.strategy) {
      return selecting_.create(query, options, sink);
    }
    return PetriFactory::create(query, *compiled, sink);
  }

  Result<std::unique_ptr<plugin::Detector>> createMany(
      std::span<const plugin::NamedQuery> queries, const plugin::DetectorOptions& options,
      plugin::MultiMatchSink& sink) const override {
    return selecting_.createMany(queries, options, sink);
  }

 private:
  PetriFactory native_;
  plugin::StrategyFactory selecting_{"petri", std::make_unique<PetriFactory>()};
};

void registerFactories(plugin::FactoryRegistrar& registrar) {
  registrar.add("petri", std::make_unique<StrategiesFactory>());
}

}  // namespace
}  // namespace cepbus::plugins::petri

CEPBUS_DEFINE_PLUGIN("petri", "1.0.0", cepbus::plugins::petri::registerFactories)
