// router_dispatch_bench: the cost of routing an event through the broker.
//
// Measurements (one JSON object each):
//   flow_st_send          StFlow::send to one target, no router: the floor
//   router_dispatch_st    Broker::publish -> StFlow -> one subscriber (exact address)
//   router_fanout_st      Broker::publish -> StFlow -> 8 subscribers ("stocks.*")
//   router_wildcard_cached  publish with 10,000 wildcard subscriptions, addresses
//                         cycling over a working set (route-cache hits)
//   router_wildcard_miss  publish with 10,000 wildcard subscriptions, every
//                         publish to a new address (trie match + route build)
//   subscription_match    SubscriptionTable::match alone over the same table
//   router_dispatch_st_mt the one-subscriber case from 2 publisher threads
// Events and exchanges are built before timing; the consumer only counts.
// `allocs_per_event` counts calls to operator new during the timed loop (the
// straight-through path is meant to allocate nothing).
//
// Usage: router_dispatch_bench [--events N]

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bus/core/event.h"
#include "flows/st_flow.h"
#include "router/broker.h"
#include "router/subscription_table.h"
#include "tests/bench/alloc_counter.h"

namespace {

using cepbus::EventBuilder;
using cepbus::EventPtr;
using cepbus::Status;
using cepbus::Symbol;
using cepbus::Value;
using namespace cepbus::router;
namespace flows = cepbus::flows;
using Clock = std::chrono::steady_clock;

constexpr size_t kEventPool = 1024;

std::vector<EventPtr> makeEvents(size_t n) {
  std::vector<EventPtr> events;
  events.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    events.push_back(EventBuilder("Tick")
                         .at(static_cast<cepbus::Timestamp>(i))
                         .set(Symbol::intern("n"), Value(1))
                         .build());
  }
  return events;
}

std::vector<flows::Exchange> makeExchanges(const std::vector<EventPtr>& events,
                                           std::string_view address) {
  std::vector<flows::Exchange> out;
  for (const EventPtr& e : events) {
    flows::Exchange ex;
    ex.event = e;
    ex.address = Symbol::intern(address);
    out.push_back(ex);
  }
  return out;
}

std::unique_ptr<Broker> stBroker(std::shared_ptr<Registry> registry) {
  auto policy = std::make_unique<DeliveryPolicy>("st");
  (void)policy->addFlow(std::make_unique<flows::StFlow>("st"));
  auto broker = std::make_unique<Broker>(std::move(policy), std::move(registry));
  if (!broker->start().isOk()) std::abort();
  return broker;
}

uint64_t g_timed_allocations = 0;  // operator new calls during the last timeIt()

void print(const char* bench, const std::string& params, uint64_t events, double seconds,
           const std::string& extra = "") {
  std::printf(
      "{\"bench\":\"%s\",\"params\":{%s},\"events\":%llu,\"seconds\":%.4f,"
      "\"events_per_s\":%.0f,\"ns_per_event\":%.2f,\"allocs_per_event\":%.3f%s}\n",
      bench, params.c_str(), static_cast<unsigned long long>(events), seconds, events / seconds,
      seconds * 1e9 / static_cast<double>(events),
      static_cast<double>(g_timed_allocations) / static_cast<double>(events), extra.c_str());
  std::fflush(stdout);
}

template <typename Fn>
double timeIt(Fn&& fn) {
  const uint64_t allocations = cepbus::bench::allocationCount();
  const auto start = Clock::now();
  fn();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  g_timed_allocations = cepbus::bench::allocationCount() - allocations;
  return seconds;
}

class CountingTarget final : public flows::DeliveryTarget {
 public:
  const std::string& name() const override { return name_; }
  Status deliver(const flows::Exchange&, flows::DeliveryContext&) override {
    ++count;
    return Status::ok();
  }
  uint64_t count = 0;

 private:
  std::string name_ = "count";
};

void benchFlowAlone(uint64_t n, const std::vector<EventPtr>& events) {
  flows::StFlow flow;
  (void)flow.start();
  CountingTarget target;
  flows::DeliveryTarget* targets[] = {&target};
  auto exchanges = makeExchanges(events, "bench.flow");
  const double s = timeIt([&] {
    for (uint64_t i = 0; i < n; ++i) flow.send(exchanges[i % kEventPool], targets);
  });
  if (target.count != n) std::abort();
  print("flow_st_send", "\"targets\":1", n, s);
}

void benchDispatch(uint64_t n, const std::vector<EventPtr>& events, int subscribers) {
  auto broker = stBroker(std::make_shared<Registry>());
  uint64_t delivered = 0;
  for (int i = 0; i < subscribers; ++i) {
    const std::string name = "sub" + std::to_string(i);
    (void)broker->addEndpoint(name, [&delivered](const flows::Exchange&, flows::DeliveryContext&) {
      ++delivered;
      return Status::ok();
    });
    (void)broker->subscribe(name, subscribers == 1 ? "stocks.ibm" : "stocks.*");
  }
  auto exchanges = makeExchanges(events, "stocks.ibm");
  broker->publish(exchanges[0]);  // resolve the route before timing
  delivered = 0;
  const double s = timeIt([&] {
    for (uint64_t i = 0; i < n; ++i) broker->publish(exchanges[i % kEventPool]);
  });
  if (delivered != n * static_cast<uint64_t>(subscribers)) std::abort();
  char extra[96];
  std::snprintf(extra, sizeof extra, ",\"deliveries_per_s\":%.0f", delivered / s);
  print(subscribers == 1 ? "router_dispatch_st" : "router_fanout_st",
        "\"subscribers\":" + std::to_string(subscribers) + ",\"flow\":\"st\"", n, s, extra);
}

void benchDispatchThreads(uint64_t n, const std::vector<EventPtr>& events, int threads) {
  auto broker = stBroker(std::make_shared<Registry>());
  std::atomic<uint64_t> delivered{0};
  (void)broker->addEndpoint("sub", [&delivered](const flows::Exchange&, flows::DeliveryContext&) {
    delivered.fetch_add(1, std::memory_order_relaxed);
    return Status::ok();
  });
  (void)broker->subscribe("sub", "stocks.ibm");
  auto exchanges = makeExchanges(events, "stocks.ibm");
  broker->publish(exchanges[0]);
  delivered = 0;
  const uint64_t each = n / static_cast<uint64_t>(threads);
  const double s = timeIt([&] {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&] {
        for (uint64_t i = 0; i < each; ++i) broker->publish(exchanges[i % kEventPool]);
      });
    }
    for (auto& w : workers) w.join();
  });
  if (delivered.load() != each * static_cast<uint64_t>(threads)) std::abort();
  print("router_dispatch_st_mt", "\"subscribers\":1,\"threads\":" + std::to_string(threads),
        each * static_cast<uint64_t>(threads), s);
}

// 10,000 wildcard subscriptions over 1,000 endpoints: per symbol s<i>, the
// patterns "stocks.s<i>.*" and "#.s<i>" (on two different endpoints). The
// cached working set publishes to "stocks.s<k>.s<k>" (two deliveries); the
// misses go to fresh addresses "stocks.s<k>.m<j>" (one delivery).
void benchWildcards(uint64_t n, const std::vector<EventPtr>& events) {
  constexpr int kSymbols = 5000;
  constexpr int kEndpoints = 1000;
  auto broker = stBroker(std::make_shared<Registry>());
  uint64_t delivered = 0;
  for (int e = 0; e < kEndpoints; ++e) {
    (void)broker->addEndpoint("ep" + std::to_string(e),
                              [&delivered](const flows::Exchange&, flows::DeliveryContext&) {
                                ++delivered;
                                return Status::ok();
                              });
  }
  SubscriptionTable table;  // the same patterns, for the raw match rate
  auto target = std::make_shared<CountingTarget>();
  const auto build_start = Clock::now();
  for (int i = 0; i < kSymbols; ++i) {
    const std::string sym = "s" + std::to_string(i);
    (void)broker->subscribe("ep" + std::to_string(i % kEndpoints), "stocks." + sym + ".*");
    (void)broker->subscribe("ep" + std::to_string((i + 1) % kEndpoints), "#." + sym);
    (void)table.add("stocks." + sym + ".*", target);
    (void)table.add("#." + sym, target);
  }
  const double build_s = std::chrono::duration<double>(Clock::now() - build_start).count();

  // Cached: a working set of 1,000 addresses.
  std::vector<flows::Exchange> working;
  for (int i = 0; i < 1000; ++i) {
    flows::Exchange ex;
    ex.event = events[static_cast<size_t>(i) % kEventPool];
    const std::string sym = "s" + std::to_string(i * 5);
    ex.address = Symbol::intern("stocks." + sym + "." + sym);
    working.push_back(ex);
  }
  for (const auto& ex : working) broker->publish(ex);
  delivered = 0;
  double s = timeIt([&] {
    for (uint64_t i = 0; i < n; ++i) broker->publish(working[i % working.size()]);
  });
  if (delivered != 2 * n) std::abort();
  char extra[128];
  std::snprintf(extra, sizeof extra, ",\"build_subscriptions_s\":%.3f", build_s);
  print("router_wildcard_cached", "\"wildcards\":10000,\"working_set\":1000", n, s, extra);

  // Misses: every publish to an address not seen before.
  const uint64_t misses = std::min<uint64_t>(n / 20, 200'000);
  std::vector<flows::Exchange> fresh;
  std::vector<std::string> names;
  for (uint64_t i = 0; i < misses; ++i) {
    flows::Exchange ex;
    ex.event = events[i % kEventPool];
    names.push_back("stocks.s" + std::to_string(i % kSymbols) + ".m" + std::to_string(i));
    ex.address = Symbol::intern(names.back());
    fresh.push_back(ex);
  }
  delivered = 0;
  s = timeIt([&] {
    for (const auto& ex : fresh) broker->publish(ex);
  });
  if (delivered != misses) std::abort();
  print("router_wildcard_miss", "\"wildcards\":10000", misses, s);

  std::vector<const Subscription*> out;
  uint64_t matched = 0;
  s = timeIt([&] {
    for (const std::string& name : names) {
      out.clear();
      table.match(name, out);
      matched += out.size();
    }
  });
  if (matched != misses) std::abort();
  print("subscription_match", "\"wildcards\":10000", misses, s);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t n = 20'000'000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--events") == 0 && i + 1 < argc)
      n = std::strtoull(argv[++i], nullptr, 10);
  }
  const std::vector<EventPtr> events = makeEvents(kEventPool);
  benchFlowAlone(n, events);
  benchDispatch(n, events, 1);
  benchDispatch(n / 4, events, 8);
  benchWildcards(n / 4, events);
  benchDispatchThreads(n, events, 2);
  return 0;
}
