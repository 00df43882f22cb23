#include "plugins/window/window_plan.h"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <string>
#include <utility>

#include "bus/core/plugin/snapshot.h"

namespace cepbus::plugins::window {
namespace {

using pattern::Expr;
using pattern::ExprKind;
using pattern::ExprPtr;

// Rewrites RETURN and HAVING expressions into reads of the row event,
// collecting the aggregate columns as it meets them (each distinct one once).
class RowRewriter {
 public:
  explicit RowRewriter(Plan& plan, std::string var) : plan_(plan), var_(std::move(var)) {}

  ExprPtr rewrite(const ExprPtr& e) {
    auto out = std::make_shared<Expr>(*e);
    if (e->kind == ExprKind::kAggregate) {
      out->kind = ExprKind::kAttr;
      out->ref = rowRef(columnOf(*e));
    } else if (e->kind == ExprKind::kAttr) {
      // The checker admits only group keys here.
      const auto key =
          std::find(plan_.group_by.begin(), plan_.group_by.end(), Symbol::intern(e->ref.attr));
      out->ref = rowRef(plan_.key_names[static_cast<size_t>(key - plan_.group_by.begin())]);
    }
    if (e->lhs) out->lhs = rewrite(e->lhs);
    if (e->rhs) out->rhs = rewrite(e->rhs);
    return out;
  }

 private:
  Symbol columnOf(const Expr& e) {
    AggregateColumn column{e.agg, e.ref.builtin,
                           e.ref.builtin == pattern::Builtin::kNone && !e.ref.attr.empty()
                               ? Symbol::intern(e.ref.attr)
                               : Symbol()};
    auto it = std::find(plan_.columns.begin(), plan_.columns.end(), column);
    if (it != plan_.columns.end()) {
      return plan_.column_names[static_cast<size_t>(it - plan_.columns.begin())];
    }
    plan_.columns.push_back(column);
    plan_.column_names.push_back(Symbol::intern("#a" + std::to_string(plan_.columns.size() - 1)));
    return plan_.column_names.back();
  }

  pattern::AttrRef rowRef(Symbol attr) const {
    pattern::AttrRef ref;
    ref.var = var_;
    ref.attr = std::string(attr.name());
    return ref;
  }

  Plan& plan_;
  std::string var_;
};

// The row value a rewritten RETURN item reads as it is, if it is a bare read.
std::optional<size_t> rowSource(const Plan& plan, const Expr& e) {
  if (e.kind != ExprKind::kAttr || e.ref.index != pattern::IndexKind::kNone ||
      e.ref.builtin != pattern::Builtin::kNone) {
    return std::nullopt;
  }
  const Symbol attr = Symbol::intern(e.ref.attr);
  const auto column = std::find(plan.column_names.begin(), plan.column_names.end(), attr);
  if (column != plan.column_names.end()) {
    return static_cast<size_t>(column - plan.column_names.begin());
  }
  const auto key = std::find(plan.key_names.begin(), plan.key_names.end(), attr);
  if (key != plan.key_names.end()) {
    return plan.columns.size() + static_cast<size_t>(key - plan.key_names.begin());
  }
  return std::nullopt;
}

Status applyOptions(const plugin::DetectorOptions& options, Plan& plan) {
  static constexpr std::string_view kKnown[] = {"max_groups"};
  if (Status s = options.checkKnown(kKnown, "window"); !s) return s;
  if (const std::string* text = options.find("max_groups")) {
    size_t n = 0;
    const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), n);
    if (ec != std::errc() || end != text->data() + text->size() || n == 0) {
      return Status::invalidArgument("window engine: option max_groups=" + *text +
                                     ": expected an integer >= 1");
    }
    plan.max_groups = n;
  }
  return Status::ok();
}

// Plan::state_shape.
uint64_t stateShapeOf(const Plan& plan) {
  std::string text = pattern::windowKindName(plan.kind);
  text += " " + std::to_string(plan.length) + "/" + std::to_string(plan.every) + "/" +
          std::to_string(plan.pane) + (plan.emit_every != 0 ? " partials" : "");
  for (Symbol attr : plan.group_by) text += " by:" + std::string(attr.name());
  for (const AggregateInput& in : plan.aggregates.inputs()) {
    text += " in:" + std::string(in.attr.name()) + "/" +
            std::to_string(static_cast<int>(in.builtin)) + (in.order ? "o" : "") +
            (in.extremes ? "e" : "") + (in.moments ? "m" : "") + std::to_string(in.numeric);
  }
  // Never 0, which would say the state cannot be carried over.
  return plugin::snapshotFingerprint(text) | 1;
}

}  // namespace

Result<PlanPtr> compilePlan(const pattern::Query& query, const plugin::DetectorOptions& options) {
  if (!query.window || !query.returns) {
    return Status::invalidArgument(
        "the window engine runs window queries (FROM Type t ... WINDOW ... RETURN ...), not "
        "patterns; run patterns with engine nfa, petri, algebra or auto");
  }
  auto plan = std::make_shared<Plan>();
  if (Status s = applyOptions(options, *plan); !s) return s;
  const pattern::PatternNode& source = *query.pattern;
  plan->type = Symbol::intern(source.type);
  const pattern::BindingLayout layout = pattern::BindingLayout::forQuery(query);
  auto where = pattern::compileConjuncts(query.where, layout);
  if (!where) return where.status();
  plan->where = std::move(where).value();
  plan->kind = query.window->kind;
  plan->length = query.window->length;
  plan->every = query.window->every;
  plan->emit_every = query.window->emit_every;
  plan->partial_name = Symbol::intern(pattern::kPartialAttribute);
  plan->pane =
      plan->kind == pattern::WindowKind::kSession ? 0 : std::gcd(plan->length, plan->every);
  if (plan->pane != 0) {
    plan->every_panes = plan->every / plan->pane;
    plan->length_panes = plan->length / plan->pane;
  }
  for (size_t j = 0; j < query.group_by.size(); ++j) {
    plan->group_by.push_back(Symbol::intern(query.group_by[j]));
    plan->key_names.push_back(Symbol::intern("#g" + std::to_string(j)));
  }
  RowRewriter rows(*plan, source.var);
  pattern::ReturnClause returns = *query.returns;
  for (pattern::ReturnItem& item : returns.items) item.expr = rows.rewrite(item.expr);
  auto compiled = pattern::compileReturn(returns, layout);
  if (!compiled) return compiled.status();
  plan->returns = std::move(compiled).value();
  if (query.having) {
    auto having = pattern::compileExpr(*rows.rewrite(query.having), layout);
    if (!having) return having.status();
    plan->having = std::move(having).value();
  }
  plan->aggregates = AggregateLayout(plan->columns);
  if (!query.having) {
    std::vector<Plan::DirectItem> items;
    for (const pattern::ReturnItem& item : returns.items) {
      const std::optional<size_t> source = rowSource(*plan, *item.expr);
      if (!source) break;
      items.push_back({Symbol::intern(item.name), *source});
    }
    if (items.size() == returns.items.size()) {
      std::sort(
          items.begin(), items.end(),
          [](const Plan::DirectItem& a, const Plan::DirectItem& b) { return a.name < b.name; });
      for (size_t i = 0; i < items.size(); ++i) {
        items[i].takes = items[i].source < plan->columns.size() &&
                         std::none_of(items.begin() + static_cast<ptrdiff_t>(i) + 1, items.end(),
                                      [&](const Plan::DirectItem& later) {
                                        return later.source == items[i].source;
                                      });
      }
      plan->direct_returns = std::move(items);
    }
  }
  plan->state_shape = stateShapeOf(*plan);
  return PlanPtr(std::move(plan));
}

}  // namespace cepbus::plugins::window
