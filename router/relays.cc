#include "router/relays.h"

#include <algorithm>

#include "router/topic.h"

namespace cepbus::router {

namespace {

std::vector<std::string> splitPatterns(const std::string& joined) {
  std::vector<std::string> patterns;
  size_t start = 0;
  while (start <= joined.size()) {
    const size_t comma = std::min(joined.find(',', start), joined.size());
    if (comma > start) patterns.push_back(joined.substr(start, comma - start));
    start = comma + 1;
  }
  return patterns;
}

}  // namespace

std::vector<Relay> relaysIn(const Registry& registry) {
  std::vector<Relay> relays;
  for (const auto& entry : registry.entries()) {
    std::optional<std::string> inputs = entry->metadata(kRelayInputs);
    std::optional<std::string> output = entry->metadata(kRelayOutput);
    if (!inputs || !output || output->empty()) continue;
    relays.push_back(Relay{splitPatterns(*inputs), std::move(*output)});
  }
  return relays;
}

std::vector<std::string> derivedAddresses(const std::vector<Relay>& relays,
                                          std::string_view address) {
  std::vector<std::string> reached;
  std::vector<bool> taken(relays.size(), false);
  // Breadth first from `address`; a relay is followed at most once, so a
  // cycle of relays ends.
  std::vector<std::string> frontier{std::string(address)};
  while (!frontier.empty()) {
    std::vector<std::string> next;
    for (const std::string& from : frontier) {
      for (size_t i = 0; i < relays.size(); ++i) {
        if (taken[i]) continue;
        const auto& inputs = relays[i].inputs;
        if (std::none_of(inputs.begin(), inputs.end(),
                         [&from](const std::string& p) { return topicMatches(p, from); })) {
          continue;
        }
        taken[i] = true;
        const std::string& output = relays[i].output;
        if (std::find(reached.begin(), reached.end(), output) == reached.end()) {
          reached.push_back(output);
          next.push_back(output);
        }
      }
    }
    frontier = std::move(next);
  }
  return reached;
}

}  // namespace cepbus::router
