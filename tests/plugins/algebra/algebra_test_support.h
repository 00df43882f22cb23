#pragma once

// Shared by the algebra plugin tests: loading the plugins built in this tree,
// running a query over a hand-made stream, and the matches as intervals and
// bindings (element index, event id).

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/pattern/parser.h"
#include "bus/host/loader/plugin_loader.h"
#include "tests/testing/match_recorder.h"

namespace cepbus::plugins::algebra::testing {

inline plugin::PluginPtr loadPlugin(const std::string& name) {
  static std::map<std::string, plugin::PluginPtr> plugins;
  static plugin::PluginLoader loader({std::string(CEPBUS_TEST_BUILD_DIR) + "/plugins"});
  auto it = plugins.find(name);
  if (it != plugins.end()) return it->second;
  auto p = loader.load(name);
  if (!p) ADD_FAILURE() << p.status().message();
  plugin::PluginPtr out = p ? *p : nullptr;
  plugins[name] = out;
  return out;
}

// One match: its interval and which event each element bound.
struct Out {
  Timestamp start = 0;
  Timestamp end = 0;
  std::vector<std::pair<uint32_t, EventId>> binds;  // (element, event id), match order
  EventPtr composite;

  friend bool operator<(const Out& a, const Out& b) {
    return std::tie(a.end, a.start, a.binds) < std::tie(b.end, b.start, b.binds);
  }
  friend bool operator==(const Out& a, const Out& b) {
    return a.start == b.start && a.end == b.end && a.binds == b.binds;
  }
};

inline std::ostream& operator<<(std::ostream& os, const Out& o) {
  os << "[" << o.start << "," << o.end << "]{";
  for (const auto& [e, id] : o.binds) os << e << ":" << id << " ";
  return os << "}";
}

using cepbus::testing::MatchRecorder;

// The matches `sink` recorded as intervals and bindings, in report order.
inline std::vector<Out> outs(const MatchRecorder& sink) {
  std::vector<Out> outs;
  for (const cepbus::testing::RecordedMatch& m : sink.matches()) {
    Out o;
    o.start = m.ts.empty() ? 0 : m.ts[0];
    o.end = o.start;
    for (size_t j = 0; j < m.element_ends.size(); ++j) {
      for (size_t i = m.elementBegin(j); i < m.elementEnd(j); ++i) {
        o.binds.emplace_back(static_cast<uint32_t>(j), m.ids[i]);
        o.start = std::min(o.start, m.ts[i]);
        o.end = std::max(o.end, m.ts[i]);
      }
    }
    o.composite = m.composite;
    outs.push_back(std::move(o));
  }
  return outs;
}

// Runs `query` on `engine` over `events`; the outputs sorted, or the status
// of the first failing call.
inline Result<std::vector<Out>> run(const std::string& engine, const std::string& query,
                                    const std::vector<EventPtr>& events,
                                    std::vector<std::string> options = {}, bool compose = false) {
  auto q = pattern::parseQuery(query);
  if (!q) return q.status();
  auto opts = plugin::DetectorOptions::parse(options);
  if (!opts) return opts.status();
  MatchRecorder sink(compose);
  auto d = loadPlugin(engine)->createDetector(engine, *q, *opts, sink);
  if (!d) return d.status();
  for (const EventPtr& e : events) {
    Status s = (*d)->onEvent(e);
    if (!s) return s;
  }
  Status s = (*d)->flush();
  if (!s) return s;
  std::vector<Out> out = outs(sink);
  std::sort(out.begin(), out.end());
  return out;
}

inline std::vector<Out> runAlgebra(const std::string& query, const std::vector<EventPtr>& events,
                                   bool compose = false) {
  auto r = run("algebra", query, events, {}, compose);
  EXPECT_TRUE(r.isOk()) << query << ": " << r.status().message();
  return r ? *r : std::vector<Out>{};
}

// "a1 c2 b3:7" streams: a lower-case type letter, the ts and optionally the
// integer attribute x. Event ids are 1, 2, ... in stream order.
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
    const std::string body = text.substr(i + 1, j - i - 1);
    const size_t colon = body.find(':');
    EventBuilder b(type);
    b.at(std::stoll(body.substr(0, colon))).id(out.size() + 1);
    if (colon != std::string::npos)
      b.set("x", Value(static_cast<int64_t>(std::stoll(body.substr(colon + 1)))));
    out.push_back(b.build());
    i = j;
  }
  return out;
}

// The intervals of `outs`, in order.
inline std::vector<std::pair<Timestamp, Timestamp>> intervals(const std::vector<Out>& outs) {
  std::vector<std::pair<Timestamp, Timestamp>> v;
  for (const Out& o : outs) v.emplace_back(o.start, o.end);
  return v;
}

}  // namespace cepbus::plugins::algebra::testing
