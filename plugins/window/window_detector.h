#pragma once

// The window engine's detector: tumbling, sliding and session windows per
// group, each result a composite event (docs/pattern-language.md, "Windows").
//
// Tumbling and sliding windows share panes: time is cut into panes of
// gcd(L, S) units aligned to ts 0, an event updates the one pane it falls in
// (its group's newest), and a window's result merges the group's non-empty
// panes inside it, so an event costs the same whatever L/S is and no window
// goes back over its events. The panes of a group's windows are a queue
// aggregated with two stacks: panes enter at the back into one running
// state, and leave at the front from suffix states computed when the front
// runs out, so a result costs a constant number of merges amortized, not
// L/gcd(L, S). A pane is dropped once every window that holds it has come
// out. A session is one running state per group.
//
// Events come in ts order (the host reorders them within the query's maximum
// delay): an event at ts closes every window ending at or before ts (a
// window [s, e) holds ts < e) and every session whose last event is more
// than the gap before ts; the host's watermark (onWatermark(t): no event at
// or before t is still to come) closes those ending by t + 1, and the end
// of time closes the rest. flush() is a pause in the input, which closes
// nothing: a later event may still fall into an open window. Results coming
// out together come out by ts, then window start, then by group in order of
// first appearance.
//
// EMIT EVERY d: when event time passes a multiple p of d strictly inside an
// open window (or session) that holds an event before p, the window's
// result so far comes out with ts p - 1 (a session's: its last event's) and
// `partial` true; its final result has `partial` false. HAVING filters
// partial results too. A window's partial results come out before its final
// one, in time order.
//
// Memory: the groups with an open pane or session, at most max_groups; an
// event of a new group beyond that is refused and counted (exportModel
// "json"), never stored. A group with nothing open is forgotten. A value a
// numeric aggregate (sum, avg, min, max, stddev) skips as not a number is
// counted too (non_numeric).
// state().partial_matches is the open panes plus open sessions.
//
// Thread safety: none (Detector); the sink must outlive the detector.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/plugin/engine_counters.h"
#include "bus/core/status.h"
#include "bus/core/value.h"
#include "plugins/window/aggregates.h"
#include "plugins/window/group_table.h"
#include "plugins/window/ring_queue.h"
#include "plugins/window/window_plan.h"

namespace cepbus::plugins::window {

class WindowDetector final : public plugin::Detector {
 public:
  WindowDetector(PlanPtr plan, plugin::MatchSink& sink);

  Status onEvent(const EventPtr& event) override;
  // As onEvent() on each, looking ahead: the group of the event kLookahead
  // places on is found early and prefetched, so that finding it when its
  // turn comes does not wait on memory (with a thousand groups, it would).
  Status onEvents(std::span<const EventPtr> events) override;
  Status onWatermark(Timestamp t) override;
  // Nothing to report: windows close on time, not on pauses.
  Status flush() override { return Status::ok(); }
  // "json": {"groups":N,"max_groups":M,"refused_events":R,"non_numeric":K,
  // "open":P}; plugin::kCountersFormat: the same as "name value" lines.
  Result<std::string> exportModel(std::string_view format) const override;
  std::optional<plugin::DetectorState> state() const override;
  // Snapshots (plugin::Detector): every group in order of its place, with
  // its panes (their own and suffix states), its two-stack split, its next
  // window and its session; the list of open sessions by last event; the
  // time results and partial results are due; and the counters.
  uint32_t snapshotVersion() const override { return kSnapshotVersion; }
  Status snapshot(plugin::SnapshotWriter& out) const override;
  Status restore(plugin::SnapshotReader& in) override;

 private:
  static constexpr uint32_t kSnapshotVersion = 1;

  struct Pane {
    int64_t index;
    Timestamp first;  // the ts of its first event
    // The pane's events; in the front stack, its suffix state (its events
    // and those of the front stack's newer panes) unless `suffix` is set.
    Accumulator acc;
    // EMIT EVERY, which merges panes' own states for partial results, keeps
    // the suffix state apart; otherwise it takes the place of `acc`, so that
    // a pane is half the memory.
    std::unique_ptr<Accumulator> suffix;
  };
  struct Group {
    uint64_t seq = 0;  // order of first appearance
    std::vector<Value> key;
    Value key_first;        // key[0] (a null Value for no key), beside the rest for lookups
    uint64_t hash = 0;      // ValueKeyHash of the key
    size_t at = 0;          // its place in groups_
    RingQueue<Pane> panes;  // non-empty panes, oldest first
    // The two stacks: panes [0, front) are the front stack (their suffix
    // set), [front, in) the back stack, merged in `back`; [0, in) are the
    // panes of the windows out so far still held.
    size_t front = 0;
    size_t in = 0;
    std::optional<Accumulator> back;
    int64_t next_window = INT64_MIN;  // no window before it comes out (tumbling, sliding)
    std::optional<Accumulator> session;
    Timestamp first = 0;  // the open session's first and last ts
    Timestamp last = 0;
    // Sessions without EMIT EVERY: the neighbours in the list of open
    // sessions by last event (see oldest_).
    Group* older = nullptr;
    Group* newer = nullptr;

    // Key j, the first read beside the group's other fields.
    const Value& keyAt(size_t j) const { return j == 0 ? key_first : key[j]; }
  };
  // A result ready to come out: its columns' values are values_[first,
  // first + columns), computed when it closed so that no state is copied.
  struct Closed {
    Timestamp start;
    Timestamp end;
    uint64_t seq;
    const Group* group;
    size_t first;
    bool partial = false;
  };
  static EventId resultId(const Closed& closed);
  bool passes(const Event& event) const;
  static constexpr size_t kLookahead = 8;
  void consume(const Event& event, std::optional<uint64_t> hash);
  // Asks for the first lines of the group filed under `hash`, if any.
  void prefetchGroup(uint64_t hash) const;
  // ValueKeyHash of the event's key.
  uint64_t keyHash(const Event& event) const;
  // The event's value of a key attribute, a null Value when it has none.
  static const Value& keyValue(const Event& event, Symbol attr);
  // The group of `event`, whose key hash is `hash`, made when new; nullptr
  // when max_groups refuses it.
  Group* groupOf(const Event& event, uint64_t hash);
  // Drops the group (its results are out).
  void forget(const Group& group);
  void add(Group& group, const Event& event);
  // Closes whatever ends before `now` (everything when `now` is nullopt).
  void closeBefore(std::optional<Timestamp> now);
  // closeBefore() for sessions without EMIT EVERY: the sessions that ended
  // are the oldest of the list, so it walks those only, not every group.
  void closeSessionsBefore(std::optional<Timestamp> now);
  // Moves the group to the newest end of the list of open sessions.
  void touchSession(Group& group);
  void unlinkSession(Group& group);
  // Emits `closed` in time order and forgets the values they hold.
  void emitInOrder(std::vector<Closed>& closed);
  // Closes the group's windows (or session) ending before `now` (all when
  // nullopt); returns when its next one is due without EMIT EVERY (dueOf()),
  // INT64_MAX when it has nothing open.
  Timestamp closeWindows(Group& group, std::optional<Timestamp> now, std::vector<Closed>& out);
  // The merge of the group's panes before `end_pane` (those of the window
  // coming out; the ones before it are gone), valid until the next call.
  const Accumulator& windowState(Group& group, int64_t end_pane);
  // Appends the result of a window or session in state `acc` to `out`.
  void close(const Closed& closed, const Accumulator& acc, std::vector<Closed>& out);
  void dropFrontPane(Group& group);
  static Accumulator& suffixOf(Pane& pane) { return pane.suffix ? *pane.suffix : pane.acc; }
  void snapshotGroup(const Group& group, plugin::SnapshotWriter& out) const;
  void restoreGroup(Group& group, plugin::SnapshotReader& in);
  // Appends an empty pane to the group's.
  void pushPane(Group& group, int64_t index, Timestamp first);
  // EMIT EVERY: the partial results of the group's open windows (or session)
  // at the multiples of d after partials_until_ and up to `now`.
  void reportPartials(const Group& group, std::optional<Timestamp> now, std::vector<Closed>& out);
  // The partial results of a window [start, end) whose first event is at
  // `first` and whose state is `acc`, at the points up to `last_point`.
  void partialsOf(const Group& group, Timestamp start, Timestamp first, Timestamp last_point,
                  const Accumulator& acc, std::vector<Closed>& out);
  // When the group's next result is due: the end of its next window, or one
  // past its session's gap; nullopt when it has nothing open.
  std::optional<Timestamp> dueOf(const Group& group) const;
  // Builds the result of `closed` and hands it to the sink. column(i,
  // takes) is value i of its row: column i, then the group keys; `takes`
  // when no later item reads it.
  template <typename Column>
  void emit(const Closed& closed, const Column& column);
  // emit() of a result whose columns are in values_.
  void emit(const Closed& closed);

  int64_t firstWindowHolding(int64_t pane) const;
  // The index of the pane holding `ts`.
  int64_t paneIndexOf(Timestamp ts);

  PlanPtr plan_;
  plugin::MatchSink& sink_;
  // The groups, and the index from key to group. In order of first
  // appearance, so that the results of windows ending together come out
  // sorted already, except after a session's group was forgotten (the last
  // group takes its place; results are sorted as they come out anyway).
  std::vector<std::unique_ptr<Group>> groups_;
  GroupTable<Group> index_;
  // The values of the key being looked up, in the event.
  std::vector<const Value*> key_values_;
  // The column values of the results closing together (Closed::first), and
  // the merge of a window's panes: kept to reuse their storage.
  std::vector<Value> values_;
  // The results closing together, kept to reuse its storage.
  std::vector<Closed> closed_;
  // Results come out as they close, in order already (closeBefore()), not
  // collected in closed_ and values_.
  bool emit_at_close_ = false;
  std::optional<Accumulator> merged_;
  uint64_t next_seq_ = 0;
  // The pane of the last event's ts: events come in ts order, so the next
  // one most often falls in it too, and finding its pane costs no division.
  bool pane_known_ = false;
  Timestamp pane_start_ = 0;
  int64_t pane_index_ = 0;
  // Sessions without EMIT EVERY: the groups with an open session by their
  // last event's ts (events come in ts order, so a touched group goes to
  // the newest end), which makes the next one due the oldest's.
  Group* oldest_ = nullptr;
  Group* newest_ = nullptr;
  // No result is due before this time (a lower bound: a session extended
  // since it was computed is due later).
  Timestamp due_ = INT64_MAX;
  // EMIT EVERY: every partial result due at or before this time is out.
  Timestamp partials_until_ = INT64_MIN;
  uint64_t open_ = 0;  // panes and sessions held
  uint64_t peak_open_ = 0;
  uint64_t refused_events_ = 0;
  uint64_t non_numeric_ = 0;  // values numeric aggregates skipped as not numbers
};

}  // namespace cepbus::plugins::window
