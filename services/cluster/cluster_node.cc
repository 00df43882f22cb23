#include "services/cluster/cluster_node.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
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

#include "bus/core/pattern/parser.h"
#include "bus/host/time/reorder.h"
#include "flows/dedupe_window.h"
#include "services/cluster/broker_dialer.h"
#include "services/cluster/cluster_publisher.h"
#include "services/cluster/composite_id.h"
#include "services/cluster/event_batch.h"
#include "services/cluster/membership.h"
#include "services/cluster/partition_ledger.h"
#include "services/cluster/partitioned_query.h"
#include "services/cluster/partitioner.h"
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
// How long stream messages wait for an earlier one of their publisher's
// (stream_sequencer.h): a publisher resends within its confirm timeout and
// a read-back, and gives up on the brokers after its give_up_ms.
constexpr std::chrono::milliseconds kSequenceGapWait(PublishOptions{}.give_up_ms);

// A cluster query compiled once; each active partition runs a detector of it.
struct CompiledQuery {
  std::string name;
  std::string engine;
  std::string output;
  pattern::Query query;
  plugin::DetectorOptions options;
  plugin::PluginPtr plugin;
};

std::string joinTs(const plugin::Match& match) {
  std::string out = "[";
  for (size_t i = 0; i < match.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(match.ts(i));
  }
  return out + "]";
}

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

}  // namespace

std::string clusterStatsJson(const ClusterStats& s) {
  nlohmann::json partitions = nlohmann::json::array();
  for (const PartitionStats& p : s.partitions) {
    partitions.push_back({{"partition", p.partition},
                          {"role", p.role},
                          {"owner", p.owner},
                          {"held", p.held},
                          {"unaccepted_outputs", p.unaccepted_outputs},
                          {"held_messages_peak", p.held_messages_peak},
                          {"stream_ended", p.stream_ended}});
    if (p.resume_from) {
      partitions.back()["resume_from"] = *p.resume_from;
      partitions.back()["lease_offset"] = *p.lease_offset;
    }
  }
  return nlohmann::json{{"node", s.node},
                        {"live_nodes", s.live_nodes},
                        {"partitions", std::move(partitions)},
                        {"received", s.received},
                        {"settled", s.settled},
                        {"replayed", s.replayed},
                        {"takeovers", s.takeovers},
                        {"handovers", s.handovers},
                        {"duplicates", s.duplicates},
                        {"late", s.late},
                        {"rejected", s.rejected},
                        {"composites", s.composites},
                        {"detector_errors", s.detector_errors},
                        {"reconnects", s.reconnects},
                        {"stalls", s.stalls},
                        {"unconfirmed_handovers", s.unconfirmed_handovers},
                        {"window_full", s.window_full},
                        {"checkpoints", s.checkpoints},
                        {"retention_gaps", s.retention_gaps},
                        {"out_of_order", s.out_of_order},
                        {"sequence_gaps", s.sequence_gaps},
                        {"stream_refreshes", s.stream_refreshes},
                        {"stream_broker_switches", s.stream_broker_switches},
                        {"echo_timeouts", s.echo_timeouts},
                        {"streams_ended", s.streams_ended}}
      .dump();
}

class ClusterNode::Impl final : public proton::messaging_handler {
 public:
  Impl(ClusterSpec spec, std::string password, ClusterHooks hooks,
       std::vector<CompiledQuery> queries, router::Registry& registry)
      : spec_(std::move(spec)),
        registry_(registry),
        password_(std::move(password)),
        hooks_(std::move(hooks)),
        queries_(std::move(queries)),
        membership_(spec_.node, std::chrono::milliseconds(spec_.idle_timeout_ms)),
        incarnation_(std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32)),
        log_(Poco::Logger::get("cepbus.cluster")) {
    window_ = 0;
    for (const CompiledQuery& q : queries_) window_ = std::max(window_, *q.query.within);
    partitions_.resize(spec_.partitions);
    for (uint32_t p = 0; p < spec_.partitions; ++p) {
      partitions_[p].index = p;
      partitions_[p].symbol = Symbol::intern(partitionQueue(spec_.name, p));
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
    // The stats change all the time; the registry asks for them only when
    // someone takes a snapshot (the admin API, metrics).
    entry_->setProbe([this](router::LiveNumbers& numbers) {
      const ClusterStats s = stats();
      numbers.queue_length = 0;
      for (const PartitionStats& p : s.partitions) numbers.queue_length += p.held;
      entry_->setMetadata("status", clusterStatsJson(s));
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
    if (entry_) {
      entry_->setProbe(nullptr);
      registry_.remove(entryName());
    }
  }

  // "cluster:<name>/<node>": what /api/cluster and the metrics read.
  std::string entryName() const { return "cluster:" + spec_.name + "/" + spec_.node; }

  ClusterStats stats() const {
    std::lock_guard lock(stats_mu_);
    return published_stats_;
  }

  const ClusterSpec& spec() const { return spec_; }

  // ---- container thread ---------------------------------------------------

  void on_container_start(proton::container&) override {
    last_tick_ = Clock::now();
    started_at_ = last_tick_;
    connect();
    tick();
  }

  void on_connection_open(proton::connection& c) override {
    connection_ = c;
    local_address_ = amqp::localAddress(c.transport());
    watchSocket();
    log_.information("cluster %s node %s: connected to broker %s:%hu from %s", spec_.name,
                     spec_.node, broker().host, broker().port, local_address_);
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
    connected_at_ = Clock::now();
    last_echo_ = connected_at_;
    sendHeartbeat(false);
  }

  void on_message(proton::delivery& d, proton::message& m) override {
    const std::string& link = d.receiver().name();
    if (link == "members") {
      onHeartbeat(m);
      d.accept();
      return;
    }
    watchdog();
    uint32_t index = 0;
    const char kind = link.empty() ? '\0' : link[0];
    auto [end, ec] = std::from_chars(link.data() + 1, link.data() + link.size(), index);
    // A stream or probe link's name has a generation after '-' (see
    // openStream(), openTailProbe()).
    const bool whole =
        end == link.data() + link.size() || ((kind == 's' || kind == 'q') && *end == '-');
    Partition* p =
        ec == std::errc() && whole && index < partitions_.size() && partitions_[index].attached
            ? &partitions_[index]
            : nullptr;
    if (p != nullptr && kind == 'p' && d.receiver() == p->receiver) {
      if (streamInput()) {
        onLeaseToken(*p, d, m);
      } else {
        onQueueInput(*p, d, m);
      }
    } else if (p != nullptr && kind == 's' && d.receiver() == p->stream && p->active) {
      onStreamInput(*p, d, m);
    } else if (p != nullptr && kind == 'q' && d.receiver() == p->tail_probe && p->active) {
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
    if (trackers_.count(t) != 0 || token_trackers_.count(t) != 0) trackerDone(t, false);
  }

  void on_session_close(proton::session& s) override {
    for (Partition& p : partitions_) {
      if (p.session == s) detached(p, "session closed");
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
    for (Partition& p : partitions_) detached(p, "connection closed");
    trackers_.clear();
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
    container_->schedule(proton::duration(std::min<uint64_t>(spec_.heartbeat_ms, 1000)),
                         [this] { connect(); });
  }

 private:
  struct QueryRun;

  // A partition lease token this node holds unsettled; `id` is the
  // message-id of a token a node published (none for the first).
  struct HeldToken {
    proton::delivery delivery;
    std::string id;
  };

  // An input message and how many of its events the ledger still holds.
  struct HeldDelivery {
    proton::delivery delivery;
    uint32_t unsettled_events;
  };

  // A stream message that waits for an earlier one of its publisher.
  struct HeldInput {
    proton::delivery delivery;
    proton::message message;
  };

  // One active partition: its detectors and what it holds.
  struct Active {
    Active(Timestamp window, Timestamp slack, size_t dedupe) : ledger(window), seen(dedupe) {
      reorder.emplace(slack);
    }
    PartitionLedger ledger;
    std::optional<plugin::ReorderBuffer> reorder;  // replaced for each new stream
    flows::DedupeWindow seen;
    std::vector<std::unique_ptr<QueryRun>> runs;
    std::unordered_map<uint64_t, HeldDelivery> deliveries;  // by ledger tag
    uint64_t next_tag = 0;  // queue input; with stream input a tag is the offset
    bool ended = false;     // an end-of-stream marker came; the next event starts anew
    // Stream input only: where a successor resumes, the lease tokens held
    // (settled once a newer one is accepted), and stream credit to return.
    std::optional<StreamCheckpoint> checkpoint;
    // Stream input: puts the stream back in its publishers' order; what came
    // ahead of a gap waits here, by offset.
    std::optional<StreamSequencer> sequencer;
    std::map<uint64_t, HeldInput> ahead_of_gap;
    std::vector<HeldToken> tokens;
    uint32_t stream_credit_owed = 0;
    uint64_t replay_to = 0;  // offsets below were read by the previous owner
    std::optional<StreamReaderWatch> reader_watch;
    uint64_t held_messages_peak = 0;
  };

  struct Partition {
    uint32_t index = 0;
    Symbol symbol;
    proton::session session;
    proton::receiver receiver;    // the partition queue, or with stream input its lease
    proton::receiver stream;      // stream input: the stream, once active
    proton::receiver tail_probe;  // stream input: reads the stream's last chunk (reader_watch)
    proton::sender lease;         // stream input: where new lease tokens go
    bool attached = false;
    bool handing_over = false;  // its session was ended; the broker's end not seen yet
    SteadyTime handover_started;
    std::unique_ptr<Active> active;
  };

  // The sink of one query's detector on one partition.
  struct QueryRun final : plugin::MatchSink {
    QueryRun(Impl& impl, Partition& partition, const CompiledQuery& query)
        : impl(impl), partition(partition), query(query) {}
    void onMatch(const plugin::Match& match) override { impl.publishComposite(*this, match); }
    Impl& impl;
    Partition& partition;
    const CompiledQuery& query;
    std::unique_ptr<plugin::GuardedDetector> detector;
  };

  // A lease token on its way; dropActive() forgets those of a partition.
  struct TokenRef {
    uint32_t partition;
    std::string id;
  };

  struct OutputRef {
    uint32_t partition;
    uint64_t seq;
    uint64_t incarnation;  // the partition's activation it belongs to
    proton::message message;
    std::string sender;
  };

  const ClusterBroker& broker() const { return spec_.brokers[broker_index_]; }

  // Hands the new connection's socket to the stall watchdog.
  void watchSocket() {
    if (!watchdog_) return;
    const size_t colon = local_address_.rfind(':');
    uint16_t port = 0;
    if (colon != std::string::npos) {
      std::from_chars(local_address_.data() + colon + 1,
                      local_address_.data() + local_address_.size(), port);
    }
    const int fd = port == 0 ? -1 : socketWithLocalPort(port);
    Status s = fd < 0 ? Status::notFound("no socket with local address " + local_address_)
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
    watchdog();
    if (watchdog_) watchdog_->beat();
    const SteadyTime now = Clock::now();
    for (const std::string& gone : membership_.expire(now)) {
      log_.warning("cluster %s node %s: node %s went silent; its partitions move", spec_.name,
                   spec_.node, gone);
      auto addresses = peer_addresses_.find(gone);
      if (hooks_.evict && addresses != peer_addresses_.end()) {
        evictions_.emplace_back(
            [evict = hooks_.evict, gone, list = addresses->second] { evict(gone, list); });
      }
      if (addresses != peer_addresses_.end()) peer_addresses_.erase(addresses);
    }
    sendHeartbeat(false);
    // Attach nothing until the others had a chance to announce themselves:
    // a node that attached to everything first would be active everywhere.
    if (now - connected_at_ > std::chrono::milliseconds(2 * spec_.heartbeat_ms)) reconcile();
    for (Partition& p : partitions_) {
      if (p.active && p.active->checkpoint) {
        const uint64_t gaps = p.active->sequencer->gaps();
        const std::vector<uint64_t> overdue = p.active->sequencer->expire(now);
        resume(p, overdue, p.active->sequencer->gaps() - gaps);
        checkpoint(p);
        if (!superviseStream(p)) break;
      }
    }
    checkEcho(now);
    publishStats();
    container_->schedule(proton::duration(spec_.heartbeat_ms), [this] { tick(); });
  }

  // The node's own heartbeats come back to it through the members exchange.
  // When they stop, the broker no longer routes what this connection
  // publishes (RabbitMQ 3.10 was seen, after another broker node died, to
  // keep such a connection delivering stream input while taking none of its
  // heartbeats or composites): the others count this node gone, but it
  // still holds its partitions' leases, so it lets go of the connection and
  // reconnects through the next broker.
  void checkEcho(SteadyTime now) {
    const auto limit = 2 * std::chrono::milliseconds(spec_.idle_timeout_ms);
    if (!connection_ || !connection_.active() || now - last_echo_ < limit) return;
    ++counters_.echo_timeouts;
    log_.warning(
        "cluster %s node %s: none of this node's heartbeats came back through broker %s:%hu for "
        "%s ms; reconnecting through the next broker",
        spec_.name, spec_.node, broker().host, broker().port,
        std::to_string(
            std::chrono::duration_cast<std::chrono::milliseconds>(now - last_echo_).count()));
    last_echo_ = now;
    connection_.close();
  }

  // A node whose timer ran late by more than the idle timeout was stopped or
  // starved: the others counted it gone and took its partitions, so what it
  // holds is stale and its composites would only repeat theirs.
  void watchdog() {
    const SteadyTime now = Clock::now();
    const auto gap = now - last_tick_;
    last_tick_ = now;
    if (gap <= std::chrono::milliseconds(spec_.idle_timeout_ms)) return;
    ++counters_.stalls;
    log_.warning(
        "cluster %s node %s: stalled for %ld ms (idle timeout %lu ms); dropping every partition",
        spec_.name, spec_.node,
        static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(gap).count()),
        static_cast<unsigned long>(spec_.idle_timeout_ms));
    for (Partition& p : partitions_) detach(p);
    connected_at_ = now;  // wait a round of heartbeats before attaching again
    // What it heard before the stall is stale: judged by it, every peer would
    // look gone (and be evicted). It hears them again within a heartbeat.
    membership_.forgetPeers();
  }

  void sendHeartbeat(bool leaving) {
    if (!heartbeat_sender_ || !heartbeat_sender_.active()) return;
    proton::message m;
    m.subject(kHeartbeatSubject);
    m.properties().put("node", spec_.node);
    m.properties().put("incarnation", incarnation_);
    m.properties().put("leaving", leaving);
    std::vector<uint32_t> attached;
    for (const Partition& p : partitions_) {
      if (p.attached) attached.push_back(p.index);
    }
    m.properties().put("attached", joinPartitions(attached));
    m.properties().put("address", local_address_);
    heartbeat_sender_.send(m);
    Heartbeat self{spec_.node, incarnation_, false, attached};
    membership_.heard(self, Clock::now());
  }

  void onHeartbeat(const proton::message& m) {
    Heartbeat hb;
    auto node = property<std::string>(m, "node");
    auto incarnation = property<uint64_t>(m, "incarnation");
    auto leaving = property<bool>(m, "leaving");
    auto attached = property<std::string>(m, "attached");
    if (!node || !incarnation || !leaving || !attached) return;
    if (*node == spec_.node) {
      if (*incarnation == incarnation_ && property<std::string>(m, "address") == local_address_) {
        last_echo_ = Clock::now();
      }
      return;
    }
    hb.node = *node;
    hb.incarnation = *incarnation;
    hb.leaving = *leaving;
    hb.attached = parsePartitions(*attached);
    if (auto address = property<std::string>(m, "address"); address && !address->empty()) {
      auto& known = peer_addresses_[hb.node];
      if (std::find(known.begin(), known.end(), *address) == known.end()) {
        known.push_back(*address);
      }
    }
    if (membership_.heard(hb, Clock::now())) {
      log_.information("cluster %s node %s: live nodes now %s", spec_.name, spec_.node,
                       joined(membership_.live()));
    }
  }

  static std::string joined(const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
    return out;
  }

  // Attach where this node ranks first or second, detach elsewhere, and hand
  // over a partition this node is active on while its owner waits for it.
  void reconcile() {
    if (!connection_ || !connection_.active()) return;
    const std::vector<std::string> live = membership_.live();
    for (Partition& p : partitions_) {
      const std::vector<std::string> ranked = rankNodes(p.index, live);
      const auto rank = std::find(ranked.begin(), ranked.end(), spec_.node) - ranked.begin();
      const bool wanted = rank < 2;
      if (p.handing_over &&
          Clock::now() - p.handover_started > std::chrono::milliseconds(spec_.idle_timeout_ms)) {
        // RabbitMQ 3.10 ended the session (its consumer was gone) but sent no
        // end back: waiting longer would leave the partition without this
        // node for good, even once it is the owner.
        log_.warning(
            "cluster %s node %s: partition %u: the broker did not confirm the end of its session "
            "within the idle timeout (%lu ms); the partition may be attached again",
            spec_.name, spec_.node, p.index, static_cast<unsigned long>(spec_.idle_timeout_ms));
        ++counters_.unconfirmed_handovers;
        detached(p, "session end not confirmed");
      }
      if (wanted && !p.attached && !p.handing_over) {
        attach(p);
      } else if (!wanted && p.attached) {
        detach(p);
      } else if (p.attached && p.active && rank != 0 && membership_.attached(ranked[0], p.index)) {
        log_.information("cluster %s node %s: handing partition %u over to its owner %s",
                         spec_.name, spec_.node, p.index, ranked[0]);
        ++counters_.handovers;
        detach(p);
      }
    }
  }

  bool streamInput() const { return spec_.input == ClusterSpec::Input::kStream; }

  // Consumes the partition queue (with stream input: its lease) in a
  // session of its own.
  void attach(Partition& p) {
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
    p.attached = true;
  }

  // Reads the partition's stream from the offset the lease token carries.
  // Each link of a partition's stream has a name of its own ("s<i>-<n>"),
  // so that one replacing another in the same session never clashes.
  void openStream(Partition& p, uint64_t offset) {
    proton::source::filter_map filters;
    filters.put(proton::symbol("rabbitmq:stream-offset-spec"),
                proton::value(static_cast<int64_t>(offset)));
    p.stream = p.session.open_receiver(
        "/amq/queue/" + partitionStream(spec_.name, p.index),
        proton::receiver_options()
            .name("s" + std::to_string(p.index) + "-" + std::to_string(++stream_links_))
            .credit_window(0)
            .auto_accept(false)
            .source(proton::source_options().filters(filters)));
    p.stream.add_credit(static_cast<int>(streamCredit()));
    if (!p.active->reader_watch) {
      p.active->reader_watch.emplace(
          streamSilence(), 2 * std::chrono::milliseconds(spec_.idle_timeout_ms), Clock::now());
    }
  }

  // A probe of the partition's stream: one message from its last chunk,
  // whose offset tells a silent reader from an idle stream (StreamReaderWatch).
  void openTailProbe(Partition& p) {
    proton::source::filter_map filters;
    filters.put(proton::symbol("rabbitmq:stream-offset-spec"), proton::value(std::string("last")));
    if (p.tail_probe) p.tail_probe.close();
    p.tail_probe = p.session.open_receiver(
        "/amq/queue/" + partitionStream(spec_.name, p.index),
        proton::receiver_options()
            .name("q" + std::to_string(p.index) + "-" + std::to_string(++stream_links_))
            .credit_window(0)
            .auto_accept(false)
            .source(proton::source_options().filters(filters)));
    p.tail_probe.add_credit(1);
  }

  void onTailProbe(Partition& p, proton::delivery& d, proton::message& m) {
    d.accept();
    p.tail_probe.close();
    p.tail_probe = proton::receiver();
    if (const std::optional<uint64_t> offset = streamOffset(m)) {
      p.active->reader_watch->probed(*offset, Clock::now());
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
    Active& a = *p.active;
    if (!p.stream || !a.reader_watch) return true;
    const auto action = a.reader_watch->tick(Clock::now(), a.checkpoint->readTo());
    if (action == StreamReaderWatch::Action::kNone) return true;
    if (action == StreamReaderWatch::Action::kSwitchBroker) {
      ++counters_.stream_broker_switches;
      log_.warning(
          "cluster %s node %s: partition %u: broker %s:%hu delivers nothing from the stream "
          "although it holds events past offset %s; reconnecting through the next broker",
          spec_.name, spec_.node, p.index, broker().host, broker().port,
          std::to_string(a.checkpoint->readTo()));
      if (connection_ && connection_.active()) connection_.close();
      return false;
    }
    ++counters_.stream_refreshes;
    log_.information(
        "cluster %s node %s: partition %u: nothing from its stream for %s ms; reading on through "
        "a new link from offset %s%s",
        spec_.name, spec_.node, p.index, std::to_string(streamSilence().count()),
        std::to_string(a.checkpoint->readTo()),
        std::string(action == StreamReaderWatch::Action::kReopenAndProbe
                        ? ", and probing the stream's end"
                        : ""));
    if (action == StreamReaderWatch::Action::kReopenAndProbe) openTailProbe(p);
    p.stream.close();
    a.stream_credit_owed = 0;
    openStream(p, a.checkpoint->readTo());
    return true;
  }

  // How many event ids a partition remembers to drop resent copies: what
  // it may hold, and at least many times what a publisher resends after a
  // failover (ClusterPublisher keeps up to 1,000 events in flight).
  size_t dedupeEvents() const { return std::max<size_t>(2 * spec_.max_unsettled, 16384); }

  uint32_t streamCredit() const { return std::min(spec_.max_unsettled, kStreamReadAhead); }

  // How many stream messages may wait for an earlier one of their
  // publisher's: at least twice what a publisher has in flight (all that a
  // broker can store after one it refuses), and what the node reads ahead.
  size_t maxOutOfOrder() const {
    return std::max<size_t>(spec_.max_unsettled, 2 * PublishOptions{}.max_in_flight);
  }

  // Ends the partition's session: the broker takes back what it held
  // unsettled and gives the consumer to the next attached node.
  void detach(Partition& p) {
    if (!p.attached) return;
    p.handing_over = true;
    p.handover_started = Clock::now();
    if (p.session && p.session.active()) p.session.close();
    dropActive(p);
    p.attached = false;
  }

  void detached(Partition& p, const char* why) {
    if (p.active) {
      log_.information("cluster %s node %s: partition %u inactive (%s)", spec_.name, spec_.node,
                       p.index, why);
    }
    dropActive(p);
    p.attached = false;
    p.handing_over = false;
    p.session = proton::session();
    p.receiver = proton::receiver();
    p.stream = proton::receiver();
    p.tail_probe = proton::receiver();
    p.lease = proton::sender();
  }

  void dropActive(Partition& p) {
    if (!p.active) return;
    for (auto it = trackers_.begin(); it != trackers_.end();) {
      it = it->second.partition == p.index ? trackers_.erase(it) : std::next(it);
    }
    for (auto it = token_trackers_.begin(); it != token_trackers_.end();) {
      it = it->second.partition == p.index ? token_trackers_.erase(it) : std::next(it);
    }
    p.active.reset();
  }

  // The partition's first message: this node just became its active consumer.
  Status activate(Partition& p) {
    auto active = std::make_unique<Active>(window_, spec_.slack, dedupeEvents());
    for (const CompiledQuery& q : queries_) {
      auto run = std::make_unique<QueryRun>(*this, p, q);
      auto detector = q.plugin->createDetector(q.engine, q.query, q.options, *run);
      if (!detector) return detector.status();
      run->detector = std::move(*detector);
      active->runs.push_back(std::move(run));
    }
    p.active = std::move(active);
    ++activation_;
    ++counters_.takeovers;
    log_.information("cluster %s node %s: active on partition %u", spec_.name, spec_.node, p.index);
    return Status::ok();
  }

  // Makes this node the partition's active consumer; false (logged, the
  // message released) when its queries cannot run.
  bool activateOrRelease(Partition& p, proton::delivery& d) {
    if (Status s = activate(p); !s) {
      log_.error("cluster %s node %s: partition %u cannot run its queries: %s", spec_.name,
                 spec_.node, p.index, s.message());
      d.release();
      return false;
    }
    return true;
  }

  // Queue input: the message is held unsettled until no window needs it.
  void onQueueInput(Partition& p, proton::delivery& d, proton::message& m) {
    ++counters_.received;
    if (m.delivery_count() > 0 || !m.first_acquirer()) ++counters_.replayed;
    if (!p.active && !activateOrRelease(p, d)) return;
    const uint64_t tag = p.active->next_tag++;
    onInput(p, tag, d, m);
    if (p.active->deliveries.size() >= spec_.max_unsettled) {
      ++counters_.window_full;
      if (counters_.window_full == 1 || counters_.window_full % 1000 == 0) {
        log_.warning(
            "cluster %s node %s: partition %u holds max-unsettled=%u messages that its windows "
            "still need: it waits for newer events (raise max-unsettled, shorten WITHIN, or "
            "use input=\"stream\")",
            spec_.name, spec_.node, p.index, spec_.max_unsettled);
      }
    }
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
    if (!p.active) {
      if (!activateOrRelease(p, d)) return;
      p.active->checkpoint.emplace(mark->resume_from);
      p.active->sequencer.emplace(maxOutOfOrder(), kSequenceGapWait);
      p.active->replay_to = mark->read_to;
      openStream(p, mark->resume_from);
      log_.information(
          "cluster %s node %s: partition %u resumes its stream at offset %s (read to %s before)",
          spec_.name, spec_.node, p.index, std::to_string(mark->resume_from),
          std::to_string(mark->read_to));
    }
    std::string id;
    if (!m.id().empty()) id = proton::to_string(m.id());
    p.active->tokens.push_back(HeldToken{d, std::move(id)});
  }

  // Stream input: the stream keeps the message, so it is accepted at once
  // (that only returns credit); the checkpoint holds its offset instead.
  void onStreamInput(Partition& p, proton::delivery& d, proton::message& m) {
    ++counters_.received;
    Active& a = *p.active;
    a.reader_watch->read(Clock::now());
    d.accept();
    if (++a.stream_credit_owed >= streamCredit() / 2) {
      p.stream.add_credit(static_cast<int>(a.stream_credit_owed));
      a.stream_credit_owed = 0;
    }
    const std::optional<uint64_t> offset = streamOffset(m);
    if (!offset) {
      ++counters_.rejected;
      log_.warning(
          "cluster %s node %s: partition %u: a stream message without x-stream-offset; "
          "ignored",
          spec_.name, spec_.node, p.index);
      return;
    }
    if (*offset < a.replay_to) ++counters_.replayed;
    if (const uint64_t lost = a.checkpoint->read(*offset); lost > 0) {
      counters_.retention_gaps += lost;
      log_.error(
          "cluster %s node %s: partition %u: the stream no longer holds offsets %s to %s "
          "that its lease says to replay (retention=%s is shorter than the windows and "
          "the downtime): matches needing those events are lost",
          spec_.name, spec_.node, p.index, std::to_string(*offset - lost),
          std::to_string(*offset - 1), spec_.retention);
    }
    sequence(p, *offset, d, m);
  }

  // Stream input: a message goes on in its publisher's order
  // (stream_sequencer.h); one that came ahead of a gap waits for it.
  void sequence(Partition& p, uint64_t offset, proton::delivery& d, proton::message& m) {
    Active& a = *p.active;
    const uint64_t gaps = a.sequencer->gaps();
    const StreamSequencer::Offer offer = a.sequencer->offer(offset, sequenceTag(m), Clock::now());
    if (offer.held) {
      ++counters_.out_of_order;
      a.ahead_of_gap.emplace(offset, HeldInput{d, m});
    } else {
      onInput(p, offset, d, m);
    }
    resume(p, offer.then, a.sequencer->gaps() - gaps);
  }

  // Held stream messages whose turn came, in order; `gaps` messages were
  // given up on to let them go.
  void resume(Partition& p, const std::vector<uint64_t>& offsets, uint64_t gaps) {
    Active& a = *p.active;
    if (gaps > 0) {
      counters_.sequence_gaps += gaps;
      log_.error(
          "cluster %s node %s: partition %u: %s messages of a publisher were missing from "
          "the stream ahead of later ones for %s ms (or %s later ones were held); the "
          "later ones go on, and the missing ones count as late if they come",
          spec_.name, spec_.node, p.index, std::to_string(gaps),
          std::to_string(kSequenceGapWait.count()), std::to_string(maxOutOfOrder()));
    }
    for (uint64_t offset : offsets) {
      auto held = a.ahead_of_gap.extract(offset);
      if (!held.empty()) onInput(p, offset, held.mapped().delivery, held.mapped().message);
    }
  }

  void onInput(Partition& p, uint64_t tag, proton::delivery& d, proton::message& m) {
    Active& a = *p.active;
    if (m.subject() == kEndOfStreamSubject) {
      endOfStream(p, tag, d);
      return;
    }
    if (a.ended) startNewStream(p);
    std::vector<EventPtr> events;
    if (m.subject() == kEventBatchSubject) {
      MappedBatch batch = eventsFromBatchMessage(m);
      if (batch.events.empty()) {
        refuse(p, tag, d, batch.condition, batch.description);
        return;
      }
      events = std::move(batch.events);
    } else {
      amqp::MappedEvent mapped = amqp::eventFromMessage(m);
      if (!mapped.event) {
        refuse(p, tag, d, mapped.condition, mapped.description);
        return;
      }
      events.push_back(std::move(mapped.event));
    }
    // The ledger holds the message once per event; it is accepted when the
    // last of them may go.
    a.deliveries.emplace(tag, HeldDelivery{d, static_cast<uint32_t>(events.size())});
    a.held_messages_peak = std::max<uint64_t>(a.held_messages_peak, a.deliveries.size());
    for (const EventPtr& event : events) {
      const flows::DeliveryKey key{p.symbol, event->id()};
      if (a.seen.contains(key)) {
        // Resent by a publisher after a broker failover: the original is
        // held or was accepted already.
        ++counters_.duplicates;
        a.ledger.holdUntilOutputsAccepted(tag);
      } else if (Status s = a.reorder->push(event); !s) {
        a.seen.insert(key);
        ++counters_.late;
        publishLate(p, *event);
        a.ledger.holdUntilOutputsAccepted(tag);
      } else {
        a.seen.insert(key);
        a.ledger.hold(tag, event->ts());
      }
    }
    release(p);
    settle(p);
  }

  // A message that is no event. A queue rejects it; a stream keeps it, so
  // it is only logged, counted and let go.
  void refuse(Partition& p, uint64_t tag, proton::delivery& d, const std::string& condition,
              const std::string& description) {
    ++counters_.rejected;
    log_.warning("cluster %s node %s: partition %u: refused a message: %s", spec_.name, spec_.node,
                 p.index, description);
    if (p.active->checkpoint) {
      p.active->checkpoint->done(tag);
      return;
    }
    amqp::rejectWithCondition(d, proton::error_condition(condition, description));
    p.receiver.add_credit(1);
  }

  // No event follows in this stream: every buffered event goes to the
  // detectors, every window closes, and what was held may go once the
  // outputs are accepted.
  void endOfStream(Partition& p, uint64_t tag, proton::delivery& d) {
    Active& a = *p.active;
    while (EventPtr e = a.reorder->popAny()) feed(p, e);
    flushDetectors(p);
    a.ledger.released(INT64_MAX);
    a.deliveries.emplace(tag, HeldDelivery{d, 1});
    a.ledger.holdUntilOutputsAccepted(tag);
    a.ended = true;
    ++counters_.streams_ended;
    settle(p);
  }

  // The first event after an end of stream: detectors and order start over.
  void startNewStream(Partition& p) {
    Active& a = *p.active;
    for (auto& run : a.runs) {
      auto detector = run->query.plugin->createDetector(run->query.engine, run->query.query,
                                                        run->query.options, *run);
      if (detector) run->detector = std::move(*detector);
    }
    a.reorder.emplace(spec_.slack);
    a.ledger.newStream();
    a.ended = false;
  }

  void feed(Partition& p, const EventPtr& e) {
    for (auto& run : p.active->runs) {
      if (Status s = run->detector->onEvent(e); !s) detectorFailed(p, *run, s);
    }
    p.active->ledger.released(e->ts());
  }

  void flushDetectors(Partition& p) {
    for (auto& run : p.active->runs) {
      if (Status s = run->detector->flush(); !s) detectorFailed(p, *run, s);
    }
  }

  // Feeds the detectors every event now in order, then flushes them, so
  // that every composite these events make is out before the ledger may
  // let them go.
  void release(Partition& p) {
    while (EventPtr e = p.active->reorder->popReady()) feed(p, e);
    flushDetectors(p);
  }

  void detectorFailed(const Partition& p, const QueryRun& run, const Status& s) {
    ++counters_.detector_errors;
    log_.warning("cluster %s node %s: partition %u query %s: %s", spec_.name, spec_.node, p.index,
                 run.query.name, s.message());
  }

  void publishComposite(QueryRun& run, const plugin::Match& match) {
    Partition& p = run.partition;
    std::vector<EventId> ids;
    ids.reserve(match.size());
    for (size_t i = 0; i < match.size(); ++i) ids.push_back(match.event(i)->id());
    EventPtr composite = match.composite();
    proton::message m;
    amqp::messageFromEvent(*composite, m);
    m.id(proton::message_id(compositeId(run.query.name, ids)));
    m.properties().put("query", run.query.name);
    m.properties().put("match-ts", joinTs(match));
    m.properties().put("partition", static_cast<uint32_t>(p.index));
    m.properties().put("node", spec_.node);
    ++counters_.composites;
    send(p, run.query.output, std::move(m));
  }

  void publishLate(Partition& p, const Event& event) {
    proton::message m;
    amqp::messageFromEvent(event, m);
    m.properties().put("late", true);
    m.properties().put("partition", static_cast<uint32_t>(p.index));
    send(p, "", std::move(m));
  }

  // Sends on the query's output sender (or the late sender for ""),
  // tracked until the broker accepts it.
  void send(Partition& p, const std::string& output, proton::message m) {
    proton::sender* sender = nullptr;
    if (output.empty()) {
      sender = &late_sender_;
    } else if (auto it = outputs_.find(output); it != outputs_.end()) {
      sender = &it->second;
    }
    const uint64_t seq = p.active->ledger.published();
    if (sender == nullptr || !*sender) return;  // the connection is going: replayed later
    proton::tracker t = sender->send(m);
    trackers_.emplace(t, OutputRef{p.index, seq, activation_, std::move(m), output});
  }

  void trackerDone(proton::tracker& t, bool accepted) {
    if (auto token = token_trackers_.find(t); token != token_trackers_.end()) {
      TokenRef ref = std::move(token->second);
      token_trackers_.erase(token);
      tokenDone(ref, accepted);
      return;
    }
    auto it = trackers_.find(t);
    if (it == trackers_.end()) return;
    OutputRef ref = std::move(it->second);
    trackers_.erase(it);
    Partition& p = partitions_[ref.partition];
    if (!p.active) return;
    if (!accepted) {
      // Sent again: an input is accepted only after its outputs are.
      proton::sender* sender = ref.sender.empty() ? &late_sender_ : &outputs_[ref.sender];
      if (*sender && sender->active()) {
        proton::tracker again = sender->send(ref.message);
        trackers_.emplace(again, std::move(ref));
      }
      return;
    }
    p.active->ledger.accepted(ref.seq);
    settle(p);
  }

  // Stream input: moves the partition's lease forward when its windows
  // let go of the oldest messages (stream_checkpoint.h).
  void checkpoint(Partition& p) {
    Active& a = *p.active;
    const std::optional<uint64_t> at = a.checkpoint->due();
    if (!at || !p.lease || !p.lease.active() || p.lease.credit() <= 0) return;
    proton::message m;
    const std::string id =
        spec_.node + "/" + std::to_string(incarnation_) + "/" + std::to_string(++tokens_published_);
    m.id(proton::message_id(id));
    m.durable(true);
    const std::string body = leaseTokenBody(LeaseMark{*at, a.checkpoint->readTo()});
    m.body(proton::binary(body.begin(), body.end()));
    token_trackers_.emplace(p.lease.send(m), TokenRef{p.index, id});
    a.checkpoint->sending(*at);
  }

  // The broker took the new token: the ones held before it are settled, so
  // the lease carries only the newest offset.
  void tokenDone(const TokenRef& ref, bool accepted) {
    Partition& p = partitions_[ref.partition];
    if (!p.active) return;
    Active& a = *p.active;
    a.checkpoint->sent(accepted);
    if (!accepted) return;
    ++counters_.checkpoints;
    std::vector<HeldToken> kept;
    for (HeldToken& token : a.tokens) {
      if (token.id == ref.id) {
        kept.push_back(std::move(token));
      } else {
        token.delivery.accept();
      }
    }
    a.tokens = std::move(kept);
  }

  void settle(Partition& p) {
    Active& a = *p.active;
    int accepted = 0;
    for (uint64_t tag : a.ledger.settleable()) {
      auto it = a.deliveries.find(tag);
      if (it == a.deliveries.end()) continue;
      ++counters_.settled;
      if (--it->second.unsettled_events > 0) continue;
      if (a.checkpoint) {
        a.checkpoint->done(tag);
      } else {
        it->second.delivery.accept();
        ++accepted;
      }
      a.deliveries.erase(it);
    }
    if (accepted > 0) p.receiver.add_credit(accepted);
  }

  void leave() {
    leaving_ = true;
    sendHeartbeat(true);
    for (Partition& p : partitions_) detach(p);
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
    s.live_nodes = membership_.live();
    for (const Partition& p : partitions_) {
      PartitionStats ps;
      ps.partition = p.index;
      ps.role = p.active ? "active" : p.attached ? "standby" : "none";
      ps.owner = rankNodes(p.index, s.live_nodes).front();
      if (p.active) {
        ps.held = p.active->ledger.held();
        ps.unaccepted_outputs = p.active->ledger.unacceptedOutputs();
        ps.stream_ended = p.active->ended;
        ps.held_messages_peak = p.active->held_messages_peak;
        if (const auto& c = p.active->checkpoint) {
          ps.resume_from = c->resumeFrom();
          ps.lease_offset = c->token();
        }
      }
      s.partitions.push_back(std::move(ps));
    }
    std::lock_guard lock(stats_mu_);
    published_stats_ = std::move(s);
  }

  const ClusterSpec spec_;
  router::Registry& registry_;
  std::shared_ptr<router::ComponentEntry> entry_;
  const std::string password_;
  const ClusterHooks hooks_;
  const std::vector<CompiledQuery> queries_;
  Membership membership_;
  const uint64_t incarnation_;
  Poco::Logger& log_;
  Timestamp window_ = 0;

  std::unique_ptr<StallWatchdog> watchdog_;  // beaten and fed on the container thread
  std::unique_ptr<proton::container> container_;
  std::thread thread_;
  bool stopped_ = false;  // control plane

  // Container thread only.
  std::vector<Partition> partitions_;
  proton::connection connection_;
  proton::sender heartbeat_sender_;
  proton::sender late_sender_;
  std::map<std::string, proton::sender> outputs_;
  std::map<proton::tracker, OutputRef> trackers_;
  std::map<proton::tracker, TokenRef> token_trackers_;
  uint64_t tokens_published_ = 0;
  uint64_t stream_links_ = 0;
  std::vector<std::thread> evictions_;
  std::string local_address_;  // of the current connection, announced in heartbeats
  // Every address a peer announced (it reconnects from new ports), for eviction.
  std::map<std::string, std::vector<std::string>> peer_addresses_;
  size_t broker_index_ = 0;
  bool leaving_ = false;
  std::promise<void> closed_;  // set once the connection closed after leave()
  bool closed_set_ = false;
  uint64_t activation_ = 0;
  SteadyTime last_tick_;
  SteadyTime started_at_;
  SteadyTime connected_at_ = SteadyTime::max();
  SteadyTime last_echo_;  // this connection's last heartbeat that came back
  ClusterStats counters_;

  mutable std::mutex stats_mu_;
  ClusterStats published_stats_;  // guarded by stats_mu_
};

ClusterNode::ClusterNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ClusterNode::~ClusterNode() { stop(); }

const std::string& ClusterNode::name() const { return impl_->spec().node; }

Status ClusterNode::start() { return impl_->start(); }

void ClusterNode::stop() { impl_->stop(); }

ClusterStats ClusterNode::stats() const { return impl_->stats(); }

Result<std::unique_ptr<ClusterNode>> ClusterNode::create(const ClusterSpec& spec,
                                                         std::string password, ClusterHooks hooks,
                                                         ServiceContext& context) {
  std::vector<CompiledQuery> queries;
  std::string errors;
  auto fail = [&errors](const descriptor::Location& where, const std::string& message) {
    errors += (errors.empty() ? "" : "\n") + where.error(message).toString();
  };
  for (const descriptor::QuerySpec& spec_query : spec.queries) {
    const std::string label = "cluster query \"" + spec_query.name + "\"";
    auto query = pattern::parseQuery(spec_query.text);
    if (!query) {
      fail(spec_query.text_where, label + ": " + query.status().message());
      continue;
    }
    if (Status s = checkPartitionedQuery(*query, spec_query.name, spec_query.engine, spec.key);
        !s) {
      fail(spec_query.where, s.message());
      continue;
    }
    auto plugin = context.plugins.load(spec_query.engine);
    if (!plugin) {
      fail(spec_query.where, label + ": engine \"" + spec_query.engine +
                                 "\" cannot be loaded: " + plugin.status().message());
      continue;
    }
    std::map<std::string, std::string, std::less<>> values;
    for (const descriptor::Param& option : spec_query.options) values[option.name] = option.value;
    if (values.count("slack") != 0) {
      fail(spec_query.where, label +
                                 ": the cluster's slack attribute orders a partition's events "
                                 "for every query; a query has no slack option");
      continue;
    }
    CompiledQuery compiled{
        spec_query.name,
        spec_query.engine,
        spec_query.output,
        std::move(*query),
        plugin::DetectorOptions(std::move(values)).withBaseDir(spec_query.base_dir),
        *plugin};
    // Compile once now, so a query the engine refuses is a start-up error
    // naming its line rather than a failure on each partition's first event.
    struct NoSink final : plugin::MatchSink {
      void onMatch(const plugin::Match&) override {}
    } sink;
    auto probe =
        compiled.plugin->createDetector(compiled.engine, compiled.query, compiled.options, sink);
    if (!probe) {
      fail(spec_query.where, label + ": engine \"" + spec_query.engine +
                                 "\" cannot run the query: " + probe.status().message());
      continue;
    }
    queries.push_back(std::move(compiled));
  }
  if (!errors.empty()) return Status::invalidArgument(errors);
  return std::unique_ptr<ClusterNode>(new ClusterNode(std::make_unique<Impl>(
      spec, std::move(password), std::move(hooks), std::move(queries), context.registry)));
}

}  // namespace cepbus::services::cluster
