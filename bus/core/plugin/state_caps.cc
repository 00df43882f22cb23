#include "bus/core/plugin/state_caps.h"

#include <charconv>
#include <string>

namespace cepbus::plugin {
namespace {

// The value of a cap option when set: a positive integer.
Status readCap(const DetectorOptions& options, std::string_view key, uint64_t& out) {
  const std::string* text = options.find(key);
  if (text == nullptr) return Status::ok();
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || v == 0) {
    return Status::invalidArgument("option " + std::string(key) + "=" + *text +
                                   ": expected a positive integer");
  }
  out = v;
  return Status::ok();
}

}  // namespace

Result<StateCaps> StateCaps::parse(const DetectorOptions& options) {
  StateCaps caps;
  if (Status s = readCap(options, "max_partition_partial_matches", caps.partition); !s) return s;
  if (Status s = readCap(options, "max_partial_matches", caps.total); !s) return s;
  if (const std::string* p = options.find("state_policy")) {
    if (*p == "drop_oldest") {
      caps.policy = StatePolicy::kDropOldest;
    } else if (*p == "refuse_new") {
      caps.policy = StatePolicy::kRefuseNew;
    } else {
      return Status::invalidArgument("option state_policy=" + *p +
                                     ": expected drop_oldest or refuse_new");
    }
  }
  return caps;
}

}  // namespace cepbus::plugin
