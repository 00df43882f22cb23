#pragma once

// What the detection host's tests share: the fake engines of
// fake_engines.cc loaded through a real PluginLoader, queries to plan with
// them, and a sink that records what a detection reports.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "bus/host/detection/detection.h"
#include "bus/host/detection/planner.h"
#include "bus/host/loader/plugin_loader.h"

namespace cepbus::detection::testing {

// A loader that finds the fake nfa, petri, algebra and join engines only.
inline plugin::PluginLoader fakeLoader() { return plugin::PluginLoader({FAKE_ENGINE_DIR}); }

// How many single-query detectors the fake `engine` has made so far in
// this process (0 before it is loaded).
inline int detectorsMade(const std::string& engine) {
  const std::string path =
      std::string(FAKE_ENGINE_DIR) + "/" + plugin::PluginLoader::fileNameFor(engine);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return 0;
  auto made = reinterpret_cast<int (*)()>(dlsym(handle, "fake_detectors_made"));
  const int n = made != nullptr ? made() : -1;
  dlclose(handle);
  return n;
}

// A query `name` of `engine` over `text` on input "in", written at "q.xml:<line>".
inline QueryRequest request(std::string name, std::string engine, const std::string& text,
                            std::vector<std::string> options = {}, int line = 1) {
  QueryRequest r;
  r.name = std::move(name);
  auto query = pattern::parseQuery(text);
  EXPECT_TRUE(query) << query.status().message();
  if (query) r.query = std::move(query).value();
  r.engine = std::move(engine);
  auto parsed = plugin::DetectorOptions::parse(options);
  EXPECT_TRUE(parsed) << parsed.status().message();
  if (parsed) r.options = std::move(parsed).value();
  r.inputs = {"in"};
  r.where = "q.xml:" + std::to_string(line);
  return r;
}

inline EventPtr event(const char* type, Timestamp ts) { return EventBuilder(type).at(ts).build(); }

// Records each match as (member, ts of its events) and the trial's outcomes.
class RecordingSink final : public DetectionSink {
 public:
  struct Seen {
    size_t member;
    std::vector<Timestamp> ts;
    bool operator==(const Seen&) const = default;
  };
  void onMatch(size_t member, const plugin::Match& match) override {
    Seen s{member, {}};
    for (size_t i = 0; i < match.size(); ++i) s.ts.push_back(match.ts(i));
    seen.push_back(std::move(s));
  }
  void onTrialDecided(const plugin::TrialOutcome& outcome) override {
    decided.push_back(outcome.kept);
  }
  void onLate(const EventPtr& event, Timestamp newest) override {
    late.push_back({event->ts(), newest});
  }
  std::vector<Seen> seen;
  std::vector<std::pair<Timestamp, Timestamp>> late;  // (ts, newest before it)
  std::vector<std::string> decided;
};

}  // namespace cepbus::detection::testing
