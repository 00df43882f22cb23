#pragma once

// PARTITION BY for any engine: a detector that routes each event to the
// detector of its partition, each made by the engine itself for the query
// without its PARTITION BY clause. An engine that does not partition natively
// calls createPartitioned() (and createManyPartitioned()) from its factory
// when a query has the clause; the matches are those of the engine run once
// per partition on that partition's events alone.
//
// Partitions follow the nfa engine: the key of an event is the value of each
// PARTITION BY attribute; an event without the attribute has the null value
// there (all such events share one partition), except that `PARTITION BY key`
// falls back to the event's own partition key (its JSON "key" field). Keys
// compare as Values do (1 and 1.0 are one partition); NaN keys are one
// partition. Every event goes to its partition, also one of a type the query
// does not name, since it breaks strict contiguity there.
//
// Time: a partition's detector sees only its own events, so it cannot tell
// that the stream has moved past its newest timestamp. The detector of every
// partition that received events at a timestamp is flushed as soon as an
// event with a later timestamp arrives (or at flush()): an engine that holds
// a tick back (the algebra engine) reports at the time it would unpartitioned.
//
// Memory: with a window (the query's WITHIN; for several queries the largest,
// none if one has none) a partition whose newest event is more than the
// window behind the stream's newest can bind none of its events to a later
// one; at most once per window the quiet ones are dropped, their detectors
// destroyed. Without a window every partition is kept.
//
// State caps (StateCaps, the engine options): each partition's detector
// caps its own state (max_partition_partial_matches); the partitioned
// detector caps their sum (max_partial_matches) when the engine counts its
// state. Over the total cap under drop_oldest the partitions least recently
// active are shed whole, their detectors destroyed, down to nine tenths of
// the cap (those that received events at the stream's newest timestamp are
// kept); under refuse_new no partition is made while the sum is at the cap
// (its events go nowhere), and the live ones go on under their own caps, so
// the sum may pass the total cap by what they grow. A shed partition's
// partial matches and each refused event count as evicted.
//
// Order: matches come out as the per-partition detectors report them, event
// by event, so the order is the unpartitioned engine's for one partition;
// matches of one tick from several partitions come partition by partition,
// in the order the partitions were made (flush() and onWatermark() too), so
// that a restored detector reports them in the order the original would.
//
// Snapshots: the partitions in that order, each with its key, its newest
// timestamp and its detector's own snapshot, then the partitions of the open
// tick, the stream's time and when quiet partitions are next dropped. The
// detector snapshots when the engine's detectors do (the model's
// snapshotVersion(), which it reports as its own); otherwise it refuses as
// the engine refuses.
//
// Thread safety: none (Detector); the factory used to make partitions must
// outlive the detector, as must the sink the partitions report to.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bus/core/api.h"
#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/plugin/state_caps.h"
#include "bus/core/symbol.h"
#include "bus/core/value.h"

namespace cepbus::plugin {

class CEPBUS_API PartitionedDetector final : public Detector {
 public:
  // Makes the detector of one new partition, reporting to the caller's sink.
  using MakeDetector = std::function<Result<std::unique_ptr<Detector>>()>;

  // `partition_by`: the attribute names (at least one). `window`, `caps`:
  // see the file comment. Makes one detector up front (a query the engine
  // refuses fails here, and exportModel() shows it); an error is `make`'s.
  static Result<std::unique_ptr<PartitionedDetector>> create(
      std::span<const std::string> partition_by, std::optional<Timestamp> window, MakeDetector make,
      std::optional<StateCaps> caps);
  // Without a total cap (the SDK's form before caps, kept for plugins built
  // against it).
  static Result<std::unique_ptr<PartitionedDetector>> create(
      std::span<const std::string> partition_by, std::optional<Timestamp> window,
      MakeDetector make) {
    return create(partition_by, window, std::move(make), std::nullopt);
  }

  // Returns the first error of the partitions' detectors (flushing the
  // previous tick, consuming the event) or of making the event's partition
  // (the event then goes nowhere). An event older than the newest one is
  // refused: the partitions share the stream's time.
  Status onEvent(const EventPtr& event) override;
  // Forwards each run of consecutive events of one partition as one span, so
  // the matches come in the order per-event calls give.
  Status onEvents(std::span<const EventPtr> events) override;
  // Flushes every partition's detector.
  Status flush() override;
  // Passes the watermark to every partition's detector.
  Status onWatermark(Timestamp t) override;
  // The model of the query as one partition runs it.
  Result<std::string> exportModel(std::string_view format) const override;
  // The sum over the live partitions, kept up to date after each call into
  // one (a dropped partition's holdings go with it, its evictions stay in
  // the sum); std::nullopt when the engine does not count.
  std::optional<DetectorState> state() const override;
  uint32_t snapshotVersion() const override { return model_->snapshotVersion(); }
  Status snapshot(SnapshotWriter& out) const override;
  // Makes each partition's detector and restores it; a key of the wrong
  // arity, a repeated key or a touched partition out of range fails it.
  Status restore(SnapshotReader& in) override;

  // Partitions alive now (for tests and memory accounting).
  size_t partitionCount() const { return partitions_.size(); }

 private:
  struct Partition {
    std::unique_ptr<Detector> detector;
    Timestamp newest = INT64_MIN;
    bool touched = false;  // in touched_
    DetectorState share;   // its state, as last sampled
  };
  using Partitions = std::unordered_map<std::vector<Value>, Partition, ValueKeyHash, ValueKeyEqual>;
  // The state section's version (the snapshot's own is the engine's); 2:
  // the evictions of the total cap.
  static constexpr uint32_t kSnapshotVersion = 2;

  PartitionedDetector(std::vector<Symbol> attrs, std::optional<Timestamp> window, MakeDetector make,
                      std::unique_ptr<Detector> model, std::optional<StateCaps> caps);

  // The error for an event older than now_.
  Status late(const Event& event) const;
  // Moves now_ to `ts` >= now_: closes the tick before it (flushing its
  // partitions) and drops quiet partitions when due; an error is a flush's.
  Status advanceTo(Timestamp ts);
  // Sets key_ to the key of `event`.
  void keyOf(const Event& event);
  // The partition of `event`, made when new; nullptr with `error` set when
  // making its detector failed, or with it OK when the total cap refused a
  // new partition (counted in evicted_).
  Partition* partitionOf(const Event& event, Status& error);
  // The partition of key_, made when new (added to order_); nullptr with
  // `error` set when making its detector failed.
  Partitions::value_type* findOrMake(Status& error);
  // Over the total cap under drop_oldest: sheds the least recently active
  // partitions (see the file comment).
  void enforceTotalCap();
  // Whether the total cap refuses to make a partition now.
  bool refusesNew() const;
  Status flushTouched();
  void dropQuiet();
  // Brings p's share of total_ up to date after a call into its detector.
  void sample(Partition& p);

  const std::vector<Symbol> attrs_;
  const std::optional<Timestamp> window_;
  const MakeDetector make_;
  const std::unique_ptr<Detector> model_;  // never fed: exportModel() only
  Partitions partitions_;
  std::vector<Partitions::value_type*> order_;  // partitions_ in the order made; stable
  std::vector<Partition*> touched_;             // received events at now_; stable (node-based map)
  std::vector<Value> key_;                      // scratch
  Timestamp now_ = INT64_MIN;
  Timestamp next_drop_ = INT64_MIN;
  const bool counts_;  // the engine's detectors report state()
  const std::optional<StateCaps> caps_;
  StateTotal total_;      // the partitions' states
  uint64_t evicted_ = 0;  // partial matches of shed partitions, events refused
};

// What an engine's create() returns for a query with PARTITION BY: a
// PartitionedDetector whose partitions are `engine.create()` detectors of the
// query without the clause, reporting to `sink`, under the total cap
// `options` set (StateCaps::parse(), whose error it returns).
CEPBUS_API Result<std::unique_ptr<Detector>> createPartitioned(const DetectorFactory& engine,
                                                               const pattern::Query& query,
                                                               const DetectorOptions& options,
                                                               MatchSink& sink);

// What an engine's createMany() returns when some query has PARTITION BY.
// When every query has the same PARTITION BY attributes, one
// PartitionedDetector whose partitions are `engine.createMany()` detectors
// of the queries without the clause (an engine that shares work between
// queries still shares it within a partition); otherwise one detector per
// query (DetectorFactory::createMany's fan-out), each partitioned on its own.
CEPBUS_API Result<std::unique_ptr<Detector>> createManyPartitioned(
    const DetectorFactory& engine, std::span<const NamedQuery> queries,
    const DetectorOptions& options, MultiMatchSink& sink);

}  // namespace cepbus::plugin
