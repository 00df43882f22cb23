#pragma once

// Shared by the join tests: random checkpoint readings, a random symmetric
// time matrix, the brute-force reference join they are checked against, and
// a collecting sink.

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"
#include "tests/testing/match_recorder.h"

namespace cepbus::plugins::join::testing {

// (left id, right id, prob): a joined pair, left arrived first.
using PairKey = std::tuple<EventId, EventId, double>;

using cepbus::testing::MatchRecorder;

// The pairs `sink` recorded, in report order.
inline std::vector<PairKey> joinedPairs(const MatchRecorder& sink) {
  std::vector<PairKey> out;
  for (const cepbus::testing::RecordedMatch& m : sink.matches()) {
    out.emplace_back(m.ids[0], m.ids[1], m.probabilities[0] * m.probabilities[1]);
  }
  return out;
}

inline std::vector<PairKey> sortedPairs(const MatchRecorder& sink) {
  auto out = joinedPairs(sink);
  std::sort(out.begin(), out.end());
  return out;
}

struct Workload {
  int sites = 4;
  std::vector<std::vector<int64_t>> time;  // symmetric, diagonal 0
  std::vector<EventPtr> events;

  std::string matrixCsv() const {
    std::string csv;
    for (const auto& row : time) {
      for (size_t c = 0; c < row.size(); ++c) csv += (c ? "," : "") + std::to_string(row[c]);
      csv += "\n";
    }
    return csv;
  }
};

// Readings of `plates` plates at `sites` sites, ts non-decreasing with
// repeats, probabilities in [0.3, 1) with exact binary ties now and then.
inline Workload randomWorkload(std::mt19937_64& rng, size_t n, int sites, int plates,
                               int64_t max_time, const std::string& type = "Reading") {
  Workload w;
  w.sites = sites;
  w.time.assign(sites, std::vector<int64_t>(sites, 0));
  for (int x = 0; x < sites; ++x) {
    for (int y = x + 1; y < sites; ++y) {
      w.time[x][y] = w.time[y][x] = 1 + static_cast<int64_t>(rng() % max_time);
    }
  }
  Timestamp ts = 0;
  for (size_t i = 0; i < n; ++i) {
    ts += static_cast<Timestamp>(rng() % 3);
    double p = 0.3 + 0.7 * static_cast<double>(rng() % 1000) / 1000.0;
    if (rng() % 8 == 0) p = 0.5 + 0.25 * static_cast<double>(rng() % 3);
    w.events.push_back(EventBuilder(type)
                           .at(ts)
                           .set("plate", Value("P" + std::to_string(rng() % plates)))
                           .set("site", Value(static_cast<int64_t>(rng() % sites)))
                           .probability(p)
                           .build());
  }
  return w;
}

// Every pair i < j (arrival order) of the same plate with |dt| below
// min(time[x][y], window) and p_i * p_j >= threshold, each reading itself at
// least the threshold.
inline std::vector<PairKey> referenceJoin(const Workload& w, double threshold, int64_t window) {
  std::vector<PairKey> out;
  const Symbol plate = Symbol::intern("plate"), site = Symbol::intern("site");
  for (size_t j = 0; j < w.events.size(); ++j) {
    const Event& b = *w.events[j];
    if (b.probability() < threshold) continue;
    for (size_t i = 0; i < j; ++i) {
      const Event& a = *w.events[i];
      if (a.probability() < threshold || !(*a.find(plate) == *b.find(plate))) continue;
      const int64_t x = a.find(site)->asInt(), y = b.find(site)->asInt();
      const int64_t bound = std::min(w.time[x][y], window);
      if (b.ts() - a.ts() >= bound) continue;
      const double p = a.probability() * b.probability();
      if (p >= threshold) out.emplace_back(a.id(), b.id(), p);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace cepbus::plugins::join::testing
