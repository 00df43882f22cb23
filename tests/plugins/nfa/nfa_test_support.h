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

struct CollectedMatch {
  std::vector<EventId> ids;
  std::vector<Timestamp> ts;
  std::vector<uint32_t> element_sizes;
  EventPtr composite;
};

class CollectingSink : public plugin::MatchSink {
 public:
  explicit CollectingSink(bool compose = false) : compose_(compose) {}
  void onMatch(const plugin::Match& match) override {
    CollectedMatch m;
    for (size_t i = 0; i < match.size(); ++i) {
      m.ids.push_back(match.event(i)->id());
      m.ts.push_back(match.ts(i));
    }
    for (size_t k = 0; k < match.elementCount(); ++k) {
      m.element_sizes.push_back(static_cast<uint32_t>(match.elementEvents(k).size()));
    }
    if (compose_) m.composite = match.composite();
    matches.push_back(std::move(m));
  }
  std::vector<std::vector<Timestamp>> sortedTs() const {
    std::vector<std::vector<Timestamp>> out;
    for (const auto& m : matches) out.push_back(m.ts);
    std::sort(out.begin(), out.end());
    return out;
  }
  std::vector<std::vector<EventId>> sortedIds() const {
    std::vector<std::vector<EventId>> out;
    for (const auto& m : matches) out.push_back(m.ids);
    std::sort(out.begin(), out.end());
    return out;
  }
  std::vector<CollectedMatch> matches;

 private:
  bool compose_;
};

// Runs `query` over `events` with the given options; the status of the
// first failing call (creation, an event, flush), or OK.
inline Status runQuery(const std::string& query, const std::vector<EventPtr>& events,
                       std::vector<std::string> options, CollectingSink& sink) {
  auto q = pattern::parseQuery(query);
  if (!q) return q.status();
  auto opts = plugin::DetectorOptions::parse(options);
  if (!opts) return opts.status();
  auto d = nfaPlugin()->createDetector("nfa", *q, *opts, sink);
  if (!d) return d.status();
  for (const EventPtr& e : events) {
    Status s = (*d)->onEvent(e);
    if (!s) return s;
  }
  return (*d)->flush();
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
