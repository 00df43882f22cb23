#pragma once

// The C++ side of the plugin ABI: what a CEP engine plugin implements
// (DetectorFactory, Detector) and what the host hands it (MatchSink,
// DetectorOptions). These types cross the library boundary only after the
// loader has checked the plugin's ABI version and build tag (plugin_abi.h).
//
// A detector consumes events in timestamp order and reports every match to
// its sink. A match is the events bound by the pattern, in pattern order
// (a Kleene element's events inline in stream order, negated elements
// contributing nothing), plus the composite event built from the query's
// RETURN clause, made on demand so that a sink that only needs the bound
// events (counting, printing timestamps) costs no allocation per match.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/api.h"
#include "bus/core/event.h"
#include "bus/core/pattern/ast.h"
#include "bus/core/plugin/snapshot.h"
#include "bus/core/status.h"

namespace cepbus::plugin {

class Match;

// Builds the composite event of a match; implemented by each engine from its
// compiled RETURN clause.
class CEPBUS_API MatchComposer {
 public:
  virtual ~MatchComposer() = default;
  virtual EventPtr compose(const Match& match) const = 0;
};

// One match as handed to a sink. A view: valid only during MatchSink::onMatch;
// a sink that keeps the events copies the EventPtrs (or keeps composite()).
class CEPBUS_API Match {
 public:
  // `events`: the bound events in pattern order. `element_ends[j]`: one past
  // the index in `events` of the last event of the j-th positive element.
  Match(std::span<const EventPtr* const> events, std::span<const uint32_t> element_ends,
        const MatchComposer* composer)
      : events_(events), element_ends_(element_ends), composer_(composer) {}

  size_t size() const { return events_.size(); }
  const EventPtr& event(size_t i) const { return *events_[i]; }
  Timestamp ts(size_t i) const { return (*events_[i])->ts(); }

  // The positive elements of the pattern (single or Kleene), in pattern order.
  size_t elementCount() const { return element_ends_.size(); }
  // The events bound to positive element `j` (several for a Kleene element).
  std::span<const EventPtr* const> elementEvents(size_t j) const {
    const size_t begin = j == 0 ? 0 : element_ends_[j - 1];
    return events_.subspan(begin, element_ends_[j] - begin);
  }

  // The probability that the match exists: the product of its events'
  // probabilities, the events taken as independent. Negated elements do not
  // enter it (an event that negates a match rejects it whatever its
  // probability; docs/pattern-language.md, "Uncertain events").
  double probability() const {
    double p = 1;
    for (const EventPtr* e : events_) p *= (*e)->probability();
    return p;
  }

  // The composite event: the RETURN type and attributes (or type "Match" and
  // no attributes without RETURN), spanning its constituents, which are the
  // bound events, with the match's probability. Allocates; call it only when
  // the composite is needed.
  EventPtr composite() const { return composer_->compose(*this); }

 private:
  std::span<const EventPtr* const> events_;
  std::span<const uint32_t> element_ends_;
  const MatchComposer* composer_;
};

// Receives matches. Called synchronously on the detector's thread; must not
// throw (a throwing sink is treated like a throwing detector).
class CEPBUS_API MatchSink {
 public:
  virtual ~MatchSink() = default;
  virtual void onMatch(const Match& match) = 0;
};

// Engine options, `key=value` strings such as `construction=per_event`.
// Immutable once built; safe to read from any thread.
class CEPBUS_API DetectorOptions {
 public:
  DetectorOptions() = default;
  explicit DetectorOptions(std::map<std::string, std::string, std::less<>> values)
      : values_(std::move(values)) {}

  // A copy whose relative paths in option values (files an engine reads)
  // resolve against `dir`: the descriptor's folder for a deployed query.
  // Without one they resolve against the working directory.
  DetectorOptions withBaseDir(std::filesystem::path dir) const;

  // Parses `key=value` items; a later item overrides an earlier one. The
  // error names the malformed item.
  static Result<DetectorOptions> parse(std::span<const std::string> items);

  // The value of `key`, or nullptr when it is not set.
  const std::string* find(std::string_view key) const;
  const std::map<std::string, std::string, std::less<>>& values() const { return values_; }
  // `path` unchanged when absolute or when there is no base folder, else
  // resolved against it.
  std::filesystem::path resolvePath(std::string_view path) const;
  const std::filesystem::path& baseDir() const { return base_dir_; }
  // A copy without `key` (the host consumes the options it implements itself).
  DetectorOptions without(std::string_view key) const;
  // InvalidArgument naming the first option not in `known`, for an engine to
  // reject options it does not understand.
  Status checkKnown(std::span<const std::string_view> known, std::string_view engine) const;

 private:
  std::map<std::string, std::string, std::less<>> values_;
  std::filesystem::path base_dir_;
};

// How much matching state a detector holds: what grows with the stream and
// what PROBABILITY >= p and the window prune. The unit is the engine's own,
// so compare figures of one engine only (docs/engines.md, "Partial matches
// kept"): the nfa engine counts the events in its active instance stacks,
// the algebra engine the operand instances it keeps between ticks, the petri
// engine the tokens in its places. Events an engine holds only to negate
// (inhibitor places, negation stacks) and events waiting for their tick or
// for the reorder slack are not partial matches and are not counted.
struct CEPBUS_API DetectorState {
  // Held now, after the last call returned.
  uint64_t partial_matches = 0;
  // The most held at once since the detector was made. A detector made of
  // several (PARTITION BY, the default createMany()) samples the sum of its
  // parts after each call into one, so a part's peak inside a call may go
  // beyond it.
  uint64_t peak_partial_matches = 0;
  // Partial matches a cap on the engine's state dropped or refused since the
  // detector was made, in the same unit (docs/engines.md, "Bounded state").
  uint64_t evicted = 0;
  // The memory the state keeps alive, in bytes: the engine's estimate, for a
  // gauge (an event held in two places may be counted twice); 0 from an
  // engine that does not estimate it.
  uint64_t bytes = 0;
};

// The state of a detector made of parts (a fan-out's queries, a partitioned
// detector's partitions): each part's last sample is its share of the sum,
// and the peak is the sum's. Thread safety: none (the detector's).
class CEPBUS_API StateTotal {
 public:
  // Replaces `share` (the part's previous sample, then updated) by `now`.
  void update(DetectorState& share, const DetectorState& now) {
    total_.partial_matches += now.partial_matches - share.partial_matches;
    total_.evicted += now.evicted - share.evicted;
    total_.bytes += now.bytes - share.bytes;
    total_.peak_partial_matches = std::max(total_.peak_partial_matches, total_.partial_matches);
    share = now;
  }
  // A part that is gone: what it held leaves the sum, what it evicted stays.
  void remove(const DetectorState& share) {
    total_.partial_matches -= share.partial_matches;
    total_.bytes -= share.bytes;
  }
  const DetectorState& total() const { return total_; }

 private:
  DetectorState total_;
};

// One detector instance: a compiled query plus its run-time state.
//
// Thread safety: none; a detector is driven by one thread at a time
// (parallelism comes from one detector per partition range, not locks).
// Errors are returned, never thrown (the host still guards every call, see
// GuardedDetector).
class CEPBUS_API Detector {
 public:
  // The watermark of the end of a stream: time passes to infinity.
  static constexpr Timestamp kEndOfTime = INT64_MAX;

  virtual ~Detector() = default;
  // Consumes the next event. Events arrive in non-decreasing ts order
  // (ReorderingDetector enforces it); an event of a type the query does not
  // mention is accepted and ignored (it still matters to strict contiguity).
  virtual Status onEvent(const EventPtr& event) = 0;
  // Consumes `events` in span order, as onEvent() on each would: the batched
  // form of the call, for sources that have several events at hand (a file
  // replay, a benchmark), so that an engine pays its per-call costs (virtual
  // calls through the host's wrappers, a hand-off to its workers) once per
  // batch. Every event is offered even when one fails; the result is the
  // first error (in span order, unless the detector documents otherwise),
  // else OK. Matches are reported during the call, in the order per-event
  // calls would report them unless the engine documents otherwise. The
  // default loops over onEvent(); an engine overrides it only to do better
  // than that.
  //
  // An exception (a bug: engines return errors) leaves the batch consumed in
  // part: the events before the one being processed were consumed, that one
  // may or may not have been, the later ones were not offered.
  // GuardedDetector reports it as such.
  virtual Status onEvents(std::span<const EventPtr> events);
  // Reports every match still pending for the events so far (e.g. of a
  // batched construction). It does not move event time: a match that waits
  // for time to pass (a trailing negation's window) stays until
  // onWatermark() passes it. The end of a stream is onWatermark(kEndOfTime)
  // then flush(). The detector may receive more events afterwards.
  virtual Status flush() = 0;
  // Event time has passed `t`: every event with ts <= t has been offered, so
  // a match waiting for the time after it (a trailing negation whose window
  // ends at or before `t`) is decided now, with no later event needed.
  // Called after the events it covers, with non-decreasing `t`; kEndOfTime
  // at the end of a stream (events after it are a new stream, whose time
  // starts over from their own). The default does nothing: an engine that never
  // waits for time needs no watermark.
  virtual Status onWatermark(Timestamp t);
  // The engine's model of the query (or queries) it runs, in `format`, for
  // people to see how the patterns were compiled and merged: "dot"
  // (Graphviz) or "json" where the engine supports it. InvalidArgument for
  // an engine without a model or an unknown format. Called on the thread
  // that drives the detector (or with that thread excluded).
  virtual Result<std::string> exportModel(std::string_view format) const;
  // The state it holds now (see DetectorState), for monitoring: cheap enough
  // to call after every batch, so engines keep the count as they go rather
  // than walk their state. std::nullopt for an engine that does not count
  // (the default), which is not the same as holding nothing. Called on the
  // thread that drives the detector (or with that thread excluded).
  virtual std::optional<DetectorState> state() const;

  // Snapshots (snapshot.h; docs/plugins.md, "Snapshots"): a checkpointed
  // query's state written to bytes and read back into a new detector of the
  // same query and options, which then goes on as the original would have.
  // A snapshot holds everything a later event, watermark or flush() depends
  // on (partial matches, windows, negation and partition state, matches
  // waiting for a flush or for time to pass, counters that change what is
  // reported), but not the host's (reorder buffer, late events), and is
  // taken between calls, never from inside a sink.
  //
  // The version of the state snapshot() writes, which restore() reads back
  // (the host refuses a snapshot of another version); 0, the default, for a
  // detector that does not snapshot: the host refuses to checkpoint its
  // queries, and nothing else changes.
  virtual uint32_t snapshotVersion() const { return 0; }
  // Writes the state to `out`. The default refuses (InvalidArgument).
  virtual Status snapshot(SnapshotWriter& out) const;
  // Reads back what snapshot() wrote into a detector just made for the same
  // query, before any event. An error (never an exception, never a crash)
  // when `in` does not hold such state; the detector is then not to be used.
  // The default refuses (InvalidArgument).
  virtual Status restore(SnapshotReader& in);
};

// One query of a multi-pattern detector, named for the labels of its matches.
struct CEPBUS_API NamedQuery {
  std::string name;
  pattern::Query query;
};

// Receives the matches of a multi-pattern detector, each labelled with the
// index of its query in the span given to DetectorFactory::createMany().
// Called synchronously on the detector's thread; must not throw.
class CEPBUS_API MultiMatchSink {
 public:
  virtual ~MultiMatchSink() = default;
  virtual void onMatch(size_t pattern, const Match& match) = 0;
};

// One engine option as `cepbus plugins` lists it: `name=VALUE` and what it
// does, e.g. {"construction", "per_event|batched: when matches are built"}.
// Both strings are static (they live in the plugin's read-only data).
struct CEPBUS_API OptionInfo {
  std::string_view name;
  std::string_view help;
};

// Creates detectors of one engine. Registered by a plugin under the engine's
// name; shared read-only by the host, so create() must be safe to call from
// any thread.
class CEPBUS_API DetectorFactory {
 public:
  virtual ~DetectorFactory() = default;
  // The options create() accepts (the host's own, such as slack, are not
  // listed here), for people: `cepbus plugins` prints them. The default
  // lists none. Describing an option does not make create() accept it.
  virtual std::span<const OptionInfo> options() const { return {}; }
  // A detector for `query` reporting to `sink`, which must outlive it. An
  // InvalidArgument status names what the engine does not support (an
  // operator, a strategy, an option) or why the query cannot be compiled.
  virtual Result<std::unique_ptr<Detector>> create(const pattern::Query& query,
                                                   const DetectorOptions& options,
                                                   MatchSink& sink) const = 0;
  // One detector running every query of `queries` (each match reported to
  // `sink` with its query's index), which must outlive it. The default runs
  // one create() detector per query behind a fan-out that feeds each event
  // to every one in query order; an engine that shares work between queries
  // (the petri engine merges them into one net) overrides it. An error names
  // the query that cannot be compiled; InvalidArgument for an empty span or
  // a repeated name.
  virtual Result<std::unique_ptr<Detector>> createMany(std::span<const NamedQuery> queries,
                                                       const DetectorOptions& options,
                                                       MultiMatchSink& sink) const;
  // What a user should know about how this engine reads `query` when it
  // changes the matches and the query does not say so — a default it leaves
  // implicit, such as the algebra engine's CONTEXT recent — one sentence
  // each. The host logs them as notices (`cepbus match` on stderr, the bus
  // log for a deployed query). The default has none.
  virtual std::vector<std::string> notices(const pattern::Query& /*query*/) const { return {}; }
};

// What every createMany() checks first: queries present, names non-empty and distinct.
CEPBUS_API Status checkNamedQueries(std::span<const NamedQuery> queries);

}  // namespace cepbus::plugin
