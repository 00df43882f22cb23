#include "bus/app/publish_command.h"

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <proton/binary.hpp>
#include <proton/connection.hpp>
#include <proton/container.hpp>
#include <proton/delivery_mode.hpp>
#include <proton/duration.hpp>
#include <proton/error_condition.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>
#include <streambuf>
#include <thread>

#include "bus/app/amqp_client_options.h"
#include "bus/app/stop_signals.h"
#include "bus/base/mutex.h"
#include "bus/core/event_json.h"
#include "services/protocols/amqp/client_options.h"
#include "services/protocols/amqp/message_mapping.h"

namespace cepbus::app {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kOk = 0;
constexpr int kFailure = 1;
// Events read ahead of the bus's credit: enough to keep a flood going
// between two grants, little enough that a stopped run leaves little unsent.
constexpr size_t kReadAhead = 4096;
// How often the container looks at the clock (the --timeout).
constexpr std::chrono::milliseconds kTick{50};

// Standard input for EventLineReader, read so that the reading thread can
// be told to stop while it waits for a line that may never come (an
// interactive publisher whose bus went away, or a Ctrl-C).
class StoppableInput final : public std::streambuf {
 public:
  StoppableInput(int fd, const std::atomic<bool>& stop) : fd_(fd), stop_(stop) {}

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    for (;;) {
      if (stop_.load(std::memory_order_acquire)) return traits_type::eof();
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(kTick.count()));
      if (ready < 0 && errno != EINTR) return traits_type::eof();
      if (ready <= 0) continue;
      const ssize_t n = ::read(fd_, buffer_, sizeof buffer_);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return traits_type::eof();
      setg(buffer_, buffer_, buffer_ + n);
      return traits_type::to_int_type(*gptr());
    }
  }

 private:
  const int fd_;
  const std::atomic<bool>& stop_;
  char buffer_[1 << 16];
};

// One line read: an event, or why the line is none.
struct FeedItem {
  size_t line = 0;
  EventPtr event;
  std::string error;
};

// EventFeed: the events the reading thread has read, waiting for the
// container thread to send them, at most kReadAhead. The container thread
// takes them when the bus grants credit; when it found none it asks to be
// woken (`wake`, posted on its connection's work queue) by the next push.
//
// Thread-safety: push()/close()/sleepUntil() from the reading thread, pop()
// and the rest from the container thread, stop() and stopped() from any.
class EventFeed {
 public:
  // Waits while the feed is full; false once stopped.
  bool push(FeedItem item) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    room_.wait(mu_, [&]() REQUIRES(mu_) { return items_.size() < kReadAhead || stopped(); });
    if (stopped()) return false;
    if (item.event != nullptr) ++events_;
    items_.push_back(std::move(item));
    wakeLocked();
    return true;
  }
  // The end of the input.
  void close() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    closed_ = true;
    wakeLocked();
  }
  // No more reading: push() refuses and what waits is dropped.
  void stop() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    stop_.store(true, std::memory_order_release);
    items_.clear();
    room_.notify_all();
    wakeLocked();
  }
  bool stopped() const { return stop_.load(std::memory_order_acquire); }
  const std::atomic<bool>& stopFlag() const { return stop_; }

  // For a paced input: false when stopped before `due`.
  bool sleepUntil(Clock::time_point due) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    room_.waitUntil(mu_, due, [&]() REQUIRES(mu_) { return stopped(); });
    return !stopped();
  }

  // The next item; none (and the next push wakes the taker) when empty.
  std::optional<FeedItem> pop() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (items_.empty()) {
      wake_armed_ = true;
      return std::nullopt;
    }
    FeedItem item = std::move(items_.front());
    items_.pop_front();
    room_.notify_one();
    return item;
  }
  bool hasItems() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return !items_.empty();
  }
  // Nothing more will come: the input ended (and all was taken) or it stopped.
  bool finished() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return stopped() || (closed_ && items_.empty());
  }
  // Events read (bad lines not counted).
  uint64_t events() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return events_;
  }
  // The container thread's wake-up; nullptr once its connection is gone.
  void setWake(std::function<void()> wake) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    wake_ = std::move(wake);
  }

 private:
  // Posting on a work queue never blocks, so it is done under the lock: the
  // queue's connection cannot be gone meanwhile (setWake(nullptr) waits).
  void wakeLocked() REQUIRES(mu_) {
    if (!wake_armed_ || !wake_) return;
    wake_armed_ = false;
    wake_();
  }

  Mutex mu_;
  CondVar room_;
  std::deque<FeedItem> items_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
  bool wake_armed_ GUARDED_BY(mu_) = false;
  uint64_t events_ GUARDED_BY(mu_) = 0;
  std::function<void()> wake_ GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
};

// The reading thread: every line of `in` into the feed, paced to `rate`.
void readEvents(std::istream& in, double rate, EventFeed& feed) {
  EventLineReader reader(in);
  const Clock::time_point start = Clock::now();
  uint64_t paced = 0;
  while (!feed.stopped()) {
    Result<EventPtr> event = reader.next();
    if (!event && event.status().code() == Status::Code::kNotFound) break;
    FeedItem item{reader.lineNumber(), nullptr, {}};
    if (event) {
      item.event = std::move(*event);
      if (rate > 0) {
        const auto due =
            start + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(static_cast<double>(paced++) / rate));
        if (!feed.sleepUntil(due)) break;
      }
    } else {
      item.error = event.status().message();
    }
    if (!feed.push(std::move(item))) break;
  }
  feed.close();
}

struct Tally {
  uint64_t sent = 0, accepted = 0, rejected = 0, released = 0, bad_lines = 0;
};

// Publisher: the AMQP side of the command, on the container's thread: one
// connection, one sending link to the address, each event of the feed sent
// as credit allows and reported as it is settled.
//
// Thread-safety: a Proton handler; its container runs it on one thread.
// tally(), unsettled() and failed() are read once that thread has ended.
class Publisher final : public proton::messaging_handler {
 public:
  Publisher(const PublishOptions& options, EventFeed& feed, std::string source, std::ostream& out,
            std::ostream& err)
      : options_(options), feed_(feed), source_(std::move(source)), out_(out), err_(err) {}

  const Tally& tally() const { return tally_; }
  size_t unsettled() const { return in_flight_.size(); }
  bool failed() const { return failed_; }

  void on_container_start(proton::container& c) override {
    container_ = &c;
    last_answer_ = Clock::now();
    connection_ = c.connect(options_.peer.url, services::amqp::connectionOptions(options_.peer));
    tick();
  }

  void on_connection_open(proton::connection& c) override {
    opened_ = true;
    answered();
    proton::work_queue* queue = &c.work_queue();
    feed_.setWake([this, queue] { queue->add([this] { send(); }); });
    sender_ = c.open_sender(options_.address,
                            proton::sender_options().delivery_mode(
                                options_.at_most_once ? proton::delivery_mode::AT_MOST_ONCE
                                                      : proton::delivery_mode::AT_LEAST_ONCE));
  }

  void on_sendable(proton::sender&) override {
    answered();
    send();
  }

  void on_tracker_accept(proton::tracker& t) override { settled(t, Outcome::kAccepted); }
  void on_tracker_reject(proton::tracker& t) override { settled(t, Outcome::kRejected); }
  void on_tracker_release(proton::tracker& t) override { settled(t, Outcome::kReleased); }

  void on_sender_error(proton::sender& s) override {
    fail("the bus refused the link to " + options_.address + ": " +
         services::amqp::describeCondition(s.error(), "closed"));
  }
  void on_transport_error(proton::transport& t) override {
    fail(std::string(opened_ ? "lost the connection to " : "cannot connect to ") +
         options_.peer.url + ": " + services::amqp::describeCondition(t.error(), "closed"));
  }
  void on_error(const proton::error_condition& e) override {
    fail("the bus closed the connection: " +
         services::amqp::describeCondition(e, "no reason given"));
  }
  void on_transport_close(proton::transport&) override {
    finished_ = true;
    feed_.setWake(nullptr);
  }

 private:
  enum class Outcome { kAccepted, kRejected, kReleased };
  struct Sent {
    size_t line;
    std::string type;
    Timestamp ts;
  };

  void send() {
    if (failed_ || closing_ || !sender_ || sender_.closed()) return;
    while (sender_.credit() > 0) {
      std::optional<FeedItem> item = feed_.pop();
      if (!item) break;
      if (item->event == nullptr) {
        ++tally_.bad_lines;
        err_ << "cepbus publish: " << source_ << ": " << item->error
             << (options_.strict ? " (--strict: stopping)" : " (skipped)") << "\n";
        if (options_.strict) feed_.stop();
        continue;
      }
      services::amqp::messageFromEvent(*item->event, message_);
      proton::tracker tracker = sender_.send(message_);
      ++tally_.sent;
      Sent sent{item->line, std::string(item->event->type().name()), item->event->ts()};
      if (options_.at_most_once) {
        report(sent, "sent", {});
      } else {
        in_flight_.emplace(tracker.tag(), std::move(sent));
      }
    }
    waiting_for_credit_ = sender_.credit() <= 0 && feed_.hasItems();
    finishIfDone();
  }

  void settled(proton::tracker& t, Outcome outcome) {
    auto it = in_flight_.find(t.tag());
    if (it == in_flight_.end()) return;
    const Sent sent = std::move(it->second);
    in_flight_.erase(it);
    answered();
    switch (outcome) {
      case Outcome::kAccepted:
        ++tally_.accepted;
        report(sent, "accepted", {});
        break;
      case Outcome::kRejected:
        ++tally_.rejected;
        report(sent, "rejected", services::amqp::remoteCondition(t));
        break;
      case Outcome::kReleased:
        ++tally_.released;
        report(sent, "released", {});
        break;
    }
    finishIfDone();
  }

  void report(const Sent& sent, std::string_view outcome,
              const proton::error_condition& condition) {
    if (!options_.quiet || (outcome != "accepted" && outcome != "sent")) {
      nlohmann::ordered_json line = {
          {"line", sent.line}, {"type", sent.type}, {"ts", sent.ts}, {"outcome", outcome}};
      if (condition) {
        line["condition"] = condition.name();
        line["description"] = condition.description();
      }
      out_ << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    // Interactive use sees each outcome at once; a flood writes in blocks.
    if (!feed_.hasItems()) out_.flush();
  }

  void finishIfDone() {
    if (!closing_ && in_flight_.empty() && feed_.finished()) {
      closing_ = true;
      services::amqp::closeConnection(connection_);
    }
  }

  // The first failure ends the run: nothing more is read or sent, and what
  // is in flight stays unsettled.
  void fail(const std::string& why) {
    if (failed_) return;
    failed_ = true;
    err_ << "cepbus publish: " << why << "\n";
    feed_.stop();
    if (!closing_) {
      closing_ = true;
      services::amqp::closeConnection(connection_);
    }
  }

  void answered() { last_answer_ = Clock::now(); }

  // Watches the clock while the bus owes an answer: the connection, credit
  // for waiting events, or an outcome.
  void tick() {
    if (finished_) return;
    const bool owed = !opened_ || !in_flight_.empty() || waiting_for_credit_;
    if (owed && !closing_ && Clock::now() - last_answer_ > options_.timeout) {
      fail("no answer from the bus at " + options_.peer.url + " for " +
           std::to_string(options_.timeout.count()) + " ms (" + std::to_string(in_flight_.size()) +
           " events waiting for their outcome)");
    }
    container_->schedule(proton::duration(kTick.count()), [this] { tick(); });
  }

  const PublishOptions& options_;
  EventFeed& feed_;
  const std::string source_;  // the input's name in messages
  std::ostream& out_;
  std::ostream& err_;
  proton::container* container_ = nullptr;
  proton::connection connection_;
  proton::sender sender_;
  proton::message message_;  // reused: messageFromEvent() keeps its allocations
  std::map<proton::binary, Sent> in_flight_;
  Tally tally_;
  Clock::time_point last_answer_;
  bool opened_ = false;
  bool waiting_for_credit_ = false;
  bool closing_ = false;
  bool finished_ = false;
  bool failed_ = false;
};

Result<double> parseRate(const std::string& text) {
  std::string_view number = text;
  if (number.ends_with("/s")) number.remove_suffix(2);
  double rate = 0;
  const char* end = number.data() + number.size();
  auto [p, ec] = std::from_chars(number.data(), end, rate);
  if (ec != std::errc() || p != end || !(rate > 0) || !std::isfinite(rate)) {
    return Status::invalidArgument("--rate " + text +
                                   ": expected events per second above 0, as N or N/s");
  }
  return rate;
}

}  // namespace

const CommandSpec& publishSpec() {
  static const CommandSpec spec = [] {
    CommandSpec s;
    s.name = "publish";
    s.usage = "cepbus publish [OPTIONS] ADDRESS";
    s.summary = "publish JSON-lines events to an address of a running bus over AMQP 1.0";
    s.description =
        "Reads events, one JSON object a line (docs/concepts.md, \"Events\"):\n"
        "  {\"type\":\"Stock\",\"ts\":7000,\"attrs\":{\"symbol\":\"IBM\",\"price\":42.5}}\n"
        "publishes each to ADDRESS, and prints what became of each as a JSON line\n"
        "on stdout, in the order the bus settles them:\n"
        "  {\"line\":1,\"type\":\"Stock\",\"ts\":7000,\"outcome\":\"accepted\"}\n"
        "\"rejected\" comes with the AMQP \"condition\" and \"description\" the bus\n"
        "gave; \"released\" means the bus refused it for now (overload): publish it\n"
        "again; \"sent\" is all there is to say at most once. Then a summary:\n"
        "  {\"events\":N,\"sent\":N,\"accepted\":N,\"rejected\":N,\"released\":N,\n"
        "   \"unsettled\":N,\"not_sent\":N,\"bad_lines\":N}\n"
        "A line that is no event is named on stderr (FILE: line N: reason),\n"
        "counted and skipped. A query on the bus drops an event whose ts is below\n"
        "the newest it has seen (late, see docs/pattern-language.md): give events\n"
        "published by hand timestamps after what the bus replayed. SIGINT or\n"
        "SIGTERM stops the reading; what was sent is still settled.\n";
    s.options = {
        {"--events", "FILE", "the events to publish; '-' (the default) reads standard input"},
        {"--rate", "N[/s]", "publish N events per second (default: as fast as the bus takes them)"},
        {"--at-least-once", "", "send each event unsettled and wait for its outcome (the default)"},
        {"--at-most-once", "", "send pre-settled: no outcome to wait for, none reported"},
        {"--strict", "", "a line that is no event ends the run instead of being skipped"},
        {"--quiet", "", "report only the events not accepted, and the summary"},
        {"--timeout", "SECONDS",
         "give up when the bus has owed an answer (the connection, credit, an outcome) for "
         "this long (default 30)"},
    };
    for (HelpEntry& e : amqpClientOptions()) s.options.push_back(std::move(e));
    s.options.push_back({"--help", "", "show this help and exit"});
    s.examples = {
        {"cepbus publish stocks.ticks --events examples/quickstart/stocks.jsonl --rate 200/s", "",
         "replay the quickstart's ticks into a running bus at 200 events a second"},
        {"echo '{\"type\":\"Stock\",\"ts\":7000,\"attrs\":{\"symbol\":\"IBM\",\"price\":1}}' | "
         "cepbus publish stocks.ticks",
         "", "publish one event by hand"},
        {"CEPBUS_PASSWORD=... cepbus publish orders.eu --url amqps://bus:5671 --user alice "
         "--ca ca.pem --events orders.jsonl --quiet",
         "", "over TLS as alice, printing only what the bus did not accept"},
    };
    s.environment = amqpClientEnvironment();
    s.files = {
        {"FILE (--events)", "",
         "JSON lines, one event a line: type, ts, and optionally attrs, start, prob, "
         "key, cost"},
        {"FILE (--ca)", "", "the PEM certificate of the CA the bus's certificate must chain to"}};
    s.exit_status =
        "0 every event read was accepted (at most once: sent) and every line was an event, "
        "1 otherwise (or the bus unreachable, the link refused, no answer in time), 2 bad "
        "command line.";
    return s;
  }();
  return spec;
}

Result<PublishOptions> parsePublishArguments(std::span<const std::string> args) {
  auto parsed = publishSpec().parse(args);
  if (!parsed) return parsed.status();
  if (parsed->positional.size() != 1) {
    return Status::invalidArgument("expected one ADDRESS");
  }
  if (parsed->has("--at-most-once") && parsed->has("--at-least-once")) {
    return Status::invalidArgument("--at-most-once and --at-least-once exclude each other");
  }
  PublishOptions o;
  o.address = parsed->positional[0];
  o.events_file = parsed->value("--events", "-");
  o.at_most_once = parsed->has("--at-most-once");
  o.strict = parsed->has("--strict");
  o.quiet = parsed->has("--quiet");
  if (parsed->has("--rate")) {
    auto rate = parseRate(parsed->value("--rate"));
    if (!rate) return rate.status();
    o.rate = *rate;
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

int runPublishCommand(const PublishOptions& options, std::ostream& out, std::ostream& err) {
  const StopSignals signals;  // before any thread starts
  EventFeed feed;
  std::ifstream file;
  std::unique_ptr<StoppableInput> stdin_buffer;
  std::unique_ptr<std::istream> stdin_stream;
  std::istream* in = &file;
  std::string source = options.events_file;
  if (options.events_file == "-") {
    stdin_buffer = std::make_unique<StoppableInput>(STDIN_FILENO, feed.stopFlag());
    stdin_stream = std::make_unique<std::istream>(stdin_buffer.get());
    in = stdin_stream.get();
    source = "stdin";
  } else {
    file.open(options.events_file);
    if (!file) {
      err << "cepbus publish: cannot open " << options.events_file << ": " << std::strerror(errno)
          << "\n";
      return kFailure;
    }
  }

  Publisher publisher(options, feed, source, out, err);
  proton::container container(publisher);
  std::thread reader([&] { readEvents(*in, options.rate, feed); });
  runContainer(container, signals, [&](int sig) {
    if (feed.stopped()) return;
    err << "cepbus publish: " << strsignal(sig) << ": stopping; settling what was sent\n";
    feed.stop();
  });
  feed.stop();  // a reader still at work (the run failed) stops at its next line
  reader.join();

  const Tally& t = publisher.tally();
  const uint64_t events = feed.events();
  const uint64_t unsettled = publisher.unsettled();
  const uint64_t not_sent = events - t.sent;
  out << nlohmann::ordered_json{{"events", events},       {"sent", t.sent},
                                {"accepted", t.accepted}, {"rejected", t.rejected},
                                {"released", t.released}, {"unsettled", unsettled},
                                {"not_sent", not_sent},   {"bad_lines", t.bad_lines}}
             .dump()
      << std::endl;
  const uint64_t taken = options.at_most_once ? t.sent : t.accepted;
  if (publisher.failed() || taken != events || t.bad_lines != 0) {
    err << "cepbus publish: " << events - taken << " of " << events << " events not "
        << (options.at_most_once ? "sent" : "accepted") << " (" << t.rejected << " rejected, "
        << t.released << " released, " << unsettled << " unsettled, " << not_sent << " not sent), "
        << t.bad_lines << " bad lines\n";
    return kFailure;
  }
  return kOk;
}

}  // namespace cepbus::app
