#include "bus/core/plugin/detector.h"

#include <algorithm>

namespace cepbus::plugin {

Result<DetectorOptions> DetectorOptions::parse(std::span<const std::string> items) {
  std::map<std::string, std::string, std::less<>> values;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::invalidArgument("option '" + item + "': expected key=value");
    }
    values[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return DetectorOptions(std::move(values));
}

const std::string* DetectorOptions::find(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

DetectorOptions DetectorOptions::without(std::string_view key) const {
  auto values = values_;
  if (auto it = values.find(key); it != values.end()) values.erase(it);
  return DetectorOptions(std::move(values));
}

Status DetectorOptions::checkKnown(std::span<const std::string_view> known,
                                   std::string_view engine) const {
  for (const auto& [key, value] : values_) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return Status::invalidArgument("engine '" + std::string(engine) + "' has no option '" + key +
                                     "' (known: " + (list.empty() ? "none" : list) + ")");
    }
  }
  return Status::ok();
}

}  // namespace cepbus::plugin
