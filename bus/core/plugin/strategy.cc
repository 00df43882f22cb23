#include "bus/core/plugin/strategy.h"

#include <algorithm>

#include "bus/core/plugin/partitioned_detector.h"

namespace cepbus::plugin {
namespace {

using pattern::PatternKind;
using pattern::PatternNode;
using pattern::Strategy;

Status notDefined(std::string_view engine, const pattern::Query& query, const std::string& why) {
  return Status::invalidArgument(std::string("the ") + std::string(engine) +
                                 " engine runs STRATEGY " + pattern::strategyName(query.strategy) +
                                 " only on " +
                                 "SEQ(...) of 'Type var', 'Type+ var[]' and 'NOT(Type var)' "
                                 "elements, where the strategy is defined; " +
                                 why);
}

// The elements of a SEQ in pattern order, nested sequences flattened.
Status flatten(const PatternNode& node, std::vector<const PatternNode*>& out,
               std::string_view engine, const pattern::Query& query) {
  switch (node.kind) {
    case PatternKind::kEvent:
    case PatternKind::kNot:
      out.push_back(&node);
      return Status::ok();
    case PatternKind::kKleene:
      if (node.star) {
        return notDefined(engine, query,
                          "the Kleene star '" + node.type + "* " + node.var + "[]' is not one");
      }
      out.push_back(&node);
      return Status::ok();
    case PatternKind::kSeq:
      for (const pattern::PatternPtr& c : node.children) {
        if (Status s = flatten(*c, out, engine, query); !s) return s;
      }
      return Status::ok();
    default:
      return notDefined(engine, query,
                        std::string("the ") + pattern::operatorName(node.kind) +
                            " operator runs under skip_till_any_match only");
  }
}

bool testEvery(const pattern::Conjunct& c, std::vector<pattern::SlotBinding>& slots) {
  if (!c.iteration_slot) return c.test(slots);
  pattern::SlotBinding& kb = slots[*c.iteration_slot];
  bool ok = true;
  for (size_t j = 0; ok && j < kb.events.size(); ++j) {
    kb.current = j;
    ok = c.test(slots);
  }
  kb.current = pattern::SlotBinding::kNewest;
  return ok;
}

}  // namespace

Result<std::unique_ptr<StrategySelector>> StrategySelector::create(const pattern::Query& query,
                                                                   std::string_view engine) {
  std::vector<const PatternNode*> items;
  if (Status s = flatten(*query.pattern, items, engine, query); !s) return s;
  const auto layout = pattern::BindingLayout::forQuery(query);
  auto compiled = pattern::compileConjuncts(query.where, layout);
  if (!compiled) return compiled.status();
  std::vector<pattern::Conjunct> conjuncts = std::move(compiled).value();

  std::vector<Element> elements;
  std::vector<int> element_of_slot(layout.size(), -1);
  uint64_t negated = 0;
  for (const PatternNode* n : items) {
    const int slot = n->var.empty() ? -1 : static_cast<int>(*layout.slotOf(n->var));
    if (n->kind == PatternKind::kNot) {
      if (slot >= 0) negated |= uint64_t{1} << slot;
      continue;
    }
    if (slot >= 0) element_of_slot[slot] = static_cast<int>(elements.size());
    elements.push_back({Symbol::intern(n->type), slot, n->kind == PatternKind::kKleene, {}});
  }
  for (const pattern::Conjunct& c : conjuncts) {
    if ((c.slot_mask & negated) != 0) continue;  // a negation's condition, not a step's
    int last = -1;
    for (size_t slot : c.slots) last = std::max(last, element_of_slot[slot]);
    if (last < 0) continue;
    Element& e = elements[static_cast<size_t>(last)];
    // Of a Kleene element only b[i] predicates are bound while it grows;
    // the others (aggregates, b[1], b[last]) wait for the whole binding.
    if (e.kleene && c.iteration_slot != static_cast<size_t>(e.slot)) continue;
    e.checks.push_back(&c);
  }
  return std::unique_ptr<StrategySelector>(
      new StrategySelector(query, std::move(elements), std::move(conjuncts)));
}

StrategySelector::StrategySelector(const pattern::Query& query, std::vector<Element> elements,
                                   std::vector<pattern::Conjunct> conjuncts)
    : strategy_(query.strategy),
      window_(query.within),
      layout_(pattern::BindingLayout::forQuery(query)),
      conjuncts_(std::move(conjuncts)),
      elements_(std::move(elements)),
      bound_(elements_.size()),
      slots_(layout_.size()) {
  for (const Element& e : elements_) {
    if (std::find(types_.begin(), types_.end(), e.type) == types_.end()) types_.push_back(e.type);
  }
}

void StrategySelector::beginCall() {
  if (!window_) return;
  while (!kept_.empty() && kept_.front().ts < newest_ - *window_) kept_.pop_front();
}

void StrategySelector::observe(const EventPtr& event) {
  newest_ = std::max(newest_, event->ts());
  const uint64_t position = next_position_++;
  if (std::find(types_.begin(), types_.end(), event->type()) == types_.end()) return;
  kept_.push_back({event->ts(), event, position});
}

void StrategySelector::save(SnapshotWriter& out) const {
  out.varint(next_position_);
  out.signedVarint(newest_);
  out.varint(kept_.size());
  for (const Kept& k : kept_) {
    out.event(k.event);
    out.varint(k.position);
  }
}

void StrategySelector::load(SnapshotReader& in) {
  next_position_ = in.varint();
  newest_ = in.signedVarint();
  const uint64_t kept = in.count(2);
  for (uint64_t i = 0; i < kept && in.ok(); ++i) {
    EventPtr event = in.event();
    const uint64_t position = in.varint();
    if (!in.ok()) break;
    // find() searches by ts, contiguous() compares positions.
    if (!event || position >= next_position_ ||
        (!kept_.empty() && (kept_.back().ts > event->ts() || kept_.back().position >= position))) {
      in.fail("a strategy's kept event missing or out of stream order");
      break;
    }
    kept_.push_back({event->ts(), std::move(event), position});
  }
}

int64_t StrategySelector::find(const Event& event) const {
  auto it = std::lower_bound(kept_.begin(), kept_.end(), event.ts(),
                             [](const Kept& k, Timestamp ts) { return k.ts < ts; });
  for (; it != kept_.end() && it->ts == event.ts(); ++it) {
    if (it->event.get() == &event) return it - kept_.begin();
  }
  return -1;
}

bool StrategySelector::selects(const Match& match) {
  at_.resize(match.size());
  for (size_t i = 0; i < match.size(); ++i) {
    at_[i] = find(*match.event(i));
    if (at_[i] < 0) return false;  // not an event of this stream
  }
  if (strategy_ == Strategy::kStrictContiguity) return contiguous(at_);
  return nextMatches(match, at_);
}

bool StrategySelector::contiguous(std::span<const int64_t> at) const {
  for (size_t i = 1; i < at.size(); ++i) {
    const auto before = static_cast<size_t>(at[i - 1]);
    if (kept_[static_cast<size_t>(at[i])].position != kept_[before].position + 1) return false;
  }
  return true;
}

bool StrategySelector::nextMatches(const Match& match, std::span<const int64_t> at) {
  if (match.elementCount() != elements_.size()) return false;
  for (auto& b : bound_) b.clear();
  std::fill(slots_.begin(), slots_.end(), pattern::SlotBinding{});
  size_t i = 0;  // index in the match (and in `at`)
  for (size_t k = 0; k < elements_.size(); ++k) {
    for (size_t j = 0; j < match.elementEvents(k).size(); ++j, ++i) {
      if (i > 0) {
        // No earlier event after the previous bound one fills this step.
        const Timestamp after = match.ts(i - 1);
        for (auto p = static_cast<size_t>(at[i - 1]) + 1; p < static_cast<size_t>(at[i]); ++p) {
          const Event& e = *kept_[p].event;
          if (e.ts() > after && fills(k, e)) return false;
        }
      }
      bound_[k].push_back(match.event(i).get());
      const Element& el = elements_[k];
      if (el.slot < 0) continue;
      if (el.kleene) {
        slots_[el.slot].events = bound_[k];
      } else {
        slots_[el.slot].event = bound_[k].back();
      }
    }
  }
  return true;
}

bool StrategySelector::fills(size_t k, const Event& candidate) {
  const Element& el = elements_[k];
  if (candidate.type() != el.type) return false;
  if (el.checks.empty()) return true;
  // Bind the candidate as the element's next event, test, then unbind (the
  // span is taken again: push_back may have moved the events).
  pattern::SlotBinding& slot = slots_[el.slot];
  if (el.kleene) {
    bound_[k].push_back(&candidate);
    slot.events = bound_[k];
  } else {
    slot.event = &candidate;
  }
  bool ok = true;
  for (const pattern::Conjunct* c : el.checks) {
    ok = el.kleene ? c->test(slots_) : testEvery(*c, slots_);
    if (!ok) break;
  }
  if (el.kleene) {
    bound_[k].pop_back();
    slot.events = bound_[k];
  } else {
    slot.event = nullptr;
  }
  return ok;
}

namespace {

// The engine's detector with a selector between its matches and the sink.
// The selectors and filters are declared before the engine's detector, which
// reports to them: they outlive it.
class StrategyDetector final : public Detector {
 public:
  explicit StrategyDetector(std::vector<std::unique_ptr<StrategySelector>> selectors)
      : selectors_(std::move(selectors)) {}

  // The sink for a single query's engine detector, reporting to `out`.
  MatchSink& filter(MatchSink& out) {
    single_ = std::make_unique<Single>(*selectors_.front(), out);
    return *single_;
  }
  // The sink for a multi-query engine detector, reporting to `out`.
  MultiMatchSink& filter(MultiMatchSink& out) {
    many_ = std::make_unique<Many>(selectors_, out);
    return *many_;
  }
  void setEngine(std::unique_ptr<Detector> engine) { engine_ = std::move(engine); }

  Status onEvent(const EventPtr& event) override {
    for (const auto& s : selectors_) {
      if (s == nullptr) continue;
      s->beginCall();
      s->observe(event);
    }
    return engine_->onEvent(event);
  }
  Status onEvents(std::span<const EventPtr> events) override {
    for (const auto& s : selectors_) {
      if (s == nullptr) continue;
      s->beginCall();
      for (const EventPtr& e : events) s->observe(e);
    }
    return engine_->onEvents(events);
  }
  Status flush() override { return engine_->flush(); }
  Status onWatermark(Timestamp t) override { return engine_->onWatermark(t); }
  Result<std::string> exportModel(std::string_view format) const override {
    return engine_->exportModel(format);
  }
  // The engine's: the events a selector keeps are not partial matches.
  std::optional<DetectorState> state() const override { return engine_->state(); }
  // The selectors' events, then the engine's state: a strategy snapshots
  // when its engine does.
  uint32_t snapshotVersion() const override { return engine_->snapshotVersion(); }
  Status snapshot(SnapshotWriter& out) const override {
    if (engine_->snapshotVersion() == 0) return engine_->snapshot(out);
    out.section("strategy", 1);
    out.varint(selectors_.size());
    for (const auto& s : selectors_) {
      out.flag(s != nullptr);
      if (s != nullptr) s->save(out);
    }
    return engine_->snapshot(out);
  }
  Status restore(SnapshotReader& in) override {
    if (!in.section("strategy", 1)) return in.status();
    if (const uint64_t n = in.varint(); in.ok() && n != selectors_.size()) {
      in.fail("state of " + std::to_string(n) + " strategies for " +
              std::to_string(selectors_.size()) + " queries");
    }
    for (size_t i = 0; i < selectors_.size() && in.ok(); ++i) {
      if (in.flag() != (selectors_[i] != nullptr)) {
        in.fail("a strategy's state for query " + std::to_string(i) + ", which has none");
        break;
      }
      if (selectors_[i] != nullptr) selectors_[i]->load(in);
    }
    if (!in.ok()) return in.status();
    return engine_->restore(in);
  }

 private:
  class Single final : public MatchSink {
   public:
    Single(StrategySelector& selector, MatchSink& out) : selector_(selector), out_(out) {}
    void onMatch(const Match& match) override {
      if (selector_.selects(match)) out_.onMatch(match);
    }

   private:
    StrategySelector& selector_;
    MatchSink& out_;
  };
  // A null selector passes its query's matches through.
  class Many final : public MultiMatchSink {
   public:
    Many(const std::vector<std::unique_ptr<StrategySelector>>& selectors, MultiMatchSink& out)
        : selectors_(selectors), out_(out) {}
    void onMatch(size_t pattern, const Match& match) override {
      StrategySelector* s = selectors_[pattern].get();
      if (s == nullptr || s->selects(match)) out_.onMatch(pattern, match);
    }

   private:
    const std::vector<std::unique_ptr<StrategySelector>>& selectors_;
    MultiMatchSink& out_;
  };

  std::vector<std::unique_ptr<StrategySelector>> selectors_;
  std::unique_ptr<Single> single_;
  std::unique_ptr<Many> many_;
  std::unique_ptr<Detector> engine_;
};

}  // namespace

StrategyFactory::StrategyFactory(std::string engine, std::unique_ptr<DetectorFactory> any_match,
                                 Adapt adapt)
    : engine_(std::move(engine)), any_match_(std::move(any_match)), adapt_(adapt) {}

Result<pattern::Query> StrategyFactory::anyMatch(const pattern::Query& query) const {
  pattern::Query q = query;
  if (adapt_ != nullptr) {
    if (Status s = adapt_(q); !s) return s;
  }
  q.strategy = Strategy::kSkipTillAnyMatch;
  return q;
}

std::vector<std::string> StrategyFactory::notices(const pattern::Query& query) const {
  if (query.strategy == Strategy::kSkipTillAnyMatch) return any_match_->notices(query);
  auto q = anyMatch(query);
  return q ? any_match_->notices(*q) : std::vector<std::string>{};
}

Result<std::unique_ptr<Detector>> StrategyFactory::create(const pattern::Query& query,
                                                          const DetectorOptions& options,
                                                          MatchSink& sink) const {
  if (query.strategy == Strategy::kSkipTillAnyMatch) {
    return any_match_->create(query, options, sink);
  }
  // Each partition comes back here without the clause: one selector each.
  if (!query.partition_by.empty()) return createPartitioned(*this, query, options, sink);
  auto selector = StrategySelector::create(query, engine_);
  if (!selector) return selector.status();
  auto q = anyMatch(query);
  if (!q) return q.status();
  std::vector<std::unique_ptr<StrategySelector>> selectors;
  selectors.push_back(std::move(selector).value());
  auto detector = std::make_unique<StrategyDetector>(std::move(selectors));
  auto engine = any_match_->create(*q, options, detector->filter(sink));
  if (!engine) return engine.status();
  detector->setEngine(std::move(engine).value());
  return std::unique_ptr<Detector>(std::move(detector));
}

Result<std::unique_ptr<Detector>> StrategyFactory::createMany(std::span<const NamedQuery> queries,
                                                              const DetectorOptions& options,
                                                              MultiMatchSink& sink) const {
  const bool all_any = std::all_of(queries.begin(), queries.end(), [](const NamedQuery& q) {
    return q.query.strategy == Strategy::kSkipTillAnyMatch;
  });
  if (all_any) return any_match_->createMany(queries, options, sink);
  if (Status s = checkNamedQueries(queries); !s) return s;
  if (std::any_of(queries.begin(), queries.end(),
                  [](const NamedQuery& q) { return !q.query.partition_by.empty(); })) {
    return createManyPartitioned(*this, queries, options, sink);
  }
  std::vector<NamedQuery> any_match;
  std::vector<std::unique_ptr<StrategySelector>> selectors(queries.size());
  for (size_t i = 0; i < queries.size(); ++i) {
    const NamedQuery& nq = queries[i];
    if (nq.query.strategy == Strategy::kSkipTillAnyMatch) {
      any_match.push_back(nq);
      continue;
    }
    auto selector = StrategySelector::create(nq.query, engine_);
    auto q = selector ? anyMatch(nq.query) : Result<pattern::Query>(selector.status());
    if (!q) return Status::invalidArgument("query '" + nq.name + "': " + q.status().message());
    selectors[i] = std::move(selector).value();
    any_match.push_back({nq.name, std::move(q).value()});
  }
  auto detector = std::make_unique<StrategyDetector>(std::move(selectors));
  auto engine = any_match_->createMany(any_match, options, detector->filter(sink));
  if (!engine) return engine.status();
  detector->setEngine(std::move(engine).value());
  return std::unique_ptr<Detector>(std::move(detector));
}

}  // namespace cepbus::plugin
