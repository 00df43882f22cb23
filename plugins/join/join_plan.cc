#include "plugins/join/join_plan.h"

#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>

#include "bus/core/pattern/window_query.h"

namespace cepbus::plugins::join {
namespace {

using pattern::BinaryOp;
using pattern::ExprKind;
using pattern::PatternKind;

Status bad(const std::string& msg) { return Status::invalidArgument("join engine: " + msg); }

std::string at(const pattern::SourcePos& pos) {
  return "line " + std::to_string(pos.line) + ", column " + std::to_string(pos.column) + ": ";
}

bool parseDouble(const std::string& s, double& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(out);
}

bool parseInt(const std::string& s, int64_t& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

Status intOption(const plugin::DetectorOptions& o, const char* name, int64_t min, int64_t max,
                 std::optional<int64_t>& out) {
  const std::string* v = o.find(name);
  if (v == nullptr) return Status::ok();
  int64_t x = 0;
  if (!parseInt(*v, x) || x < min || x > max) {
    return bad("option " + std::string(name) + "=" + *v + ": expected an integer in [" +
               std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  out = x;
  return Status::ok();
}

Status doubleOption(const plugin::DetectorOptions& o, const char* name, double min, double max,
                    bool min_open, std::optional<double>& out) {
  const std::string* v = o.find(name);
  if (v == nullptr) return Status::ok();
  double x = 0;
  if (!parseDouble(*v, x) || x < min || x > max || (min_open && x == min)) {
    return bad("option " + std::string(name) + "=" + *v + ": expected a number in " +
               (min_open ? "(" : "[") + Value(min).toString() + ", " + Value(max).toString() + "]");
  }
  out = x;
  return Status::ok();
}

// The WHERE clause as key equalities: var -> key attribute, and the pairs of
// variables each equality connects.
Status compileKeys(const pattern::Query& query, JoinPlan& plan,
                   std::map<std::string, std::string>& key_of) {
  if (!query.where)
    return bad("the query needs WHERE with key equalities such as a.plate = b.plate");
  std::map<std::string, std::string> parent;
  for (const std::string& v : plan.vars) parent[v] = v;
  auto find = [&](std::string v) {
    while (parent[v] != v) v = parent[v];
    return v;
  };
  for (const pattern::ExprPtr& c : pattern::splitConjuncts(query.where)) {
    const bool is_key = c->kind == ExprKind::kBinary && c->binary == BinaryOp::kEq &&
                        c->lhs->kind == ExprKind::kAttr && c->rhs->kind == ExprKind::kAttr &&
                        c->lhs->ref.index == pattern::IndexKind::kNone &&
                        c->rhs->ref.index == pattern::IndexKind::kNone &&
                        c->lhs->ref.builtin == pattern::Builtin::kNone &&
                        c->rhs->ref.builtin == pattern::Builtin::kNone &&
                        c->lhs->ref.var != c->rhs->ref.var;
    if (!is_key) {
      return bad(at(c->pos) +
                 "WHERE may only hold key equalities between two variables (x.key = y.key); "
                 "the time bound comes from the time matrix and the window");
    }
    for (const pattern::AttrRef* r : {&c->lhs->ref, &c->rhs->ref}) {
      if (parent.count(r->var) == 0) return bad(at(c->pos) + "unknown variable '" + r->var + "'");
      auto [it, fresh] = key_of.emplace(r->var, r->attr);
      if (!fresh && it->second != r->attr) {
        return bad(at(c->pos) + "variable '" + r->var + "' is keyed on both '" + it->second +
                   "' and '" + r->attr + "'; each stream has one key attribute");
      }
    }
    parent[find(c->lhs->ref.var)] = find(c->rhs->ref.var);
  }
  const std::string root = find(plan.vars.front());
  for (const std::string& v : plan.vars) {
    if (find(v) != root) {
      return bad("variable '" + v + "' is not connected to '" + plan.vars.front() +
                 "' by key equalities");
    }
  }
  return Status::ok();
}

}  // namespace

Result<JoinPlanPtr> compileJoin(const pattern::Query& query,
                                const plugin::DetectorOptions& options) {
  if (Status w = pattern::requirePatternQuery(query, "join"); !w) return w;
  static constexpr std::array<std::string_view, 14> kKnown = {
      "time_matrix",       "site",        "threshold", "window", "workers",       "expiry",
      "deletion_interval", "index_slots", "batch",     "spill",  "memory_budget", "spill_dir",
      "spill_probability", "spill_m"};
  if (Status s = options.checkKnown(kKnown, "join"); !s) return s;

  auto plan = std::make_shared<JoinPlan>();
  const pattern::PatternNode& root = *query.pattern;
  if (root.kind != PatternKind::kAnd || root.children.size() < 2) {
    return bad(at(root.pos) +
               "expected PATTERN AND(Type a, Type b, ...) of two or more streams, "
               "not " +
               pattern::operatorName(root.kind));
  }
  std::vector<Symbol> types;
  for (const pattern::PatternPtr& c : root.children) {
    if (c->kind != PatternKind::kEvent || c->var.empty()) {
      return bad(at(c->pos) + "every element of AND must be a single named event (Type var), not " +
                 (c->kind == PatternKind::kEvent ? std::string("an unnamed one")
                                                 : pattern::operatorName(c->kind)));
    }
    types.push_back(Symbol::intern(c->type));
    plan->vars.push_back(c->var);
  }
  bool all_same = true, all_distinct = true;
  for (size_t i = 0; i < types.size(); ++i) {
    for (size_t j = i + 1; j < types.size(); ++j) {
      if (types[i] == types[j])
        all_distinct = false;
      else
        all_same = false;
    }
  }
  if (!all_distinct && !(all_same && types.size() == 2)) {
    return bad(at(root.pos) +
               "a join reports pairs: give every element its own event type, or exactly two "
               "elements of one type (a self-join)");
  }
  plan->self_join = !all_distinct;
  if (query.strategy != pattern::Strategy::kSkipTillAnyMatch) {
    return bad("STRATEGY " + std::string(pattern::strategyName(query.strategy)) +
               " is not supported (a join pairs every partner)");
  }
  if (query.context != pattern::Context::kUnspecified) return bad("CONTEXT is not supported");
  if (!query.partition_by.empty()) return bad("PARTITION BY is not supported; the key partitions");

  std::map<std::string, std::string> key_of;
  if (Status s = compileKeys(query, *plan, key_of); !s) return s;
  if (plan->self_join) {
    if (key_of[plan->vars[0]] != key_of[plan->vars[1]]) {
      return bad("a self-join needs the same key attribute on both sides, not '" +
                 key_of[plan->vars[0]] + "' and '" + key_of[plan->vars[1]] + "'");
    }
    plan->streams.push_back({types[0], Symbol::intern(key_of[plan->vars[0]]), plan->vars[0]});
  } else {
    for (size_t i = 0; i < types.size(); ++i) {
      plan->streams.push_back({types[i], Symbol::intern(key_of[plan->vars[i]]), plan->vars[i]});
    }
  }

  const std::string* matrix = options.find("time_matrix");
  const std::string* site = options.find("site");
  if ((matrix == nullptr) != (site == nullptr)) {
    return bad("options time_matrix and site go together (the site attribute picks the row)");
  }
  if (matrix != nullptr) {
    auto m = TimeMatrix::load(options.resolvePath(*matrix).string());
    if (!m) return m.status();
    plan->matrix = std::make_shared<const TimeMatrix>(std::move(*m));
    if (site->empty()) return bad("option site= needs an attribute name");
    plan->site = Symbol::intern(*site);
  }

  std::optional<double> threshold, spill_p, spill_m;
  std::optional<int64_t> window, workers, interval, slots, budget, batch;
  for (Status s : {doubleOption(options, "threshold", 0, 1, false, threshold),
                   doubleOption(options, "spill_probability", 0, 1, false, spill_p),
                   doubleOption(options, "spill_m", 0, 1e9, true, spill_m),
                   intOption(options, "window", 1, INT64_MAX / 4, window),
                   intOption(options, "workers", 1, 64, workers),
                   intOption(options, "deletion_interval", 1, INT64_MAX / 4, interval),
                   intOption(options, "index_slots", 1, 1 << 26, slots),
                   intOption(options, "batch", 1, 65536, batch),
                   intOption(options, "memory_budget", 1, INT64_MAX, budget)}) {
    if (!s) return s;
  }
  if (query.min_probability) {
    return bad("PROBABILITY is not supported; the join's threshold is option threshold");
  }
  if (query.within && window) return bad("give the window either as WITHIN or as option window");
  if (query.within) {
    window = *query.within + 1;  // WITHIN is inclusive, the window exclusive
  } else if (!window) {
    if (!plan->matrix) return bad("without a time matrix, option window (or WITHIN) is required");
    // Every pair that can join is younger than the largest travel time.
    window = static_cast<int64_t>(std::ceil(plan->matrix->maxTime()));
    if (*window < 1) window = 1;
  }
  plan->window = *window;
  plan->threshold = threshold.value_or(0);
  plan->workers = static_cast<size_t>(workers.value_or(1));
  plan->deletion_interval = interval.value_or(plan->window);
  size_t n = 1;
  while (n < static_cast<size_t>(slots.value_or(1 << 14))) n <<= 1;
  plan->index_slots = n;
  plan->batch = static_cast<size_t>(batch.value_or(1024));
  plan->spill_probability = spill_p.value_or(0.8);
  plan->spill_m = spill_m.value_or(3);

  if (const std::string* e = options.find("expiry")) {
    if (*e == "on_insert") {
      plan->expiry = Expiry::kOnInsert;
    } else if (*e == "batch") {
      plan->expiry = Expiry::kBatch;
    } else {
      return bad("option expiry=" + *e + ": expected on_insert or batch");
    }
  }
  if (interval && plan->expiry != Expiry::kBatch) {
    return bad("option deletion_interval needs expiry=batch");
  }
  if (const std::string* s = options.find("spill")) {
    if (*s == "none") {
      plan->spill = SpillStrategy::kNone;
    } else if (*s == "window_half") {
      plan->spill = SpillStrategy::kWindowHalf;
    } else if (*s == "less_than_probability") {
      plan->spill = SpillStrategy::kLessThanProbability;
    } else {
      return bad("option spill=" + *s + ": expected none, window_half or less_than_probability");
    }
  }
  if (plan->spill != SpillStrategy::kNone && !budget) {
    return bad("option spill=" + *options.find("spill") + " needs memory_budget=BYTES");
  }
  if (budget && plan->spill == SpillStrategy::kNone) {
    return bad(
        "option memory_budget needs a spill strategy (spill=window_half or "
        "less_than_probability)");
  }
  plan->memory_budget = static_cast<size_t>(budget.value_or(0));
  if (const std::string* d = options.find("spill_dir")) {
    if (plan->spill == SpillStrategy::kNone) return bad("option spill_dir needs a spill strategy");
    plan->spill_dir = options.resolvePath(*d).string();
  } else if (plan->spill != SpillStrategy::kNone) {
    std::error_code ec;
    plan->spill_dir = std::filesystem::temp_directory_path(ec).string();
    if (ec) plan->spill_dir = "/tmp";
  }

  plan->layout = pattern::BindingLayout::forQuery(query);
  if (query.returns) {
    auto r = pattern::compileReturn(*query.returns, plan->layout);
    if (!r) return r.status();
    plan->returns = std::make_shared<const pattern::CompiledReturn>(std::move(*r));
  }
  return JoinPlanPtr(std::move(plan));
}

}  // namespace cepbus::plugins::join
