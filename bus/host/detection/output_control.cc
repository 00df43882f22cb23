#include "bus/host/detection/output_control.h"

#include <algorithm>
#include <string>
#include <utility>

#include "bus/host/detection/gate_rule.h"
#include "bus/host/detection/last_every_rule.h"
#include "bus/host/detection/match_key.h"

namespace cepbus::detection {
namespace {

// The state version of the "output control" section.
constexpr uint32_t kSnapshotVersion = 1;

// How long after a match's end it may still be reported: a trailing
// negation's match is decided when event time passes its first event plus
// WITHIN, so its rules wait that long before taking the matches ending at a
// time in order.
Timestamp reportDelay(const pattern::Query& query) {
  const pattern::PatternNode& p = *query.pattern;
  const bool trailing_not = p.kind == pattern::PatternKind::kSeq && !p.children.empty() &&
                            p.children.back()->kind == pattern::PatternKind::kNot;
  return trailing_not && query.within ? *query.within : 0;
}

}  // namespace

bool hasOutputControl(const pattern::Query& query) {
  return query.emit.has_value() || query.skip_past_last_event;
}

Result<std::unique_ptr<OutputControl>> OutputControl::create(
    std::span<const plugin::NamedQuery> queries, MemberRelay& out) {
  std::unique_ptr<OutputControl> control(new OutputControl());
  control->members_.resize(queries.size());
  for (size_t i = 0; i < queries.size(); ++i) {
    const pattern::Query& query = queries[i].query;
    Member& member = control->members_[i];
    member.output = std::make_unique<MemberOutput>(out, i);
    const Timestamp delay = reportDelay(query);
    // Built from the output back, each rule reporting to the one after it.
    plugin::MatchSink* next = member.output.get();
    if (query.emit) {
      MatchKeyer keyer;
      if (query.emit->per) {
        auto per = MatchKeyer::ofExpr(query, *query.emit->per);
        if (!per) {
          const std::string name = queries[i].name.empty() ? "" : " '" + queries[i].name + "'";
          return Status::invalidArgument("query" + name +
                                         ": EMIT ... PER: " + per.status().message());
        }
        keyer = std::move(per).value();
      }
      if (query.emit->kind == pattern::EmitKind::kFirst) {
        member.rules.push_back(
            GateRule::firstEvery(query.emit->every, std::move(keyer), delay, *next));
      } else {
        member.rules.push_back(
            std::make_unique<LastEveryRule>(query.emit->every, std::move(keyer), delay, *next));
      }
      next = member.rules.back().get();
    }
    if (query.skip_past_last_event) {
      member.rules.push_back(GateRule::skipPastLastEvent(
          MatchKeyer::ofPartition(query.partition_by), query.within, delay, *next));
      next = member.rules.back().get();
    }
    // Built backwards: put them in the order matches go through.
    std::reverse(member.rules.begin(), member.rules.end());
    member.entry = next;
  }
  return control;
}

OutputControl::~OutputControl() = default;

std::unique_ptr<plugin::GuardedDetector> OutputControl::wrap(
    std::unique_ptr<OutputControl> control, std::unique_ptr<plugin::Detector> inner) {
  control->inner_ = std::move(inner);
  return std::make_unique<plugin::GuardedDetector>("output control", nullptr, std::move(control));
}

void OutputControl::onMatch(size_t member, const plugin::Match& match) {
  if (member < members_.size()) members_[member].entry->onMatch(match);
}

void OutputControl::settle() {
  const Timestamp t = std::min(time_, reported_to_);
  if (t == INT64_MIN) return;
  for (Member& member : members_) {
    for (const std::unique_ptr<OutputRule>& rule : member.rules) rule->onTime(t);
  }
}

Status OutputControl::beforeOffering(Timestamp ts) {
  if (time_ == kEndOfTime) {
    // After the end of time, events are a new stream whose time starts over.
    time_ = INT64_MIN;
    reported_to_ = INT64_MIN;
    newest_ = INT64_MIN;
  }
  if (ts <= newest_) return Status::ok();
  // Every event before `ts` has been offered and none at it yet: a flush now
  // makes the engine report every match ending before `ts` without cutting
  // the events of one ts in two (which an engine may treat as two steps).
  // Also when no rule waits yet: an engine that constructs in batches (the
  // nfa on the bus) may not have reported the match a rule would wait for,
  // and the watermark alone, which may come after the last event, cannot
  // flush without cutting the newest ts in two.
  Status s = Status::ok();
  if (newest_ != INT64_MIN) {
    s = inner_->flush();
    reported_to_ = ts - 1;
    settle();
  }
  newest_ = ts;
  return s;
}

Status OutputControl::onEvent(const EventPtr& event) {
  Status before = beforeOffering(event->ts());
  Status s = inner_->onEvent(event);
  settle();
  return before ? s : before;
}

Status OutputControl::onEvents(std::span<const EventPtr> events) {
  if (events.empty()) return inner_->onEvents(events);
  // Each run of one ts goes in on its own, after beforeOffering(): a batch
  // spanning several ts (the bus hands over everything its reorder buffer
  // released at once) must let the rules decide at each ts boundary in it,
  // or what ends before its last ts waits for an event that may never come.
  Status first = Status::ok();
  size_t from = 0;
  while (from < events.size()) {
    const Timestamp ts = events[from]->ts();
    size_t to = from + 1;
    while (to < events.size() && events[to]->ts() == ts) ++to;
    Status before = beforeOffering(ts);
    Status s = inner_->onEvents(events.subspan(from, to - from));
    newest_ = std::max(newest_, ts);
    if (first) first = before ? std::move(s) : std::move(before);
    from = to;
  }
  settle();
  return first;
}

Status OutputControl::flush() {
  // A pause: more events of the newest ts may follow, so the rules decide
  // nothing new from it.
  return inner_->flush();
}

Status OutputControl::onWatermark(Timestamp t) {
  Status s = inner_->onWatermark(t);
  time_ = std::max(time_, t);
  if (t == kEndOfTime) {
    // Every match is in after a last flush; the rules decide them all.
    if (s) s = inner_->flush();
    reported_to_ = kEndOfTime;
  } else if (newest_ != INT64_MIN && newest_ <= t && reported_to_ < t) {
    // No event at or before t is still to come and every one offered is:
    // a flush cuts no ts in two (time moving on with no event, a wall clock).
    if (s) s = inner_->flush();
    reported_to_ = t;
  }
  settle();
  return s;
}

Result<std::string> OutputControl::exportModel(std::string_view format) const {
  return inner_->exportModel(format);
}

std::optional<plugin::DetectorState> OutputControl::state() const { return inner_->state(); }

uint64_t OutputControl::suppressed(size_t member) const {
  uint64_t n = 0;
  if (member < members_.size()) {
    for (const std::unique_ptr<OutputRule>& rule : members_[member].rules) n += rule->suppressed();
  }
  return n;
}

Status OutputControl::snapshot(plugin::SnapshotWriter& out) const {
  out.section("output control", kSnapshotVersion);
  out.signedVarint(time_);
  out.signedVarint(newest_);
  out.signedVarint(reported_to_);
  out.varint(members_.size());
  for (const Member& member : members_) {
    for (const std::unique_ptr<OutputRule>& rule : member.rules) rule->save(out);
  }
  return inner_->snapshot(out);
}

Status OutputControl::restore(plugin::SnapshotReader& in) {
  if (!in.section("output control", kSnapshotVersion)) return in.status();
  time_ = in.signedVarint();
  newest_ = in.signedVarint();
  reported_to_ = in.signedVarint();
  if (in.varint() != members_.size()) in.fail("output control of another number of queries");
  for (Member& member : members_) {
    for (const std::unique_ptr<OutputRule>& rule : member.rules) {
      if (in.ok()) rule->load(in);
    }
  }
  if (!in.ok()) return in.status();
  return inner_->restore(in);
}

}  // namespace cepbus::detection
