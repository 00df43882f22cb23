#include "bus/app/subscribe_command.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <proton/connection.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/delivery_mode.hpp>
#include <proton/duration.hpp>
#include <proton/error_condition.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/reconnect_options.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>

#include "bus/app/amqp_client_options.h"
#include "bus/app/stop_signals.h"
#include "bus/core/event_json.h"
#include "services/protocols/amqp/client_options.h"
#include "services/protocols/amqp/message_mapping.h"

namespace cepbus::app {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kOk = 0;
constexpr int kFailure = 1;
constexpr std::chrono::milliseconds kTick{50};
// Credit granted at a time: enough for a stream, small enough that a slow
// terminal holds the bus back (its flow control) rather than this process.
constexpr uint64_t kCreditWindow = 100;
// How soon a bus that is not up yet is tried again: often, so that a
// subscriber started first attaches before the bus's first events.
constexpr std::chrono::milliseconds kRetryDelay{20};
constexpr std::chrono::milliseconds kMaxRetryDelay{200};

// Subscriber: the AMQP side of the command, on the container's thread: one
// connection (re-made while the bus is away), one receiving link on the
// pattern, each message printed as its event.
//
// Thread-safety: a Proton handler; its container runs it on one thread.
// The accessors are read once that thread has ended; `interrupted` may be
// set from any thread.
class Subscriber final : public proton::messaging_handler {
 public:
  Subscriber(const SubscribeOptions& options, std::ostream& out, std::ostream& err,
             const std::atomic<bool>& interrupted)
      : options_(options), out_(out), err_(err), interrupted_(interrupted) {}

  uint64_t received() const { return received_; }
  uint64_t unreadable() const { return unreadable_; }
  bool failed() const { return failed_; }
  bool everConnected() const { return connected_once_; }
  bool timedOut() const { return timed_out_; }

  void on_container_start(proton::container& c) override {
    container_ = &c;
    last_activity_ = Clock::now();
    proton::connection_options options = services::amqp::connectionOptions(options_.peer);
    options.reconnect(proton::reconnect_options()
                          .delay(proton::duration(kRetryDelay.count()))
                          .delay_multiplier(1.5)
                          .max_delay(proton::duration(kMaxRetryDelay.count())));
    connection_ = c.connect(options_.peer.url, options);
    tick();
  }

  void on_connection_open(proton::connection& c) override {
    if (connected_once_) {
      err_ << "cepbus subscribe: connected again to " << options_.peer.url << "\n";
    }
    waiting_said_ = false;
    // After a reconnect Proton opens the link again by itself.
    if (!connected_once_) {
      receiver_ = c.open_receiver(
          options_.pattern,
          proton::receiver_options().credit_window(0).auto_accept(false).delivery_mode(
              options_.at_most_once ? proton::delivery_mode::AT_MOST_ONCE
                                    : proton::delivery_mode::AT_LEAST_ONCE));
    }
    connected_once_ = true;
  }

  void on_receiver_open(proton::receiver& r) override {
    receiver_ = r;
    if (!subscribed_said_) {
      subscribed_said_ = true;
      err_ << "cepbus subscribe: subscribed to " << options_.pattern << " at " << options_.peer.url
           << "\n";
    }
    topUpCredit();
  }

  void on_message(proton::delivery& d, proton::message& m) override {
    last_activity_ = Clock::now();
    services::amqp::MappedEvent mapped = services::amqp::eventFromMessage(m);
    if (mapped.event != nullptr) {
      out_ << encodeEvent(*mapped.event) << "\n";
      out_.flush();  // written before it is accepted: at least once
      ++received_;
      if (!options_.at_most_once) d.accept();
    } else {
      ++unreadable_;
      err_ << "cepbus subscribe: a message on " << options_.pattern
           << " is no event: " << mapped.condition << ": " << mapped.description << "\n";
      if (!options_.at_most_once) {
        services::amqp::rejectWithCondition(
            d, proton::error_condition(mapped.condition, mapped.description));
      }
    }
    if (options_.count && received_ >= *options_.count) {
      finish();
      return;
    }
    topUpCredit();
  }

  void on_receiver_error(proton::receiver& r) override {
    fail("the bus refused the subscription to " + options_.pattern + ": " +
         services::amqp::describeCondition(r.error(), "closed"));
  }

  void on_transport_error(proton::transport& t) override {
    if (closing_) return;
    const proton::error_condition& e = t.error();
    // Wrong credentials stay wrong: trying again would only hide it.
    if (e.name() == "amqp:unauthorized-access") {
      fail("the bus at " + options_.peer.url +
           " refused the connection: " + services::amqp::describeCondition(e, "closed"));
      return;
    }
    if (!waiting_said_) {
      waiting_said_ = true;
      err_ << "cepbus subscribe: " << (connected_once_ ? "lost the bus" : "waiting for the bus")
           << " at " << options_.peer.url << " (" << services::amqp::describeCondition(e, "closed")
           << ")" << (connected_once_ ? "; waiting for it to come back" : "") << "\n";
    }
  }

  void on_connection_close(proton::connection&) override {
    if (!closing_) {
      err_ << "cepbus subscribe: the bus at " << options_.peer.url << " closed the connection\n";
      closing_ = true;
    }
  }

  void on_error(const proton::error_condition& e) override {
    fail("the bus closed the connection: " + services::amqp::describeCondition(e, "no reason"));
  }

  void on_transport_close(proton::transport&) override { finished_ = true; }

 private:
  void topUpCredit() {
    if (!receiver_ || closing_) return;
    const uint64_t wanted = options_.count ? *options_.count - received_ : kCreditWindow;
    const int target = static_cast<int>(std::min(wanted, kCreditWindow));
    // Topped up at half the window: one flow frame per half window.
    if (receiver_.credit() <= target / 2) receiver_.add_credit(target - receiver_.credit());
  }

  void tick() {
    if (finished_) return;
    if (!closing_ && interrupted_.load(std::memory_order_acquire)) finish();
    if (!closing_ && options_.timeout && Clock::now() - last_activity_ > *options_.timeout) {
      timed_out_ = true;
      finish();
    }
    container_->schedule(proton::duration(kTick.count()), [this] { tick(); });
  }

  // Ends the run; closing the connection also ends any reconnecting.
  void finish() {
    if (closing_) return;
    closing_ = true;
    services::amqp::closeConnection(connection_);
  }

  void fail(const std::string& why) {
    if (failed_) return;
    failed_ = true;
    err_ << "cepbus subscribe: " << why << "\n";
    finish();
  }

  const SubscribeOptions& options_;
  std::ostream& out_;
  std::ostream& err_;
  const std::atomic<bool>& interrupted_;
  proton::container* container_ = nullptr;
  proton::connection connection_;
  proton::receiver receiver_;
  Clock::time_point last_activity_;
  uint64_t received_ = 0;
  uint64_t unreadable_ = 0;
  bool connected_once_ = false;
  bool waiting_said_ = false;
  bool subscribed_said_ = false;
  bool closing_ = false;
  bool finished_ = false;
  bool failed_ = false;
  bool timed_out_ = false;
};

}  // namespace

const CommandSpec& subscribeSpec() {
  static const CommandSpec spec = [] {
    CommandSpec s;
    s.name = "subscribe";
    s.usage = "cepbus subscribe [OPTIONS] PATTERN";
    s.summary = "print the events a running bus publishes on an address, as JSON lines";
    s.description =
        "Attaches a receiving link to PATTERN, an address where '*' matches one\n"
        "segment and '#' any number (stocks.equal, stocks.#), and prints each\n"
        "event that arrives as one JSON line on stdout, as the replay sink writes\n"
        "them; a composite event carries its \"start\":\n"
        "  {\"attrs\":{\"a_price\":181.68,...},\"start\":682,\"ts\":698,"
        "\"type\":\"EqualPrices\"}\n"
        "The bus need not be up yet: the command waits for it, and connects as\n"
        "soon as it listens, so it can be started before a bus whose first events\n"
        "it must not miss; when the bus goes away it waits for it again. A\n"
        "message that is no event is named on stderr and rejected. SIGINT or\n"
        "SIGTERM ends the run; stderr then says how many events arrived.\n";
    s.options = {
        {"--count", "N", "stop after N events"},
        {"--timeout", "SECONDS",
         "stop once nothing arrived for this long (while waiting for the bus too)"},
        {"--at-most-once", "",
         "ask the bus for pre-settled messages (default: each is accepted once its line is "
         "written)"},
    };
    for (HelpEntry& e : amqpClientOptions()) s.options.push_back(std::move(e));
    s.options.push_back({"--help", "", "show this help and exit"});
    s.examples = {
        {"cepbus subscribe stocks.equal --count 9", "",
         "start it before the quickstart's bus, and print the nine composite events of its "
         "replay"},
        {"cepbus subscribe 'stocks.#' --timeout 10", "",
         "everything published under stocks., until nothing came for 10 s"},
        {"cepbus subscribe stocks.equal | jq -c '{start, ts, a: .attrs.a_symbol}'", "",
         "feed another program"},
    };
    s.environment = amqpClientEnvironment();
    s.files = {{"FILE (--ca)", "",
                "the PEM certificate of the CA the bus's certificate must chain to; the command "
                "reads no other file"}};
    s.exit_status =
        "0 the --count events arrived, or (without --count) the run ended by a signal, "
        "--timeout or the bus closing; 1 --count not reached, or the subscription or the "
        "credentials refused; 2 bad command line.";
    return s;
  }();
  return spec;
}

Result<SubscribeOptions> parseSubscribeArguments(std::span<const std::string> args) {
  auto parsed = subscribeSpec().parse(args);
  if (!parsed) return parsed.status();
  if (parsed->positional.size() != 1) return Status::invalidArgument("expected one PATTERN");
  SubscribeOptions o;
  o.pattern = parsed->positional[0];
  o.at_most_once = parsed->has("--at-most-once");
  if (parsed->has("--count")) {
    const std::string text = parsed->value("--count");
    uint64_t n = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || p != text.data() + text.size() || n == 0) {
      return Status::invalidArgument("--count " + text + ": expected a number of events above 0");
    }
    o.count = n;
  }
  if (parsed->has("--timeout")) {
    auto timeout = parseSeconds("--timeout", parsed->value("--timeout"));
    if (!timeout) return timeout.status();
    o.timeout = *timeout;
  }
  auto peer = amqpPeerFrom(*parsed);
  if (!peer) return peer.status();
  o.peer = std::move(*peer);
  return o;
}

int runSubscribeCommand(const SubscribeOptions& options, std::ostream& out, std::ostream& err) {
  const StopSignals signals;  // before any thread starts
  std::atomic<bool> interrupted{false};
  Subscriber subscriber(options, out, err, interrupted);
  proton::container container(subscriber);
  runContainer(container, signals,
               [&](int) { interrupted.store(true, std::memory_order_release); });

  err << "cepbus subscribe: " << subscriber.received() << " events from " << options.pattern;
  if (subscriber.unreadable() != 0) err << ", " << subscriber.unreadable() << " no events";
  if (!subscriber.everConnected()) err << "; no bus at " << options.peer.url;
  err << "\n";
  if (subscriber.failed()) return kFailure;
  if (options.count) return subscriber.received() >= *options.count ? kOk : kFailure;
  return subscriber.everConnected() ? kOk : kFailure;
}

}  // namespace cepbus::app
