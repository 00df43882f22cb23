// AMQP 1.0 end to end, cepbus against reference brokers, with one client.
//
// One publisher connection and one subscriber connection (one Proton C++
// container) on loopback; ~100-byte messages; messages/s end to end (first
// send to last receive) and the latency of each message (send -> receive,
// one steady clock) as p50/p90/p99/p99.9. For each target:
//   modes:  at-most-once  (pre-settled publish, settled-on-send consume)
//           at-least-once (unsettled publish and consume, each accepted)
//   rates:  flood (as fast as credit allows), 1,000/s and 10,000/s
// Targets (each started by the benchmark, loopback only, one at a time):
//   cepbus      the real `cepbus` binary; bench.# on a reliable route through a
//               stage: at-least-once runs are journaled (SQLite) and each event
//               is forgotten only after the subscriber's accept; at-most-once
//               runs pass the same stage best effort
//   cepbus-cep  the same plus a CEP query on the path: events in on
//               bench.ticks, one composite event per event out on bench.seen
//               (published with output_qos=reliable: kept until delivered;
//               run_inline=when_idle)
//   rabbitmq    Debian's rabbitmq-server with rabbitmq_amqp1_0, /queue/bench
//   proton      the Proton C example broker (broker.c), queue "bench"
// (scripts/install-bench-deps.sh installs the references; missing ones are
// skipped with a note on stderr.)
//
//   amqp_bench [--messages N] [--seconds S] [--targets a,b,...] [--modes m,...]
//              [--rates flood,1000,10000] [--listener ATTRS] [--stage ATTRS]
//              [--journal ATTRS] [--query-options NAME=VALUE,...] [--cepbus PATH]
//              [--beside COMMAND]
//
// --listener adds attributes to cepbus's <listeners><amqp> element, e.g.
// 'subscriber-buffer="200" credit-window="50"' (flow control: the smaller
// the subscriber buffer, the less a flood queues inside the bus). --stage
// replaces the attributes of the route's stage (default
// 'run-inline="when-idle"': the AMQP thread routes an event itself while the
// stage is idle; 'run-inline="never"' always hands it to the stage's thread).
// --journal adds attributes to the <journal> element, e.g.
// 'commit-delay-us="5000"'. --query-options replaces the options added to
// cepbus-cep's query (default 'run_inline=when_idle': the AMQP thread runs
// the detector itself while the query is idle; 'run_inline=never' hands
// every event to the query's thread). --cepbus runs another cepbus executable (another
// build, to compare two versions on the same machine in one session).
//
// --beside runs COMMAND (through /bin/sh, "{port}" replaced by the target's
// AMQP port) during each measurement, from a second before it until it
// ends, then stops it with SIGTERM and prints the JSON line it printed: a
// client beside the measured pair, such as tests/bench/hostile_client.py
// (the pair's figures then say what that client costs the others).
//
// Flood runs send N messages (default 200000); a fixed-rate run sends
// rate x S messages (default S = 10). One JSON object per measurement.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <proton/codec/map.hpp>
#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/delivery_mode.hpp>
#include <proton/duration.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/child_process.h"
#include "tests/testing/ports.h"

namespace {

using cepbus::testing::canConnect;
using cepbus::testing::freePort;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using cepbus::testing::ChildProcess;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// Event time keeps growing across runs: a CEP query on the path drops events
// older than what it has seen.
int64_t next_ts = 1;

bool waitListening(int port, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (canConnect(port)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

struct Run {
  std::string url;
  std::string publish_to;
  std::string subscribe_to;
  size_t messages = 0;
  double rate = 0;  // 0: flood
  bool at_least_once = false;
};

struct Measured {
  size_t sent = 0;
  size_t received = 0;
  // Publishes the broker refused (at least once): rejected, released.
  size_t rejected = 0;
  size_t released = 0;
  size_t message_bytes = 0;
  double seconds = 0;
  double p50_us = 0;
  double p90_us = 0;
  double p99_us = 0;
  double p999_us = 0;
  bool timed_out = false;
};

// Finds the send time in what came back: a property for brokers that pass
// messages through, a body entry for cepbus (attributes travel in the body),
// and for a composite event an entry whose name ends in "sent_ns".
int64_t sentNs(const proton::message& m) {
  const auto& props = m.properties();
  if (props.exists("sent_ns")) return proton::get<int64_t>(props.get("sent_ns"));
  if (proton::type_id_is_scalar(m.body().type()) || m.body().empty()) return -1;
  std::map<std::string, proton::scalar> body;
  try {
    proton::get(m.body(), body);
  } catch (const std::exception&) {
    return -1;
  }
  for (const auto& [key, value] : body) {
    if (key.size() >= 7 && key.compare(key.size() - 7, 7, "sent_ns") == 0) {
      return proton::get<int64_t>(value);
    }
  }
  return -1;
}

class BenchClient final : public proton::messaging_handler {
 public:
  explicit BenchClient(Run run) : run_(std::move(run)) { latencies_.reserve(run_.messages); }

  Measured result() {
    Measured m;
    m.sent = sent_;
    m.received = received_;
    m.rejected = rejected_;
    m.released = released_;
    m.message_bytes = message_bytes_;
    m.timed_out = timed_out_;
    m.seconds = std::chrono::duration<double>(last_receive_ - first_send_).count();
    if (!latencies_.empty()) {
      std::sort(latencies_.begin(), latencies_.end());
      const auto at = [&](size_t i) { return static_cast<double>(latencies_[i]) / 1000.0; };
      const auto percentile = [&](size_t per_mille) {
        return at(std::min(latencies_.size() - 1, latencies_.size() * per_mille / 1000));
      };
      m.p50_us = percentile(500);
      m.p90_us = percentile(900);
      m.p99_us = percentile(990);
      m.p999_us = percentile(999);
    }
    return m;
  }

 private:
  proton::connection_options options() {
    proton::connection_options o;
    o.sasl_allowed_mechs("ANONYMOUS");
    return o;
  }
  void on_container_start(proton::container& c) override {
    subscriber_ = c.connect(run_.url, options());
    watchdog(c);
  }
  // Gives up when nothing arrived for 5 s (a reference that loses or
  // stalls); the result then says timed_out.
  void watchdog(proton::container& c) {
    c.schedule(proton::duration(1000), [this, &c] {
      if (finished_) return;
      if (received_ == last_seen_ && ++idle_seconds_ >= 5) {
        timed_out_ = true;
        finish();
        return;
      }
      if (received_ != last_seen_) idle_seconds_ = 0;
      last_seen_ = received_;
      watchdog(c);
    });
  }
  void on_connection_open(proton::connection& c) override {
    if (c == subscriber_) {
      proton::receiver_options ro;
      ro.credit_window(1000);
      if (!run_.at_least_once) ro.delivery_mode(proton::delivery_mode::AT_MOST_ONCE);
      c.open_receiver(run_.subscribe_to, ro);
    } else {
      proton::sender_options so;
      if (!run_.at_least_once) so.delivery_mode(proton::delivery_mode::AT_MOST_ONCE);
      sender_ = c.open_sender(run_.publish_to, so);
    }
  }
  void on_receiver_open(proton::receiver& r) override {
    // The subscription is in place: now the publisher.
    publisher_ = r.container().connect(run_.url, options());
  }
  void on_sender_open(proton::sender&) override {
    first_send_ = Clock::now();
    if (run_.rate > 0) pace();
  }
  // Every millisecond, the messages due by then. The timer is the
  // container's (a connection's timed work outlives the connection in Proton
  // 0.37); the sending is the connection's work, so that it is written out.
  void pace() {
    if (finished_ || sent_ >= run_.messages || !publisher_) return;
    sendAllowed();
    publisher_.container().schedule(proton::duration(1), [this] {
      if (publisher_) publisher_.work_queue().add([this] { pace(); });
    });
  }
  void sendAllowed() {
    if (!sender_ || !sender_.active()) return;
    size_t allowed = run_.messages;
    if (run_.rate > 0) {
      const double elapsed = std::chrono::duration<double>(Clock::now() - first_send_).count();
      allowed = std::min(run_.messages, static_cast<size_t>(elapsed * run_.rate) + 1);
    }
    while (sender_.credit() > 0 && sent_ < allowed) {
      proton::message m;
      m.subject("Tick");
      m.properties().put("ts", next_ts++);
      m.properties().put("n", static_cast<int64_t>(sent_ + 1));
      m.properties().put("sent_ns", nowNs());
      m.body(proton::value(std::map<std::string, proton::scalar>{{"pad", std::string(24, 'x')}}));
      if (message_bytes_ == 0) {
        std::vector<char> buffer;
        m.encode(buffer);
        message_bytes_ = buffer.size();
      }
      sender_.send(m);
      ++sent_;
    }
  }
  void on_sendable(proton::sender&) override { sendAllowed(); }
  void on_tracker_reject(proton::tracker&) override { ++rejected_; }
  void on_tracker_release(proton::tracker&) override { ++released_; }
  void on_message(proton::delivery&, proton::message& m) override {
    // Received now: finding the send time in the message is the client's
    // own work, not the broker's.
    const int64_t received = nowNs();
    const int64_t sent = sentNs(m);
    if (sent > 0) latencies_.push_back(received - sent);
    last_receive_ = Clock::now();
    if (++received_ >= run_.messages) finish();
  }
  void finish() {
    if (finished_) return;
    finished_ = true;
    // Each on its own connection's queue: closing one connection from
    // another's event would not be written out until that one wakes.
    if (publisher_)
      publisher_.work_queue().add([this] {
        if (publisher_) publisher_.close();
      });
    if (subscriber_)
      subscriber_.work_queue().add([this] {
        if (subscriber_) subscriber_.close();
      });
  }
  // Handles go before Proton frees the connections.
  void on_transport_close(proton::transport& t) override {
    if (t.connection() == publisher_) {
      publisher_ = proton::connection();
      sender_ = proton::sender();
    } else if (t.connection() == subscriber_) {
      subscriber_ = proton::connection();
    }
  }
  void on_error(const proton::error_condition& e) override {
    std::fprintf(stderr, "amqp_bench: %s\n", e.what().c_str());
    timed_out_ = true;
    finish();
  }

  const Run run_;
  proton::connection subscriber_, publisher_;
  proton::sender sender_;
  size_t sent_ = 0, received_ = 0, last_seen_ = 0, message_bytes_ = 0;
  size_t rejected_ = 0, released_ = 0;
  int idle_seconds_ = 0;
  bool finished_ = false, timed_out_ = false;
  Clock::time_point first_send_, last_receive_;
  std::vector<int64_t> latencies_;
};

Measured measure(const Run& run) {
  BenchClient client(run);
  proton::container container(client);
  container.run();
  return client.result();
}

// A reference (or cepbus) running for a series of measurements.
class Target {
 public:
  virtual ~Target() = default;
  virtual std::string name() const = 0;
  virtual bool start(const fs::path& dir) = 0;  // false: skipped (said why on stderr)
  virtual std::string url() const { return "127.0.0.1:" + std::to_string(port_); }
  virtual std::string publishTo() const = 0;
  virtual std::string subscribeTo() const = 0;

 protected:
  int port_ = 0;
};

// How the cepbus targets run: which executable, and attributes added to the
// descriptor's elements (to compare settings in one run).
struct CepbusSettings {
  std::string binary = CEPBUS_BINARY;
  std::string listener_attrs;                             // <amqp>
  std::string stage_attrs = R"(run-inline="when-idle")";  // the route's <stage>
  std::string journal_attrs;                              // <journal>
  // Options added to cepbus-cep's query, as name=value pairs: by default it
  // detects on the AMQP thread while idle, as the route's stage routes there.
  std::vector<std::pair<std::string, std::string>> query_options{{"run_inline", "when_idle"}};
};

class CepbusTarget final : public Target {
 public:
  CepbusTarget(bool cep, CepbusSettings settings) : cep_(cep), settings_(std::move(settings)) {}
  std::string name() const override { return cep_ ? "cepbus-cep" : "cepbus"; }
  bool start(const fs::path& dir) override {
    port_ = freePort();
    fs::create_directories(dir / name());
    std::string units;
    if (cep_) {
      units = R"(
  <plugins><plugin name="nfa"/></plugins>
  <service-assembly name="bench">
    <service-unit name="cep" type="cep">
      <query name="seen" engine="nfa" input="bench.ticks" output="bench.seen">
        <!-- The engine's default batched construction: the CEP service
             flushes it whenever the query's queue runs empty. Composites
             go out reliably, so a subscriber that falls behind delays them
             instead of losing them. -->
        <option name="output_qos" value="reliable"/>)";
      for (const auto& [option, value] : settings_.query_options) {
        units += "\n        <option name=\"" + option + "\" value=\"" + value + "\"/>";
      }
      units += R"(
        <text>PATTERN Tick a RETURN Seen(a.n, a.sent_ns)</text>
      </query>
    </service-unit>
  </service-assembly>)";
    }
    std::ofstream(dir / name() / "bench.xml") << R"(<cepbus name="bench">
  <logging level="warning"/>
  <listeners><amqp host="127.0.0.1" port=")" + std::to_string(port_) +
                                                     R"(" allow-anonymous="true" )" +
                                                     settings_.listener_attrs +
                                                     R"(/></listeners>
  <journal path="journal.db" )" + settings_.journal_attrs +
                                                     R"(/>
  <stages><stage name="dispatch" capacity="8192" min-threads="1" max-threads="1" )" +
                                                     settings_.stage_attrs + R"(/></stages>
  <routes default-flow="st"><route address="bench.#" flow="reliable" stage="dispatch"/></routes>)" +
                                                     units + "\n</cepbus>\n";
    setenv("CEPBUS_PLUGIN_PATH", CEPBUS_PLUGIN_DIR, 1);
    process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{settings_.binary, "run", "bench.xml"}, dir / name());
    if (!waitListening(port_, std::chrono::seconds(30))) {
      std::fprintf(stderr, "amqp_bench: %s did not start: %s\n", name().c_str(),
                   process_->err().c_str());
      return false;
    }
    return true;
  }
  std::string publishTo() const override { return "bench.ticks"; }
  std::string subscribeTo() const override { return cep_ ? "bench.seen" : "bench.ticks"; }
  ~CepbusTarget() override {
    if (process_) {
      process_->signal(SIGTERM);
      process_->wait(std::chrono::seconds(30));
    }
  }

 private:
  const bool cep_;
  const CepbusSettings settings_;
  std::unique_ptr<ChildProcess> process_;
};

class ProtonBrokerTarget final : public Target {
 public:
  std::string name() const override { return "proton"; }
  bool start(const fs::path& dir) override {
    if (!fs::exists(PROTON_EXAMPLE_BROKER)) {
      std::fprintf(stderr, "amqp_bench: no Proton example broker (%s); skipped\n",
                   PROTON_EXAMPLE_BROKER);
      return false;
    }
    port_ = freePort();
    fs::create_directories(dir / name());
    process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{PROTON_EXAMPLE_BROKER, "127.0.0.1", std::to_string(port_)},
        dir / name());
    return waitListening(port_, std::chrono::seconds(10));
  }
  std::string publishTo() const override { return "bench"; }
  std::string subscribeTo() const override { return "bench"; }
  ~ProtonBrokerTarget() override {
    if (process_) {
      process_->signal(SIGTERM);
      if (process_->wait(std::chrono::seconds(5)) < 0) process_->signal(SIGKILL);
    }
  }

 private:
  std::unique_ptr<ChildProcess> process_;
};

// rabbitmq-server as its own node in a scratch folder, every port on
// loopback, the AMQP 1.0 plugin enabled, anonymous clients as guest.
class RabbitTarget final : public Target {
 public:
  std::string name() const override { return "rabbitmq"; }
  bool start(const fs::path& dir) override {
    if (!fs::exists("/usr/sbin/rabbitmq-server")) {
      std::fprintf(stderr, "amqp_bench: no rabbitmq-server; skipped\n");
      return false;
    }
    port_ = freePort();
    home_ = dir / name();
    fs::create_directories(home_);
    // The server runs as the rabbitmq user (Debian's wrapper switches to it).
    fs::permissions(home_, fs::perms::all);
    std::ofstream(home_ / "enabled_plugins") << "[rabbitmq_amqp1_0].\n";
    fs::permissions(home_ / "enabled_plugins", fs::perms::all);
    node_ = "cepbusbench" + std::to_string(port_) + "@localhost";
    setEnvironment();
    process_ = std::make_unique<ChildProcess>(std::vector<std::string>{"/usr/sbin/rabbitmq-server"},
                                              home_);
    if (!waitListening(port_, std::chrono::seconds(90))) {
      std::fprintf(stderr, "amqp_bench: rabbitmq did not start: %s\n", process_->out().c_str());
      return false;
    }
    return true;
  }
  std::string publishTo() const override { return "/queue/bench"; }
  std::string subscribeTo() const override { return "/queue/bench"; }
  ~RabbitTarget() override {
    if (!process_) return;
    setEnvironment();
    ChildProcess stop({"/usr/sbin/rabbitmqctl", "-n", node_, "stop"}, home_);
    stop.wait(std::chrono::seconds(60));
    if (process_->wait(std::chrono::seconds(30)) < 0) process_->signal(SIGKILL);
  }

 private:
  void setEnvironment() const {
    const std::string dist = std::to_string(port_ + 1 > 65535 ? port_ - 1 : port_ + 1);
    setenv("RABBITMQ_NODENAME", node_.c_str(), 1);
    setenv("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1", 1);
    setenv("RABBITMQ_NODE_PORT", std::to_string(port_).c_str(), 1);
    setenv("RABBITMQ_DIST_PORT", dist.c_str(), 1);
    setenv("ERL_EPMD_ADDRESS", "127.0.0.1", 1);
    setenv("RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS", "-kernel inet_dist_use_interface {127,0,0,1}", 1);
    setenv("RABBITMQ_MNESIA_BASE", (home_ / "mnesia").c_str(), 1);
    setenv("RABBITMQ_LOG_BASE", (home_ / "log").c_str(), 1);
    setenv("RABBITMQ_ENABLED_PLUGINS_FILE", (home_ / "enabled_plugins").c_str(), 1);
    setenv("RABBITMQ_PLUGINS_EXPAND_DIR", (home_ / "plugins").c_str(), 1);
  }

  fs::path home_;
  std::string node_;
  std::unique_ptr<ChildProcess> process_;
};

// A client run beside one measurement (--beside): started a second before
// it, so that it is at work when the measurement starts.
class Beside {
 public:
  Beside(std::string command, const std::string& url, const fs::path& dir) : dir_(dir) {
    const std::string port = url.substr(url.rfind(':') + 1);
    for (size_t at; (at = command.find("{port}")) != std::string::npos;) {
      command.replace(at, 6, port);
    }
    fs::create_directories(dir_);
    process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/bin/sh", "-c", "exec " + command}, dir_);
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  // Stops it; what it printed.
  std::string stop() {
    process_->signal(SIGTERM);
    if (process_->wait(std::chrono::seconds(30)) < 0) {
      std::fprintf(stderr, "amqp_bench: the client beside did not stop\n");
    }
    std::ifstream out(dir_ / "stdout.txt");
    std::stringstream text;
    text << out.rdbuf();
    return text.str();
  }

 private:
  const fs::path dir_;
  std::unique_ptr<ChildProcess> process_;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  size_t messages = 200000;
  double seconds = 10;
  std::vector<std::string> targets{"cepbus", "cepbus-cep", "rabbitmq", "proton"};
  std::vector<std::string> modes{"at-most-once", "at-least-once"};
  std::vector<std::string> rates{"flood", "1000", "10000"};
  CepbusSettings cepbus;
  std::string beside;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--messages") {
      messages = std::strtoul(argv[i + 1], nullptr, 10);
    } else if (flag == "--seconds") {
      seconds = std::strtod(argv[i + 1], nullptr);
    } else if (flag == "--targets") {
      targets = split(argv[i + 1]);
    } else if (flag == "--modes") {
      modes = split(argv[i + 1]);
    } else if (flag == "--rates") {
      rates = split(argv[i + 1]);
    } else if (flag == "--listener") {
      cepbus.listener_attrs = argv[i + 1];
    } else if (flag == "--stage") {
      cepbus.stage_attrs = argv[i + 1];
    } else if (flag == "--journal") {
      cepbus.journal_attrs = argv[i + 1];
    } else if (flag == "--query-options") {
      cepbus.query_options.clear();
      for (const std::string& pair : split(argv[i + 1])) {
        const size_t eq = pair.find('=');
        if (eq == std::string::npos) {
          std::fprintf(stderr, "amqp_bench: --query-options takes NAME=VALUE pairs, got %s\n",
                       pair.c_str());
          return 2;
        }
        cepbus.query_options.emplace_back(pair.substr(0, eq), pair.substr(eq + 1));
      }
    } else if (flag == "--beside") {
      beside = argv[i + 1];
    } else if (flag == "--cepbus") {
      cepbus.binary = fs::absolute(argv[i + 1]);  // it runs in its own directory
    } else {
      std::fprintf(stderr,
                   "usage: %s [--messages N] [--seconds S] [--targets a,b] [--modes m] "
                   "[--rates flood,1000,10000] [--listener ATTRS] [--stage ATTRS] "
                   "[--journal ATTRS] [--query-options NAME=VALUE,...] [--cepbus PATH] "
                   "[--beside COMMAND]\n",
                   argv[0]);
      return 2;
    }
  }
  std::random_device rd;
  const fs::path dir = fs::temp_directory_path() / ("cepbus-amqp-bench-" + std::to_string(rd()));
  fs::create_directories(dir);
  for (const std::string& name : targets) {
    std::unique_ptr<Target> target;
    if (name == "cepbus" || name == "cepbus-cep") {
      target = std::make_unique<CepbusTarget>(name == "cepbus-cep", cepbus);
    } else if (name == "rabbitmq") {
      target = std::make_unique<RabbitTarget>();
    } else if (name == "proton") {
      target = std::make_unique<ProtonBrokerTarget>();
    } else {
      std::fprintf(stderr, "amqp_bench: unknown target %s\n", name.c_str());
      return 2;
    }
    if (!target->start(dir)) continue;
    for (const std::string& mode : modes) {
      for (const std::string& rate_name : rates) {
        Run run;
        run.url = target->url();
        run.publish_to = target->publishTo();
        run.subscribe_to = target->subscribeTo();
        run.at_least_once = mode == "at-least-once";
        run.rate = rate_name == "flood" ? 0 : std::strtod(rate_name.c_str(), nullptr);
        run.messages = run.rate > 0 ? static_cast<size_t>(run.rate * seconds) : messages;
        std::unique_ptr<Beside> beside_client;
        if (!beside.empty()) {
          beside_client = std::make_unique<Beside>(beside, target->url(), dir / "beside");
        }
        const Measured m = measure(run);
        std::printf(
            "{\"bench\":\"amqp_end_to_end\",\"params\":{\"target\":\"%s\",\"mode\":\"%s\","
            "\"rate\":\"%s\",\"messages\":%zu,\"message_bytes\":%zu},\"events_per_s\":%.0f,"
            "\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,"
            "\"received\":%zu,\"rejected\":%zu,\"released\":%zu,\"timed_out\":%s}\n",
            name.c_str(), mode.c_str(), rate_name.c_str(), run.messages, m.message_bytes,
            m.seconds > 0 ? static_cast<double>(m.received) / m.seconds : 0.0, m.p50_us, m.p90_us,
            m.p99_us, m.p999_us, m.received, m.rejected, m.released,
            m.timed_out ? "true" : "false");
        if (beside_client) std::printf("%s", beside_client->stop().c_str());
        std::fflush(stdout);
      }
    }
  }
  fs::remove_all(dir);
  return 0;
}
