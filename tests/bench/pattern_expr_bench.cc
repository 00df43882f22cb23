// pattern_expr_bench: the cost of compiled pattern-language expressions.
//
// Measures, on events built up front:
//   where_conjuncts - the equal-prices example's three WHERE conjuncts over
//                     (a, b, c) triples, as an engine checks them;
//   iteration       - the Kleene predicate b[i].price > b[i-1].price checked
//                     on each prefix of a growing b[];
//   aggregate       - avg(b[].price) < a.price over a 16-element b[];
//   filter          - a subscription filter `price > 10 AND symbol = 'IBM'`;
//   parse           - parsing and checking the example query (control plane).
// Prints one JSON object per measurement; "events_per_s" is evaluations (or
// parses) per second.
//
// Usage: pattern_expr_bench [--iterations N] [--events N]
// (--events: distinct events cycled through, default 4096; a small number
// keeps them in cache and isolates the evaluation cost)

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/pattern/expr_compiler.h"
#include "bus/core/pattern/filter.h"
#include "bus/core/pattern/parser.h"

namespace {

using namespace cepbus;
using namespace cepbus::pattern;
using Clock = std::chrono::steady_clock;

constexpr const char* kQuery =
    "PATTERN SEQ(Stock a, Stock b, Stock c) "
    "WHERE a.price = b.price AND b.price = c.price AND a.symbol != b.symbol "
    "WITHIN 1000 STRATEGY skip_till_any_match "
    "RETURN EqualPrices(a.symbol, b.symbol, c.symbol, a.price)";

std::vector<EventPtr> makeStocks(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  const char* symbols[] = {"IBM", "MSFT", "ORCL", "SAP"};
  std::vector<EventPtr> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(EventBuilder("Stock")
                      .at(static_cast<Timestamp>(i))
                      .set("symbol", Value(symbols[rng() % 4]))
                      .set("price", Value(static_cast<int64_t>(rng() % 20)))
                      .set("volume", Value(static_cast<double>(rng() % 1000)))
                      .build());
  }
  return out;
}

Query mustParse(const std::string& text) {
  Result<Query> q = parseQuery(text);
  if (!q.isOk()) {
    std::fprintf(stderr, "%s\n", q.status().toString().c_str());
    std::exit(1);
  }
  return *q;
}

size_t g_events = 0;

void report(const char* bench, uint64_t n, double seconds, uint64_t matches) {
  std::printf(
      "{\"bench\":\"pattern_expr\",\"params\":{\"case\":\"%s\",\"iterations\":%llu,"
      "\"events\":%zu},"
      "\"events_per_s\":%.0f,\"ns_per_eval\":%.2f,\"matches\":%llu}\n",
      bench, static_cast<unsigned long long>(n), g_events, static_cast<double>(n) / seconds,
      seconds * 1e9 / static_cast<double>(n), static_cast<unsigned long long>(matches));
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void benchWhere(uint64_t iterations, const std::vector<EventPtr>& events) {
  Query q = mustParse(kQuery);
  Result<std::vector<Conjunct>> conj = compileConjuncts(q.where, BindingLayout::forQuery(q));
  SlotBinding slots[3];
  uint64_t matches = 0;
  const size_t n = events.size();
  const auto start = Clock::now();
  for (uint64_t i = 0; i < iterations; ++i) {
    slots[0].event = events[i % n].get();
    slots[1].event = events[(i * 7 + 1) % n].get();
    slots[2].event = events[(i * 13 + 2) % n].get();
    bool all = true;
    for (const Conjunct& c : *conj) all = all && c.test(slots);
    matches += all;
  }
  report("where_conjuncts", iterations, secondsSince(start), matches);
}

void benchIteration(uint64_t iterations, const std::vector<EventPtr>& events) {
  Query q = mustParse("PATTERN SEQ(Stock a, Stock+ b[]) WHERE b[i].price > b[i-1].price");
  Result<std::vector<Conjunct>> conj = compileConjuncts(q.where, BindingLayout::forQuery(q));
  const Conjunct& rising = (*conj)[0];
  std::vector<const Event*> run;
  for (const EventPtr& e : events) run.push_back(e.get());
  SlotBinding slots[2];
  uint64_t matches = 0;
  const auto start = Clock::now();
  for (uint64_t i = 0; i < iterations; ++i) {
    const size_t len = 2 + i % 30;
    const size_t from = i % (run.size() - len);
    slots[1].events = std::span<const Event* const>(run.data() + from, len);
    matches += rising.test(slots);
  }
  report("iteration", iterations, secondsSince(start), matches);
}

void benchAggregate(uint64_t iterations, const std::vector<EventPtr>& events) {
  Query q = mustParse("PATTERN SEQ(Stock a, Stock+ b[]) WHERE avg(b[].price) < a.price");
  Result<CompiledExpr> e = compileExpr(*q.where, BindingLayout::forQuery(q));
  std::vector<const Event*> run;
  for (const EventPtr& ev : events) run.push_back(ev.get());
  SlotBinding slots[2];
  uint64_t matches = 0;
  const auto start = Clock::now();
  for (uint64_t i = 0; i < iterations; ++i) {
    const size_t from = i % (run.size() - 17);
    slots[0].event = run[from + 16];
    slots[1].events = std::span<const Event* const>(run.data() + from, 16);
    matches += e->test(slots);
  }
  report("aggregate16", iterations, secondsSince(start), matches);
}

void benchFilter(uint64_t iterations, const std::vector<EventPtr>& events) {
  Result<EventFilterPtr> f = compileFilter("price > 10 AND symbol = 'IBM'");
  uint64_t matches = 0;
  const auto start = Clock::now();
  for (uint64_t i = 0; i < iterations; ++i) matches += (*f)->matches(*events[i % events.size()]);
  report("filter", iterations, secondsSince(start), matches);
}

void benchParse(uint64_t iterations) {
  uint64_t ok = 0;
  const auto start = Clock::now();
  for (uint64_t i = 0; i < iterations; ++i) ok += parseQuery(kQuery).isOk();
  report("parse", iterations, secondsSince(start), ok);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t iterations = 5'000'000;
  size_t events_count = 4096;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      iterations = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--events") == 0 && i + 1 < argc) {
      events_count = std::max<size_t>(64, std::strtoull(argv[++i], nullptr, 10));
    } else {
      std::fprintf(stderr, "usage: pattern_expr_bench [--iterations N] [--events N]\n");
      return 2;
    }
  }
  const std::vector<EventPtr> events = makeStocks(events_count, 42);
  g_events = events.size();
  benchWhere(iterations, events);
  benchIteration(iterations, events);
  benchAggregate(iterations, events);
  benchFilter(iterations, events);
  benchParse(iterations / 100);
  return 0;
}
