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
#include <proton/message_id.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/source_options.hpp>
#include <proton/timestamp.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>
#include <random>
#include <thread>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/core/event_json.h"
#include "services/cluster/broker_dialer.h"
#include "services/cluster/event_batch.h"
#include "services/cluster/ingress_batcher.h"
#include "services/cluster/partitioner.h"
#include "services/cluster/stream_read_back.h"
#include "services/cluster/stream_sequencer.h"
#include "services/cluster/topology.h"
#include "services/protocols/amqp/message_mapping.h"
#include "services/protocols/amqp/sasl_plugin.h"

namespace cepbus::services::cluster {
namespace {

using Clock = std::chrono::steady_clock;

// How many read-back rounds in a row may find messages the broker accepted
// missing from their stream before the publish fails: each round resends
// them, so only a broker that keeps losing what it confirms gets there.
constexpr int kMaxLossyReadBacks = 10;

// A read-back takes the stream in runs of this many messages.
constexpr int kReadBackCredit = 1000;
// How often a read-back looks for partitions whose stream went quiet.
const proton::duration kReadBackTick(250);

// Per plan message, how many messages of its partition come before it.
std::vector<uint64_t> placesInPartitions(const std::vector<MessagePlan>& plan) {
  std::vector<uint64_t> place(plan.size());
  std::map<uint32_t, uint64_t> next;
  for (size_t i = 0; i < plan.size(); ++i) place[i] = next[plan[i].partition]++;
  return place;
}

uint64_t randomRun() {
  std::random_device device;
  return (uint64_t{device()} << 32) | device();
}

class Publisher final : public proton::messaging_handler {
 public:
  Publisher(const ClusterSpec& spec, const std::string& password, std::span<const EventPtr> events,
            const PublishOptions& options, std::vector<MessagePlan> messages)
      : spec_(spec),
        password_(password),
        events_(events),
        options_(options),
        plan_(std::move(messages)),
        place_(placesInPartitions(plan_)),
        read_back_(randomRun()) {}

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
      MutexLock lock(watch_mu_);
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
    // After a failed connection, what its broker accepted (or left in
    // doubt) is checked against the streams before anything goes again.
    if (read_back_.pending()) startReadBack();
  }

  void on_sendable(proton::sender&) override { pump(); }

  void on_tracker_accept(proton::tracker& t) override {
    auto it = in_flight_.find(t);
    if (it == in_flight_.end()) return;
    report_.published += eventCount(it->second.index);
    proven_[plan_[it->second.index].partition] = true;
    last_accepted_ = Clock::now();
    if (streamInput()) read_back_.accepted(it->second.index);
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

  // What the broker did not accept is sent again on the next connection;
  // with stream input, what the stream does not hold (read back first).
  void on_transport_close(proton::transport& t) override {
    {
      MutexLock lock(watch_mu_);
      watched_ = nullptr;
    }
    senders_.clear();
    readers_.clear();
    reading_back_ = false;
    if ((done() && !read_back_.pending()) || !status_) {
      container_->stop();
      return;
    }
    if (!streamInput()) {
      std::vector<size_t> doubt;
      for (const auto& [tracker, sent] : in_flight_) doubt.push_back(sent.index);
      resendFirst(doubt);
    }
    in_flight_.clear();
    in_flight_events_ = 0;
    in_flight_on_.assign(spec_.partitions, 0);
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
  void on_receiver_error(proton::receiver& r) override { linkEnded(r.error()); }
  void on_session_error(proton::session& s) override { linkEnded(s.error()); }

  // The read-back: a message of a partition's stream.
  void on_message(proton::delivery& d, proton::message& m) override {
    if (!reading_back_) return;
    const auto reader = std::find(readers_.begin(), readers_.end(), d.receiver());
    if (reader == readers_.end()) return;
    const uint32_t partition = reads_[reader - readers_.begin()].partition;
    last_read_[reader - readers_.begin()] = Clock::now();
    const std::string id =
        m.id().type() == proton::STRING ? proton::get<std::string>(m.id()) : std::string();
    if (read_back_.read(partition, id)) {
      stopReading(reader - readers_.begin());
    }
  }
  void on_receiver_open(proton::receiver& r) override {
    const auto reader = std::find(readers_.begin(), readers_.end(), r);
    if (reader != readers_.end()) last_read_[reader - readers_.begin()] = Clock::now();
  }

 private:
  struct InFlight {
    size_t index;  // into plan_
    Clock::time_point sent;
  };

  void connect() {
    BrokerDial c = dialBroker(spec_, spec_.brokers[broker_], password_);
    c.options.handler(*this);
    connection_ = container_->connect(c.url, c.options);
  }

  bool streamInput() const { return spec_.input == ClusterSpec::Input::kStream; }

  // Puts `messages` (plan indices) before anything else that goes again,
  // all in plan order, each once.
  void resendFirst(const std::vector<size_t>& messages) {
    std::vector<size_t> merged(resend_.begin(), resend_.end());
    for (size_t index : messages) {
      merged.push_back(index);
      report_.resent += eventCount(index);
    }
    std::sort(merged.begin(), merged.end());
    merged.erase(std::unique(merged.begin(), merged.end()), merged.end());
    resend_.assign(merged.begin(), merged.end());
  }

  // Reads back, on the open connection, every partition stream that should
  // hold messages not seen there yet (stream_read_back.h); nothing is sent
  // meanwhile.
  void startReadBack() {
    reading_back_ = true;
    ++report_.read_backs;
    reads_ = read_back_.beginRound(std::chrono::milliseconds(options_.read_back_skew_ms));
    readers_.clear();
    last_read_.assign(reads_.size(), Clock::now());
    const uint64_t round = report_.read_backs;
    for (const StreamReadBack::Read& r : reads_) {
      proton::source::filter_map filters;
      filters.put(
          proton::symbol("rabbitmq:stream-offset-spec"),
          proton::value(proton::timestamp(
              std::chrono::duration_cast<std::chrono::milliseconds>(r.from.time_since_epoch())
                  .count())));
      readers_.push_back(connection_.open_receiver(
          "/amq/queue/" + partitionStream(spec_.name, r.partition),
          proton::receiver_options()
              .name("read-back:" + partitionRoutingKey(r.partition) + "-" + std::to_string(round))
              .credit_window(kReadBackCredit)
              .source(proton::source_options().filters(filters))));
    }
    container_->schedule(kReadBackTick, [this, round] { superviseReadBack(round); });
  }

  // A partition is read to its end once its stream has been quiet for
  // read_back_quiet_ms (from the link's attach, or its last message).
  void superviseReadBack(uint64_t round) {
    if (!reading_back_ || round != report_.read_backs) return;
    const auto now = Clock::now();
    for (size_t i = 0; i < readers_.size() && reading_back_; ++i) {
      if (readers_[i] &&
          now - last_read_[i] > std::chrono::milliseconds(options_.read_back_quiet_ms)) {
        stopReading(i);
      }
    }
    if (reading_back_) {
      container_->schedule(kReadBackTick, [this, round] { superviseReadBack(round); });
    }
  }

  void stopReading(size_t reader) {
    if (!readers_[reader]) return;
    readers_[reader].close();
    readers_[reader] = proton::receiver();
    if (std::none_of(readers_.begin(), readers_.end(),
                     [](const proton::receiver& r) { return static_cast<bool>(r); })) {
      finishReadBack();
    }
  }

  // What the streams lack goes again first, in plan order.
  void finishReadBack() {
    reading_back_ = false;
    readers_.clear();
    // A stream that delivered nothing through this broker may be one the
    // broker stopped serving: it is read again through the next broker
    // before its silence is taken for a loss (once per other broker).
    if (!read_back_.silent().empty() && silent_read_backs_ + 1 < spec_.brokers.size()) {
      ++silent_read_backs_;
      ++report_.read_back_switches;
      report_.read_back_confirmed += read_back_.abandonRound();
      if (connection_ && connection_.active()) {
        connection_.close(proton::error_condition(
            "cepbus:read-back-silent",
            "a partition stream delivered nothing to the read-back through this broker"));
      }
      return;
    }
    silent_read_backs_ = 0;
    const StreamReadBack::Outcome outcome = read_back_.endRound();
    report_.read_back_confirmed += outcome.confirmed;
    std::vector<size_t> missing;
    uint64_t lost = 0;
    for (const StreamReadBack::Missing& m : outcome.missing) {
      missing.push_back(m.message);
      if (m.accepted) lost += eventCount(m.message);
    }
    report_.resent_accepted += lost;
    lossy_read_backs_ = lost > 0 ? lossy_read_backs_ + 1 : 0;
    if (lossy_read_backs_ >= kMaxLossyReadBacks) {
      fail(Status::unavailable("the brokers of cluster \"" + spec_.name +
                               "\" accepted messages that their streams did not hold, " +
                               std::to_string(kMaxLossyReadBacks) +
                               " read-backs in a row (the last missed " + std::to_string(lost) +
                               " accepted events or end markers)"));
      return;
    }
    resendFirst(missing);
    pump();
  }

  size_t total() const { return plan_.size(); }

  // What a message counts for in the report: its events, or 1 for an
  // end-of-stream marker.
  size_t eventCount(size_t index) const { return std::max<size_t>(plan_[index].events.size(), 1); }

  bool done() const { return next_ == total() && resend_.empty() && in_flight_.empty(); }

  void landed(std::map<proton::tracker, InFlight>::iterator it) {
    in_flight_events_ -= plan_[it->second.index].events.size();
    --in_flight_on_[plan_[it->second.index].partition];
    in_flight_.erase(it);
  }

  void pump() {
    if (!status_ || reading_back_) return;
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
    if (done() && connection_ && connection_.active()) {
      // A publish ends once the streams hold what it sent (read back).
      if (read_back_.pending()) {
        startReadBack();
      } else {
        connection_.close();
      }
    }
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
    if (message.events.size() == 1 && !streamInput()) {
      amqp::messageFromEvent(*events_[message.events.front()], message_);
    } else if (message.events.empty()) {
      message_.clear();
      message_.subject(kEndOfStreamSubject);
    } else {
      batch_.clear();
      for (size_t i : message.events) batch_.push_back(events_[i]);
      messageFromEventBatch(batch_, message_);
    }
    if (streamInput()) {
      message_.id(read_back_.messageId(index));
      message_.properties().put(kSequenceProperty, place_[index]);
      read_back_.sent(index, message.partition, std::chrono::system_clock::now());
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
    MutexLock lock(watch_mu_);
    while (!watch_cv_.waitFor(watch_mu_, std::chrono::seconds(1), [this] {
      watch_mu_.assertHeld();
      return watch_stop_;
    })) {
      if (watched_ != nullptr) watched_->add([this] { checkConfirms(); });
    }
  }

  void stopWatch(std::thread& watch) {
    {
      MutexLock lock(watch_mu_);
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

  const ClusterSpec& spec_;
  const std::string& password_;
  const std::span<const EventPtr> events_;
  const PublishOptions options_;
  const std::vector<MessagePlan> plan_;  // what each message carries, in sending order
  // Per plan message, its place among its partition's (stream_sequencer.h).
  const std::vector<uint64_t> place_;

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
  // Stream input: what was sent and not yet seen in its stream, and the
  // read-back in progress (one reader per partition read, in reads_ order;
  // a finished one is empty).
  StreamReadBack read_back_;
  bool reading_back_ = false;
  std::vector<StreamReadBack::Read> reads_;
  std::vector<proton::receiver> readers_;
  std::vector<Clock::time_point> last_read_;
  int lossy_read_backs_ = 0;
  size_t silent_read_backs_ = 0;  // in a row, each through another broker
  size_t next_ = 0;
  size_t broker_ = 0;
  bool timer_armed_ = false;
  Clock::time_point start_;
  Clock::time_point last_up_;
  Clock::time_point last_accepted_;  // bounds how long broker failures are retried

  Mutex watch_mu_;
  CondVar watch_cv_;
  proton::work_queue* watched_ GUARDED_BY(watch_mu_) = nullptr;  // the open connection's
  bool watch_stop_ GUARDED_BY(watch_mu_) = false;
  PublishReport report_;
  Status status_ = Status::ok();
};

}  // namespace

std::vector<MessagePlan> planMessages(std::span<const EventPtr> events,
                                      const std::vector<uint32_t>& partition_of,
                                      uint32_t partitions, const PublishOptions& options) {
  IngressBatcher::Limits limits;
  limits.max_events = std::max<uint32_t>(options.batch, 1);
  limits.max_bytes = std::max<uint64_t>(options.batch_bytes, 1);
  limits.linger = std::chrono::milliseconds(options.linger_ms);
  limits.max_held_events = UINT64_MAX;  // the plan holds nothing: in_flight bounds the publish
  limits.max_held_bytes = UINT64_MAX;
  IngressBatcher batcher(partitions, limits);
  // Event i comes at i / rate seconds of the schedule; without a rate the
  // whole file is there at once, so batches close by size only.
  const IngressBatcher::TimePoint start{};
  auto at = [&](size_t i) {
    return options.rate == 0 ? start
                             : start + std::chrono::nanoseconds(i * 1'000'000'000 / options.rate);
  };
  std::vector<MessagePlan> plan;
  auto take = [&](std::vector<IngressBatcher::Batch> closed) {
    for (IngressBatcher::Batch& batch : closed) {
      batcher.confirmed(batch.id);
      // Each event is a delivery of its own, named by its index.
      const size_t last = batch.deliveries.back();
      plan.push_back(MessagePlan{batch.partition, std::move(batch.deliveries), last});
    }
  };
  for (size_t i = 0; i < partition_of.size(); ++i) {
    // The linger timer fires before an event that comes at its deadline.
    if (options.rate > 0) take(batcher.expire(at(i)));
    const uint64_t bytes =
        limits.max_events > 1 ? encodeEvent(*events[i], EventFormat::kFull).size() + 1 : 0;
    const IngressBatcher::Item item{partition_of[i], events[i], bytes};
    take(batcher.add(i, std::span(&item, 1), at(i)));
  }
  take(batcher.flush());
  if (options.end_of_stream) {
    for (uint32_t p = 0; p < partitions; ++p) plan.push_back(MessagePlan{p, {}, 0});
  }
  return plan;
}

Result<PublishReport> publishToCluster(const ClusterSpec& spec, const std::string& password,
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
                      planMessages(events, partitions, spec.partitions, options));
  if (Status s = publisher.run(); !s) return s;
  return publisher.report();
}

}  // namespace cepbus::services::cluster
