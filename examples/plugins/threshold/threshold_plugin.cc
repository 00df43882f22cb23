// An example third-party engine, "threshold": an alert when COUNT events of
// one type satisfying the query's WHERE clause fall within its WITHIN window
// (say, three failed logins of any user within 60 time units):
//
//   PATTERN Login l WHERE l.ok = false WITHIN 60 RETURN Alert(l.user)
//   --option count=3
//
// Semantics: qualifying events are kept while ts(newest) - ts(oldest) <=
// WITHIN (every one without WITHIN); when COUNT are kept, they are one match,
// in stream order, and are forgotten (an event is in one alert at most). The
// composite event's RETURN clause sees the variable bound to the newest one.
// With PROBABILITY >= p, COUNT kept events whose probability (the product of
// theirs) is below p are no alert: the oldest is forgotten and the newest
// COUNT - 1 wait for the next qualifying event.
//
// It shows what a plugin does (docs/plugins.md): walk the query's AST and
// reject, with a clear message, what the engine does not support; compile
// WHERE and RETURN with the core's expression compiler; validate options;
// report matches to the sink; export the two C entry points with
// CEPBUS_DEFINE_PLUGIN. It includes only the installed SDK headers.

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bus/core/pattern/expr_compiler.h"
#include "bus/core/pattern/window_query.h"
#include "bus/core/plugin/plugin_export.h"

#ifndef THRESHOLD_PLUGIN_VERSION
#define THRESHOLD_PLUGIN_VERSION "1.0.0"
#endif

namespace threshold {

using cepbus::Event;
using cepbus::EventBuilder;
using cepbus::EventPtr;
using cepbus::Result;
using cepbus::Status;
using cepbus::Symbol;
using cepbus::Timestamp;
namespace pattern = cepbus::pattern;
namespace plugin = cepbus::plugin;

constexpr plugin::OptionInfo kOptions[] = {
    {"count", "N >= 1: how many qualifying events make an alert (default 3)"},
};

// The compiled query. Immutable, shared by the factory's detectors.
struct Plan {
  Symbol type;
  pattern::BindingLayout layout;
  std::vector<pattern::Conjunct> where;
  std::optional<pattern::CompiledReturn> returns;
  std::optional<Timestamp> within;
  double min_probability = 0;  // PROBABILITY >= p
  size_t count = 3;
};

Result<size_t> parseCount(const plugin::DetectorOptions& options) {
  const std::string* text = options.find("count");
  if (text == nullptr) return size_t{3};
  size_t n = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), n);
  if (ec != std::errc() || end != text->data() + text->size() || n == 0) {
    return Status::invalidArgument("threshold engine: option count=" + *text +
                                   ": expected an integer >= 1");
  }
  return n;
}

Result<std::shared_ptr<const Plan>> compile(const pattern::Query& query,
                                            const plugin::DetectorOptions& options) {
  static constexpr std::string_view kKnown[] = {"count"};
  if (Status s = options.checkKnown(kKnown, "threshold"); !s) return s;
  // A window query (FROM ... WINDOW) also has a single event element; the
  // shared check refuses it with the message every engine gives.
  if (Status s = pattern::requirePatternQuery(query, "threshold"); !s) return s;
  // `PATTERN Login l`, or the same written as a one-element SEQ(Login l).
  const pattern::PatternNode* node = query.pattern.get();
  if (node->kind == pattern::PatternKind::kSeq && node->children.size() == 1) {
    node = node->children[0].get();
  }
  const pattern::PatternNode& p = *node;
  if (p.kind != pattern::PatternKind::kEvent) {
    return Status::invalidArgument(std::string("the threshold engine counts events of one type "
                                               "(PATTERN Type var); it does not support ") +
                                   pattern::operatorName(p.kind));
  }
  if (!query.partition_by.empty()) {
    return Status::invalidArgument("the threshold engine does not support PARTITION BY");
  }
  if (query.strategy != pattern::Strategy::kSkipTillAnyMatch ||
      query.context != pattern::Context::kUnspecified) {
    return Status::invalidArgument("the threshold engine has no STRATEGY or CONTEXT to choose");
  }
  auto plan = std::make_shared<Plan>();
  plan->type = Symbol::intern(p.type);
  plan->layout = pattern::BindingLayout::forQuery(query);
  auto where = pattern::compileConjuncts(query.where, plan->layout);
  if (!where) return where.status();
  plan->where = std::move(where).value();
  if (query.returns) {
    auto returns = pattern::compileReturn(*query.returns, plan->layout);
    if (!returns) return returns.status();
    plan->returns = std::move(returns).value();
  }
  plan->within = query.within;
  plan->min_probability = query.min_probability.value_or(0);
  auto count = parseCount(options);
  if (!count) return count.status();
  plan->count = *count;
  return std::shared_ptr<const Plan>(std::move(plan));
}

// Builds the composite event: constituents are the match's events; RETURN
// sees the query's variable (slot 0, if named) bound to the newest.
class Composer final : public plugin::MatchComposer {
 public:
  explicit Composer(std::shared_ptr<const Plan> plan) : plan_(std::move(plan)) {}
  EventPtr compose(const plugin::Match& match) const override {
    EventBuilder builder(plan_->returns ? plan_->returns->type : Symbol::intern("Match"));
    for (size_t i = 0; i < match.size(); ++i) builder.constituent(match.event(i));
    builder.probability(match.probability());
    if (plan_->returns) {
      std::vector<pattern::SlotBinding> bindings(plan_->layout.size());
      if (!bindings.empty()) bindings[0].event = match.event(match.size() - 1).get();
      plan_->returns->apply(bindings, match.probability(), builder);
    }
    return builder.build();
  }

 private:
  std::shared_ptr<const Plan> plan_;
};

// Single-threaded, as every detector (the host drives it from one thread).
class ThresholdDetector final : public plugin::Detector {
 public:
  ThresholdDetector(std::shared_ptr<const Plan> plan, plugin::MatchSink& sink)
      : plan_(plan), sink_(sink), composer_(std::move(plan)) {}

  Status onEvent(const EventPtr& event) override {
    if (event->type() != plan_->type || !qualifies(*event)) return Status::ok();
    kept_.push_back(event);
    peak_kept_ = std::max<uint64_t>(peak_kept_, kept_.size());
    if (plan_->within) {
      while (event->ts() - kept_.front()->ts() > *plan_->within) kept_.pop_front();
    }
    if (kept_.size() < plan_->count) return Status::ok();
    // The host's Match is a view of pointers to the bound events, in order.
    std::vector<const EventPtr*> events;
    for (const EventPtr& e : kept_) events.push_back(&e);
    const uint32_t ends[] = {static_cast<uint32_t>(events.size())};
    const plugin::Match match(events, ends, &composer_);
    if (match.probability() < plan_->min_probability) {
      kept_.pop_front();
      return Status::ok();
    }
    sink_.onMatch(match);
    kept_.clear();
    return Status::ok();
  }

  // Nothing is pending: an alert is reported as soon as it is complete.
  Status flush() override { return Status::ok(); }

  // The qualifying events kept towards the next alert are its partial
  // matches (the host shows them per query; optional: the default says the
  // engine does not count).
  std::optional<plugin::DetectorState> state() const override {
    return plugin::DetectorState{kept_.size(), peak_kept_, 0, 0};
  }

 private:
  bool qualifies(const Event& event) const {
    pattern::SlotBinding binding;
    binding.event = &event;
    const std::span<const pattern::SlotBinding> bindings(&binding, 1);
    for (const pattern::Conjunct& c : plan_->where) {
      if (!c.test(bindings)) return false;
    }
    return true;
  }

  std::shared_ptr<const Plan> plan_;
  plugin::MatchSink& sink_;
  Composer composer_;
  std::deque<EventPtr> kept_;
  uint64_t peak_kept_ = 0;
};

void registerFactories(plugin::FactoryRegistrar& registrar) {
  registrar.add(
      "threshold",
      std::make_unique<plugin::PlanDetectorFactory<ThresholdDetector, compile>>(kOptions));
}

}  // namespace threshold

CEPBUS_DEFINE_PLUGIN("threshold", THRESHOLD_PLUGIN_VERSION, threshold::registerFactories)
