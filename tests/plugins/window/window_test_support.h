#pragma once

// Shared by the window engine's tests: a sink that keeps each result's
// composite event, and a result printed as one line for comparisons.

#include <map>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"

namespace cepbus::plugins::window::testing {

// Keeps the composite event of every result, in the order they came out.
class ResultSink : public plugin::MatchSink {
 public:
  void onMatch(const plugin::Match& match) override { results.push_back(match.composite()); }
  std::vector<EventPtr> results;
};

// "Type [start,ts] name=value ..." with the attributes by name.
inline std::string describe(const Event& e) {
  std::map<std::string, std::string> attrs;
  for (const Attribute& a : e.attributes()) attrs[std::string(a.name.name())] = a.value.toString();
  std::string out = std::string(e.type().name()) + " [" + std::to_string(e.start()) + "," +
                    std::to_string(e.ts()) + "]";
  for (const auto& [name, value] : attrs) out += " " + name + "=" + value;
  return out;
}

inline std::vector<std::string> describeAll(const std::vector<EventPtr>& events) {
  std::vector<std::string> out;
  for (const EventPtr& e : events) out.push_back(describe(*e));
  return out;
}

}  // namespace cepbus::plugins::window::testing
