#include "bus/host/detection/edge_negation.h"

#include <algorithm>
#include <string>
#include <utility>

namespace cepbus::detection {
namespace {

// The state version of the "edge negation" section.
constexpr uint32_t kSnapshotVersion = 1;

bool isNot(const pattern::PatternPtr& n) { return n->kind == pattern::PatternKind::kNot; }

}  // namespace

bool hasEdgeNegation(const pattern::Query& query) {
  const pattern::PatternNode& p = *query.pattern;
  if (p.kind != pattern::PatternKind::kSeq || p.children.empty()) return false;
  return isNot(p.children.front()) || isNot(p.children.back());
}

pattern::Query withoutEdgeNegation(const pattern::Query& query) {
  if (!hasEdgeNegation(query)) return query;
  const auto& items = query.pattern->children;
  const auto first = std::find_if_not(items.begin(), items.end(), isNot);
  const auto last = std::find_if_not(items.rbegin(), items.rend(), isNot).base();
  std::vector<std::string> edge;  // the edge NOTs' variables
  for (auto it = items.begin(); it != items.end(); ++it) {
    if ((it < first || it >= last) && !(*it)->var.empty()) edge.push_back((*it)->var);
  }
  pattern::Query out = query;
  auto seq = std::make_shared<pattern::PatternNode>(*query.pattern);
  seq->children.assign(first, last);
  out.pattern = std::move(seq);
  std::erase_if(out.variables, [&](const pattern::Variable& v) {
    return std::find(edge.begin(), edge.end(), v.name) != edge.end();
  });
  out.where = nullptr;
  for (const pattern::ExprPtr& conjunct : pattern::splitConjuncts(query.where)) {
    const std::vector<std::string> vars = pattern::variablesOf(*conjunct);
    const bool mentions_edge = std::any_of(vars.begin(), vars.end(), [&](const std::string& v) {
      return std::find(edge.begin(), edge.end(), v) != edge.end();
    });
    if (mentions_edge) continue;
    if (out.where == nullptr) {
      out.where = conjunct;
      continue;
    }
    auto both = std::make_shared<pattern::Expr>();
    both->kind = pattern::ExprKind::kBinary;
    both->binary = pattern::BinaryOp::kAnd;
    both->pos = out.where->pos;
    both->lhs = out.where;
    both->rhs = conjunct;
    out.where = std::move(both);
  }
  if (out.context == pattern::Context::kUnspecified) out.context = pattern::Context::kUnrestricted;
  return out;
}

Result<std::unique_ptr<plugin::GuardedDetector>> EdgeNegation::makeDetector(
    std::span<const plugin::NamedQuery> queries, const MakeEngineDetector& make,
    plugin::MatchSink& one, plugin::MultiMatchSink& many, bool several) {
  auto full = make(queries, one, many);
  if (full || std::none_of(queries.begin(), queries.end(),
                           [](const plugin::NamedQuery& q) { return hasEdgeNegation(q.query); })) {
    return full;
  }
  auto negation = create(queries, one, many, several);
  if (!negation) return negation.status();
  std::vector<plugin::NamedQuery> stripped;
  for (const plugin::NamedQuery& q : queries) {
    stripped.push_back({q.name, withoutEdgeNegation(q.query)});
  }
  // Its refusal of the rest names what the engine still does not run.
  auto inner = make(stripped, **negation, **negation);
  if (!inner) return inner.status();
  return wrap(std::move(negation).value(), std::move(inner).value());
}

Result<std::unique_ptr<EdgeNegation>> EdgeNegation::create(
    std::span<const plugin::NamedQuery> queries, plugin::MatchSink& one,
    plugin::MultiMatchSink& many, bool several) {
  std::unique_ptr<EdgeNegation> negation(new EdgeNegation(one, many, several));
  negation->members_.resize(queries.size());
  for (size_t i = 0; i < queries.size(); ++i) {
    Member& member = negation->members_[i];
    member.output = std::make_unique<MemberOutput>(*negation, i);
    member.entry = member.output.get();
    if (!hasEdgeNegation(queries[i].query)) continue;
    auto rule = AbsenceRule::create(queries[i].query, *member.output);
    if (!rule) {
      const std::string name = queries[i].name.empty() ? "" : "query '" + queries[i].name + "': ";
      return Status::invalidArgument(name + rule.status().message());
    }
    member.rule = std::move(rule).value();
    member.entry = member.rule.get();
    negation->window_ = std::max(negation->window_, member.rule->window());
  }
  return negation;
}

EdgeNegation::~EdgeNegation() = default;

std::unique_ptr<plugin::GuardedDetector> EdgeNegation::wrap(
    std::unique_ptr<EdgeNegation> negation, std::unique_ptr<plugin::Detector> inner) {
  negation->inner_ = std::move(inner);
  return std::make_unique<plugin::GuardedDetector>("edge negation", nullptr, std::move(negation));
}

void EdgeNegation::MemberOutput::onMatch(const plugin::Match& match) {
  if (owner_.several_) {
    owner_.many_.onMatch(member_, match);
  } else {
    owner_.one_.onMatch(match);
  }
}

void EdgeNegation::onMatch(size_t member, const plugin::Match& match) {
  if (member < members_.size()) members_[member].entry->onMatch(match);
}

Status EdgeNegation::flushAndForget() {
  Status s = inner_->flush();
  reported_to_ = newest_;
  for (Member& member : members_) {
    if (member.rule != nullptr) member.rule->forget(reported_to_);
  }
  return s;
}

Status EdgeNegation::beforeOffering(Timestamp ts) {
  if (ended_) {
    // After the end of time, events are a new stream whose time starts over.
    ended_ = false;
    newest_ = INT64_MIN;
    reported_to_ = INT64_MIN;
    for (Member& member : members_) {
      if (member.rule != nullptr) member.rule->restart();
    }
  }
  Status s = Status::ok();
  // With no watermark coming (a replay without maximum delay), a flush at a
  // ts boundary once per WITHIN keeps what the rules hold bounded by it.
  if (ts > newest_ && newest_ != INT64_MIN &&
      (reported_to_ == INT64_MIN || newest_ - reported_to_ > window_)) {
    s = flushAndForget();
  }
  return s;
}

Status EdgeNegation::onEvent(const EventPtr& event) {
  Status before = beforeOffering(event->ts());
  for (Member& member : members_) {
    if (member.rule != nullptr) member.rule->onEvent(event);
  }
  newest_ = std::max(newest_, event->ts());
  Status s = inner_->onEvent(event);
  return before ? s : before;
}

Status EdgeNegation::onEvents(std::span<const EventPtr> events) {
  if (events.empty()) return inner_->onEvents(events);
  // The rules see the whole batch first: a negated event later in it lies
  // after the end of every match the batch reports, where only a trailing
  // NOT looks, and it would cancel that match when it came anyway.
  Status before = beforeOffering(events.front()->ts());
  for (const EventPtr& event : events) {
    for (Member& member : members_) {
      if (member.rule != nullptr) member.rule->onEvent(event);
    }
    newest_ = std::max(newest_, event->ts());
  }
  Status s = inner_->onEvents(events);
  return before ? s : before;
}

Status EdgeNegation::flush() { return inner_->flush(); }

Status EdgeNegation::onWatermark(Timestamp t) {
  Status s = inner_->onWatermark(t);
  if (t == kEndOfTime) {
    ended_ = true;
    if (Status f = flushAndForget(); s) s = std::move(f);
  } else if (newest_ != INT64_MIN && newest_ <= t && reported_to_ < newest_) {
    // Every event up to t is in: a flush cuts no ts in two.
    if (Status f = flushAndForget(); s) s = std::move(f);
  }
  for (Member& member : members_) {
    if (member.rule != nullptr) member.rule->onTime(t);
  }
  return s;
}

Result<std::string> EdgeNegation::exportModel(std::string_view format) const {
  return inner_->exportModel(format);
}

std::optional<plugin::DetectorState> EdgeNegation::state() const { return inner_->state(); }

size_t EdgeNegation::held() const {
  size_t n = 0;
  for (const Member& member : members_) n += member.rule != nullptr ? member.rule->held() : 0;
  return n;
}

size_t EdgeNegation::kept() const {
  size_t n = 0;
  for (const Member& member : members_) n += member.rule != nullptr ? member.rule->kept() : 0;
  return n;
}

Status EdgeNegation::snapshot(plugin::SnapshotWriter& out) const {
  out.section("edge negation", kSnapshotVersion);
  out.signedVarint(newest_);
  out.signedVarint(reported_to_);
  out.flag(ended_);
  out.varint(members_.size());
  for (const Member& member : members_) {
    out.flag(member.rule != nullptr);
    if (member.rule != nullptr) member.rule->save(out);
  }
  return inner_->snapshot(out);
}

Status EdgeNegation::restore(plugin::SnapshotReader& in) {
  if (!in.section("edge negation", kSnapshotVersion)) return in.status();
  newest_ = in.signedVarint();
  reported_to_ = in.signedVarint();
  ended_ = in.flag();
  if (in.varint() != members_.size()) in.fail("edge negation of another number of queries");
  for (Member& member : members_) {
    if (!in.ok()) break;
    if (in.flag() != (member.rule != nullptr)) {
      in.fail("edge negation rules of other queries");
      break;
    }
    if (member.rule != nullptr) member.rule->load(in);
  }
  if (!in.ok()) return in.status();
  return inner_->restore(in);
}

}  // namespace cepbus::detection
