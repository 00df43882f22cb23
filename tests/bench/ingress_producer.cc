// An ordinary AMQP 1.0 producer for a cepbus node's cluster ingress, in C++:
// ingress_producer.py's job (the same arguments and output) at a cost per
// message low enough that the producer is not what bounds the ingress's
// figures (docs/cluster.md, "Through a node's ingress").
//
// Sends every event of a JSON-lines file as one message (the plain event
// mapping of docs/amqp.md, message-id = the line number as a ulong) to
// ADDRESS on HOST:PORT, as fast as the node gives credit, and exits once
// every message is settled. Prints {"sent":N,"accepted":N,"released":N,"rejected":N};
// exits 1 unless every message was accepted.
//
// With --rate N it sends on a schedule instead (message i at i/N s after the
// link opened, as far as credit allows) and measures each message's time
// from its send to its settlement: the latency the ingress adds, linger and
// broker confirm (docs/cluster.md, "Figures"). The JSON line then also has
// "latency_ms":{"count","p50","p90","p99","max"} and "behind_max_ms", how
// far the sends fell behind the schedule (credit the node withheld).
//
//     ingress_producer --url 127.0.0.1:5690 --address demo.in --events FILE [--rate N]

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/sender.hpp>
#include <proton/tracker.hpp>
#include <proton/work_queue.hpp>
#include <string>
#include <vector>

#include "bus/core/event_json.h"
#include "services/protocols/amqp/message_mapping.h"

namespace {

using Clock = std::chrono::steady_clock;

double millis(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Send-to-settlement times of the paced messages, in settlement order.
class LatencyRecorder {
 public:
  void sent(const proton::tracker& t) { in_flight_[t] = Clock::now(); }
  void settled(const proton::tracker& t) {
    auto it = in_flight_.find(t);
    if (it == in_flight_.end()) return;
    millis_.push_back(millis(Clock::now() - it->second));
    in_flight_.erase(it);
  }
  // ,"latency_ms":{...} for the JSON line: nearest-rank percentiles.
  std::string json() {
    std::sort(millis_.begin(), millis_.end());
    auto rank = [this](double q) {
      if (millis_.empty()) return 0.0;
      size_t i = static_cast<size_t>(q * static_cast<double>(millis_.size()) + 0.999999);
      return millis_[std::clamp<size_t>(i, 1, millis_.size()) - 1];
    };
    char out[200];
    std::snprintf(out, sizeof out,
                  ",\"latency_ms\":{\"count\":%zu,\"p50\":%.2f,\"p90\":%.2f,\"p99\":%.2f,"
                  "\"max\":%.2f}",
                  millis_.size(), rank(0.50), rank(0.90), rank(0.99), rank(1.0));
    return out;
  }

 private:
  // Keyed by the delivery, unique while it is unsettled (tags need not be).
  std::map<proton::tracker, Clock::time_point> in_flight_;
  std::vector<double> millis_;
};

class Producer final : public proton::messaging_handler {
 public:
  // rate 0: as fast as credit allows; otherwise that many events per second, timed.
  Producer(std::string url, std::string address, std::vector<cepbus::EventPtr> events, double rate)
      : url_(std::move(url)),
        address_(std::move(address)),
        events_(std::move(events)),
        rate_(rate) {}

  void on_container_start(proton::container& c) override {
    c.open_sender(url_ + "/" + address_,
                  proton::connection_options().sasl_allowed_mechs("ANONYMOUS"));
  }
  void on_sender_open(proton::sender& s) override {
    if (rate_ <= 0) return;
    start_ = Clock::now();
    started_ = true;
    tick(s);
  }
  void on_sendable(proton::sender& s) override {
    while (s.credit() > 0 && sent < due()) {
      cepbus::services::amqp::messageFromEvent(*events_[sent], message_);
      message_.id(proton::message_id(static_cast<uint64_t>(++sent)));
      proton::tracker t = s.send(message_);
      if (rate_ > 0) {
        latency_.sent(t);
        behind_max_ms = std::max(behind_max_ms, millis(Clock::now() - scheduled(sent - 1)));
      }
    }
  }
  void on_tracker_accept(proton::tracker& t) override { settled(t, accepted); }
  void on_tracker_release(proton::tracker& t) override { settled(t, released); }
  void on_tracker_reject(proton::tracker& t) override { settled(t, rejected); }

  std::string latencyJson() { return rate_ > 0 ? latency_.json() : ""; }

  size_t sent = 0, accepted = 0, released = 0, rejected = 0;
  double behind_max_ms = 0;

 private:
  // Every millisecond: send what the schedule has come to.
  void tick(proton::sender s) {
    on_sendable(s);
    if (sent < events_.size()) s.work_queue().schedule(proton::duration(1), [this, s] { tick(s); });
  }
  // How many events the schedule has sent by now (all of them without a rate).
  size_t due() const {
    if (rate_ <= 0) return events_.size();
    if (!started_) return 0;
    const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    return std::min(events_.size(), static_cast<size_t>(seconds * rate_) + 1);
  }
  Clock::time_point scheduled(size_t i) const {
    return start_ + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(static_cast<double>(i) / rate_));
  }
  void settled(proton::tracker& t, size_t& outcome) {
    ++outcome;
    if (rate_ > 0) latency_.settled(t);
    if (accepted + released + rejected == events_.size()) t.connection().close();
  }

  const std::string url_, address_;
  const std::vector<cepbus::EventPtr> events_;
  const double rate_;
  Clock::time_point start_;
  bool started_ = false;  // the schedule starts once the link is open
  LatencyRecorder latency_;
  proton::message message_;  // reused: each event is mapped as it goes
};

int usage() {
  std::cerr << "usage: ingress_producer --url HOST:PORT --address ADDRESS --events FILE"
               " [--rate EVENTS_PER_S]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string url, address, file;
  double rate = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--url") {
      url = argv[i + 1];
    } else if (flag == "--address") {
      address = argv[i + 1];
    } else if (flag == "--events") {
      file = argv[i + 1];
    } else if (flag == "--rate") {
      char* end = nullptr;
      rate = std::strtod(argv[i + 1], &end);
      if (*end != '\0' || !(rate > 0)) {
        std::cerr << "ingress_producer: --rate " << argv[i + 1]
                  << ": expected events per second, a number above 0\n";
        return 2;
      }
    } else {
      return usage();
    }
  }
  if (url.empty() || address.empty() || file.empty()) return usage();
  std::ifstream in(file);
  if (!in) {
    std::cerr << "ingress_producer: cannot read " << file << "\n";
    return 1;
  }
  std::vector<cepbus::EventPtr> events;
  cepbus::EventLineReader reader(in);
  for (;;) {
    cepbus::Result<cepbus::EventPtr> event = reader.next();
    if (!event) {
      if (event.status().code() == cepbus::Status::Code::kNotFound) break;
      std::cerr << "ingress_producer: " << file << ": " << event.status().message() << "\n";
      return 1;
    }
    events.push_back(std::move(event).value());
  }
  Producer producer(url, address, std::move(events), rate);
  proton::container(producer).run();
  std::printf("{\"sent\":%zu,\"accepted\":%zu,\"released\":%zu,\"rejected\":%zu", producer.sent,
              producer.accepted, producer.released, producer.rejected);
  if (rate > 0) {
    std::printf("%s,\"behind_max_ms\":%.2f", producer.latencyJson().c_str(),
                producer.behind_max_ms);
  }
  std::printf("}\n");
  return producer.released + producer.rejected == 0 && producer.accepted == producer.sent ? 0 : 1;
}
