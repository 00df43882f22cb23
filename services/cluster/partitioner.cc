#include "services/cluster/partitioner.h"

#include <charconv>
#include <cmath>

namespace cepbus::services::cluster {
namespace {

void appendCanonical(const Value& v, std::string& out) {
  switch (v.kind()) {
    case Value::Kind::kNull:
      break;
    case Value::Kind::kBool:
      out += v.asBool() ? "true" : "false";
      break;
    case Value::Kind::kInt:
      out += std::to_string(v.asInt());
      break;
    case Value::Kind::kDouble: {
      const double d = v.asDouble();
      // Integral doubles within int64 render as the integer they equal.
      if (std::isfinite(d) && std::trunc(d) == d && std::fabs(d) < 9.2e18) {
        out += std::to_string(static_cast<int64_t>(d));
        break;
      }
      char buf[32];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
      out.append(buf, ec == std::errc() ? end : buf);
      break;
    }
    case Value::Kind::kString:
      out += v.asString();
      break;
  }
}

}  // namespace

Result<std::string> partitionKeyText(const Event& event, std::span<const Symbol> key) {
  std::string text;
  for (size_t i = 0; i < key.size(); ++i) {
    const Value* v = event.find(key[i]);
    if (v == nullptr || v->isNull()) {
      return Status::invalidArgument("event of type \"" + std::string(event.type().name()) +
                                     "\" at ts " + std::to_string(event.ts()) +
                                     " has no partition key attribute \"" +
                                     std::string(key[i].name()) + "\"");
    }
    if (i > 0) text += '\x1f';
    appendCanonical(*v, text);
  }
  return text;
}

}  // namespace cepbus::services::cluster
