#include "bus/base/stats/store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace cepbus::stats {
namespace {

constexpr MetricSpec kSent = MetricSpec::counter("sent", "Things sent.");
constexpr MetricSpec kQueued = MetricSpec::gauge("queued", "Things waiting.");
constexpr MetricSpec kLatency = MetricSpec::histogram("latency", "Time to send.");
constexpr MetricSpec kThreads = MetricSpec::gauge("threads", "Threads running.");
constexpr MetricSpec kPipeMetrics[] = {kSent, kQueued, kLatency, kThreads};
constexpr Schema kPipe{"pipe", kPipeMetrics};

constexpr MetricSpec kValveOpen = MetricSpec::gauge("open", "1 while open.");
constexpr MetricSpec kValveMetrics[] = {kValveOpen};
constexpr Schema kValve{"valve", kValveMetrics};

// The value of metric `name` in the only scope of `component`; -1 if none.
double valueOf(const Store& store, std::string_view component, std::string_view name) {
  const std::vector<ScopeSnapshot> scopes = store.scopes(component);
  if (scopes.size() != 1) return -1;
  const MetricValue* metric = scopes[0].find(name);
  return metric == nullptr ? -1 : metric->value;
}

TEST(StatsStoreTest, AMetricIsRegisteredOnce) {
  Store store;
  ScopePtr scope = store.scope(kPipe, {{"pipe", "a"}});
  Counter& first = scope->counter(kSent);
  Counter& again = scope->counter(kSent);
  EXPECT_EQ(&first, &again);
  first.inc();
  again.add(2);
  EXPECT_EQ(valueOf(store, "pipe", "sent"), 3);
  // One metric, not two.
  EXPECT_EQ(store.scopes("pipe").at(0).metrics.size(), 1u);
  // A function registered twice keeps the first.
  scope->gauge(kThreads, [] { return 4.0; });
  scope->gauge(kThreads, [] { return 5.0; });
  EXPECT_EQ(valueOf(store, "pipe", "threads"), 4);
}

TEST(StatsStoreTest, ScopesCarryTheirLabelsAndChildrenAddTheirs) {
  Store store;
  ScopePtr b = store.scope(kPipe, {{"pipe", "b"}});
  ScopePtr a = store.scope(kPipe, {{"pipe", "a"}});
  ScopePtr valve = a->child(kValve, {{"valve", "v1"}});
  a->counter(kSent).add(7);
  b->counter(kSent).add(9);
  valve->gauge(kValveOpen).set(1);

  const std::vector<ScopeSnapshot> pipes = store.scopes("pipe");
  ASSERT_EQ(pipes.size(), 2u);
  EXPECT_EQ(pipes[0].label("pipe"), "b");  // in the order they were made
  EXPECT_EQ(pipes[0].find("sent")->value, 9);
  EXPECT_EQ(pipes[1].label("pipe"), "a");
  EXPECT_EQ(pipes[1].find("sent")->value, 7);
  EXPECT_EQ(pipes[0].label("nothing"), "");
  EXPECT_EQ(pipes[0].find("nothing"), nullptr);

  const std::vector<ScopeSnapshot> valves = store.scopes("valve");
  ASSERT_EQ(valves.size(), 1u);
  EXPECT_EQ(valves[0].component, "valve");
  EXPECT_EQ(valves[0].labels, (Labels{{"pipe", "a"}, {"valve", "v1"}}));
  EXPECT_EQ(valves[0].find("open")->kind, MetricKind::kGauge);
  EXPECT_EQ(store.scopes().size(), 3u);  // every component's
  // Chosen by component and labels before they are read.
  const std::vector<ScopeSnapshot> chosen =
      store.scopes([](std::string_view component, const Labels& labels) {
        return component == "pipe" && labels.at(0).second == "a";
      });
  ASSERT_EQ(chosen.size(), 1u);
  EXPECT_EQ(chosen[0].find("sent")->value, 7);
}

TEST(StatsStoreTest, GaugesGoBothWaysAndHistogramsSummarize) {
  Store store;
  ScopePtr scope = store.scope(kPipe);
  Gauge& queued = scope->gauge(kQueued);
  queued.add(5);
  queued.dec();
  queued.sub(6);
  EXPECT_EQ(valueOf(store, "pipe", "queued"), -2);
  queued.set(3);
  EXPECT_EQ(valueOf(store, "pipe", "queued"), 3);

  Histogram& latency = scope->histogram(kLatency);
  for (uint64_t ns = 1; ns <= 100; ++ns) latency.record(ns);
  const std::vector<ScopeSnapshot> snapshots = store.scopes("pipe");
  const MetricValue* read = snapshots.at(0).find("latency");
  ASSERT_NE(read, nullptr);
  EXPECT_EQ(read->kind, MetricKind::kHistogram);
  EXPECT_EQ(read->summary.count, 100u);
  EXPECT_EQ(read->summary.max_ns, 100u);
  EXPECT_EQ(read->summary.p50_ns, 51u);  // 50 lies in the bucket [50, 51]
}

TEST(StatsStoreTest, FamiliesStayDeclaredWhenTheirScopesGo) {
  Store store;
  store.declare(kValve);
  std::vector<Family> families = store.families();
  ASSERT_EQ(families.size(), 1u);
  EXPECT_EQ(families[0].component, "valve");
  EXPECT_EQ(families[0].name, "open");
  EXPECT_EQ(families[0].kind, MetricKind::kGauge);
  EXPECT_EQ(families[0].help, "1 while open.");
  EXPECT_TRUE(store.scopes().empty());

  // A scope declares its schema, all of it, before registering anything.
  ScopePtr scope = store.scope(kPipe);
  EXPECT_EQ(store.families().size(), 1u + std::size(kPipeMetrics));
  scope.reset();
  EXPECT_EQ(store.families().size(), 1u + std::size(kPipeMetrics));
  EXPECT_TRUE(store.scopes().empty());
}

TEST(StatsStoreTest, RemovingAScopeRemovesItsMetricsAndStopsItsFunctions) {
  Store store;
  auto source = std::make_shared<std::atomic<int>>(0);
  std::weak_ptr<std::atomic<int>> watched = source;
  ScopePtr scope = store.scope(kPipe, {{"pipe", "gone"}});
  scope->gauge(kThreads, [source] { return source->fetch_add(1) + 1.0; });
  source.reset();
  EXPECT_EQ(valueOf(store, "pipe", "threads"), 1);  // called when read
  EXPECT_EQ(valueOf(store, "pipe", "threads"), 2);
  scope.reset();
  EXPECT_TRUE(store.scopes("pipe").empty());
  // What the function held is let go with the scope.
  EXPECT_TRUE(watched.expired());
}

TEST(StatsStoreTest, CopiesShareOneStore) {
  Store store;
  const Store copy = store;
  ScopePtr scope = copy.scope(kPipe);
  scope->counter(kSent).inc();
  EXPECT_EQ(valueOf(store, "pipe", "sent"), 1);
  // A default-constructed store is another one.
  EXPECT_TRUE(Store().scopes().empty());
}

TEST(StatsStoreTest, TwoLiveScopesWithTheSameLabelsAreBothKeptOlderFirst) {
  Store store;
  ScopePtr old_one = store.scope(kPipe, {{"pipe", "x"}});
  ScopePtr new_one = store.scope(kPipe, {{"pipe", "x"}});
  old_one->counter(kSent).add(1);
  new_one->counter(kSent).add(2);
  const std::vector<ScopeSnapshot> scopes = store.scopes("pipe");
  ASSERT_EQ(scopes.size(), 2u);
  EXPECT_EQ(scopes[0].find("sent")->value, 1);
  EXPECT_EQ(scopes[1].find("sent")->value, 2);
  old_one.reset();
  ASSERT_EQ(store.scopes("pipe").size(), 1u);
  EXPECT_EQ(store.scopes("pipe")[0].find("sent")->value, 2);
}

// Threads count into one scope while another reads the store: every
// increment is counted, and the reads are race-free (this test runs under
// ThreadSanitizer in CI).
TEST(StatsStoreTest, ConcurrentIncrementsAreAllCounted) {
  constexpr int kThreadCount = 4;
  constexpr int kPerThread = 20000;
  Store store;
  ScopePtr scope = store.scope(kPipe, {{"pipe", "busy"}});
  Counter& sent = scope->counter(kSent);
  Gauge& queued = scope->gauge(kQueued);
  Histogram& latency = scope->histogram(kLatency);
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      for (const ScopeSnapshot& s : store.scopes()) EXPECT_GE(s.find("sent")->value, 0);
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreadCount; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        sent.inc();
        queued.inc();
        queued.dec();
        latency.record(static_cast<uint64_t>(t * kPerThread + i));
      }
    });
  }
  for (std::thread& w : writers) w.join();
  done.store(true);
  reader.join();
  EXPECT_EQ(valueOf(store, "pipe", "sent"), kThreadCount * kPerThread);
  EXPECT_EQ(valueOf(store, "pipe", "queued"), 0);
  EXPECT_EQ(store.scopes("pipe")[0].find("latency")->summary.count,
            static_cast<uint64_t>(kThreadCount * kPerThread));
}

// Components come and go while the store is read: a scope's function reads
// its component, which is freed right after the scope. Once the scope is
// destroyed no read of it may still run (AddressSanitizer and
// ThreadSanitizer see it if one does).
TEST(StatsStoreTest, ScopesMadeAndDestroyedWhileTheStoreIsRead) {
  Store store;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> reads{0};
  std::thread reader([&] {
    while (!done.load()) {
      for (const ScopeSnapshot& s : store.scopes("pipe")) {
        if (s.find("threads") != nullptr) reads.fetch_add(1);
      }
    }
  });
  // Two components live at a time: each new one replaces the oldest.
  struct Component {
    std::unique_ptr<int> state;
    ScopePtr scope;  // reads `state`: destroyed first
  };
  std::vector<Component> live;
  for (int i = 0; i < 2000 || reads.load() == 0; ++i) {
    Component c{std::make_unique<int>(i), store.scope(kPipe, {{"pipe", std::to_string(i % 3)}})};
    c.scope->gauge(kThreads, [state = c.state.get()] { return static_cast<double>(*state); });
    live.push_back(std::move(c));
    if (live.size() > 2) {
      live.front().scope.reset();
      live.erase(live.begin());
    }
  }
  live.clear();
  done.store(true);
  reader.join();
  EXPECT_TRUE(store.scopes("pipe").empty());
}

}  // namespace
}  // namespace cepbus::stats
