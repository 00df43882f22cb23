#include "services/cluster/cluster_publisher.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>
#include <vector>

#include "services/amqp/message_mapping.h"
#include "services/amqp/sasl_plugin.h"
#include "services/cluster/partitioner.h"
#include "services/cluster/topology.h"

namespace cepbus::services::cluster {
namespace {

using Clock = std::chrono::steady_clock;

class Publisher final : public proton::messaging_handler {
 public:
  Publisher(const descriptor::ClusterSpec& spec, const std::string& password,
            std::span<const EventPtr> events, const PublishOptions& options,
            std::vector<uint32_t> partitions)
      : spec_(spec),
        password_(password),
        events_(events),
        options_(options),
        partitions_(std::move(partitions)) {}

  Status run() {
    amqp::installSaslPlugin();
    proton::container container(*this);
    container_ = &container;
    start_ = Clock::now();
    last_up_ = start_;
    container.run();
    return status_;
  }

  const PublishReport& report() const { return report_; }

  void on_container_start(proton::container&) override { connect(); }

  void on_connection_open(proton::connection& c) override {
    last_up_ = Clock::now();
    senders_.clear();
    for (uint32_t p = 0; p < spec_.partitions; ++p) {
      senders_.push_back(
          c.open_sender("/exchange/" + inExchange(spec_.name) + "/" + partitionRoutingKey(p),
                        proton::sender_options().name("in:" + partitionRoutingKey(p))));
    }
  }

  void on_sendable(proton::sender&) override { pump(); }

  void on_tracker_accept(proton::tracker& t) override {
    if (in_flight_.erase(t) == 0) return;
    ++report_.published;
    last_up_ = Clock::now();
    pump();
  }
  void on_tracker_reject(proton::tracker& t) override {
    auto it = in_flight_.find(t);
    if (it == in_flight_.end()) return;
    fail(Status::invalidArgument("the broker rejected the event at index " +
                                 std::to_string(it->second) + ": " +
                                 amqp::remoteCondition(t).what()));
  }
  void on_tracker_release(proton::tracker& t) override {
    auto it = in_flight_.find(t);
    if (it == in_flight_.end()) return;
    resend_.push_back(it->second);
    in_flight_.erase(it);
    pump();
  }

  // What the broker did not accept is sent again on the next connection.
  void on_transport_close(proton::transport& t) override {
    senders_.clear();
    if (done() || !status_) {
      container_->stop();
      return;
    }
    std::vector<size_t> doubt;
    for (const auto& [tracker, index] : in_flight_) doubt.push_back(index);
    in_flight_.clear();
    std::sort(doubt.begin(), doubt.end());
    report_.resent += doubt.size();
    resend_.insert(resend_.begin(), doubt.begin(), doubt.end());
    if (Clock::now() - last_up_ > std::chrono::milliseconds(options_.give_up_ms)) {
      status_ = Status::unavailable("no broker of cluster \"" + spec_.name + "\" answered for " +
                                    std::to_string(options_.give_up_ms) +
                                    " ms; last error: " + t.error().what());
      container_->stop();
      return;
    }
    broker_ = (broker_ + 1) % spec_.brokers.size();
    ++report_.reconnects;
    container_->schedule(proton::duration(200), [this] { connect(); });
  }

  void on_transport_error(proton::transport&) override {}  // handled at the close

 private:
  void connect() {
    const descriptor::ClusterBroker& b = spec_.brokers[broker_];
    proton::connection_options options;
    options.handler(*this);
    options.user(spec_.user).password(password_).sasl_allowed_mechs("PLAIN");
    options.sasl_allow_insecure_mechs(true);
    options.idle_timeout(proton::duration(std::max<uint64_t>(spec_.idle_timeout_ms, 2000)));
    connection_ = container_->connect("amqp://" + b.host + ":" + std::to_string(b.port), options);
  }

  size_t total() const { return partitions_.size(); }
  bool done() const { return next_ == total() && resend_.empty() && in_flight_.empty(); }

  void pump() {
    if (!status_) return;
    while (in_flight_.size() < options_.max_in_flight && (!resend_.empty() || next_ < total())) {
      if (!resend_.empty()) {
        if (!sendIndex(resend_.front())) return;
        resend_.pop_front();
        continue;
      }
      if (options_.rate > 0) {
        const auto due = start_ + std::chrono::nanoseconds(next_ * 1'000'000'000 / options_.rate);
        if (next_ < events_.size() && Clock::now() < due) {
          if (!timer_armed_) {
            timer_armed_ = true;
            container_->schedule(proton::duration(1), [this] {
              timer_armed_ = false;
              pump();
            });
          }
          return;
        }
      }
      if (!sendIndex(next_)) return;
      ++next_;
    }
    if (done() && connection_ && connection_.active()) connection_.close();
  }

  // False when the partition's sender has no credit yet (on_sendable resumes).
  bool sendIndex(size_t index) {
    if (senders_.empty()) return false;
    proton::sender& s = senders_[partitions_[index]];
    if (!s.active() || s.credit() <= 0) return false;
    if (index < events_.size()) {
      amqp::messageFromEvent(*events_[index], message_);
    } else {
      message_.clear();
      message_.subject(kEndOfStreamSubject);
    }
    in_flight_.emplace(s.send(message_), index);
    return true;
  }

  void fail(Status s) {
    status_ = std::move(s);
    if (connection_ && connection_.active()) connection_.close();
  }

  const descriptor::ClusterSpec& spec_;
  const std::string& password_;
  const std::span<const EventPtr> events_;
  const PublishOptions options_;
  const std::vector<uint32_t> partitions_;  // per event, then per end marker

  proton::container* container_ = nullptr;
  proton::connection connection_;
  std::vector<proton::sender> senders_;
  proton::message message_;
  std::map<proton::tracker, size_t> in_flight_;
  std::deque<size_t> resend_;
  size_t next_ = 0;
  size_t broker_ = 0;
  bool timer_armed_ = false;
  Clock::time_point start_;
  Clock::time_point last_up_;
  PublishReport report_;
  Status status_ = Status::ok();
};

}  // namespace

Result<PublishReport> publishToCluster(const descriptor::ClusterSpec& spec,
                                       const std::string& password,
                                       std::span<const EventPtr> events,
                                       const PublishOptions& options) {
  std::vector<Symbol> key;
  for (const std::string& k : spec.key) key.push_back(Symbol::intern(k));
  std::vector<uint32_t> partitions;
  partitions.reserve(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    auto text = partitionKeyText(*events[i], key);
    if (!text) {
      return Status::invalidArgument("event " + std::to_string(i + 1) + ": " +
                                     text.status().message());
    }
    partitions.push_back(partitionOfKey(*text, spec.partitions));
  }
  if (options.end_of_stream) {
    for (uint32_t p = 0; p < spec.partitions; ++p) partitions.push_back(p);
  }
  if (spec.brokers.empty()) return Status::invalidArgument("the cluster names no broker");
  Publisher publisher(spec, password, events, options, std::move(partitions));
  if (Status s = publisher.run(); !s) return s;
  return publisher.report();
}

}  // namespace cepbus::services::cluster
