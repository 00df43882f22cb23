#include "plugins/window/aggregates.h"

#include <algorithm>
#include <cmath>

namespace cepbus::plugins::window {
namespace {

using pattern::AggFunc;
using pattern::Builtin;

// The value an input reads off `event`, or nullptr; built-ins go through `scratch`.
const Value* valueOf(const Event& event, const AggregateInput& input, Value& scratch) {
  switch (input.builtin) {
    case Builtin::kNone:
      return event.find(input.attr);
    case Builtin::kTs:
      scratch = Value(event.ts());
      return &scratch;
    case Builtin::kStart:
      scratch = Value(event.start());
      return &scratch;
    case Builtin::kProb:
      scratch = Value(event.probability());
      return &scratch;
    case Builtin::kType:
      scratch = Value(event.type().name());
      return &scratch;
  }
  return nullptr;
}

bool needsOrder(AggFunc f) { return f == AggFunc::kFirst || f == AggFunc::kLast; }
bool needsExtremes(AggFunc f) { return f == AggFunc::kMin || f == AggFunc::kMax; }
// The aggregates that read numbers only.
bool isNumeric(AggFunc func) {
  return func == AggFunc::kSum || func == AggFunc::kAvg || func == AggFunc::kMin ||
         func == AggFunc::kMax || func == AggFunc::kStddev;
}

}  // namespace

ColumnExtras& ColumnExtras::operator=(const ColumnExtras& other) {
  if (this == &other) return *this;
  if (other.held_) {
    held() = *other.held_;
  } else {
    clear();
  }
  return *this;
}

void ColumnExtras::clearHeld() {
  if (!held_->first.isNull()) held_->first = Value();
  if (!held_->last.isNull()) held_->last = Value();
  held_->mean = 0;
  held_->m2 = 0;
}

const Value& ColumnExtras::null() {
  static const Value kNull;
  return kNull;
}

ColumnExtras::Held& ColumnExtras::held() {
  if (!held_) held_ = std::make_unique<Held>();
  return *held_;
}

bool Number::less(const Number& other) const {
  if (kind_ == Kind::kInt && other.kind_ == Kind::kInt) return int_ < other.int_;
  return toDouble() < other.toDouble();
}

Value Number::toValue() const {
  switch (kind_) {
    case Kind::kNone:
      return Value();
    case Kind::kInt:
      return Value(int_);
    case Kind::kDouble:
      return Value(double_);
  }
  return Value();
}

AggregateLayout::AggregateLayout(std::span<const AggregateColumn> columns) {
  for (const AggregateColumn& column : columns) {
    auto it = std::find_if(inputs_.begin(), inputs_.end(), [&](const AggregateInput& in) {
      return in.builtin == column.builtin && in.attr == column.attr;
    });
    if (column.countsEvents()) {
      input_of_.push_back(0);
      continue;
    }
    if (it == inputs_.end()) it = inputs_.insert(it, AggregateInput{column.builtin, column.attr});
    it->order |= needsOrder(column.func);
    it->extremes |= needsExtremes(column.func);
    it->moments |= column.func == AggFunc::kStddev;
    if (isNumeric(column.func)) ++it->numeric;
    input_of_.push_back(static_cast<size_t>(it - inputs_.begin()));
  }
}

bool ColumnState::add(const Value* v, const AggregateInput& input) {
  if (v == nullptr || v->isNull()) return true;
  ++present_;
  if (input.order) {
    if (extras_.first().isNull()) extras_.first() = *v;
    extras_.last() = *v;
  }
  if (!v->isNumber()) return false;
  ++numbers_;
  // Read inline: Value::toDouble() is a call out of the plugin, paid on every value.
  const bool is_int = v->kind() == Value::Kind::kInt;
  const double d = is_int ? static_cast<double>(v->asInt()) : v->asDouble();
  sum_ += d;
  if (all_int_ && (!is_int || __builtin_add_overflow(int_sum_, v->asInt(), &int_sum_))) {
    all_int_ = false;
  }
  if (input.moments) {
    double& mean = extras_.mean();
    const double delta = d - mean;
    mean += delta / static_cast<double>(numbers_);
    extras_.m2() += delta * (d - mean);
  }
  if (input.extremes) {
    const Number n(*v);
    if (min_.empty() || n.less(min_)) min_ = n;
    if (max_.empty() || max_.less(n)) max_ = n;
  }
  return true;
}

void ColumnState::merge(const ColumnState& later, const AggregateInput& input) {
  if (later.present_ == 0) return;
  present_ += later.present_;
  if (input.order) {
    if (extras_.first().isNull()) extras_.first() = later.extras_.first();
    extras_.last() = later.extras_.last();
  }
  if (later.numbers_ == 0) return;
  const int64_t n = numbers_ + later.numbers_;
  if (input.moments) {
    double& mean = extras_.mean();
    const double delta = later.extras_.mean() - mean;
    extras_.m2() += later.extras_.m2() + delta * delta * static_cast<double>(numbers_) *
                                             static_cast<double>(later.numbers_) /
                                             static_cast<double>(n);
    mean += delta * static_cast<double>(later.numbers_) / static_cast<double>(n);
  }
  numbers_ = n;
  sum_ += later.sum_;
  if (all_int_ &&
      (!later.all_int_ || __builtin_add_overflow(int_sum_, later.int_sum_, &int_sum_))) {
    all_int_ = false;
  }
  if (input.extremes) {
    if (min_.empty() || later.min_.less(min_)) min_ = later.min_;
    if (max_.empty() || max_.less(later.max_)) max_ = later.max_;
  }
}

Value ColumnState::result(AggFunc func) const {
  switch (func) {
    case AggFunc::kCount:
      return Value(present_);
    case AggFunc::kSum:
      return all_int_ ? Value(int_sum_) : Value(sum_);
    case AggFunc::kAvg:
      return numbers_ == 0 ? Value() : Value(sum_ / static_cast<double>(numbers_));
    case AggFunc::kMin:
      return min_.toValue();
    case AggFunc::kMax:
      return max_.toValue();
    case AggFunc::kStddev:
      return numbers_ < 2 ? Value()
                          : Value(std::sqrt(extras_.m2() / static_cast<double>(numbers_ - 1)));
    case AggFunc::kFirst:
      return extras_.first();
    case AggFunc::kLast:
      return extras_.last();
  }
  return Value();
}

void ColumnState::clear() {
  present_ = 0;
  numbers_ = 0;
  int_sum_ = 0;
  all_int_ = true;
  sum_ = 0;
  min_ = Number();
  max_ = Number();
  extras_.clear();
}

uint32_t Accumulator::add(const Event& event, const AggregateLayout& layout) {
  ++events_;
  Value scratch;
  uint32_t skipped = 0;
  const std::span<const AggregateInput> inputs = layout.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!input(i).add(valueOf(event, inputs[i], scratch), inputs[i])) skipped += inputs[i].numeric;
  }
  return skipped;
}

void Accumulator::merge(const Accumulator& later, const AggregateLayout& layout) {
  events_ += later.events_;
  const std::span<const AggregateInput> inputs = layout.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) input(i).merge(later.input(i), inputs[i]);
}

void Accumulator::clear() {
  events_ = 0;
  first_.clear();
  for (ColumnState& state : more_) state.clear();
}

Value Accumulator::result(size_t i, const AggregateColumn& column,
                          const AggregateLayout& layout) const {
  if (column.countsEvents()) return Value(events_);
  return input(layout.inputOf(i)).result(column.func);
}

void Number::save(plugin::SnapshotWriter& out) const {
  out.u8(static_cast<uint8_t>(kind_));
  if (kind_ == Kind::kInt) out.signedVarint(int_);
  if (kind_ == Kind::kDouble) out.real(double_);
}

void Number::load(plugin::SnapshotReader& in) {
  const uint8_t kind = in.u8();
  if (kind > static_cast<uint8_t>(Kind::kDouble)) in.fail("unknown number kind");
  kind_ = in.ok() ? static_cast<Kind>(kind) : Kind::kNone;
  int_ = 0;
  if (kind_ == Kind::kInt) int_ = in.signedVarint();
  if (kind_ == Kind::kDouble) double_ = in.real();
}

void ColumnState::save(plugin::SnapshotWriter& out) const {
  out.signedVarint(present_);
  out.signedVarint(numbers_);
  out.signedVarint(int_sum_);
  out.flag(all_int_);
  out.real(sum_);
  out.real(extras_.mean());
  out.real(extras_.m2());
  min_.save(out);
  max_.save(out);
  out.value(extras_.first());
  out.value(extras_.last());
}

void ColumnState::load(plugin::SnapshotReader& in) {
  present_ = in.signedVarint();
  numbers_ = in.signedVarint();
  int_sum_ = in.signedVarint();
  all_int_ = in.flag();
  sum_ = in.real();
  const double mean = in.real();
  const double m2 = in.real();
  min_.load(in);
  max_.load(in);
  Value first = in.value();
  Value last = in.value();
  extras_.clear();
  // Storage only for what an input keeps (-0.0 is kept too: its sign is the state's).
  if (mean != 0 || m2 != 0 || std::signbit(mean) || std::signbit(m2)) {
    extras_.mean() = mean;
    extras_.m2() = m2;
  }
  if (!first.isNull()) extras_.first() = std::move(first);
  if (!last.isNull()) extras_.last() = std::move(last);
}

void Accumulator::save(plugin::SnapshotWriter& out) const {
  out.signedVarint(events_);
  first_.save(out);
  for (const ColumnState& c : more_) c.save(out);
}

void Accumulator::load(plugin::SnapshotReader& in) {
  events_ = in.signedVarint();
  first_.load(in);
  for (ColumnState& c : more_) c.load(in);
}

}  // namespace cepbus::plugins::window
