#include "plugins/window/window_detector.h"

#include <algorithm>
#include <span>
#include <utility>

#include "bus/core/pattern/expr_compiler.h"

namespace cepbus::plugins::window {
namespace {

// Division rounding towards minus infinity, for times before ts 0.
int64_t floorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

class ResultComposer final : public plugin::MatchComposer {
 public:
  // The window's result is the match's one event.
  EventPtr compose(const plugin::Match& match) const override { return match.event(0); }
};

const ResultComposer kComposer;

}  // namespace

WindowDetector::WindowDetector(PlanPtr plan, plugin::MatchSink& sink)
    : plan_(std::move(plan)), sink_(sink) {}

Status WindowDetector::onEvent(const EventPtr& event) {
  if (event->ts() >= due_) closeBefore(event->ts());
  if (event->type() != plan_->type || !passes(*event)) return Status::ok();
  Group* group = groupOf(*event);
  if (group == nullptr) {
    ++refused_events_;
    return Status::ok();
  }
  add(*group, *event);
  peak_open_ = std::max(peak_open_, open_);
  return Status::ok();
}

Status WindowDetector::onWatermark(Timestamp t) {
  if (t == kEndOfTime) {
    closeBefore(std::nullopt);
  } else if (t + 1 >= due_) {
    closeBefore(t + 1);
  }
  return Status::ok();
}

bool WindowDetector::passes(const Event& event) const {
  pattern::SlotBinding binding;
  binding.event = &event;
  const std::span<const pattern::SlotBinding> bindings(&binding, 1);
  return std::all_of(plan_->where.begin(), plan_->where.end(),
                     [&](const pattern::Conjunct& c) { return c.test(bindings); });
}

WindowDetector::Group* WindowDetector::groupOf(const Event& event) {
  key_.resize(plan_->group_by.size());
  for (size_t j = 0; j < key_.size(); ++j) {
    const Value* v = event.find(plan_->group_by[j]);
    if (v == nullptr) {
      key_[j] = Value();
    } else {
      key_[j] = *v;
    }
  }
  auto it = groups_.find(key_);
  if (it != groups_.end()) return &it->second;
  if (groups_.size() >= plan_->max_groups) return nullptr;
  Group& group = groups_[key_];
  group.seq = next_seq_++;
  group.key = key_;
  return &group;
}

int64_t WindowDetector::firstWindowHolding(int64_t pane) const {
  return ceilDiv(pane * plan_->pane + plan_->pane - plan_->length, plan_->every);
}

void WindowDetector::add(Group& group, const Event& event) {
  const Timestamp ts = event.ts();
  const AggregateLayout& aggregates = plan_->aggregates;
  if (plan_->kind == pattern::WindowKind::kSession) {
    if (!group.session) {
      group.session.emplace(aggregates);
      group.first = ts;
      ++open_;
      due_ = std::min(due_, ts + plan_->length + 1);
    }
    group.last = ts;
    group.session->add(event, aggregates);
    return;
  }
  const int64_t pane = floorDiv(ts, plan_->pane);
  if (group.panes.empty() || group.panes.back().index != pane) {
    if (group.panes.empty())
      group.next_window = std::max(group.next_window, firstWindowHolding(pane));
    group.panes.push_back(newPane(pane));
    ++open_;
  }
  group.panes.back().acc.add(event, aggregates);
  if (const auto due = dueOf(group)) due_ = std::min(due_, *due);
}

std::optional<Timestamp> WindowDetector::dueOf(const Group& group) const {
  if (plan_->kind == pattern::WindowKind::kSession) {
    if (!group.session) return std::nullopt;
    return group.last + plan_->length + 1;
  }
  if (group.panes.empty()) return std::nullopt;
  const int64_t k = std::max(group.next_window, firstWindowHolding(group.panes.front().index));
  return k * plan_->every + plan_->length;
}

void WindowDetector::closeWindows(Group& group, std::optional<Timestamp> now,
                                  std::vector<Closed>& out) {
  if (plan_->kind == pattern::WindowKind::kSession) {
    if (group.session && (!now || *now > group.last + plan_->length)) {
      out.push_back(
          Closed{group.first, group.last, group.seq, &group.key, std::move(*group.session)});
      group.session.reset();
      --open_;
    }
    return;
  }
  const int64_t p = plan_->pane;
  while (!group.panes.empty()) {
    const int64_t k = std::max(group.next_window, firstWindowHolding(group.panes.front().index));
    const Timestamp start = k * plan_->every;
    if (now && start + plan_->length > *now) {
      group.next_window = k;
      return;
    }
    const int64_t end_pane = (start + plan_->length) / p;  // exclusive; the window is whole panes
    out.push_back(Closed{start, start + plan_->length - 1, group.seq, &group.key,
                         windowState(group, end_pane)});
    group.next_window = k + 1;
    const int64_t kept_from = floorDiv(group.next_window * plan_->every, p);
    while (!group.panes.empty() && group.panes.front().index < kept_from) {
      dropFrontPane(group);
      --open_;
    }
  }
}

Accumulator WindowDetector::windowState(Group& group, int64_t end_pane) const {
  const AggregateLayout& aggregates = plan_->aggregates;
  if (!group.back) group.back.emplace(aggregates);
  // The window's panes are complete: no event comes at or after its end.
  for (; group.in < group.panes.size() && group.panes[group.in].index < end_pane; ++group.in)
    group.back->merge(group.panes[group.in].acc, aggregates);
  if (group.front == 0) return *group.back;
  Accumulator state = group.panes.front().suffix;
  state.merge(*group.back, aggregates);
  return state;
}

WindowDetector::Pane WindowDetector::newPane(int64_t index) {
  if (spare_.empty()) {
    return Pane{index, Accumulator(plan_->aggregates), Accumulator(plan_->aggregates)};
  }
  Pane pane = std::move(spare_.back());
  spare_.pop_back();
  pane.index = index;
  pane.acc.clear();
  return pane;
}

void WindowDetector::dropFrontPane(Group& group) {
  if (group.front == 0 && group.in > 0) {
    // The front stack ran out: the back stack's panes become it, each with
    // the merge of itself and the panes after it.
    const AggregateLayout& aggregates = plan_->aggregates;
    for (size_t i = group.in; i-- > 0;) {
      Pane& pane = group.panes[i];
      pane.suffix = pane.acc;
      if (i + 1 < group.in) pane.suffix.merge(group.panes[i + 1].suffix, aggregates);
    }
    group.front = group.in;
    group.back.reset();
  }
  if (spare_.size() < open_) spare_.push_back(std::move(group.panes.front()));
  group.panes.pop_front();
  if (group.front > 0) {
    --group.front;
    --group.in;
  }
}

void WindowDetector::closeBefore(std::optional<Timestamp> now) {
  std::vector<Closed> closed;
  due_ = INT64_MAX;
  for (auto& [key, group] : groups_) {
    closeWindows(group, now, closed);
    if (const auto due = dueOf(group)) due_ = std::min(due_, *due);
  }
  std::sort(closed.begin(), closed.end(), [](const Closed& a, const Closed& b) {
    return a.start != b.start ? a.start < b.start : a.seq < b.seq;
  });
  for (const Closed& c : closed) emit(c);
  // Forgotten only now: `closed` points at the keys.
  std::erase_if(groups_, [](const auto& entry) {
    return entry.second.panes.empty() && !entry.second.session;
  });
}

void WindowDetector::emit(const Closed& closed) {
  const Plan& plan = *plan_;
  EventBuilder row(plan.type);
  for (size_t i = 0; i < plan.columns.size(); ++i) {
    Value v = closed.acc.result(i, plan.columns[i], plan.aggregates);
    if (!v.isNull()) row.set(plan.column_names[i], std::move(v));
  }
  for (size_t j = 0; j < plan.key_names.size(); ++j) {
    if (!(*closed.key)[j].isNull()) row.set(plan.key_names[j], (*closed.key)[j]);
  }
  const EventPtr row_event = row.build();
  pattern::SlotBinding binding;
  binding.event = row_event.get();
  const std::span<const pattern::SlotBinding> bindings(&binding, 1);
  if (plan.having && !plan.having->test(bindings)) return;
  EventBuilder result(plan.returns.type);
  result.interval(closed.start, closed.end);
  plan.returns.apply(bindings, 1.0, result);
  const EventPtr composite = result.build();
  const EventPtr* events[] = {&composite};
  const uint32_t ends[] = {1};
  sink_.onMatch(plugin::Match(events, ends, &kComposer));
}

Result<std::string> WindowDetector::exportModel(std::string_view format) const {
  if (format != "json") {
    return Status::invalidArgument("the window engine exports its state as json only");
  }
  return "{\"groups\":" + std::to_string(groups_.size()) +
         ",\"max_groups\":" + std::to_string(plan_->max_groups) +
         ",\"refused_events\":" + std::to_string(refused_events_) +
         ",\"open\":" + std::to_string(open_) + "}";
}

std::optional<plugin::DetectorState> WindowDetector::state() const {
  return plugin::DetectorState{open_, peak_open_};
}

}  // namespace cepbus::plugins::window
