#include "bus/core/pattern/window_query.h"

#include <string>

namespace cepbus::pattern {

Status requirePatternQuery(const Query& query, std::string_view engine) {
  if (!query.window) return Status::ok();
  return Status::invalidArgument(
      "the " + std::string(engine) + " engine runs patterns, not window queries (FROM ... WINDOW " +
      windowKindName(query.window->kind) + "): run it with engine window (or auto)");
}

}  // namespace cepbus::pattern
