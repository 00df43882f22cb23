// The node's Proton handler: the connection and its failover over the
// brokers, a session per attached partition with its links, the heartbeat,
// output and lease links, and the stall watchdog's socket. It decodes what
// arrives and hands it to the membership loop (heartbeats) or to the
// partition's runner (input, lease tokens) or to the output sender (the
// broker's answers to outputs), and it is the runners' PartitionIo, the
// loop's Actions and the output sender's Io.

#include "services/cluster/cluster_node.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <charconv>
#include <future>
#include <map>
#include <optional>
#include <proton/codec/map.hpp>
#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/session.hpp>
#include <proton/source.hpp>
#include <proton/source_options.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>
#include <random>
#include <thread>
#include <unordered_map>

#include "bus/base/mutex.h"
#include "services/cluster/broker_dialer.h"
#include "services/cluster/cluster_ingress.h"
#include "services/cluster/cluster_publisher.h"
#include "services/cluster/cluster_queries.h"
#include "services/cluster/event_batch.h"
#include "services/cluster/membership_loop.h"
#include "services/cluster/output_sender.h"
#include "services/cluster/partition_runner.h"
#include "services/cluster/stall_watchdog.h"
#include "services/cluster/stream_checkpoint.h"
#include "services/cluster/stream_reader_watch.h"
#include "services/cluster/stream_sequencer.h"
#include "services/cluster/topology.h"
#include "services/protocols/amqp/message_mapping.h"
#include "services/protocols/amqp/sasl_plugin.h"

namespace cepbus::services::cluster {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kHeartbeatSubject[] = "cepbus.heartbeat";
// How many messages of a partition stream a node reads ahead at most.
constexpr uint32_t kStreamReadAhead = 1000;

std::string joinPartitions(const std::vector<uint32_t>& parts) {
  std::string out;
  for (uint32_t p : parts) out += (out.empty() ? "" : ",") + std::to_string(p);
  return out;
}

std::vector<uint32_t> parsePartitions(std::string_view text) {
  std::vector<uint32_t> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    uint32_t v = 0;
    auto [end, ec] = std::from_chars(text.data() + at, text.data() + comma, v);
    if (ec == std::errc() && end == text.data() + comma) out.push_back(v);
    at = comma + 1;
  }
  return out;
}

// The text of a message body sent as data (a binary section) or a string.
std::optional<std::string> bodyText(const proton::message& m) {
  const proton::value& body = m.body();
  if (body.type() == proton::BINARY) {
    const auto b = proton::get<proton::binary>(body);
    return std::string(b.begin(), b.end());
  }
  if (body.type() == proton::STRING) return proton::get<std::string>(body);
  return std::nullopt;
}

// A stream message's place in its publisher's order, if it has one.
std::optional<StreamSequencer::Tag> sequenceTag(const proton::message& m) {
  if (m.id().type() != proton::STRING) return std::nullopt;
  const proton::value seq = m.properties().get(kSequenceProperty);
  if (seq.type() != proton::ULONG) return std::nullopt;
  return StreamSequencer::tagOf(proton::get<std::string>(m.id()), proton::get<uint64_t>(seq));
}

// The offset RabbitMQ stamps on a message it delivers from a stream. 3.10
// sends the annotation's key as a string where AMQP wants a symbol, which
// Proton's annotation map refuses, so the map is read raw.
std::optional<uint64_t> streamOffset(const proton::message& m) {
  try {
    const proton::value& raw = m.message_annotations().value();
    if (raw.empty()) return std::nullopt;
    std::map<proton::value, proton::value> entries;
    proton::get(raw, entries);
    for (const auto& [key, value] : entries) {
      if ((key.type() == proton::STRING || key.type() == proton::SYMBOL) &&
          proton::coerce<std::string>(key) == "x-stream-offset") {
        return proton::coerce<uint64_t>(value);
      }
    }
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

template <typename T>
std::optional<T> property(const proton::message& m, const std::string& name) {
  const auto& props = m.properties();
  if (!props.exists(name)) return std::nullopt;
  try {
    return proton::get<T>(props.get(name));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// An input message as a partition runner takes it: its events, the
// end-of-stream marker, or why it is no event.
PartitionInput decodeInput(const proton::message& m) {
  PartitionInput input;
  if (m.subject() == kEndOfStreamSubject) {
    input.end_of_stream = true;
  } else if (m.subject() == kEventBatchSubject) {
    MappedBatch batch = eventsFromBatchMessage(m);
    input.events = std::move(batch.events);
    input.condition = std::move(batch.condition);
    input.description = std::move(batch.description);
  } else {
    amqp::MappedEvent mapped = amqp::eventFromMessage(m);
    if (mapped.event) input.events.push_back(std::move(mapped.event));
    input.condition = std::move(mapped.condition);
    input.description = std::move(mapped.description);
  }
  return input;
}

}  // namespace

class ClusterNode::Impl final : public proton::messaging_handler,
                                private MembershipLoop::Actions,
                                private OutputSender::Io {
 public:
  Impl(ClusterSpec spec, std::string password, ClusterHooks hooks,
       std::vector<CompiledQuery> queries, router::Registry& registry)
      : spec_(std::move(spec)),
        registry_(registry),
        password_(std::move(password)),
        hooks_(std::move(hooks)),
        queries_(std::move(queries)),
        incarnation_(std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32)),
        log_(Poco::Logger::get("cepbus.cluster")),
        loop_(spec_, incarnation_, *this, counters_),
        output_sender_(spec_, queries_, *this),
        report_(registry.stats(), spec_.name, spec_.node) {
    if (spec_.ingress) ingress_ = std::make_unique<ClusterIngress>(spec_, counters_);
    partitions_.reserve(spec_.partitions);
    for (uint32_t p = 0; p < spec_.partitions; ++p) {
      partitions_.push_back(std::make_unique<Partition>(*this, p));
    }
  }

  // ---- control plane ------------------------------------------------------

  Status start() {
    if (hooks_.verify_topology) {
      if (Status s = hooks_.verify_topology(); !s) return s;
    }
    auto entry = registry_.add(entryName(), router::ComponentKind::kService);
    if (!entry) return entry.status();
    entry_ = *entry;
    entry_->setMetadata("type", "cluster-node");
    entry_->setMetadata("cluster", spec_.name);
    entry_->setMetadata("node", spec_.node);
    // The held events change all the time; the registry asks for them only
    // when someone takes a snapshot (/api/cluster reads stats() through
    // ClusterMember, /metrics reads report_).
    entry_->setProbe([this](router::LiveNumbers& numbers) {
      numbers.queue_length = 0;
      for (const PartitionStats& p : stats().partitions) numbers.queue_length += p.held;
    });
    entry_->setState(router::ComponentState::kStarted);
    if (!hooks_.watchdog_program.empty()) {
      auto watchdog = StallWatchdog::spawn(hooks_.watchdog_program,
                                           std::chrono::milliseconds(spec_.idle_timeout_ms));
      if (!watchdog) return watchdog.status();
      watchdog_ = std::move(*watchdog);
    }
    amqp::installSaslPlugin();
    container_ = std::make_unique<proton::container>(*this, spec_.node);
    thread_ = std::thread([this] {
      try {
        container_->run();
      } catch (const std::exception& e) {
        log_.error("cluster %s node %s: container failed: %s", spec_.name, spec_.node,
                   std::string(e.what()));
      }
    });
    return Status::ok();
  }

  void stop() {
    if (!container_ || stopped_) return;
    stopped_ = true;
    std::future<void> closed = closed_.get_future();
    container_->schedule(proton::duration(0), [this] { leave(); });
    // The broker takes the leave heartbeat and the session ends before the
    // connection goes; a broker that does not answer is not waited for long.
    if (closed.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      container_->stop();
    }
    thread_.join();
    watchdog_.reset();
    for (std::thread& t : evictions_) t.join();
    report_.withdraw();
    if (entry_) {
      entry_->setProbe(nullptr);
      registry_.remove(entryName());
    }
  }

  // "cluster:<name>/<node>": what /api/cluster reads.
  std::string entryName() const { return "cluster:" + spec_.name + "/" + spec_.node; }

  ClusterStats stats() const { return report_.stats(); }

  const ClusterSpec& spec() const { return spec_; }

  // ---- container thread ---------------------------------------------------

  void on_container_start(proton::container& c) override {
    if (ingress_) ingress_->listen(c);
    loop_.start(Clock::now());
    connect();
    tick();
  }

  void on_connection_open(proton::connection& c) override {
    connection_ = c;
    const std::string local_address = amqp::localAddress(c.transport());
    watchSocket(local_address);
    log_.information("cluster %s node %s: connected to broker %s:%hu from %s", spec_.name,
                     spec_.node, broker().host, broker().port, local_address);
    const std::string members = "/exchange/" + membersExchange(spec_.name) + "/hb";
    heartbeat_sender_ = c.open_sender(members, proton::sender_options().name("heartbeat"));
    c.open_receiver(members, proton::receiver_options().name("members").credit_window(100));
    for (const CompiledQuery& q : queries_) {
      outputs_[q.output] =
          c.open_sender("/exchange/" + outExchange(spec_.name) + "/" + q.output,
                        proton::sender_options().name("out:" + q.output).auto_settle(true));
    }
    late_sender_ = c.open_sender("/exchange/" + outExchange(spec_.name) + "/late",
                                 proton::sender_options().name("late"));
    if (ingress_) ingress_->brokerUp(c);
    loop_.connected(Clock::now(), local_address, broker());
  }

  void on_message(proton::delivery& d, proton::message& m) override {
    const std::string& link = d.receiver().name();
    if (link == "members") {
      onHeartbeat(m);
      d.accept();
      return;
    }
    // Before the partition is looked up: a stall drops every partition.
    loop_.checkStall(Clock::now());
    uint32_t index = 0;
    const char kind = link.empty() ? '\0' : link[0];
    auto [end, ec] = std::from_chars(link.data() + 1, link.data() + link.size(), index);
    // A stream or probe link's name has a generation after '-' (see
    // openStreamReader()).
    const bool whole =
        end == link.data() + link.size() || ((kind == 's' || kind == 'q') && *end == '-');
    Partition* p = ec == std::errc() && whole && index < partitions_.size() && loop_.attached(index)
                       ? partitions_[index].get()
                       : nullptr;
    if (p != nullptr && kind == 'p' && d.receiver() == p->receiver) {
      if (streamInput()) {
        onLeaseToken(*p, d, m);
      } else {
        onQueueInput(*p, d, m);
      }
    } else if (p != nullptr && kind == 's' && d.receiver() == p->stream && p->runner) {
      onStreamInput(*p, d, m);
    } else if (p != nullptr && kind == 'q' && d.receiver() == p->tail_probe && p->runner) {
      onTailProbe(*p, d, m);
    } else {
      // Not the partition's current consumer (an ended session's link has
      // the same name): what it held goes back to the broker.
      d.release();
    }
  }

  void on_tracker_accept(proton::tracker& t) override { trackerDone(t, true); }
  void on_tracker_reject(proton::tracker& t) override { trackerDone(t, false); }
  void on_tracker_release(proton::tracker& t) override { trackerDone(t, false); }
  void on_tracker_settle(proton::tracker& t) override {
    // A broker that settles without an outcome (a dead link) resends.
    if (batch_trackers_.count(t) != 0 || token_trackers_.count(t) != 0) trackerDone(t, false);
  }

  void on_session_close(proton::session& s) override {
    for (auto& p : partitions_) {
      if (p->session == s) detached(*p, "session closed");
    }
  }

  void on_receiver_close(proton::receiver& r) override {
    if (r.error()) {
      log_.warning("cluster %s node %s: receiver %s closed: %s", spec_.name, spec_.node, r.name(),
                   r.error().what());
    }
  }

  void on_transport_error(proton::transport& t) override {
    if (leaving_) return;
    log_.warning("cluster %s node %s: connection to %s:%hu failed: %s", spec_.name, spec_.node,
                 broker().host, broker().port, t.error().what());
  }
  void on_connection_error(proton::connection& c) override {
    log_.warning("cluster %s node %s: connection error: %s", spec_.name, spec_.node,
                 c.error().what());
  }
  void on_error(const proton::error_condition& e) override {
    log_.warning("cluster %s node %s: %s", spec_.name, spec_.node, e.what());
  }

  // Every partition's state goes with the connection: what it held is
  // redelivered by the broker, to this node or another.
  void on_transport_close(proton::transport&) override {
    for (auto& p : partitions_) detached(*p, "connection closed");
    if (ingress_) ingress_->brokerDown();
    output_sender_.clear();
    batch_trackers_.clear();
    token_trackers_.clear();
    outputs_.clear();
    heartbeat_sender_ = proton::sender();
    late_sender_ = proton::sender();
    connection_ = proton::connection();
    if (leaving_) {
      left();
      return;
    }
    // The next broker of the failover list.
    broker_index_ = (broker_index_ + 1) % spec_.brokers.size();
    ++counters_.reconnects;
    container_->schedule(proton::duration(std::min<int64_t>(heartbeat().count(), 1000)),
                         [this] { connect(); });
  }

 private:
  // One partition as the connection sees it: its session and links, and
  // while this node is its active consumer, the runner and the deliveries
  // it holds. It is the runner's way to the broker.
  struct Partition final : PartitionIo {
    Partition(Impl& node, uint32_t index) : node(node), index(index) {}

    void accept(uint64_t tag) override {
      auto it = deliveries.find(tag);
      if (it == deliveries.end()) return;
      it->second.accept();
      deliveries.erase(it);
      receiver.add_credit(1);
    }
    void reject(uint64_t tag, const std::string& condition,
                const std::string& description) override {
      auto it = deliveries.find(tag);
      if (it == deliveries.end()) return;
      amqp::rejectWithCondition(it->second, proton::error_condition(condition, description));
      deliveries.erase(it);
      receiver.add_credit(1);
    }
    void send(const OutputMessage& output) override {
      node.output_sender_.send(index, output, Clock::now());
    }
    std::optional<std::string> sendLeaseToken(const LeaseMark& mark) override {
      return node.sendLeaseToken(*this, mark);
    }
    void settleLeaseToken(uint64_t tag) override {
      auto it = tokens.find(tag);
      if (it == tokens.end()) return;
      it->second.accept();
      tokens.erase(it);
    }

    Impl& node;
    const uint32_t index;
    proton::session session;
    proton::receiver receiver;    // the partition queue, or with stream input its lease
    proton::receiver stream;      // stream input: the stream, once active
    proton::receiver tail_probe;  // stream input: reads the stream's last chunk (reader_watch)
    proton::sender lease;         // stream input: where new lease tokens go
    // While active. Tags name deliveries to the runner; they are never
    // reused while the node runs.
    std::unique_ptr<PartitionRunner> runner;
    std::unordered_map<uint64_t, proton::delivery> deliveries;  // queue input, by tag
    std::unordered_map<uint64_t, proton::delivery> tokens;      // lease tokens held, by tag
    uint64_t next_tag = 0;
    uint32_t stream_credit_owed = 0;  // stream input: credit to return
    std::optional<StreamReaderWatch> reader_watch;
  };

  // A lease token on its way.
  struct TokenRef {
    uint32_t partition;
    std::string id;
  };

  const ClusterBroker& broker() const { return spec_.brokers[broker_index_]; }
  bool streamInput() const { return spec_.input == ClusterSpec::Input::kStream; }
  std::chrono::milliseconds heartbeat() const {
    return std::chrono::milliseconds(spec_.heartbeat_ms);
  }

  // Hands the new connection's socket to the stall watchdog.
  void watchSocket(const std::string& local_address) {
    if (!watchdog_) return;
    const size_t colon = local_address.rfind(':');
    uint16_t port = 0;
    if (colon != std::string::npos) {
      std::from_chars(local_address.data() + colon + 1, local_address.data() + local_address.size(),
                      port);
    }
    const int fd = port == 0 ? -1 : socketWithLocalPort(port);
    Status s = fd < 0 ? Status::notFound("no socket with local address " + local_address)
                      : watchdog_->watch(fd);
    if (!s) {
      log_.warning("cluster %s node %s: the stall watchdog cannot watch this connection: %s",
                   spec_.name, spec_.node, s.message());
    }
  }

  void connect() {
    if (leaving_) return;
    BrokerDial c = dialBroker(spec_, broker(), password_);
    c.options.handler(*this);
    container_->connect(c.url, c.options);
  }

  void tick() {
    if (leaving_) return;
    const SteadyTime now = Clock::now();
    loop_.checkStall(now);
    if (watchdog_) watchdog_->beat();
    loop_.tick(now);
    const auto wall = std::chrono::system_clock::now();
    for (auto& p : partitions_) {
      if (!p->runner) continue;
      p->runner->tick(now, wall);
      if (streamInput() && !superviseStream(*p)) break;
    }
    loop_.checkEcho(now);
    publishStats();
    container_->schedule(proton::duration(heartbeat().count()), [this] { tick(); });
  }

  void onHeartbeat(const proton::message& m) {
    auto node = property<std::string>(m, "node");
    auto incarnation = property<uint64_t>(m, "incarnation");
    auto leaving = property<bool>(m, "leaving");
    auto attached = property<std::string>(m, "attached");
    if (!node || !incarnation || !leaving || !attached) return;
    Heartbeat heartbeat{*node, *incarnation, *leaving, parsePartitions(*attached),
                        property<std::string>(m, "address").value_or("")};
    loop_.heard(heartbeat, Clock::now());
  }

  // ---- MembershipLoop::Actions --------------------------------------------

  bool connected() const override { return connection_ && connection_.active(); }

  bool sendHeartbeat(const Heartbeat& heartbeat) override {
    if (!heartbeat_sender_ || !heartbeat_sender_.active()) return false;
    proton::message m;
    m.subject(kHeartbeatSubject);
    m.properties().put("node", heartbeat.node);
    m.properties().put("incarnation", heartbeat.incarnation);
    m.properties().put("leaving", heartbeat.leaving);
    m.properties().put("attached", joinPartitions(heartbeat.attached));
    m.properties().put("address", heartbeat.address);
    heartbeat_sender_.send(m);
    return true;
  }

  // Consumes the partition queue (with stream input: its lease) in a
  // session of its own.
  void attach(uint32_t index) override {
    Partition& p = *partitions_[index];
    const std::string queue = "/amq/queue/" + partitionQueue(spec_.name, p.index);
    p.session = connection_.open_session();
    p.receiver = p.session.open_receiver(queue, proton::receiver_options()
                                                    .name(partitionRoutingKey(p.index))
                                                    .credit_window(0)
                                                    .auto_accept(false));
    if (streamInput()) {
      // Room for the tokens a node may find: the current one, and one more
      // when an owner died between publishing a token and settling the last.
      p.receiver.add_credit(4);
      p.lease = p.session.open_sender(queue,
                                      proton::sender_options().name("t" + std::to_string(p.index)));
    } else {
      p.receiver.add_credit(static_cast<int>(spec_.max_unsettled));
    }
  }

  // Ends the partition's session: the broker takes back what it held
  // unsettled and gives the consumer to the next attached node.
  void detach(uint32_t index) override {
    Partition& p = *partitions_[index];
    if (p.session && p.session.active()) p.session.close();
    dropRunner(p);
  }

  void abandon(uint32_t index) override {
    forget(*partitions_[index], "session end not confirmed");
  }

  bool active(uint32_t index) const override { return partitions_[index]->runner != nullptr; }

  void evict(const std::string& node, const std::vector<std::string>& addresses) override {
    if (!hooks_.evict) return;
    evictions_.emplace_back([evict = hooks_.evict, node, addresses] { evict(node, addresses); });
  }

  void reconnect() override { connection_.close(); }

  // ---- partitions ---------------------------------------------------------

  // The partition's session ended (or the connection did).
  void detached(Partition& p, const char* why) {
    forget(p, why);
    loop_.sessionEnded(p.index);
  }

  // Forgets the partition's session and links; what it held unsettled goes
  // back to the broker with the session.
  void forget(Partition& p, const char* why) {
    if (p.runner) {
      log_.information("cluster %s node %s: partition %u inactive (%s)", spec_.name, spec_.node,
                       p.index, why);
    }
    dropRunner(p);
    p.session = proton::session();
    p.receiver = proton::receiver();
    p.stream = proton::receiver();
    p.tail_probe = proton::receiver();
    p.lease = proton::sender();
  }

  void dropRunner(Partition& p) {
    if (!p.runner) return;
    output_sender_.forget(p.index);
    for (auto it = token_trackers_.begin(); it != token_trackers_.end();) {
      it = it->second.partition == p.index ? token_trackers_.erase(it) : std::next(it);
    }
    p.runner.reset();
    p.deliveries.clear();
    p.tokens.clear();
    p.stream_credit_owed = 0;
    p.reader_watch.reset();
  }

  // The partition's first message: this node just became its active
  // consumer. False (logged, the message released) when its queries cannot
  // run.
  bool activate(Partition& p, proton::delivery& d, std::optional<LeaseMark> lease) {
    auto runner = PartitionRunner::create(spec_, p.index, queries_, p, counters_, lease);
    if (!runner) {
      log_.error("cluster %s node %s: partition %u cannot run its queries: %s", spec_.name,
                 spec_.node, p.index, runner.status().message());
      d.release();
      return false;
    }
    p.runner = std::move(*runner);
    ++counters_.takeovers;
    log_.information("cluster %s node %s: active on partition %u", spec_.name, spec_.node, p.index);
    return true;
  }

  // Queue input: the message is held unsettled until its runner accepts it.
  void onQueueInput(Partition& p, proton::delivery& d, proton::message& m) {
    if (!p.runner && !activate(p, d, std::nullopt)) return;
    const uint64_t tag = p.next_tag++;
    p.deliveries.emplace(tag, d);
    PartitionInput input = decodeInput(m);
    input.redelivered = m.delivery_count() > 0 || !m.first_acquirer();
    p.runner->onQueueInput(tag, std::move(input), Clock::now());
  }

  // Stream input: the lease's token, with the offset to resume from. The
  // first one makes this node the partition's active consumer.
  void onLeaseToken(Partition& p, proton::delivery& d, proton::message& m) {
    p.receiver.add_credit(1);
    const std::optional<std::string> body = bodyText(m);
    const std::optional<LeaseMark> mark = body ? parseLeaseToken(*body) : std::nullopt;
    if (!mark) {
      ++counters_.rejected;
      log_.warning(
          "cluster %s node %s: partition %u: queue %s holds a message that is not a "
          "lease token (a publisher routing to it by mistake?); rejected",
          spec_.name, spec_.node, p.index, partitionQueue(spec_.name, p.index));
      amqp::rejectWithCondition(
          d, proton::error_condition("amqp:decode-error", "not a cepbus lease token"));
      return;
    }
    if (!p.runner) {
      if (!activate(p, d, mark)) return;
      openStream(p, mark->resume_from);
      log_.information(
          "cluster %s node %s: partition %u resumes its stream at offset %s (read to %s before)",
          spec_.name, spec_.node, p.index, std::to_string(mark->resume_from),
          std::to_string(mark->read_to));
    }
    const uint64_t tag = p.next_tag++;
    p.tokens.emplace(tag, d);
    p.runner->holdLeaseToken(tag, m.id().empty() ? std::string() : proton::to_string(m.id()));
  }

  // Stream input: the stream keeps the message, so it is accepted at once
  // (that only returns credit); the runner holds its offset instead.
  void onStreamInput(Partition& p, proton::delivery& d, proton::message& m) {
    p.reader_watch->read(Clock::now());
    d.accept();
    if (++p.stream_credit_owed >= streamCredit() / 2) {
      p.stream.add_credit(static_cast<int>(p.stream_credit_owed));
      p.stream_credit_owed = 0;
    }
    PartitionInput input = decodeInput(m);
    input.offset = streamOffset(m);
    input.sequence = sequenceTag(m);
    p.runner->onStreamInput(std::move(input), Clock::now());
  }

  uint32_t streamCredit() const { return std::min(spec_.max_unsettled, kStreamReadAhead); }

  // A reader of the partition's stream from `offset_spec` (an offset, or
  // "last"), in the partition's session, with no credit yet. Each link of a
  // partition's stream has a name of its own ("<kind><i>-<n>"), so that one
  // replacing another in the same session never clashes.
  proton::receiver openStreamReader(Partition& p, char kind, proton::value offset_spec) {
    proton::source::filter_map filters;
    filters.put(proton::symbol("rabbitmq:stream-offset-spec"), offset_spec);
    return p.session.open_receiver(
        "/amq/queue/" + partitionStream(spec_.name, p.index),
        proton::receiver_options()
            .name(kind + std::to_string(p.index) + "-" + std::to_string(++stream_links_))
            .credit_window(0)
            .auto_accept(false)
            .source(proton::source_options().filters(filters)));
  }

  // Reads the partition's stream from `offset`.
  void openStream(Partition& p, uint64_t offset) {
    p.stream = openStreamReader(p, 's', proton::value(static_cast<int64_t>(offset)));
    p.stream.add_credit(static_cast<int>(streamCredit()));
    if (!p.reader_watch) {
      p.reader_watch.emplace(streamSilence(), 2 * std::chrono::milliseconds(spec_.idle_timeout_ms),
                             Clock::now());
    }
  }

  // A probe of the partition's stream: one message from its last chunk,
  // whose offset tells a silent reader from an idle stream (StreamReaderWatch).
  void openTailProbe(Partition& p) {
    if (p.tail_probe) p.tail_probe.close();
    p.tail_probe = openStreamReader(p, 'q', proton::value(std::string("last")));
    p.tail_probe.add_credit(1);
  }

  void onTailProbe(Partition& p, proton::delivery& d, proton::message& m) {
    d.accept();
    p.tail_probe.close();
    p.tail_probe = proton::receiver();
    if (const std::optional<uint64_t> offset = streamOffset(m)) {
      p.reader_watch->probed(*offset, Clock::now());
    }
  }

  std::chrono::milliseconds streamSilence() const {
    return std::chrono::milliseconds(std::max<uint64_t>(5 * spec_.idle_timeout_ms, 10000));
  }

  // A silent stream reader is reopened from the first offset not read
  // (nothing is read twice; RabbitMQ 3.10 can leave a reader that attached
  // during a leader election without deliveries), and probed from the
  // second silence on; one the broker cannot serve ends the connection, and
  // the node reconnects through the next broker. False when the connection
  // is closing.
  bool superviseStream(Partition& p) {
    if (!p.stream || !p.reader_watch) return true;
    const uint64_t read_to = p.runner->readTo();
    const auto action = p.reader_watch->tick(Clock::now(), read_to);
    if (action == StreamReaderWatch::Action::kNone) return true;
    if (action == StreamReaderWatch::Action::kSwitchBroker) {
      ++counters_.stream_broker_switches;
      log_.warning(
          "cluster %s node %s: partition %u: broker %s:%hu delivers nothing from the stream "
          "although it holds events past offset %s; reconnecting through the next broker",
          spec_.name, spec_.node, p.index, broker().host, broker().port, std::to_string(read_to));
      if (connection_ && connection_.active()) connection_.close();
      return false;
    }
    ++counters_.stream_refreshes;
    log_.information(
        "cluster %s node %s: partition %u: nothing from its stream for %s ms; reading on through "
        "a new link from offset %s%s",
        spec_.name, spec_.node, p.index, std::to_string(streamSilence().count()),
        std::to_string(read_to),
        std::string(action == StreamReaderWatch::Action::kReopenAndProbe
                        ? ", and probing the stream's end"
                        : ""));
    if (action == StreamReaderWatch::Action::kReopenAndProbe) openTailProbe(p);
    p.stream.close();
    p.stream_credit_owed = 0;
    openStream(p, read_to);
    return true;
  }

  // ---- outputs (OutputSender::Io) and lease tokens --------------------------

  bool send(uint64_t batch, const std::string& routing_key, bool late,
            const proton::message& message) override {
    proton::sender* sender = &late_sender_;
    if (!late) {
      auto it = outputs_.find(routing_key);
      sender = it == outputs_.end() ? nullptr : &it->second;
    }
    if (sender == nullptr || !*sender || !sender->active()) return false;
    batch_trackers_.emplace(sender->send(message), batch);
    return true;
  }

  void wakeAt(OutputSender::TimePoint due) override {
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(
        std::max(due - Clock::now(), Clock::duration{}));
    container_->schedule(proton::duration(wait.count()), [this] {
      // Off the connection's own events, Proton 0.37 writes out what was
      // sent only once the connection is woken (see ClusterIngress::take()).
      if (output_sender_.lingered(Clock::now()) && connection_) connection_.wake();
    });
  }

  void outputDone(uint32_t partition, uint64_t seq, bool accepted) override {
    if (PartitionRunner* runner = partitions_[partition]->runner.get()) {
      runner->outputDone(seq, accepted);
    }
  }

  std::optional<std::string> sendLeaseToken(Partition& p, const LeaseMark& mark) {
    if (!p.lease || !p.lease.active() || p.lease.credit() <= 0) return std::nullopt;
    proton::message m;
    std::string id =
        spec_.node + "/" + std::to_string(incarnation_) + "/" + std::to_string(++tokens_published_);
    m.id(proton::message_id(id));
    m.durable(true);
    const std::string body = leaseTokenBody(mark);
    m.body(proton::binary(body.begin(), body.end()));
    token_trackers_.emplace(p.lease.send(m), TokenRef{p.index, id});
    return id;
  }

  void trackerDone(proton::tracker& t, bool accepted) {
    if (auto token = token_trackers_.find(t); token != token_trackers_.end()) {
      const TokenRef ref = std::move(token->second);
      token_trackers_.erase(token);
      if (PartitionRunner* runner = partitions_[ref.partition]->runner.get()) {
        runner->leaseTokenDone(ref.id, accepted);
      }
      return;
    }
    auto it = batch_trackers_.find(t);
    if (it == batch_trackers_.end()) return;
    const uint64_t batch = it->second;
    batch_trackers_.erase(it);
    output_sender_.answered(batch, accepted);
  }

  void leave() {
    leaving_ = true;
    if (ingress_) ingress_->stop();
    loop_.leave(Clock::now());
    if (connection_ && connection_.active()) {
      connection_.close();
    } else {
      left();
    }
  }

  // The connection is gone after leave(): stop() may join. The container is
  // stopped here, on its own thread: Proton 0.37 can lose the wake of a
  // stop() called from another thread while the container winds down, and
  // the join would then wait for ever.
  void left() {
    if (closed_set_) return;
    closed_set_ = true;
    closed_.set_value();
    container_->stop();
  }

  void publishStats() {
    ClusterStats s = counters_;
    s.node = spec_.node;
    s.live_nodes = loop_.live();
    for (const auto& p : partitions_) {
      PartitionStats ps;
      ps.partition = p->index;
      ps.role = p->runner ? "active" : loop_.attached(p->index) ? "standby" : "none";
      ps.owner = rankNodes(p->index, s.live_nodes).front();
      if (p->runner) p->runner->describe(ps);
      s.partitions.push_back(std::move(ps));
    }
    report_.publish(s);
  }

  const ClusterSpec spec_;
  router::Registry& registry_;
  std::shared_ptr<router::ComponentEntry> entry_;
  const std::string password_;
  const ClusterHooks hooks_;
  const std::vector<CompiledQuery> queries_;
  const uint64_t incarnation_;
  Poco::Logger& log_;

  std::unique_ptr<StallWatchdog> watchdog_;  // beaten and fed on the container thread
  // Producers' door (<cluster><ingress>); declared before the container,
  // whose connections it handles, so that it outlives them.
  std::unique_ptr<ClusterIngress> ingress_;
  std::unique_ptr<proton::container> container_;
  std::thread thread_;
  bool stopped_ = false;  // control plane

  // Container thread only.
  ClusterStats counters_;
  MembershipLoop loop_;
  std::vector<std::unique_ptr<Partition>> partitions_;
  proton::connection connection_;
  proton::sender heartbeat_sender_;
  proton::sender late_sender_;
  std::map<std::string, proton::sender> outputs_;
  OutputSender output_sender_;
  std::map<proton::tracker, uint64_t> batch_trackers_;  // output batches, by id
  std::map<proton::tracker, TokenRef> token_trackers_;
  uint64_t tokens_published_ = 0;
  uint64_t stream_links_ = 0;
  std::vector<std::thread> evictions_;
  size_t broker_index_ = 0;
  bool leaving_ = false;
  std::promise<void> closed_;  // set once the connection closed after leave()
  bool closed_set_ = false;

  // What publishStats() published last: for stats() and the stats store.
  NodeReport report_;
};

ClusterNode::ClusterNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ClusterNode::~ClusterNode() { stop(); }

const std::string& ClusterNode::name() const { return impl_->spec().node; }

Status ClusterNode::start() { return impl_->start(); }

void ClusterNode::stop() { impl_->stop(); }

ClusterStats ClusterNode::stats() const { return impl_->stats(); }

const std::string& ClusterNode::clusterName() const { return impl_->spec().name; }

std::string ClusterNode::componentName() const { return impl_->entryName(); }

Result<std::unique_ptr<ClusterNode>> ClusterNode::create(const ClusterSpec& spec,
                                                         std::string password, ClusterHooks hooks,
                                                         ServiceContext& context) {
  auto queries = compileClusterQueries(spec, context.plugins);
  if (!queries) return queries.status();
  return std::unique_ptr<ClusterNode>(new ClusterNode(std::make_unique<Impl>(
      spec, std::move(password), std::move(hooks), std::move(*queries), context.registry)));
}

}  // namespace cepbus::services::cluster
