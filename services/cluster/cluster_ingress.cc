#include "services/cluster/cluster_ingress.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <proton/connection_options.hpp>
#include <proton/error_condition.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender_options.hpp>
#include <proton/target.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>

#include "bus/core/event_json.h"
#include "services/cluster/event_batch.h"
#include "services/cluster/partitioner.h"
#include "services/cluster/topology.h"
#include "services/protocols/amqp/message_mapping.h"

namespace cepbus::services::cluster {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<Symbol> keySymbols(const ClusterSpec& spec) {
  std::vector<Symbol> key;
  for (const std::string& k : spec.key) key.push_back(Symbol::intern(k));
  return key;
}

IngressBatcher::Limits batchLimits(const ClusterIngressSpec& in) {
  IngressBatcher::Limits limits;
  limits.max_events = in.batch_events;
  limits.max_bytes = in.batch_bytes;
  limits.linger = std::chrono::milliseconds(in.linger_ms);
  limits.max_held_events = in.max_held_events;
  return limits;
}

// The events of a producer's message: a batch message (event_batch.h) or
// one event in the plain mapping; empty with the condition that says why.
MappedBatch eventsOf(const proton::message& m) {
  if (m.subject() == kEventBatchSubject) return eventsFromBatchMessage(m);
  amqp::MappedEvent mapped = amqp::eventFromMessage(m);
  MappedBatch batch;
  if (mapped.event) {
    batch.events.push_back(std::move(mapped.event));
  } else {
    batch.condition = std::move(mapped.condition);
    batch.description = std::move(mapped.description);
  }
  return batch;
}

}  // namespace

class ClusterIngress::Door final : public proton::listen_handler {
 public:
  explicit Door(ClusterIngress& ingress) : ingress_(ingress) {}
  proton::connection_options on_accept(proton::listener&) override {
    return proton::connection_options().handler(ingress_);
  }
  void on_error(proton::listener&, const std::string& what) override {
    const ClusterSpec& spec = ingress_.spec_;
    ingress_.log_.error("cluster %s node %s: the ingress cannot listen on %s:%hu: %s", spec.name,
                        spec.node, spec.ingress->host, spec.ingress->port, what);
  }

 private:
  ClusterIngress& ingress_;
};

ClusterIngress::ClusterIngress(const ClusterSpec& spec, ClusterStats& counters)
    : spec_(spec),
      key_(keySymbols(spec)),
      door_(std::make_unique<Door>(*this)),
      log_(Poco::Logger::get("cepbus.cluster")),
      batcher_(spec.partitions, batchLimits(*spec.ingress)),
      unsent_(spec.partitions),
      counters_(counters) {}

ClusterIngress::~ClusterIngress() = default;

void ClusterIngress::listen(proton::container& container) {
  container_ = &container;
  const ClusterIngressSpec& in = *spec_.ingress;
  listener_ = container.listen(in.host + ":" + std::to_string(in.port), *door_);
  log_.information("cluster %s node %s: ingress for %s on %s:%hu", spec_.name, spec_.node,
                   inExchange(spec_.name), in.host, in.port);
}

void ClusterIngress::stop() {
  stopped_ = true;
  if (listener_) listener_->stop();
  for (proton::receiver& r : producers_) {
    if (r.connection().active()) r.connection().close();
  }
  producers_.clear();
}

// ---- producers ------------------------------------------------------------

void ClusterIngress::on_receiver_open(proton::receiver& r) {
  const std::string address = r.target().address();
  if (stopped_ || address != inExchange(spec_.name)) {
    r.close(proton::error_condition(
        amqp::kNotFound, "the ingress of cluster \"" + spec_.name + "\" takes events sent to \"" +
                             inExchange(spec_.name) + "\", not \"" + address + "\""));
    return;
  }
  // Credit goes out as the batcher has room, never by Proton's window; a
  // delivery is settled once its batches are confirmed, never on return.
  r.open(proton::receiver_options().credit_window(0).auto_accept(false));
  producers_.push_back(r);
  credit(r);
}

void ClusterIngress::on_receiver_close(proton::receiver& r) { std::erase(producers_, r); }

void ClusterIngress::on_message(proton::delivery& d, proton::message& m) {
  ++counters_.ingress_received;
  proton::receiver r = d.receiver();
  MappedBatch mapped = eventsOf(m);
  std::vector<IngressBatcher::Item> items;
  items.reserve(mapped.events.size());
  for (size_t i = 0; i < mapped.events.size() && mapped.condition.empty(); ++i) {
    const EventPtr& e = mapped.events[i];
    Result<std::string> key = partitionKeyText(*e, key_);
    if (!key) {
      mapped.condition = amqp::kInvalidField;
      mapped.description =
          (mapped.events.size() > 1 ? "event " + std::to_string(i + 1) + ": " : std::string()) +
          key.status().message();
      break;
    }
    items.push_back({partitionOfKey(*key, spec_.partitions), e,
                     encodeEvent(*e, EventFormat::kFull).size() + 1});
  }
  if (!mapped.condition.empty()) {
    ++counters_.ingress_rejected;
    log_.warning("cluster %s node %s: ingress refused a message: %s", spec_.name, spec_.node,
                 mapped.description);
    amqp::rejectWithCondition(d, proton::error_condition(mapped.condition, mapped.description));
    credit(r);
    return;
  }
  counters_.ingress_events += items.size();
  const uint64_t id = next_delivery_++;
  // A pre-settled message asked for at most once: nothing to answer.
  if (!d.settled()) waiting_.emplace(id, d);
  take(batcher_.add(id, items, Clock::now()));
  armTimer();
  credit(r);
}

// A producer that goes away leaves its unsettled deliveries to be sent
// again; their events may land anyway (duplicates, dropped by id).
void ClusterIngress::on_transport_close(proton::transport& t) {
  const proton::connection c = t.connection();
  std::erase_if(waiting_, [&](const auto& entry) { return entry.second.connection() == c; });
  std::erase_if(producers_, [&](const proton::receiver& r) { return r.connection() == c; });
}

void ClusterIngress::credit(proton::receiver& r) {
  if (batcher_.full() || stopped_ || !r.active()) return;
  const int window = static_cast<int>(spec_.ingress->credit);
  if (r.credit() <= window / 2) r.add_credit(window - r.credit());
}

// From the broker connection's events too: woken as in settled().
void ClusterIngress::creditAll() {
  for (proton::receiver& r : producers_) {
    credit(r);
    r.connection().wake();
  }
}

// Runs on an event of the broker connection: Proton 0.37 writes out what
// changed on another connection (the producers' dispositions) only when
// that connection has work of its own, so each is woken.
void ClusterIngress::settled(const std::vector<uint64_t>& deliveries, bool accepted) {
  std::vector<proton::connection> touched;
  for (uint64_t id : deliveries) {
    const auto it = waiting_.find(id);
    if (it == waiting_.end()) continue;  // pre-settled, or its producer left
    proton::connection c = it->second.connection();
    if (std::find(touched.begin(), touched.end(), c) == touched.end()) touched.push_back(c);
    if (accepted) {
      it->second.accept();
      ++counters_.ingress_accepted;
    } else {
      it->second.release();
      ++counters_.ingress_released;
    }
    waiting_.erase(it);
  }
  for (const proton::connection& c : touched) c.wake();
}

// ---- batches --------------------------------------------------------------

// Runs on a producer's connection or the linger timer, not on the broker
// connection: Proton 0.37 writes out what was sent on it only when it has
// work of its own, so it is woken. Otherwise the batches wait for the
// node's next heartbeat, and a flood stalls on max-held-events meanwhile.
void ClusterIngress::take(std::vector<IngressBatcher::Batch> closed) {
  std::vector<bool> touched(spec_.partitions, false);
  for (IngressBatcher::Batch& batch : closed) {
    touched[batch.partition] = true;
    unsent_[batch.partition].push_back(std::move(batch));
  }
  for (uint32_t p = 0; p < spec_.partitions; ++p) {
    if (touched[p]) pump(p);
  }
  if (!closed.empty() && broker_ && broker_.active()) broker_.wake();
}

void ClusterIngress::armTimer() {
  const std::optional<IngressBatcher::TimePoint> due = batcher_.nextDeadline();
  if (timer_armed_ || !due || container_ == nullptr) return;
  timer_armed_ = true;
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(
      std::max(*due - Clock::now(), Clock::duration{}));
  container_->schedule(proton::duration(wait.count()), [this] { lingered(); });
}

void ClusterIngress::lingered() {
  timer_armed_ = false;
  take(batcher_.expire(Clock::now()));
  armTimer();
}

// Batches always go in the batch format, even of one event: RabbitMQ 3.10
// cannot store in a stream a message whose message-id is a ulong, which is
// how a plain message carries its event id.
void ClusterIngress::pump(uint32_t partition) {
  if (senders_.empty()) return;
  proton::sender& s = senders_[partition];
  std::deque<IngressBatcher::Batch>& queue = unsent_[partition];
  while (!queue.empty() && s.active() && s.credit() > 0) {
    messageFromEventBatch(queue.front().events, message_);
    in_flight_.emplace(s.send(message_), std::move(queue.front()));
    queue.pop_front();
  }
}

void ClusterIngress::openSender(proton::connection& broker, uint32_t partition) {
  senders_[partition] = broker.open_sender(
      "/exchange/" + inExchange(spec_.name) + "/" + partitionRoutingKey(partition),
      proton::sender_options().name("ingress:" + partitionRoutingKey(partition)).handler(*this));
}

void ClusterIngress::brokerUp(proton::connection& broker) {
  broker_ = broker;
  senders_.assign(spec_.partitions, proton::sender());
  for (uint32_t p = 0; p < spec_.partitions; ++p) openSender(broker, p);
}

void ClusterIngress::brokerDown() {
  broker_ = proton::connection();
  senders_.clear();
  resend(std::nullopt);
}

void ClusterIngress::resend(std::optional<uint32_t> partition) {
  std::vector<IngressBatcher::Batch> doubt;
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (partition && it->second.partition != *partition) {
      ++it;
      continue;
    }
    doubt.push_back(std::move(it->second));
    it = in_flight_.erase(it);
  }
  // Newest first onto the fronts: each partition's go again in the order
  // they closed, before what closed after them.
  std::sort(doubt.begin(), doubt.end(), [](const auto& a, const auto& b) { return a.id > b.id; });
  for (IngressBatcher::Batch& batch : doubt) {
    ++counters_.ingress_resent;
    unsent_[batch.partition].push_front(std::move(batch));
  }
}

// The broker ended a partition's sender on a connection that stays up
// (RabbitMQ 3.10 does during a queue leader election): its batches in
// doubt go again on a new one.
void ClusterIngress::on_sender_close(proton::sender& s) {
  for (uint32_t p = 0; p < senders_.size(); ++p) {
    if (senders_[p] != s) continue;
    resend(p);
    proton::connection broker = s.connection();
    if (!stopped_ && broker.active()) {
      openSender(broker, p);
    } else {
      senders_[p] = proton::sender();
    }
  }
}

void ClusterIngress::on_transport_error(proton::transport& t) {
  log_.information("cluster %s node %s: an ingress producer's connection failed: %s", spec_.name,
                   spec_.node, t.error().what());
}

// Proton's default throws, which would end the node's container.
void ClusterIngress::on_error(const proton::error_condition& e) {
  log_.warning("cluster %s node %s: ingress: %s", spec_.name, spec_.node, e.what());
}

void ClusterIngress::on_sendable(proton::sender& s) {
  for (uint32_t p = 0; p < senders_.size(); ++p) {
    if (senders_[p] == s) pump(p);
  }
}

void ClusterIngress::on_tracker_accept(proton::tracker& t) {
  const auto it = in_flight_.find(t);
  if (it == in_flight_.end()) return;
  const bool was_full = batcher_.full();
  ++counters_.ingress_batches;
  settled(batcher_.confirmed(it->second.id), true);
  in_flight_.erase(it);
  if (was_full) creditAll();
}

void ClusterIngress::on_tracker_reject(proton::tracker& t) {
  const auto it = in_flight_.find(t);
  if (it == in_flight_.end()) return;
  log_.warning(
      "cluster %s node %s: the broker refused an ingress batch of %z events for partition %u "
      "(%s): its producers' deliveries are released",
      spec_.name, spec_.node, it->second.events.size(), it->second.partition,
      amqp::remoteCondition(t).what());
  const bool was_full = batcher_.full();
  settled(batcher_.refused(it->second.id), false);
  in_flight_.erase(it);
  if (was_full) creditAll();
}

// Released, or settled with no outcome (a link the broker ended): not
// taken, so it goes again.
void ClusterIngress::on_tracker_release(proton::tracker& t) {
  const auto it = in_flight_.find(t);
  if (it == in_flight_.end()) return;
  const uint32_t p = it->second.partition;
  ++counters_.ingress_resent;
  unsent_[p].push_front(std::move(it->second));
  in_flight_.erase(it);
  pump(p);
}

void ClusterIngress::on_tracker_settle(proton::tracker& t) { on_tracker_release(t); }

}  // namespace cepbus::services::cluster
