#pragma once

// The engine snapshot differential, for the engines' own tests: a query run
// over a stream in one go, and run again stopped after k events, its state
// snapshotted to bytes, restored into a fresh detector that takes the rest,
// must report the same matches in the same order, for every k. Also mutates
// a snapshot's bytes one at a time (the checksum made right again, so the
// detector's own checks are what stands between a bad body and a crash).
//
// The detectors are loaded from the plugins built in this tree, behind the
// host's guard, as the bus loads them. Each event carries its stream index
// as attribute `n`: the matches are recorded as those, element by element,
// since a restored event is a new event with a new id.

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/pattern/parser.h"
#include "bus/core/plugin/snapshot.h"
#include "bus/host/loader/plugin_loader.h"

namespace cepbus::testing {

// Records each match as "q:n,n|n,...": its query, then the `n` of its
// events element by element.
class NumberedMatches final : public plugin::MatchSink, public plugin::MultiMatchSink {
 public:
  void onMatch(const plugin::Match& match) override { onMatch(0, match); }
  void onMatch(size_t pattern, const plugin::Match& match) override {
    static const Symbol kN = Symbol::intern("n");
    std::string m = std::to_string(pattern) + ":";
    for (size_t j = 0; j < match.elementCount(); ++j) {
      if (j > 0) m += "|";
      for (const EventPtr* e : match.elementEvents(j)) {
        const Value* n = (*e)->find(kN);
        m += (n != nullptr ? n->toString() : "?") + ",";
      }
    }
    matches.push_back(std::move(m));
  }
  std::vector<std::string> matches;
};

struct SnapshotCase {
  std::string engine;
  std::vector<std::string> queries;  // one: create(); several: createMany()
  std::vector<std::string> options = {};
};

inline std::ostream& operator<<(std::ostream& os, const SnapshotCase& c) {
  os << c.engine;
  for (const std::string& q : c.queries) os << " [" << q << "]";
  return os;
}

// `n` events of types A-D with x in 0..3, k in 0..2 and n their index; ts
// rise by 0-2.
inline std::vector<EventPtr> numberedStream(std::mt19937_64& rng, int n) {
  std::vector<EventPtr> events;
  Timestamp ts = 0;
  for (int i = 0; i < n; ++i) {
    ts += static_cast<Timestamp>(rng() % 3);
    const std::string type(1, static_cast<char>('A' + rng() % 4));
    events.push_back(EventBuilder(type)
                         .at(ts)
                         .set("x", Value(static_cast<int64_t>(rng() % 4)))
                         .set("k", Value(static_cast<int64_t>(rng() % 3)))
                         .set("n", Value(static_cast<int64_t>(i)))
                         .build());
  }
  return events;
}

class SnapshotDifferential {
 public:
  explicit SnapshotDifferential(SnapshotCase c) : case_(std::move(c)) {}

  // A fresh detector reporting to `sink`; fails the test when it cannot be made.
  std::unique_ptr<plugin::GuardedDetector> make(NumberedMatches& sink) const {
    auto options = plugin::DetectorOptions::parse(case_.options);
    EXPECT_TRUE(options.isOk()) << options.status().message();
    std::vector<plugin::NamedQuery> queries;
    for (size_t i = 0; i < case_.queries.size(); ++i) {
      auto q = pattern::parseQuery(case_.queries[i]);
      EXPECT_TRUE(q.isOk()) << case_.queries[i] << ": " << q.status().message();
      if (!q) return nullptr;
      queries.push_back({"q" + std::to_string(i), std::move(q).value()});
    }
    plugin::PluginPtr engine = engineNamed(case_.engine);
    if (!engine) return nullptr;
    auto made = queries.size() == 1
                    ? engine->createDetector(case_.engine, queries[0].query, *options, sink)
                    : engine->createManyDetectors(case_.engine, queries, *options, sink);
    EXPECT_TRUE(made.isOk()) << case_ << ": " << made.status().message();
    return made ? std::move(made).value() : nullptr;
  }

  // Feeds events [from, to); at the stream's end, the watermark and a flush.
  static void feed(plugin::Detector& d, const std::vector<EventPtr>& events, size_t from,
                   size_t to) {
    for (size_t i = from; i < to; ++i) ASSERT_TRUE(d.onEvent(events[i]).isOk());
    if (to < events.size()) return;
    ASSERT_TRUE(d.onWatermark(plugin::Detector::kEndOfTime).isOk());
    ASSERT_TRUE(d.flush().isOk());
  }

  // The snapshot file of `d` after `position` events.
  std::string snapshot(const plugin::Detector& d, uint64_t position) const {
    plugin::SnapshotWriter out;
    const Status s = d.snapshot(out);
    EXPECT_TRUE(s.isOk()) << case_ << ": " << s.message();
    auto bytes = out.finish(
        {.engine = case_.engine, .engine_version = d.snapshotVersion(), .position = position});
    EXPECT_TRUE(bytes.isOk()) << bytes.status().message();
    return bytes ? *bytes : std::string();
  }

  std::vector<std::string> whole(const std::vector<EventPtr>& events) const {
    NumberedMatches sink;
    auto d = make(sink);
    if (d) feed(*d, events, 0, events.size());
    return sink.matches;
  }

  // Stops after k events, snapshots, restores into a fresh detector that
  // takes the rest: the matches of both, in order. `bytes` gets the file.
  std::vector<std::string> split(const std::vector<EventPtr>& events, size_t k,
                                 std::string* bytes = nullptr) const {
    NumberedMatches sink;
    std::string file;
    {
      auto first = make(sink);
      if (!first) return {};
      feed(*first, events, 0, k);
      file = snapshot(*first, k);
    }
    auto in = plugin::SnapshotReader::open(file);
    EXPECT_TRUE(in.isOk()) << in.status().message();
    auto second = make(sink);
    if (!in || !second) return {};
    const Status s = second->restore(*in);
    EXPECT_TRUE(s.isOk()) << case_ << " after " << k << ": " << s.message();
    if (s) feed(*second, events, k, events.size());
    if (bytes != nullptr) *bytes = file;
    return sink.matches;
  }

  // Every byte of `file` flipped in turn (the checksum made right again):
  // a restore either fails with a message or gives a detector that takes
  // the rest of the stream; neither crashes. Returns how many failed.
  size_t mutations(const std::string& file, const std::vector<EventPtr>& events, size_t k) const {
    size_t refused = 0;
    for (size_t i = 12; i + 4 < file.size(); ++i) {
      std::string bad = file;
      bad[i] = static_cast<char>(bad[i] ^ 0x5a);
      const size_t body = bad.size() - 4;
      const uint32_t crc =
          plugin::crc32({reinterpret_cast<const unsigned char*>(bad.data()), body});
      for (size_t b = 0; b < 4; ++b) bad[body + b] = static_cast<char>(crc >> (8 * b));
      auto in = plugin::SnapshotReader::open(bad);
      if (!in) {
        ++refused;
        continue;
      }
      NumberedMatches sink;
      auto d = make(sink);
      if (!d) return refused;
      const Status s = d->restore(*in);
      if (!s) {
        EXPECT_FALSE(s.message().empty());
        ++refused;
        continue;
      }
      // A mutation the checks let through (a timestamp, a count of the
      // state's own) may change the matches, but the detector goes on.
      for (size_t e = k; e < events.size(); ++e) (void)d->onEvent(events[e]);
      (void)d->onWatermark(plugin::Detector::kEndOfTime);
      (void)d->flush();
    }
    return refused;
  }

 private:
  // The plugin named as its engine, loaded once.
  static plugin::PluginPtr engineNamed(const std::string& name) {
    static plugin::PluginLoader loader({std::string(CEPBUS_TEST_BUILD_DIR) + "/plugins"});
    auto p = loader.load(name);
    EXPECT_TRUE(p.isOk()) << p.status().message();
    return p ? *p : nullptr;
  }

  SnapshotCase case_;
};

// Each case over `streams` random streams of 40 events, split at every
// point: a split whose matches differ from the one run's fails the test
// (once per stream, with both). Also fails unless most streams match.
inline void expectEverySplitResumes(const std::vector<SnapshotCase>& cases, uint64_t seed,
                                    int streams = 2) {
  std::mt19937_64 rng(seed);
  size_t with_matches = 0;
  for (const SnapshotCase& c : cases) {
    const SnapshotDifferential diff(c);
    for (int s = 0; s < streams; ++s) {
      const auto events = numberedStream(rng, 40);
      const std::vector<std::string> whole = diff.whole(events);
      with_matches += whole.empty() ? 0 : 1;
      for (size_t k = 0; k <= events.size(); ++k) {
        const std::vector<std::string> split = diff.split(events, k);
        if (split == whole) continue;
        ADD_FAILURE() << c << " split after " << k << "\nwhole: " << ::testing::PrintToString(whole)
                      << "\nsplit: " << ::testing::PrintToString(split);
        break;
      }
    }
  }
  EXPECT_GT(with_matches, cases.size()) << "the streams must give matches to compare";
}

// Each query's snapshot after 20 of 30 events, damaged byte by byte
// (mutations()): a quarter of the bytes at least must be refused.
inline void expectDamageRefused(const std::string& engine, const std::vector<std::string>& queries,
                                uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (const std::string& q : queries) {
    const SnapshotDifferential diff({engine, {q}});
    const auto events = numberedStream(rng, 30);
    std::string file;
    diff.split(events, 20, &file);
    ASSERT_FALSE(file.empty());
    EXPECT_GT(diff.mutations(file, events, 20), file.size() / 4) << q;
  }
}

}  // namespace cepbus::testing
