#include "bus/core/pattern/filter.h"

#include <string>
#include <utility>

#include "bus/core/pattern/expr_compiler.h"
#include "bus/core/pattern/parser.h"

namespace cepbus::pattern {
namespace {

class CompiledFilter final : public EventFilter {
 public:
  CompiledFilter(CompiledExpr expr, std::string text)
      : expr_(std::move(expr)), text_(std::move(text)) {}

  bool matches(const Event& event) const override {
    SlotBinding slot;
    slot.event = &event;
    return expr_.test(Bindings(&slot, 1));
  }

  const std::string& text() const override { return text_; }

 private:
  const CompiledExpr expr_;
  const std::string text_;
};

}  // namespace

Result<EventFilterPtr> compileFilter(std::string_view text) {
  Result<ExprPtr> parsed = parseFilter(text);
  if (!parsed.isOk()) return parsed.status();
  // A filter reads one event: slot 0, under the empty variable name that
  // bare attribute references carry.
  BindingLayout layout;
  layout.add("", VarKind::kSingle);
  Result<CompiledExpr> compiled = compileExpr(**parsed, layout);
  if (!compiled.isOk()) return compiled.status();
  return EventFilterPtr(
      std::make_shared<CompiledFilter>(std::move(compiled).value(), std::string(text)));
}

}  // namespace cepbus::pattern
