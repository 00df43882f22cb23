#include "plugins/window/aggregates.h"

#include <cmath>
#include <compare>

namespace cepbus::plugins::window {
namespace {

using pattern::AggFunc;
using pattern::Builtin;

// The value a column reads off `event`, or nullptr; built-ins go through `scratch`.
const Value* valueOf(const Event& event, const AggregateColumn& column, Value& scratch) {
  switch (column.builtin) {
    case Builtin::kNone:
      return event.find(column.attr);
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

bool less(const Value& a, const Value& b) {
  const auto c = a.compare(b);
  return c && *c == std::strong_ordering::less;
}

// The aggregates that read numbers only.
bool isNumeric(AggFunc func) {
  return func == AggFunc::kSum || func == AggFunc::kAvg || func == AggFunc::kMin ||
         func == AggFunc::kMax || func == AggFunc::kStddev;
}

}  // namespace

bool ColumnState::add(const Value* v, bool numeric) {
  if (v == nullptr || v->isNull()) return true;
  ++present_;
  if (first_.isNull()) first_ = *v;
  last_ = *v;
  if (!v->isNumber()) return !numeric;
  ++numbers_;
  const double d = v->toDouble();
  sum_ += d;
  if (all_int_ &&
      (v->kind() != Value::Kind::kInt || __builtin_add_overflow(int_sum_, v->asInt(), &int_sum_))) {
    all_int_ = false;
  }
  const double delta = d - mean_;
  mean_ += delta / static_cast<double>(numbers_);
  m2_ += delta * (d - mean_);
  if (min_.isNull() || less(*v, min_)) min_ = *v;
  if (max_.isNull() || less(max_, *v)) max_ = *v;
  return true;
}

void ColumnState::merge(const ColumnState& later) {
  if (later.present_ == 0) return;
  present_ += later.present_;
  if (first_.isNull()) first_ = later.first_;
  last_ = later.last_;
  if (later.numbers_ == 0) return;
  const int64_t n = numbers_ + later.numbers_;
  const double delta = later.mean_ - mean_;
  m2_ += later.m2_ + delta * delta * static_cast<double>(numbers_) *
                         static_cast<double>(later.numbers_) / static_cast<double>(n);
  mean_ += delta * static_cast<double>(later.numbers_) / static_cast<double>(n);
  numbers_ = n;
  sum_ += later.sum_;
  if (all_int_ &&
      (!later.all_int_ || __builtin_add_overflow(int_sum_, later.int_sum_, &int_sum_))) {
    all_int_ = false;
  }
  if (min_.isNull() || less(later.min_, min_)) min_ = later.min_;
  if (max_.isNull() || less(max_, later.max_)) max_ = later.max_;
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
      return min_;
    case AggFunc::kMax:
      return max_;
    case AggFunc::kStddev:
      return numbers_ < 2 ? Value() : Value(std::sqrt(m2_ / static_cast<double>(numbers_ - 1)));
    case AggFunc::kFirst:
      return first_;
    case AggFunc::kLast:
      return last_;
  }
  return Value();
}

uint32_t Accumulator::add(const Event& event, std::span<const AggregateColumn> columns) {
  ++events_;
  Value scratch;
  uint32_t skipped = 0;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].countsEvents()) continue;
    if (!columns_[i].add(valueOf(event, columns[i], scratch), isNumeric(columns[i].func))) {
      ++skipped;
    }
  }
  return skipped;
}

void Accumulator::merge(const Accumulator& later) {
  events_ += later.events_;
  for (size_t i = 0; i < columns_.size(); ++i) columns_[i].merge(later.columns_[i]);
}

Value Accumulator::result(size_t i, const AggregateColumn& column) const {
  if (column.countsEvents()) return Value(events_);
  return columns_[i].result(column.func);
}

}  // namespace cepbus::plugins::window
