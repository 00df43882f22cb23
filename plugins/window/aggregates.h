#pragma once

// The aggregates of the window engine, kept as mergeable running state: the
// state of a pane (or a session) is built event by event, and the state of a
// window is the merge of its panes in time order, so no window ever goes back
// over its events.
//
// Values follow the pattern language's aggregates (expr_compiler.h):
// count(t) counts the events, count(t.x) those that have x; sum, avg, min,
// max and stddev (sample) read numbers only, skipping the rest (which the
// detector counts: Accumulator::add() returns them); sum of nothing is 0, sum of ints stays an int
// (a double once it would overflow); avg, min, max of nothing and stddev of fewer than two are
// Missing (a null Value); first and last are the earliest and latest present value.
//
// Thread safety: none; owned by one detector.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/pattern/ast.h"
#include "bus/core/plugin/snapshot.h"
#include "bus/core/symbol.h"
#include "bus/core/value.h"

namespace cepbus::plugins::window {

// What one aggregate reads: an attribute, a built-in, or (count(t)) nothing.
struct AggregateColumn {
  pattern::AggFunc func = pattern::AggFunc::kCount;
  pattern::Builtin builtin = pattern::Builtin::kNone;
  Symbol attr;  // empty for count(t) and for built-ins

  bool countsEvents() const { return attr.empty() && builtin == pattern::Builtin::kNone; }
  bool operator==(const AggregateColumn&) const = default;
};

// One value the columns read (an attribute or a built-in; count(t) reads
// none), with what its running state must keep for the columns reading it:
// sum, avg, min and max of t.x share one state, updated once per event, and
// a state keeps first/last, min/max or the moments only when a column asks.
struct AggregateInput {
  pattern::Builtin builtin = pattern::Builtin::kNone;
  Symbol attr;
  bool order = false;     // first, last
  bool extremes = false;  // min, max
  bool moments = false;   // stddev
  uint32_t numeric = 0;   // columns reading numbers only (sum, avg, min, max, stddev)
};

// The distinct inputs of a query's columns, and which one each column reads.
class AggregateLayout {
 public:
  AggregateLayout() = default;
  explicit AggregateLayout(std::span<const AggregateColumn> columns);

  std::span<const AggregateInput> inputs() const { return inputs_; }
  // The input column i reads; meaningless for count(t).
  size_t inputOf(size_t column) const { return input_of_[column]; }

 private:
  std::vector<AggregateInput> inputs_;
  std::vector<size_t> input_of_;
};

// A number (int or double) or none: what min and max keep, since they read
// numbers only. Trivially copyable, so that copying and merging pane states
// does not go through Value's generic copy.
class Number {
 public:
  Number() = default;
  // `v` must be a number.
  explicit Number(const Value& v)
      : kind_(v.kind() == Value::Kind::kInt ? Kind::kInt : Kind::kDouble) {
    if (kind_ == Kind::kInt) {
      int_ = v.asInt();
    } else {
      double_ = v.asDouble();
    }
  }

  bool empty() const { return kind_ == Kind::kNone; }
  // As Value::compare orders numbers: ints exactly, otherwise as doubles
  // (false when either is NaN).
  bool less(const Number& other) const;
  // A null Value when empty.
  Value toValue() const;
  // Snapshots (WindowDetector::snapshot()).
  void save(plugin::SnapshotWriter& out) const;
  void load(plugin::SnapshotReader& in);

 private:
  enum class Kind : uint8_t { kNone, kInt, kDouble };
  double toDouble() const { return kind_ == Kind::kInt ? static_cast<double>(int_) : double_; }

  Kind kind_ = Kind::kNone;
  // The one kind_ names: a pane keeps two numbers (min and max), in every
  // pane of every group.
  union {
    int64_t int_ = 0;
    double double_;
  };
};

// What few inputs keep: the first and last value (first, last) and the
// running moments (stddev), in storage of their own made when first set.
// Most inputs keep neither, and their state, kept in every pane of every
// group, is that much smaller without them (96 bytes). Copies copy the
// values.
class ColumnExtras {
 public:
  ColumnExtras() = default;
  ColumnExtras(const ColumnExtras& other)
      : held_(other.held_ ? std::make_unique<Held>(*other.held_) : nullptr) {}
  ColumnExtras& operator=(const ColumnExtras& other);
  ColumnExtras(ColumnExtras&&) noexcept = default;
  ColumnExtras& operator=(ColumnExtras&&) noexcept = default;
  ~ColumnExtras() = default;

  // Null Values until set.
  const Value& first() const { return held_ ? held_->first : null(); }
  const Value& last() const { return held_ ? held_->last : null(); }
  Value& first() { return held().first; }
  Value& last() { return held().last; }
  // Welford / Chan: the running mean and sum of squared deviations, 0 until set.
  double mean() const { return held_ ? held_->mean : 0; }
  double m2() const { return held_ ? held_->m2 : 0; }
  double& mean() { return held().mean; }
  double& m2() { return held().m2; }
  // Back to nothing kept, keeping the storage. Inline: every new pane
  // clears its state, and most keep nothing here.
  void clear() {
    if (held_) clearHeld();
  }

 private:
  struct Held {
    Value first;
    Value last;
    double mean = 0;
    double m2 = 0;
  };
  static const Value& null();
  Held& held();
  void clearHeld();

  std::unique_ptr<Held> held_;
};

// The running state of one input over a set of events.
class ColumnState {
 public:
  // `v`: the event's value of the input (nullptr when it has none). False
  // when `v` is present but not a number, which numeric aggregates skip.
  bool add(const Value* v, const AggregateInput& input);
  // Appends the state of events that all come after these ones.
  void merge(const ColumnState& later, const AggregateInput& input);
  // The aggregate's value; a null Value for Missing.
  Value result(pattern::AggFunc func) const;
  // Back to the state of no values, without building a new one (first and
  // last are Values, dearer to assign than to test).
  void clear();
  void save(plugin::SnapshotWriter& out) const;
  void load(plugin::SnapshotReader& in);

 private:
  int64_t present_ = 0;  // values present, numbers or not
  int64_t numbers_ = 0;
  int64_t int_sum_ = 0;
  bool all_int_ = true;
  double sum_ = 0;
  Number min_;
  Number max_;
  ColumnExtras extras_;  // first, last and the moments
};

// The state of every input of a query over one pane, window or session.
class Accumulator {
 public:
  explicit Accumulator(const AggregateLayout& layout)
      : more_(layout.inputs().empty() ? 0 : layout.inputs().size() - 1) {}

  // Returns how many of the event's values a numeric aggregate (sum, avg,
  // min, max, stddev) skipped as not numbers, one per such column.
  uint32_t add(const Event& event, const AggregateLayout& layout);
  void merge(const Accumulator& later, const AggregateLayout& layout);
  // Back to the state of no events, keeping the storage.
  void clear();
  // Column i's value (a null Value for Missing).
  Value result(size_t i, const AggregateColumn& column, const AggregateLayout& layout) const;
  int64_t events() const { return events_; }
  // Snapshots: the state of every input, read back into an accumulator of
  // the same layout.
  void save(plugin::SnapshotWriter& out) const;
  void load(plugin::SnapshotReader& in);

 private:
  ColumnState& input(size_t i) { return i == 0 ? first_ : more_[i - 1]; }
  const ColumnState& input(size_t i) const { return i == 0 ? first_ : more_[i - 1]; }

  int64_t events_ = 0;
  // Input 0 (most queries read one value) inline, so that copying and
  // merging the states of panes touches no other memory; the rest after it.
  ColumnState first_;
  std::vector<ColumnState> more_;
};

}  // namespace cepbus::plugins::window
