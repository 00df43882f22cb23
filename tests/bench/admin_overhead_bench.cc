// admin_overhead_bench: what watching the bus costs its data path.
//
// The router benchmark's one-subscriber straight-through case (Broker::publish
// -> StFlow -> one endpoint, as router_dispatch_bench's router_dispatch_st),
// with 100 more endpoints and subscriptions so that a scrape has a realistic
// size, and the admin HTTP listener running on the same broker. Measured in
// the same process, in interleaved rounds, three ways:
//
//   off        nobody talks to the listener
//   scrape     a client GETs /metrics every 100 ms (keep-alive)
//   dashboard  the scraper, plus what an open dashboard page does: every
//              second GET /api/components, /api/stages, /api/queries,
//              /api/routes and /api/flows, and a WebSocket feed of the composite-event
//              address, which receives 1 event in 10,000 of the publisher's
//   chromium   (with --chromium) the scraper, plus the real dashboard page
//              in headless Chromium (it renders on this box's cores too)
//
// Each round publishes for --round-ms on one thread, the modes in a rotating
// order. Per mode the report gives the median over the rounds of events per
// second of wall time and of events per second of the publishing thread's
// own CPU time, and the costs relative to "off". On a shared, loaded box the
// wall rate swings with whatever else runs; the CPU rate counts only the
// publisher's own work (what the data path pays: cache lines and locks it
// shares with the scraper), so its cost is the figure to quote, the wall
// cost the sanity check.
//
// Usage: admin_overhead_bench [--rounds N] [--round-ms MS] [--chromium]

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bus/core/event.h"
#include "bus/host/loader/plugin_loader.h"
#include "flows/st_flow.h"
#include "router/broker.h"
#include "services/http/http_listener.h"
#include "services/http/http_listener_config.h"

extern char** environ;

namespace {

using namespace cepbus;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace websocket = beast::websocket;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr size_t kEventPool = 1024;
constexpr int kExtraEndpoints = 100;
constexpr uint64_t kCompositeEvery = 10000;

// A keep-alive HTTP client for the scraper and the dashboard emulation.
class Client {
 public:
  explicit Client(int port) : stream_(ioc_) {
    stream_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  }
  size_t get(const std::string& target) {
    bhttp::request<bhttp::empty_body> request(bhttp::verb::get, target, 11);
    request.set(bhttp::field::host, "127.0.0.1");
    bhttp::write(stream_, request);
    bhttp::response<bhttp::string_body> response;
    bhttp::read(stream_, buffer_, response);
    return response.body().size();
  }

 private:
  asio::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

// Runs `work` every `period` on its own thread until stopped.
class Ticker {
 public:
  Ticker(std::chrono::milliseconds period, std::function<void()> work)
      : thread_([this, period, work = std::move(work)] {
          auto next = Clock::now();
          while (!stop_.load()) {
            work();
            next += period;
            while (!stop_.load() && Clock::now() < next) {
              std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
          }
        }) {}
  ~Ticker() {
    stop_.store(true);
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A WebSocket feed reader, as the dashboard's.
class Feed {
 public:
  Feed(int port, const std::string& pattern) : ws_(ioc_) {
    ws_.next_layer().connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    ws_.handshake("127.0.0.1", "/ws?address=" + pattern);
    thread_ = std::thread([this] {
      beast::error_code ec;
      while (!ec) {
        beast::flat_buffer buffer;
        ws_.read(buffer, ec);
        if (!ec) received.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  ~Feed() {
    beast::error_code ec;
    ws_.next_layer().shutdown(tcp::socket::shutdown_both, ec);
    thread_.join();
  }
  std::atomic<uint64_t> received{0};

 private:
  asio::io_context ioc_;
  websocket::stream<tcp::socket> ws_;
  std::thread thread_;
};

// Headless Chromium showing the dashboard; killed on destruction.
class Browser {
 public:
  Browser(int port, const std::filesystem::path& profile) {
    std::vector<std::string> args = {"/usr/bin/chromium",
                                     "--headless",
                                     "--no-sandbox",
                                     "--disable-gpu",
                                     "--disable-dev-shm-usage",
                                     "--remote-debugging-port=0",
                                     "--user-data-dir=" + profile.string(),
                                     "http://127.0.0.1:" + std::to_string(port) + "/"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Browser() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  bool started() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 15;
  int round_ms = 1000;
  bool chromium = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--round-ms") && i + 1 < argc) round_ms = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--chromium")) chromium = true;
  }

  auto policy = std::make_unique<router::DeliveryPolicy>("st");
  (void)policy->addFlow(std::make_unique<flows::StFlow>("st"));
  auto registry = std::make_shared<router::Registry>();
  router::Broker broker(std::move(policy), registry);
  if (!broker.start()) return 1;
  uint64_t delivered = 0;
  (void)broker.addEndpoint("sub", [&delivered](const flows::Exchange&, flows::DeliveryContext&) {
    ++delivered;
    return Status::ok();
  });
  (void)broker.subscribe("sub", "stocks.ibm");
  for (int i = 0; i < kExtraEndpoints; ++i) {
    const std::string name = "idle" + std::to_string(i);
    (void)broker.addEndpoint(
        name, [](const flows::Exchange&, flows::DeliveryContext&) { return Status::ok(); });
    (void)broker.subscribe(name, "other." + std::to_string(i) + ".#");
  }

  plugin::PluginLoader loader{std::vector<std::string>{}};
  services::ServiceContext context{broker, *registry, loader};
  services::http::HttpListenerConfig config;
  config.port = 0;
  services::http::HttpListenerService listener(config, {}, context);
  if (!listener.start()) return 1;
  const int port = listener.port();

  std::vector<flows::Exchange> ticks;
  for (size_t i = 0; i < kEventPool; ++i) {
    flows::Exchange ex;
    ex.event = EventBuilder("Tick")
                   .at(static_cast<Timestamp>(i))
                   .set(Symbol::intern("n"), Value(1))
                   .build();
    ex.address = Symbol::intern("stocks.ibm");
    ticks.push_back(std::move(ex));
  }
  flows::Exchange composite = ticks[0];
  composite.address = Symbol::intern("matches.pairs");
  broker.publish(ticks[0]);  // resolve the routes before timing
  broker.publish(composite);

  std::vector<std::string> modes = {"off", "scrape", "dashboard"};
  if (chromium && std::filesystem::exists("/usr/bin/chromium")) modes.push_back("chromium");
  std::map<std::string, std::vector<double>> rates;
  std::map<std::string, std::vector<double>> cpu_rates;
  std::map<std::string, uint64_t> scrapes;
  const auto profile = std::filesystem::temp_directory_path() /
                       ("cepbus-bench-chromium-" + std::to_string(::getpid()));

  for (int round = 0; round < rounds; ++round) {
    for (size_t m = 0; m < modes.size(); ++m) {
      const std::string& mode = modes[(m + static_cast<size_t>(round)) % modes.size()];
      std::unique_ptr<Client> scraper;
      std::unique_ptr<Ticker> scrape_ticker;
      std::unique_ptr<Client> api;
      std::unique_ptr<Ticker> api_ticker;
      std::unique_ptr<Feed> feed;
      std::unique_ptr<Browser> browser;
      std::atomic<uint64_t> scraped{0};
      if (mode != "off") {
        scraper = std::make_unique<Client>(port);
        scrape_ticker = std::make_unique<Ticker>(std::chrono::milliseconds(100), [&] {
          scraper->get("/metrics");
          scraped.fetch_add(1);
        });
      }
      if (mode == "dashboard") {
        api = std::make_unique<Client>(port);
        api_ticker = std::make_unique<Ticker>(std::chrono::milliseconds(1000), [&] {
          for (const char* path :
               {"/api/components", "/api/stages", "/api/queries", "/api/routes", "/api/flows"}) {
            api->get(path);
          }
        });
        feed = std::make_unique<Feed>(port, "matches.%23");
      }
      if (mode == "chromium") {
        browser = std::make_unique<Browser>(port, profile);
        std::this_thread::sleep_for(std::chrono::seconds(3));  // let it load and start polling
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      delivered = 0;
      uint64_t n = 0;
      scraped.store(0);  // only the scrapes during the timed window count
      const double cpu_start = threadCpuSeconds();
      const auto start = Clock::now();
      const auto end = start + std::chrono::milliseconds(round_ms);
      while (Clock::now() < end) {
        for (int k = 0; k < 1000; ++k, ++n) {
          broker.publish(ticks[n % kEventPool]);
          if (n % kCompositeEvery == 0) broker.publish(composite);
        }
      }
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      const double cpu_seconds = threadCpuSeconds() - cpu_start;
      const uint64_t scraped_in_window = scraped.load();
      if (delivered != n) return 2;
      rates[mode].push_back(static_cast<double>(n) / seconds);
      cpu_rates[mode].push_back(static_cast<double>(n) / cpu_seconds);
      scrapes[mode] += scraped_in_window;
    }
  }
  listener.stop();
  std::filesystem::remove_all(profile);

  const double base = median(rates["off"]);
  const double cpu_base = median(cpu_rates["off"]);
  for (const std::string& mode : modes) {
    const double wall = median(rates[mode]);
    const double cpu = median(cpu_rates[mode]);
    std::printf(
        "{\"bench\":\"admin_overhead\",\"params\":{\"mode\":\"%s\",\"rounds\":%d,\"round_ms\":%d,"
        "\"endpoints\":%d,\"scrape_period_ms\":%d},\"events_per_s\":%.0f,"
        "\"events_per_cpu_s\":%.0f,\"best_events_per_s\":%.0f,\"scrapes\":%llu,"
        "\"cost_percent\":%.2f,\"wall_cost_percent\":%.2f}\n",
        mode.c_str(), rounds, round_ms, kExtraEndpoints + 1, mode == "off" ? 0 : 100, wall, cpu,
        *std::max_element(rates[mode].begin(), rates[mode].end()),
        static_cast<unsigned long long>(scrapes[mode]),
        cpu_base > 0 ? 100.0 * (1 - cpu / cpu_base) : 0.0,
        base > 0 ? 100.0 * (1 - wall / base) : 0.0);
  }
  return 0;
}
