#pragma once

// ClusterPublisher: publishes events into a cluster's partitions, the way any
// producer should (`cepbus cluster publish` is built on it).
//
// Each event goes to the input exchange "<name>.in" with the routing key of
// its partition (partitioner.h) and its event id as the AMQP message-id, so
// the nodes recognise it if it is ever sent twice. Consecutive events of one
// partition may travel together in one batch message (event_batch.h):
// the broker's cost is per message, and on RabbitMQ's quorum queues it is by
// far the largest cost of the whole path (docs/cluster.md, "Figures"). The publisher keeps every
// message until the broker accepts it; when its connection fails (a broker
// node died: RabbitMQ 3.10's AMQP 1.0 plugin drops the session during a
// queue leader election) it reconnects to the next broker of the failover
// list and sends again, in order, everything still in doubt; so it does when
// the broker leaves a message unanswered for too long. On a new connection
// a partition has one message in flight until the broker accepted one of
// it: a broker that does not know a queue's new leader yet may leave one
// message unanswered and store those after it, and the resent one would
// then reach the partition's node out of order. With stream input an
// acceptance has not always meant a stored message, so the publisher reads
// the streams back (stream_read_back.h) after a failed connection, before
// it sends anything more, and before it returns: what a stream lacks, in
// doubt or accepted, goes again. Duplicates are the price of losing
// nothing; the nodes drop them by event id.
//
// Thread-safety: publish() runs the whole exchange on the calling thread;
// a watch thread of its own only posts the confirm check to it.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/status.h"
#include "services/cluster/cluster_spec.h"

namespace cepbus::services::cluster {

inline constexpr uint32_t kMaxBatch = 1000;

struct PublishOptions {
  uint64_t rate = 0;              // events per second; 0: as fast as the broker takes them
  uint32_t max_in_flight = 1000;  // unaccepted events at most (what a failover may resend)
  // A batch message closes at `batch` events (1..kMaxBatch), before an
  // event would take its body past `batch_bytes`, or, with a rate,
  // `linger_ms` of the schedule after its first event: the ingress's rule
  // (ingress_batcher.h). A batch of 1 sends every event on its own, in the
  // plain event mapping (docs/amqp.md).
  uint32_t batch = 32;
  uint64_t batch_bytes = 65536;
  uint32_t linger_ms = 10;
  uint64_t give_up_ms = 60000;  // no broker reachable for this long: fail
  // A message the broker neither accepts nor refuses for this long is in
  // doubt with its whole connection: it is closed, and everything in doubt
  // goes again through the next broker. RabbitMQ 3.10 never answers for
  // messages published to a stream while its leader's node died.
  uint64_t confirm_timeout_ms = 10000;
  // Stream input only, the read-back (stream_read_back.h): a partition's
  // stream is read from this long before the first message looked for
  // (brokers whose clock is behind this host's by up to this much are
  // covered), and is taken as read to its end once it delivered nothing
  // for read_back_quiet_ms. Too short a quiet time only resends what the
  // stream holds (duplicates, which the nodes drop).
  uint64_t read_back_skew_ms = 2000;
  uint64_t read_back_quiet_ms = 2000;
  // After the events, an end-of-stream marker to every partition: the nodes
  // then flush their windows and accept everything (see kEndOfStreamSubject).
  bool end_of_stream = false;
};

// The subject of an end-of-stream marker: no event follows on this
// partition for the current stream. A node reports every match still
// pending, accepts everything it held, and starts the next stream afresh.
inline constexpr char kEndOfStreamSubject[] = "cepbus.end-of-stream";

struct PublishReport {
  uint64_t published = 0;  // events accepted by the broker
  uint64_t messages = 0;   // messages accepted (fewer than events when batched)
  uint64_t resent = 0;     // events (and end markers) sent again after a connection failed
  // Of those, events the broker had accepted that a read-back did not find
  // in their stream (stream input).
  uint64_t resent_accepted = 0;
  uint64_t read_backs = 0;           // rounds of reading the streams back
  uint64_t read_back_confirmed = 0;  // messages a read-back found in their stream
  // Read-backs given up for a stream that delivered nothing through the
  // broker, and read again through the next one.
  uint64_t read_back_switches = 0;
  uint64_t reconnects = 0;
  uint64_t confirm_timeouts = 0;  // connections given up for an unanswered message
  // Refusals for a failure of the broker's own (amqp:internal-error) and
  // links the broker ended, retried like a failed connection; a refusal
  // with another condition, or anything after give_up_ms without an
  // acceptance, ends the publish with its reason.
  uint64_t broker_errors = 0;
};

// What one message carries: events of one partition (indices into the
// events, in publish order), or none for an end-of-stream marker.
struct MessagePlan {
  uint32_t partition = 0;
  std::vector<size_t> events;
  size_t due = 0;  // the event whose place in the rate schedule lets it go
};

// Groups consecutive events of each partition (`partition_of`: per event)
// into messages with the ingress's batcher (ingress_batcher.h), event i
// coming at i / options.rate seconds of the schedule, in the order they
// close: full (options.batch events or options.batch_bytes), lingered past
// options.linger_ms of the schedule, or at the end; then the end-of-stream
// markers when asked for. Within a partition the events keep their publish
// order.
std::vector<MessagePlan> planMessages(std::span<const EventPtr> events,
                                      const std::vector<uint32_t>& partition_of,
                                      uint32_t partitions, const PublishOptions& options);

// Publishes `events` in order and returns once the broker accepted every
// one. Fails when an event lacks a key attribute (naming it), when the
// broker rejects a message, or when no broker answered for give_up_ms.
Result<PublishReport> publishToCluster(const ClusterSpec& spec, const std::string& password,
                                       std::span<const EventPtr> events,
                                       const PublishOptions& options);

}  // namespace cepbus::services::cluster
