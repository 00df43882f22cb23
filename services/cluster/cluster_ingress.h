#pragma once

// ClusterIngress: a cluster node's door for ordinary AMQP 1.0 producers
// (<cluster><ingress host port ...>, docs/cluster.md "Ingress through any
// node").
//
// A producer connects to the ingress's listener and sends to the address
// "<name>.in" (the cluster's input) events as any AMQP client publishes
// them to a bus: one event per message in the plain mapping
// (docs/amqp.md), or batch messages (event_batch.h). The ingress
// partitions them by the cluster key (partitioner.h), batches them per
// partition (ingress_batcher.h) and sends each batch to "<name>.in" with
// the partition's routing key on the node's own broker connection.
//
// At least once: a producer's unsettled delivery is accepted only once the
// broker confirmed every batch that carries one of its events. A delivery
// that cannot be mapped, or whose event lacks a key attribute, is rejected
// (amqp:invalid-field or amqp:decode-error, naming what and where). A batch
// the broker refuses releases its deliveries: the refusal is the broker's
// (a resource limit, a missing exchange), not the producer's, so the
// producer may send them again, here or to another node; the copies of
// events that did land are dropped by the nodes by event id (the
// message-id a producer gives). Batches in doubt when the broker
// connection fails go again, in order, on the node's next connection.
// Producers get credit while the batcher holds less than its bound.
//
// Thread-safety: everything runs on the node's container thread (the
// producers' connections and the ingress's senders have it as handler).

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <proton/connection.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/listen_handler.hpp>
#include <proton/listener.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/sender.hpp>
#include <proton/tracker.hpp>
#include <string>
#include <vector>

#include "bus/core/symbol.h"
#include "services/cluster/cluster_spec.h"
#include "services/cluster/ingress_batcher.h"
#include "services/cluster_member.h"

namespace Poco {
class Logger;
}

namespace cepbus::services::cluster {

class ClusterIngress final : public proton::messaging_handler {
 public:
  // Counts into `counters` (the node's ingress_* counters).
  ClusterIngress(const ClusterSpec& spec, ClusterStats& counters);
  ~ClusterIngress() override;

  // Listens on the spec's host:port (from the container's start).
  void listen(proton::container& container);
  // The node's broker connection opened: the partitions' senders.
  void brokerUp(proton::connection& broker);
  // It closed: what the broker had not confirmed goes again on the next.
  void brokerDown();
  // The node leaves: no more producers; what is not accepted yet stays so.
  void stop();

  // proton::messaging_handler: the producers' connections and the senders.
  void on_receiver_open(proton::receiver& r) override;
  void on_receiver_close(proton::receiver& r) override;
  void on_message(proton::delivery& d, proton::message& m) override;
  void on_transport_close(proton::transport& t) override;
  void on_transport_error(proton::transport& t) override;
  void on_error(const proton::error_condition& e) override;
  void on_sendable(proton::sender& s) override;
  void on_sender_close(proton::sender& s) override;
  void on_tracker_accept(proton::tracker& t) override;
  void on_tracker_reject(proton::tracker& t) override;
  void on_tracker_release(proton::tracker& t) override;
  void on_tracker_settle(proton::tracker& t) override;

 private:
  void take(std::vector<IngressBatcher::Batch> closed);
  void pump(uint32_t partition);
  void openSender(proton::connection& broker, uint32_t partition);
  // The batches of `partition` (all: nullopt) in flight go again first.
  void resend(std::optional<uint32_t> partition);
  void armTimer();
  void lingered();
  void settled(const std::vector<uint64_t>& deliveries, bool accepted);
  void credit(proton::receiver& r);
  void creditAll();

  class Door;  // the listener's handler: producers' connections come to this

  const ClusterSpec& spec_;
  const std::vector<Symbol> key_;
  std::unique_ptr<Door> door_;
  Poco::Logger& log_;
  IngressBatcher batcher_;
  proton::container* container_ = nullptr;
  std::optional<proton::listener> listener_;
  std::vector<proton::receiver> producers_;
  std::map<uint64_t, proton::delivery> waiting_;  // unsettled producer deliveries, by id
  uint64_t next_delivery_ = 1;
  proton::connection broker_;  // none while it is down
  // Per partition: its sender on the broker connection (none while it is
  // down) and the batches closed and not sent yet, oldest first.
  std::vector<proton::sender> senders_;
  std::vector<std::deque<IngressBatcher::Batch>> unsent_;
  std::map<proton::tracker, IngressBatcher::Batch> in_flight_;
  proton::message message_;
  bool timer_armed_ = false;
  bool stopped_ = false;
  ClusterStats& counters_;
};

}  // namespace cepbus::services::cluster
