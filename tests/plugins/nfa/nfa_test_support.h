#pragma once

// Shared by the nfa plugin tests: loading the plugin built in this tree and
// collecting matches.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/pattern/parser.h"
#include "bus/host/loader/plugin_loader.h"
#include "tests/testing/match_recorder.h"

namespace cepbus::plugins::nfa::testing {

inline plugin::PluginPtr nfaPlugin() {
  static plugin::PluginPtr plugin = [] {
    const char* dir = std::getenv("CEPBUS_BUILD_DIR");
    plugin::PluginLoader loader({std::string(dir ? dir : ".") + "/plugins"});
    auto p = loader.load("nfa");
    if (!p) ADD_FAILURE() << p.status().message();
    return p ? *p : nullptr;
  }();
  return plugin;
}

using cepbus::testing::MatchRecorder;
using cepbus::testing::RecordedMatch;

// Runs `query` over `events` with the given options, then ends the stream
// (time passes to the end, then flush); the status of the first failing call
// (creation, an event, a watermark, flush), or OK. `watermarks`: after each
// event, time is said to have passed the ts before it, as a host with no
// delay says it.
inline Status runQuery(const std::string& query, const std::vector<EventPtr>& events,
                       std::vector<std::string> options, MatchRecorder& sink,
                       bool watermarks = false) {
  auto q = pattern::parseQuery(query);
  if (!q) return q.status();
  auto opts = plugin::DetectorOptions::parse(options);
  if (!opts) return opts.status();
  auto d = nfaPlugin()->createDetector("nfa", *q, *opts, sink);
  if (!d) return d.status();
  for (const EventPtr& e : events) {
    Status s = (*d)->onEvent(e);
    if (s && watermarks) s = (*d)->onWatermark(e->ts() - 1);
    if (!s) return s;
  }
  Status s = (*d)->onWatermark(plugin::Detector::kEndOfTime);
  return s ? (*d)->flush() : s;
}

// "a1 c2 b3" style streams: a lower-case type letter and the ts.
inline std::vector<EventPtr> letters(const std::string& text) {
  std::vector<EventPtr> out;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ' ') {
      ++i;
      continue;
    }
    const std::string type(1, static_cast<char>(std::toupper(text[i])));
    size_t j = i + 1;
    while (j < text.size() && text[j] != ' ') ++j;
    out.push_back(EventBuilder(type).at(std::stoll(text.substr(i + 1, j - i - 1))).build());
    i = j;
  }
  return out;
}

}  // namespace cepbus::plugins::nfa::testing
