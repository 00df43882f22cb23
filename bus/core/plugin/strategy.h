#pragma once

// skip_till_next_match and strict_contiguity for an engine that implements
// skip_till_any_match only (the algebra and petri engines).
//
// Under either strategy a match is a binding that skip_till_any_match also
// reports: it passes the same order, type, predicate, window and negation
// checks, and the strategy only narrows which of those bindings count
// (docs/pattern-language.md, "Semantics"). So the engine runs the query under
// skip_till_any_match and a StrategySelector keeps, of its matches, those the
// strategy selects:
//
// - strict_contiguity: the bound events are consecutive in the stream the
//   detector sees (events of every type count).
// - skip_till_next_match: each bound event after the first is the first
//   event later than the one bound before it that fills its element given
//   the events bound so far (its type, and the predicates that name it and
//   no later element; for a Kleene element its b[i] predicates). A Kleene
//   element ends after any of its events: one match per completed prefix.
//
// The selector keeps the events of the pattern's types that a match still
// to be reported can contain: with WITHIN n, those at most n before the
// newest timestamp seen before the current call (engines may report a
// match when the next timestamp arrives); without WITHIN, every one.
//
// The selector sees one stream. With PARTITION BY, StrategyFactory
// partitions first (plugin::createPartitioned()): every partition runs a
// selector of its own over its own events, as the strategies are defined
// per partition. Queries under skip_till_any_match, partitioned or not, go
// to the engine's factory untouched.

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bus/core/api.h"
#include "bus/core/event.h"
#include "bus/core/pattern/ast.h"
#include "bus/core/pattern/expr_compiler.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/plugin/snapshot.h"
#include "bus/core/status.h"

namespace cepbus::plugin {

// Decides which skip_till_any_match matches of one query its strategy keeps.
// Thread safety: none (one per detector, on the detector's thread).
class CEPBUS_API StrategySelector {
 public:
  // A selector for `query` (its strategy not skip_till_any_match).
  // InvalidArgument, naming `engine`, when the pattern is not a SEQ of
  // 'Type var', 'Type+ var[]' and 'NOT(Type var)' elements, which is where
  // the strategies are defined.
  static Result<std::unique_ptr<StrategySelector>> create(const pattern::Query& query,
                                                          std::string_view engine);

  // Before the engine is handed the events of one call: forgets the events
  // no match still to be reported can contain.
  void beginCall();
  // Records the next event of the stream, in the order the engine gets it.
  void observe(const EventPtr& event);
  // Whether the strategy keeps `match`, a skip_till_any_match match made of
  // observed events.
  bool selects(const Match& match);

  // Snapshots: the events kept, with their stream positions, and the
  // stream's position and newest ts. load() reads them into a selector just
  // made for the same query; events out of order fail the reader.
  void save(SnapshotWriter& out) const;
  void load(SnapshotReader& in);

 private:
  struct Element {
    Symbol type;
    int slot;  // -1 for an unnamed element
    bool kleene;
    // The conjuncts checked when an event is tried for this element under
    // skip_till_next_match: they name it and no later element, nor a negated one.
    std::vector<const pattern::Conjunct*> checks;
  };
  struct Kept {
    Timestamp ts;  // the event's, beside it: find() reads no event
    EventPtr event;
    uint64_t position;  // in the stream, every type counted
  };

  StrategySelector(const pattern::Query& query, std::vector<Element> elements,
                   std::vector<pattern::Conjunct> conjuncts);
  // Index in kept_ of `event`, or -1 when it was not observed (or forgotten).
  int64_t find(const Event& event) const;
  bool contiguous(std::span<const int64_t> at) const;
  bool nextMatches(const Match& match, std::span<const int64_t> at);
  // Whether `candidate` fills element k after the events bound so far.
  bool fills(size_t k, const Event& candidate);

  pattern::Strategy strategy_;
  std::optional<Timestamp> window_;
  pattern::BindingLayout layout_;
  std::vector<pattern::Conjunct> conjuncts_;  // before elements_: they point into it
  std::vector<Element> elements_;
  std::vector<Symbol> types_;  // of elements_, the events worth keeping
  std::deque<Kept> kept_;
  uint64_t next_position_ = 0;
  Timestamp newest_ = INT64_MIN;
  // Scratch for selects(), reused across matches.
  std::vector<int64_t> at_;  // index in kept_ of each event of the match
  std::vector<std::vector<const Event*>> bound_;
  std::vector<pattern::SlotBinding> slots_;
};

// A DetectorFactory that runs every strategy on an engine implementing
// skip_till_any_match only: it hands the engine the query under
// skip_till_any_match and puts a StrategySelector between the engine's
// matches and the sink. Queries under skip_till_any_match go to the engine
// untouched. Stateless beyond the engine's factory; create() is as
// thread-safe as the engine's.
class CEPBUS_API StrategyFactory final : public DetectorFactory {
 public:
  // Adapts a query with another strategy before the engine compiles it under
  // skip_till_any_match (e.g. a context of the engine's own that would drop
  // matches the selector needs), or refuses it with InvalidArgument.
  using Adapt = Status (*)(pattern::Query& query);

  StrategyFactory(std::string engine, std::unique_ptr<DetectorFactory> any_match,
                  Adapt adapt = nullptr);

  std::span<const OptionInfo> options() const override { return any_match_->options(); }
  std::vector<std::string> notices(const pattern::Query& query) const override;
  Result<std::unique_ptr<Detector>> create(const pattern::Query& query,
                                           const DetectorOptions& options,
                                           MatchSink& sink) const override;
  Result<std::unique_ptr<Detector>> createMany(std::span<const NamedQuery> queries,
                                               const DetectorOptions& options,
                                               MultiMatchSink& sink) const override;

 private:
  // `query` as the engine runs it: adapted, under skip_till_any_match.
  Result<pattern::Query> anyMatch(const pattern::Query& query) const;

  std::string engine_;
  std::unique_ptr<DetectorFactory> any_match_;
  Adapt adapt_;
};

}  // namespace cepbus::plugin
