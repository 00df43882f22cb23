#pragma once

// Shared by the tests that run the engines of this build through the plugin
// ABI on random cases (tests/plugins/engines_differential_test.cc,
// tests/bus/host/detection/trial_detector_engines_test.cc): loading an engine
// from build/plugins once per process, the environment knobs of a longer
// run, and a stream printed for a failure message.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bus/core/event_json.h"
#include "bus/host/loader/plugin_loader.h"

namespace cepbus::plugins::testing {

// The plugin of `engine` built in this tree; null (and a test failure) when
// it cannot be loaded.
inline plugin::PluginPtr loadBuiltEngine(const std::string& engine) {
  static std::map<std::string, plugin::PluginPtr> plugins;
  static plugin::PluginLoader loader({std::string(CEPBUS_TEST_BUILD_DIR) + "/plugins"});
  auto it = plugins.find(engine);
  if (it != plugins.end()) return it->second;
  auto p = loader.load(engine);
  EXPECT_TRUE(p.isOk()) << p.status().message();
  return plugins[engine] = p ? *p : nullptr;
}

// The environment variable `name` as a number, or `fallback` when unset.
inline uint64_t envOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v == nullptr ? fallback : std::strtoull(v, nullptr, 10);
}

// `events` as JSON lines, to reproduce a failing case.
inline std::string describeEvents(const std::vector<EventPtr>& events) {
  std::ostringstream out;
  for (const EventPtr& e : events) out << encodeEvent(*e) << '\n';
  return out.str();
}

}  // namespace cepbus::plugins::testing
