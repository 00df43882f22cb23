#pragma once

// ClusterPublisher: publishes events into a cluster's partitions, the way any
// producer should (`cepbus cluster publish` is built on it).
//
// Each event goes to the input exchange "<name>.in" with the routing key of
// its partition (partitioner.h) and its event id as the AMQP message-id, so
// the nodes recognise it if it is ever sent twice. The publisher keeps every
// message until the broker accepts it; when its connection fails (a broker
// node died: RabbitMQ 3.10's AMQP 1.0 plugin drops the session during a
// queue leader election) it reconnects to the next broker of the failover
// list and sends again, in order, everything still in doubt. Duplicates are
// the price of losing nothing; the nodes drop them by event id.
//
// Thread-safety: publish() runs the whole exchange on the calling thread.

#include <cstdint>
#include <span>
#include <string>

#include "bus/core/descriptor/descriptor.h"
#include "bus/core/event.h"
#include "bus/core/status.h"

namespace cepbus::services::cluster {

struct PublishOptions {
  uint64_t rate = 0;              // events per second; 0: as fast as the broker takes them
  uint32_t max_in_flight = 1000;  // unaccepted messages at most
  uint64_t give_up_ms = 60000;    // no broker reachable for this long: fail
  // After the events, an end-of-stream marker to every partition: the nodes
  // then flush their windows and accept everything (see kEndOfStreamSubject).
  bool end_of_stream = false;
};

// The subject of an end-of-stream marker: no event follows on this
// partition for the current stream. A node reports every match still
// pending, accepts everything it held, and starts the next stream afresh.
inline constexpr char kEndOfStreamSubject[] = "cepbus.end-of-stream";

struct PublishReport {
  uint64_t published = 0;  // accepted by the broker
  uint64_t resent = 0;     // sent again after a connection failed
  uint64_t reconnects = 0;
};

// Publishes `events` in order and returns once the broker accepted every
// one. Fails when an event lacks a key attribute (naming it), when the
// broker rejects a message, or when no broker answered for give_up_ms.
Result<PublishReport> publishToCluster(const descriptor::ClusterSpec& spec,
                                       const std::string& password,
                                       std::span<const EventPtr> events,
                                       const PublishOptions& options);

}  // namespace cepbus::services::cluster
