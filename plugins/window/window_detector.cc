#include "plugins/window/window_detector.h"

#include <algorithm>
#include <array>
#include <span>
#include <utility>

#include "bus/core/pattern/expr_compiler.h"

namespace cepbus::plugins::window {
namespace {

// Division rounding towards minus infinity, for times before ts 0.
int64_t floorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }
// The first multiple of d after t.
int64_t nextMultiple(int64_t t, int64_t d) { return (floorDiv(t, d) + 1) * d; }

// Asks for the cache lines of `*object` ahead of their use. A group's panes
// are far apart in memory and most are not touched for a long time: with
// many groups, the pane a close reads or a new pane's slot would otherwise
// miss cache every time.
template <typename T>
void prefetch(const T* object) {
  const char* bytes = reinterpret_cast<const char*>(object);
  for (size_t offset = 0; offset < sizeof(T); offset += 64) __builtin_prefetch(bytes + offset);
}

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
  consume(*event, std::nullopt);
  return Status::ok();
}

Status WindowDetector::onEvents(std::span<const EventPtr> events) {
  // Two stages ahead of the event being consumed: the key hash of the event
  // 2 * kLookahead places on is computed and its slot in the index
  // prefetched; the group of the one kLookahead places on, whose slot is in
  // cache by then, is prefetched.
  constexpr size_t kSpan = 2 * kLookahead;
  std::array<std::optional<uint64_t>, kSpan> hashes;  // by position modulo kSpan
  const size_t n = events.size();
  const auto hashAhead = [&](size_t i) {
    hashes[i % kSpan] =
        events[i]->type() == plan_->type ? std::optional(keyHash(*events[i])) : std::nullopt;
    if (hashes[i % kSpan]) index_.prefetchSlot(*hashes[i % kSpan]);
  };
  for (size_t i = 0; i < std::min(n, kSpan); ++i) hashAhead(i);
  for (size_t i = 0; i < n; ++i) {
    if (i + kLookahead < n && hashes[(i + kLookahead) % kSpan]) {
      prefetchGroup(*hashes[(i + kLookahead) % kSpan]);
    }
    const std::optional<uint64_t> hash = hashes[i % kSpan];
    if (i + kSpan < n) hashAhead(i + kSpan);
    consume(*events[i], hash);
  }
  return Status::ok();
}

void WindowDetector::prefetchGroup(uint64_t hash) const {
  // The group filed under the hash now may be gone or another by the time
  // the event's turn comes: a prefetch only asks, it reads nothing.
  if (const Group* group = index_.find(hash, [](const Group&) { return true; })) {
    __builtin_prefetch(group);
    __builtin_prefetch(reinterpret_cast<const char*>(group) + 64);
  }
}

void WindowDetector::consume(const Event& event, std::optional<uint64_t> hash) {
  if (event.ts() >= due_) closeBefore(event.ts());
  if (event.type() != plan_->type || !passes(event)) return;
  Group* group = groupOf(event, hash ? *hash : keyHash(event));
  if (group == nullptr) {
    ++refused_events_;
    return;
  }
  add(*group, event);
  peak_open_ = std::max(peak_open_, open_);
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

uint64_t WindowDetector::keyHash(const Event& event) const {
  // As ValueKeyHash hashes the key, from the values in the event.
  uint64_t hash = kKeyHashSeed;
  for (const Symbol attr : plan_->group_by)
    hash = combineKeyHash(hash, keyValueHash(keyValue(event, attr)));
  return hash;
}

const Value& WindowDetector::keyValue(const Event& event, Symbol attr) {
  static const Value kAbsent;
  const Value* v = event.find(attr);
  return v != nullptr ? *v : kAbsent;
}

WindowDetector::Group* WindowDetector::groupOf(const Event& event, uint64_t hash) {
  key_values_.resize(plan_->group_by.size());
  for (size_t j = 0; j < key_values_.size(); ++j)
    key_values_[j] = &keyValue(event, plan_->group_by[j]);
  Group* found = index_.find(hash, [&](const Group& group) {
    for (size_t j = 0; j < key_values_.size(); ++j) {
      const Value& a = group.keyAt(j);
      const Value& b = *key_values_[j];
      // Two strings (the usual key) are one key when equal; sameKeyValue,
      // a call out of the plugin, decides the rest (numbers, nulls, NaN).
      const bool same = a.kind() == Value::Kind::kString && b.kind() == Value::Kind::kString
                            ? a.asString() == b.asString()
                            : sameKeyValue(a, b);
      if (!same) return false;
    }
    return true;
  });
  if (found != nullptr) return found;
  if (groups_.size() >= plan_->max_groups) return nullptr;
  auto group = std::make_unique<Group>();
  group->seq = next_seq_++;
  group->key.reserve(key_values_.size());
  for (const Value* v : key_values_) group->key.push_back(*v);
  if (!key_values_.empty()) group->key_first = *key_values_[0];
  group->hash = hash;
  group->at = groups_.size();
  index_.insert(hash, group.get());
  groups_.push_back(std::move(group));
  return groups_.back().get();
}

void WindowDetector::forget(const Group& group) {
  index_.erase(group.hash, &group);
  const size_t at = group.at;
  if (at + 1 != groups_.size()) {
    groups_[at] = std::move(groups_.back());
    groups_[at]->at = at;
  }
  groups_.pop_back();
}

int64_t WindowDetector::firstWindowHolding(int64_t pane) const {
  // Window k is panes [k S', k S' + L') in panes; it holds `pane` from
  // k = ceil((pane + 1 - L') / S').
  const int64_t from = pane + 1 - plan_->length_panes;
  return plan_->every_panes == 1 ? from : ceilDiv(from, plan_->every_panes);
}

void WindowDetector::add(Group& group, const Event& event) {
  const Timestamp ts = event.ts();
  const AggregateLayout& aggregates = plan_->aggregates;
  if (plan_->kind == pattern::WindowKind::kSession) {
    if (!group.session) {
      group.session.emplace(aggregates);
      group.first = ts;
      group.last = ts;
      ++open_;
      due_ = std::min(due_, *dueOf(group));
    }
    group.last = ts;
    non_numeric_ += group.session->add(event, aggregates);
    if (plan_->emit_every == 0) {
      touchSession(group);
      due_ = *dueOf(*oldest_);  // exact: the oldest session ends first
    }
    return;
  }
  const int64_t pane = paneIndexOf(ts);
  if (group.panes.empty() || group.panes.back().index != pane) {
    const bool was_empty = group.panes.empty();
    if (was_empty) group.next_window = std::max(group.next_window, firstWindowHolding(pane));
    pushPane(group, pane, ts);
    // The group's next pane goes there, some events from now.
    if (const Pane* next = group.panes.nextSlot()) prefetch(next);
    ++open_;
    // When is due depends on the front pane only, which an event changes
    // only in a group with no pane (due_ counts the others already).
    if (was_empty) due_ = std::min(due_, *dueOf(group));
  }
  non_numeric_ += group.panes.back().acc.add(event, aggregates);
}

int64_t WindowDetector::paneIndexOf(Timestamp ts) {
  // Unsigned, so that a ts before the pane's start is far past its end too.
  if (!pane_known_ || static_cast<uint64_t>(ts) - static_cast<uint64_t>(pane_start_) >=
                          static_cast<uint64_t>(plan_->pane)) {
    pane_index_ = floorDiv(ts, plan_->pane);
    pane_start_ = pane_index_ * plan_->pane;
    pane_known_ = true;
  }
  return pane_index_;
}

std::optional<Timestamp> WindowDetector::dueOf(const Group& group) const {
  Timestamp due = 0;
  Timestamp first = 0;  // the group's oldest event still in an open window
  if (plan_->kind == pattern::WindowKind::kSession) {
    if (!group.session) return std::nullopt;
    due = group.last + plan_->length + 1;
    first = group.first;
  } else {
    if (group.panes.empty()) return std::nullopt;
    const int64_t k = std::max(group.next_window, firstWindowHolding(group.panes.front().index));
    due = k * plan_->every + plan_->length;
    first = group.panes.front().first;
  }
  if (plan_->emit_every > 0) {
    due = std::min(due, nextMultiple(std::max(partials_until_, first), plan_->emit_every));
  }
  return due;
}

void WindowDetector::reportPartials(const Group& group, std::optional<Timestamp> now,
                                    std::vector<Closed>& out) {
  if (plan_->kind == pattern::WindowKind::kSession) {
    if (!group.session) return;
    // Open up to its gap's end: a result at that point is the final one.
    const Timestamp open_until = group.last + plan_->length;
    partialsOf(group, group.first, group.first, now ? std::min(*now, open_until) : open_until,
               *group.session, out);
    return;
  }
  if (group.panes.empty()) return;
  const int64_t p = plan_->pane;
  for (int64_t k = std::max(group.next_window, firstWindowHolding(group.panes.front().index));;
       ++k) {
    const Timestamp start = k * plan_->every;
    if (now && start >= *now) return;  // no point of it has passed
    const Timestamp end = start + plan_->length;
    size_t i = 0;
    while (i < group.panes.size() && group.panes[i].index * p < start) ++i;
    if (i == group.panes.size()) return;  // this window and the later ones are empty
    if (group.panes[i].index * p >= end) continue;
    const Timestamp first = group.panes[i].first;
    Accumulator acc(plan_->aggregates);
    for (; i < group.panes.size() && group.panes[i].index * p < end; ++i)
      acc.merge(group.panes[i].acc, plan_->aggregates);
    partialsOf(group, start, first, now ? std::min(*now, end - 1) : end - 1, acc, out);
  }
}

void WindowDetector::partialsOf(const Group& group, Timestamp start, Timestamp first,
                                Timestamp last_point, const Accumulator& acc,
                                std::vector<Closed>& out) {
  const int64_t d = plan_->emit_every;
  for (Timestamp point = nextMultiple(std::max(partials_until_, first), d); point <= last_point;
       point += d) {
    // A session's result so far ends at its last event, as its final one does.
    const Timestamp ts = plan_->kind == pattern::WindowKind::kSession ? group.last : point - 1;
    close(Closed{start, ts, group.seq, &group, 0, true}, acc, out);
  }
}

Timestamp WindowDetector::closeWindows(Group& group, std::optional<Timestamp> now,
                                       std::vector<Closed>& out) {
  if (plan_->kind == pattern::WindowKind::kSession) {
    if (group.session && (!now || *now > group.last + plan_->length)) {
      close(Closed{group.first, group.last, group.seq, &group, 0}, *group.session, out);
      group.session.reset();
      --open_;
    }
    return group.session ? group.last + plan_->length + 1 : INT64_MAX;
  }
  while (!group.panes.empty()) {
    const int64_t k = std::max(group.next_window, firstWindowHolding(group.panes.front().index));
    const Timestamp start = k * plan_->every;
    if (now && start + plan_->length > *now) {
      group.next_window = k;
      return start + plan_->length;
    }
    // In panes, exclusive: the window is whole panes.
    const int64_t end_pane = k * plan_->every_panes + plan_->length_panes;
    close(Closed{start, start + plan_->length - 1, group.seq, &group, 0},
          windowState(group, end_pane), out);
    group.next_window = k + 1;
    const int64_t kept_from = group.next_window * plan_->every_panes;
    while (!group.panes.empty() && group.panes.front().index < kept_from) {
      dropFrontPane(group);
      --open_;
    }
  }
  return INT64_MAX;
}

const Accumulator& WindowDetector::windowState(Group& group, int64_t end_pane) {
  const AggregateLayout& aggregates = plan_->aggregates;
  if (!group.back) group.back.emplace(aggregates);
  // The window's panes are complete: no event comes at or after its end.
  for (; group.in < group.panes.size() && group.panes[group.in].index < end_pane; ++group.in)
    group.back->merge(group.panes[group.in].acc, aggregates);
  if (group.front == 0) return *group.back;
  // Assigned, not constructed: the storage of the last window's merge is reused.
  if (merged_) {
    *merged_ = suffixOf(group.panes.front());
  } else {
    merged_.emplace(suffixOf(group.panes.front()));
  }
  merged_->merge(*group.back, aggregates);
  return *merged_;
}

void WindowDetector::close(const Closed& closed, const Accumulator& acc, std::vector<Closed>& out) {
  const Plan& plan = *plan_;
  if (emit_at_close_) {
    emit(closed, [&](size_t i, bool /*takes*/) -> Value {
      if (i < plan.columns.size()) return acc.result(i, plan.columns[i], plan.aggregates);
      return closed.group->keyAt(i - plan.columns.size());
    });
    return;
  }
  out.push_back(closed);
  out.back().first = values_.size();
  for (size_t i = 0; i < plan.columns.size(); ++i)
    values_.push_back(acc.result(i, plan.columns[i], plan.aggregates));
}

void WindowDetector::pushPane(Group& group, int64_t index, Timestamp first) {
  Pane& pane = group.panes.pushBack([&] {
    return Pane{0, 0, Accumulator(plan_->aggregates),
                plan_->emit_every > 0 ? std::make_unique<Accumulator>(plan_->aggregates) : nullptr};
  });
  pane.index = index;
  pane.first = first;
  pane.acc.clear();
}

void WindowDetector::dropFrontPane(Group& group) {
  if (group.front == 0 && group.in > 0) {
    // The front stack ran out: the back stack's panes become it, each with
    // the merge of itself and the panes after it.
    const AggregateLayout& aggregates = plan_->aggregates;
    for (size_t i = group.in; i-- > 0;) {
      Pane& pane = group.panes[i];
      Accumulator& suffix = suffixOf(pane);
      if (&suffix != &pane.acc) suffix = pane.acc;
      if (i + 1 < group.in) suffix.merge(suffixOf(group.panes[i + 1]), aggregates);
    }
    group.front = group.in;
    group.back.reset();
  }
  group.panes.popFront();
  if (group.front > 0) {
    --group.front;
    --group.in;
  }
}

void WindowDetector::touchSession(Group& group) {
  if (newest_ == &group) return;
  if (group.newer != nullptr || oldest_ == &group) unlinkSession(group);
  group.older = newest_;
  group.newer = nullptr;
  if (newest_ != nullptr) newest_->newer = &group;
  newest_ = &group;
  if (oldest_ == nullptr) oldest_ = &group;
}

void WindowDetector::unlinkSession(Group& group) {
  (group.older != nullptr ? group.older->newer : oldest_) = group.newer;
  (group.newer != nullptr ? group.newer->older : newest_) = group.older;
  group.older = nullptr;
  group.newer = nullptr;
}

void WindowDetector::closeSessionsBefore(std::optional<Timestamp> now) {
  std::vector<Closed>& closed = closed_;
  closed.clear();
  while (oldest_ != nullptr && (!now || *now > oldest_->last + plan_->length)) {
    Group& group = *oldest_;
    unlinkSession(group);
    close(Closed{group.first, group.last, group.seq, &group, 0}, *group.session, closed);
    group.session.reset();
    --open_;
  }
  due_ = oldest_ != nullptr ? *dueOf(*oldest_) : INT64_MAX;
  emitInOrder(closed);
  // Forgotten only now: `closed` points at the groups.
  for (const Closed& c : closed) forget(*c.group);
}

void WindowDetector::closeBefore(std::optional<Timestamp> now) {
  const bool partials = plan_->emit_every > 0;
  if (plan_->kind == pattern::WindowKind::kSession && !partials) {
    closeSessionsBefore(now);
    return;
  }
  if (!now && !partials) {
    // The end of time closes every window: round by round, the windows
    // ending first, so that each round comes out in order already (closing
    // each group's windows at once would leave all of them to sort).
    while (due_ != INT64_MAX) closeBefore(due_);
    return;
  }
  // Window ends are S apart, so when `now` is less than S past the first
  // one due, every window closing ends there: one per group at most, and
  // in the order of groups_, which is the groups' order of appearance
  // (only sessions forget a group out of place). Those come out as they
  // close, not collected and checked for order.
  int64_t past_due = 0;
  emit_at_close_ =
      !partials && now && !__builtin_sub_overflow(*now, due_, &past_due) && past_due < plan_->every;
  closed_.clear();
  due_ = INT64_MAX;
  bool emptied = false;
  for (size_t i = 0; i < groups_.size(); ++i) {
    // The group after next, and the next group's oldest pane, which its
    // windows read first.
    if (i + 2 < groups_.size()) prefetch(groups_[i + 2].get());
    if (i + 1 < groups_.size() && !groups_[i + 1]->panes.empty()) {
      prefetch(&groups_[i + 1]->panes.front());
    }
    Group& group = *groups_[i];
    if (partials) {
      reportPartials(group, now, closed_);
    }
    const Timestamp due = closeWindows(group, now, closed_);
    // With partials, when a group is due depends on partials_until_, set below.
    if (!partials) {
      due_ = std::min(due_, due);
      emptied |= due == INT64_MAX;
    }
  }
  if (partials) {
    // A new stream may follow the end of time.
    partials_until_ = now.value_or(INT64_MIN);
    for (const auto& group : groups_) {
      if (const auto due = dueOf(*group)) {
        due_ = std::min(due_, *due);
      } else {
        emptied = true;
      }
    }
  }
  emit_at_close_ = false;
  emitInOrder(closed_);
  if (!emptied) return;
  // Forgotten only now: `closed_` pointed at the groups.
  // In place, keeping the others' order (see emitInOrder).
  size_t kept = 0;
  for (std::unique_ptr<Group>& group : groups_) {
    if (group->panes.empty() && !group->session) {
      index_.erase(group->hash, group.get());
    } else {
      group->at = kept;
      groups_[kept++] = std::move(group);
    }
  }
  groups_.resize(kept);
}

void WindowDetector::emitInOrder(std::vector<Closed>& closed) {
  // In time order: by end (a window's partial results end before its final
  // one, a session's no later), window start, partial before final, group.
  const auto before = [](const Closed& a, const Closed& b) {
    if (a.end != b.end) return a.end < b.end;
    if (a.start != b.start) return a.start < b.start;
    if (a.partial != b.partial) return a.partial;
    return a.seq < b.seq;
  };
  // Often in order already: groups_ keeps the order of first appearance
  // until a group is forgotten, and a group's results end in order.
  if (!std::is_sorted(closed.begin(), closed.end(), before)) {
    std::sort(closed.begin(), closed.end(), before);
  }
  for (const Closed& c : closed) emit(c);
  values_.clear();
}

// The id names the result's group and window, early or final, not the
// moment it was computed: a result computed again from the same events (a
// cluster node replaying a partition's messages after a takeover) has the
// same id, so a consumer recognises the duplicate, as it does a pattern's
// composite by its constituents' ids.
EventId WindowDetector::resultId(const Closed& closed) {
  uint64_t h = closed.group->hash;
  h = combineKeyHash(h, static_cast<uint64_t>(closed.start));
  h = combineKeyHash(h, static_cast<uint64_t>(closed.end));
  return combineKeyHash(h, closed.partial ? 1 : 0);
}

void WindowDetector::emit(const Closed& closed) {
  const size_t columns = plan_->columns.size();
  emit(closed, [&](size_t i, bool takes) -> Value {
    if (i >= columns) return closed.group->keyAt(i - columns);
    // values_ is cleared once the results are out: the last reader may take it.
    Value& v = values_[closed.first + i];
    if (takes) return std::move(v);
    return v;
  });
}

template <typename Column>
void WindowDetector::emit(const Closed& closed, const Column& column) {
  const Plan& plan = *plan_;
  EventBuilder result(plan.returns.type);
  result.reserveAttributes(plan.returns.items.size() + (plan.emit_every > 0 ? 1 : 0));
  result.interval(closed.start, closed.end).id(resultId(closed));
  if (plan.direct_returns) {
    for (const Plan::DirectItem& item : *plan.direct_returns) {
      Value v = column(item.source, item.takes);
      if (!v.isNull()) result.set(NameHold::of(item.name), std::move(v));
    }
  } else {
    const size_t row_values = plan.columns.size() + plan.key_names.size();
    EventBuilder row(plan.type);
    row.reserveAttributes(row_values);
    for (size_t i = 0; i < row_values; ++i) {
      Value v = column(i, false);
      if (!v.isNull())
        row.set(i < plan.columns.size() ? plan.column_names[i]
                                        : plan.key_names[i - plan.columns.size()],
                std::move(v));
    }
    const EventPtr row_event = row.build();
    pattern::SlotBinding binding;
    binding.event = row_event.get();
    const std::span<const pattern::SlotBinding> bindings(&binding, 1);
    if (plan.having && !plan.having->test(bindings)) return;
    plan.returns.apply(bindings, 1.0, result);
  }
  if (plan.emit_every > 0) result.set(plan.partial_name, Value(closed.partial));
  const EventPtr composite = result.build();
  const EventPtr* events[] = {&composite};
  const uint32_t ends[] = {1};
  sink_.onMatch(plugin::Match(events, ends, &kComposer));
}

Result<std::string> WindowDetector::exportModel(std::string_view format) const {
  const std::pair<const char*, uint64_t> counters[] = {
      {"groups", groups_.size()},
      {"max_groups", plan_->max_groups},
      {"refused_events", refused_events_},
      {"non_numeric", non_numeric_},
      {"open", open_},
  };
  std::string out;
  if (format == plugin::kCountersFormat) {
    for (const auto& [name, value] : counters) {
      out.append(name).append(" ").append(std::to_string(value)).append("\n");
    }
    return out;
  }
  if (format != "json") {
    return Status::invalidArgument(std::string("the window engine exports its state as json or ") +
                                   plugin::kCountersFormat + ", not " + std::string(format));
  }
  for (const auto& [name, value] : counters) {
    out.append(out.empty() ? "{\"" : ",\"")
        .append(name)
        .append("\":")
        .append(std::to_string(value));
  }
  return out + "}";
}

std::optional<plugin::DetectorState> WindowDetector::state() const {
  return plugin::DetectorState{open_, peak_open_, 0, 0};
}

// --- snapshots ----------------------------------------------------------------

void WindowDetector::snapshotGroup(const Group& group, plugin::SnapshotWriter& out) const {
  out.varint(group.seq);
  for (const Value& v : group.key) out.value(v);
  out.varint(group.panes.size());
  for (size_t i = 0; i < group.panes.size(); ++i) {
    const Pane& pane = group.panes[i];
    out.signedVarint(pane.index);
    out.signedVarint(pane.first);
    pane.acc.save(out);
    out.flag(pane.suffix != nullptr);
    if (pane.suffix) pane.suffix->save(out);
  }
  out.varint(group.front);
  out.varint(group.in);
  out.flag(group.back.has_value());
  if (group.back) group.back->save(out);
  out.signedVarint(group.next_window);
  out.flag(group.session.has_value());
  if (group.session) group.session->save(out);
  out.signedVarint(group.first);
  out.signedVarint(group.last);
}

void WindowDetector::restoreGroup(Group& group, plugin::SnapshotReader& in) {
  group.seq = in.varint();
  uint64_t hash = kKeyHashSeed;
  for (size_t j = 0; j < plan_->group_by.size(); ++j) {
    group.key.push_back(in.value());
    hash = combineKeyHash(hash, keyValueHash(group.key.back()));
  }
  if (!group.key.empty()) group.key_first = group.key[0];
  group.hash = hash;
  const uint64_t panes = in.count();
  for (uint64_t i = 0; i < panes && in.ok(); ++i) {
    const int64_t index = in.signedVarint();
    const Timestamp first = in.signedVarint();
    pushPane(group, index, first);
    Pane& pane = group.panes.back();
    pane.acc.load(in);
    if (in.flag() != (pane.suffix != nullptr)) in.fail("a pane's suffix state");
    if (pane.suffix) pane.suffix->load(in);
  }
  group.front = in.varint();
  group.in = in.varint();
  if (group.front > group.in || group.in > group.panes.size()) in.fail("a group's pane stacks");
  if (in.flag()) {
    group.back.emplace(plan_->aggregates);
    group.back->load(in);
  }
  group.next_window = in.signedVarint();
  if (in.flag()) {
    group.session.emplace(plan_->aggregates);
    group.session->load(in);
  }
  group.first = in.signedVarint();
  group.last = in.signedVarint();
}

Status WindowDetector::snapshot(plugin::SnapshotWriter& out) const {
  out.section("window", kSnapshotVersion, plan_->state_shape);
  out.varint(groups_.size());
  for (const auto& group : groups_) snapshotGroup(*group, out);
  // The open sessions from the oldest, by their place in groups_.
  uint64_t sessions = 0;
  for (const Group* g = oldest_; g != nullptr; g = g->newer) ++sessions;
  out.varint(sessions);
  for (const Group* g = oldest_; g != nullptr; g = g->newer) out.varint(g->at);
  out.varint(next_seq_);
  out.signedVarint(due_);
  out.signedVarint(partials_until_);
  out.varint(open_);
  out.varint(peak_open_);
  out.varint(refused_events_);
  out.varint(non_numeric_);
  return Status::ok();
}

Status WindowDetector::restore(plugin::SnapshotReader& in) {
  if (!in.section("window", kSnapshotVersion, plan_->state_shape)) return in.status();
  const uint64_t groups = in.count();
  if (groups > plan_->max_groups) in.fail("more groups than max_groups");
  for (uint64_t i = 0; i < groups && in.ok(); ++i) {
    auto group = std::make_unique<Group>();
    restoreGroup(*group, in);
    group->at = groups_.size();
    index_.insert(group->hash, group.get());
    groups_.push_back(std::move(group));
  }
  const uint64_t sessions = in.count();
  for (uint64_t i = 0; i < sessions && in.ok(); ++i) {
    const uint64_t at = in.varint();
    if (at >= groups_.size() || groups_[at]->newer != nullptr || newest_ == groups_[at].get()) {
      in.fail("an open session of no group");
      break;
    }
    touchSession(*groups_[at]);
  }
  next_seq_ = in.varint();
  due_ = in.signedVarint();
  partials_until_ = in.signedVarint();
  open_ = in.varint();
  peak_open_ = in.varint();
  refused_events_ = in.varint();
  non_numeric_ = in.varint();
  return in.status();
}

}  // namespace cepbus::plugins::window
