#include "services/cluster/cluster_publisher.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
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
#include <thread>
#include <vector>

#include "services/amqp/message_mapping.h"
#include "services/amqp/sasl_plugin.h"
#include "services/cluster/broker_dialer.h"
#include "services/cluster/event_batch.h"
#include "services/cluster/partitioner.h"
#include "services/cluster/topology.h"

namespace cepbus::services::cluster {
namespace {

using Clock = std::chrono::steady_clock;

class Publisher final : public proton::messaging_handler {
 public:
  Publisher(const descriptor::ClusterSpec& spec, const std::string& password,
            std::span<const EventPtr> events, const PublishOptions& options,
            std::vector<MessagePlan> messages)
      : spec_(spec),
        password_(password),
        events_(events),
        options_(options),
        plan_(std::move(messages)) {}

  Status run() {
    amqp::installSaslPlugin();
    proton::container container(*this);
    container_ = &container;
    start_ = Clock::now();
    last_up_ = start_;
    last_accepted_ = start_;
    // The confirm watch is a thread of its own: a timer scheduled on the
    // container kept run() going for up to its period after the last
    // acceptance (every publish took at least a second).
    std::thread watch([this] { watchConfirms(); });
    try {
      container.run();
    } catch (...) {
      stopWatch(watch);
      throw;
    }
    stopWatch(watch);
    return status_;
  }

  const PublishReport& report() const { return report_; }

  void on_container_start(proton::container&) override { connect(); }

  void on_connection_open(proton::connection& c) override {
    last_up_ = Clock::now();
    {
      std::lock_guard lock(watch_mu_);
      watched_ = &c.work_queue();
    }
    senders_.clear();
    proven_.assign(spec_.partitions, false);
    in_flight_on_.assign(spec_.partitions, 0);
    for (uint32_t p = 0; p < spec_.partitions; ++p) {
      senders_.push_back(
          c.open_sender("/exchange/" + inExchange(spec_.name) + "/" + partitionRoutingKey(p),
                        proton::sender_options().name("in:" + partitionRoutingKey(p))));
    }
  }

  void on_sendable(proton::sender&) override { pump(); }

  void on_tracker_accept(proton::tracker& t) override {
    auto it = in_flight_.find(t);
    if (it == in_flight_.end()) return;
    report_.published += std::max<size_t>(plan_[it->second.index].events.size(), 1);
    proven_[plan_[it->second.index].partition] = true;
    last_accepted_ = Clock::now();
    rememberAccepted(it->second.index);
    ++report_.messages;
    landed(it);
    last_up_ = Clock::now();
    pump();
  }
  void on_tracker_reject(proton::tracker& t) override {
    auto it = in_flight_.find(t);
    if (it == in_flight_.end()) return;
    const proton::error_condition why = amqp::remoteCondition(t);
    if (retryBrokerError(why, /*refusal=*/true)) return;
    const MessagePlan& message = plan_[it->second.index];
    fail(Status::invalidArgument(
        (message.events.empty()
             ? "the broker rejected the end-of-stream marker of partition " +
                   std::to_string(message.partition)
             : "the broker rejected the event at index " + std::to_string(message.events.front()) +
                   (message.events.size() > 1
                        ? " (and the " + std::to_string(message.events.size() - 1) +
                              " after it in its batch)"
                        : "")) +
        ": " + why.what()));
  }
  void on_tracker_release(proton::tracker& t) override {
    auto it = in_flight_.find(t);
    if (it == in_flight_.end()) return;
    resend_.push_back(it->second.index);
    landed(it);
    pump();
  }

  // What the broker did not accept is sent again on the next connection.
  void on_transport_close(proton::transport& t) override {
    {
      std::lock_guard lock(watch_mu_);
      watched_ = nullptr;
    }
    senders_.clear();
    if (done() || !status_) {
      container_->stop();
      return;
    }
    std::vector<size_t> doubt;
    for (const auto& [tracker, sent] : in_flight_) {
      doubt.push_back(sent.index);
      report_.resent += plan_[sent.index].events.size();
    }
    in_flight_.clear();
    in_flight_events_ = 0;
    in_flight_on_.assign(spec_.partitions, 0);
    for (const Accepted& a : accepted_) {
      if (last_accepted_ - a.at > resendWindow()) continue;
      doubt.push_back(a.index);
      report_.resent += plan_[a.index].events.size();
      report_.resent_accepted += plan_[a.index].events.size();
    }
    accepted_.clear();
    std::sort(doubt.begin(), doubt.end());
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

  void on_transport_error(proton::transport&) override {}    // handled at the close
  void on_connection_error(proton::connection&) override {}  // handled at the close
  // The broker ended a link or session: retried like a failed connection,
  // for give_up_ms at most (see retryBrokerError()).
  void on_sender_error(proton::sender& s) override { linkEnded(s.error()); }
  void on_session_error(proton::session& s) override { linkEnded(s.error()); }

 private:
  struct InFlight {
    size_t index;  // into plan_
    Clock::time_point sent;
  };
  struct Accepted {
    size_t index;  // into plan_
    Clock::time_point at;
  };

  void connect() {
    BrokerDial c = dialBroker(spec_, spec_.brokers[broker_], password_);
    c.options.handler(*this);
    connection_ = container_->connect(c.url, c.options);
  }

  std::chrono::milliseconds resendWindow() const {
    return std::chrono::milliseconds(spec_.input == descriptor::ClusterSpec::Input::kStream
                                         ? options_.stream_resend_window_ms
                                         : 0);
  }

  // Keeps what the broker accepted in the last resendWindow(), which a
  // failure of this connection sends again.
  void rememberAccepted(size_t index) {
    const auto window = resendWindow();
    if (window.count() == 0) return;
    accepted_.push_back(Accepted{index, last_accepted_});
    while (last_accepted_ - accepted_.front().at > window) accepted_.pop_front();
  }

  size_t total() const { return plan_.size(); }

  bool done() const { return next_ == total() && resend_.empty() && in_flight_.empty(); }

  void landed(std::map<proton::tracker, InFlight>::iterator it) {
    in_flight_events_ -= plan_[it->second.index].events.size();
    --in_flight_on_[plan_[it->second.index].partition];
    in_flight_.erase(it);
  }

  void pump() {
    if (!status_) return;
    while (in_flight_events_ < options_.max_in_flight && (!resend_.empty() || next_ < total())) {
      if (!resend_.empty()) {
        if (!sendMessage(resend_.front())) return;
        resend_.pop_front();
        continue;
      }
      if (options_.rate > 0 && !plan_[next_].events.empty()) {
        const auto due =
            start_ + std::chrono::nanoseconds(plan_[next_].due * 1'000'000'000 / options_.rate);
        if (Clock::now() < due) {
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
      if (!sendMessage(next_)) return;
      ++next_;
    }
    if (done() && connection_ && connection_.active()) connection_.close();
  }

  // False when the partition's sender has no credit yet (on_sendable
  // resumes), or when the partition is not proven on this connection and
  // has a message in flight (an acceptance resumes).
  //
  // Why one message until the first acceptance: after a failover the new
  // broker may not yet know the queue's new leader. RabbitMQ 3.10 then
  // leaves a message to a stream unanswered for good while accepting and
  // storing the ones after it; resent after the confirm timeout, it would
  // land behind them and reach the partition's node out of order (late).
  bool sendMessage(size_t index) {
    if (senders_.empty()) return false;
    const MessagePlan& message = plan_[index];
    proton::sender& s = senders_[message.partition];
    if (!s.active() || s.credit() <= 0) return false;
    if (!proven_[message.partition] && in_flight_on_[message.partition] > 0) return false;
    // RabbitMQ 3.10 cannot store in a stream a message whose message-id is a
    // ulong (it answers amqp:internal-error), which is how one event carries
    // its id; a batch carries the ids in its body.
    if (message.events.size() == 1 && spec_.input == descriptor::ClusterSpec::Input::kQueue) {
      amqp::messageFromEvent(*events_[message.events.front()], message_);
    } else if (message.events.empty()) {
      message_.clear();
      message_.subject(kEndOfStreamSubject);
    } else {
      batch_.clear();
      for (size_t i : message.events) batch_.push_back(events_[i]);
      messageFromEventBatch(batch_, message_);
    }
    in_flight_.emplace(s.send(message_), InFlight{index, Clock::now()});
    in_flight_events_ += message.events.size();
    ++in_flight_on_[message.partition];
    return true;
  }

  // A failure of the broker's, not of the message (RabbitMQ 3.10 refuses,
  // or ends the link of, what goes to a stream whose leader's node is down:
  // amqp:internal-error, "nodedown"): like a failed connection, everything
  // in doubt goes again, in order, through the next broker; for at most
  // give_up_ms without an acceptance. A refused message counts as the
  // broker's failure only with amqp:internal-error; an ended link always.
  bool retryBrokerError(const proton::error_condition& why, bool refusal) {
    if ((refusal && why.name() != "amqp:internal-error") ||
        Clock::now() - last_accepted_ > std::chrono::milliseconds(options_.give_up_ms)) {
      return false;
    }
    ++report_.broker_errors;
    if (connection_ && connection_.active()) connection_.close();
    return true;
  }

  void linkEnded(const proton::error_condition& why) {
    if (!retryBrokerError(why, /*refusal=*/false)) {
      fail(Status::unavailable("the broker ended the publishing link: " + why.what()));
    }
  }

  // Once a second (watchConfirms()): a message unanswered for
  // confirm_timeout_ms ends its connection (on_transport_close resends what
  // is in doubt).
  void checkConfirms() {
    if (done() || !status_) return;
    const auto limit = std::chrono::milliseconds(options_.confirm_timeout_ms);
    const auto now = Clock::now();
    const bool overdue = std::any_of(in_flight_.begin(), in_flight_.end(), [&](const auto& entry) {
      return now - entry.second.sent > limit;
    });
    if (overdue && connection_ && connection_.active()) {
      ++report_.confirm_timeouts;
      connection_.close(proton::error_condition(
          "cepbus:confirm-timeout", "a message was neither accepted nor refused within " +
                                        std::to_string(options_.confirm_timeout_ms) + " ms"));
    }
  }

  // The watch thread: once a second, checkConfirms() on the open
  // connection's work queue.
  void watchConfirms() {
    std::unique_lock lock(watch_mu_);
    while (!watch_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return watch_stop_; })) {
      if (watched_ != nullptr) watched_->add([this] { checkConfirms(); });
    }
  }

  void stopWatch(std::thread& watch) {
    {
      std::lock_guard lock(watch_mu_);
      watch_stop_ = true;
      watched_ = nullptr;
    }
    watch_cv_.notify_all();
    watch.join();
  }

  void fail(Status s) {
    status_ = std::move(s);
    if (connection_ && connection_.active()) connection_.close();
  }

  const descriptor::ClusterSpec& spec_;
  const std::string& password_;
  const std::span<const EventPtr> events_;
  const PublishOptions options_;
  const std::vector<MessagePlan> plan_;  // what each message carries, in sending order

  proton::container* container_ = nullptr;
  proton::connection connection_;
  std::vector<proton::sender> senders_;
  // Per partition, on this connection: the broker accepted a message of it;
  // messages of it in flight.
  std::vector<bool> proven_;
  std::vector<uint32_t> in_flight_on_;
  proton::message message_;
  std::vector<EventPtr> batch_;
  std::map<proton::tracker, InFlight> in_flight_;
  size_t in_flight_events_ = 0;
  std::deque<size_t> resend_;
  std::deque<Accepted> accepted_;  // on this connection, within resendWindow()
  size_t next_ = 0;
  size_t broker_ = 0;
  bool timer_armed_ = false;
  Clock::time_point start_;
  Clock::time_point last_up_;
  Clock::time_point last_accepted_;  // bounds how long broker failures are retried

  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  proton::work_queue* watched_ = nullptr;  // the open connection's; guarded by watch_mu_
  bool watch_stop_ = false;                // guarded by watch_mu_
  PublishReport report_;
  Status status_ = Status::ok();
};

}  // namespace

std::vector<MessagePlan> planMessages(const std::vector<uint32_t>& partition_of,
                                      uint32_t partitions, const PublishOptions& options) {
  const uint32_t batch = std::max<uint32_t>(options.batch, 1);
  const size_t linger =
      options.rate == 0 ? SIZE_MAX : std::max<size_t>(1, options.rate * options.linger_ms / 1000);
  std::vector<MessagePlan> plan;
  std::vector<MessagePlan> open(partitions);
  std::deque<std::pair<size_t, uint32_t>> opened;  // (first event, partition), oldest first
  auto close = [&](uint32_t p) {
    open[p].partition = p;
    open[p].due = open[p].events.back();
    plan.push_back(std::move(open[p]));
    open[p] = MessagePlan{};
  };
  for (size_t i = 0; i < partition_of.size(); ++i) {
    while (!opened.empty() && i - opened.front().first >= linger) {
      const auto [first, p] = opened.front();
      opened.pop_front();
      if (!open[p].events.empty() && open[p].events.front() == first) close(p);
    }
    const uint32_t p = partition_of[i];
    if (open[p].events.empty()) opened.emplace_back(i, p);
    open[p].events.push_back(i);
    if (open[p].events.size() == batch) close(p);
  }
  for (const auto& [first, p] : opened) {
    if (!open[p].events.empty() && open[p].events.front() == first) close(p);
  }
  if (options.end_of_stream) {
    for (uint32_t p = 0; p < partitions; ++p) plan.push_back(MessagePlan{p, {}, 0});
  }
  return plan;
}

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
  if (spec.brokers.empty()) return Status::invalidArgument("the cluster names no broker");
  Publisher publisher(spec, password, events, options,
                      planMessages(partitions, spec.partitions, options));
  if (Status s = publisher.run(); !s) return s;
  return publisher.report();
}

}  // namespace cepbus::services::cluster
