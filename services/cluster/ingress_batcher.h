#pragma once

// IngressBatcher: the adaptive batching rule of a cluster's ingress (a node
// taking events from ordinary AMQP producers and forwarding them to the
// partitions), of `cepbus cluster publish`, and of a node's composites
// (output_batcher.h: a "partition" there is a routing key, a "delivery" one
// output).
//
// Per partition, events go into an open batch that closes when it holds
// `max_events`, when the next event would take it past `max_bytes`, or
// `linger` after its first event came, whichever comes first: Kafka's
// producer's rule (batch.size, linger.ms). A flood gets full batches, and
// the broker's cost is per message (docs/cluster.md, "Figures"); a trickle
// waits at most the linger.
//
// It also keeps the ingress's at-least-once promise. A producer's delivery
// may carry events of several partitions, so it becomes settleable only
// once the broker has confirmed every batch holding one of its events. A
// batch the broker refuses makes every delivery with an event in it
// refused, whatever became of its other batches: the producer sends the
// whole delivery again, and the nodes drop the copies of the events that
// did land by event id.
//
// Bounded: what it holds (events in open batches and in batches the broker
// has not answered yet) counts against `max_held_events` and
// `max_held_bytes`. While either is reached, full() is true and the ingress
// gives its producers no more credit. add() never refuses: what a producer
// sent on the credit it had is taken (backpressure, not loss).
//
// Time comes from the caller (`now`), so the rule runs in tests without a
// clock or a socket; the caller arms a timer for nextDeadline() and calls
// expire() when it fires.
//
// Thread-safety: not thread-safe; one per ingress, used on one thread.

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "bus/core/event.h"

namespace cepbus::services::cluster {

class IngressBatcher {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  struct Limits {
    uint32_t max_events = 256;   // per batch, at least 1
    uint64_t max_bytes = 65536;  // per batch; one larger event still goes, alone
    std::chrono::milliseconds linger{5};
    uint64_t max_held_events = 20000;
    uint64_t max_held_bytes = 16 << 20;
  };

  // One event of a delivery: its partition, and its size in the batch
  // message (its encoded line).
  struct Item {
    uint32_t partition = 0;
    EventPtr event;
    uint64_t bytes = 0;
  };

  enum class Closed { kFull, kBytes, kLinger, kFlush };

  // A closed batch, to be sent to its partition. `deliveries` are the
  // deliveries it holds events of, in the order of their first event in it.
  struct Batch {
    uint64_t id = 0;
    uint32_t partition = 0;
    std::vector<EventPtr> events;
    std::vector<uint64_t> deliveries;
    uint64_t bytes = 0;
    Closed closed = Closed::kFull;
  };

  IngressBatcher(uint32_t partitions, const Limits& limits);

  // Takes the events of the producer delivery `delivery` (an id the caller
  // never used before; at least one event) and returns the batches that
  // closed, in the order they closed: those it filled, and those whose
  // linger ended by `now`.
  std::vector<Batch> add(uint64_t delivery, std::span<const Item> items, TimePoint now);
  // The batches whose linger ended by `now`, oldest first.
  std::vector<Batch> expire(TimePoint now);
  // Every open batch, oldest first (shutdown, end of input).
  std::vector<Batch> flush();
  // When the oldest open batch's linger ends; nullopt when none is open.
  std::optional<TimePoint> nextDeadline() const;

  // The broker accepted batch `batch`: the deliveries that are now
  // settleable (every batch holding their events accepted).
  std::vector<uint64_t> confirmed(uint64_t batch);
  // The broker refused batch `batch`: its deliveries that were still
  // pending, none of which becomes settleable.
  std::vector<uint64_t> refused(uint64_t batch);

  // No more credit for the producers: the events or bytes held reached
  // their bound.
  bool full() const {
    return held_events_ >= limits_.max_held_events || held_bytes_ >= limits_.max_held_bytes;
  }
  uint64_t heldEvents() const { return held_events_; }
  uint64_t heldBytes() const { return held_bytes_; }
  // Deliveries taken and neither settleable nor refused yet.
  size_t pendingDeliveries() const { return pending_.size(); }

 private:
  struct Open {
    Batch batch;
    TimePoint opened;
  };
  struct Sent {
    std::vector<uint64_t> deliveries;
    uint64_t events = 0;
    uint64_t bytes = 0;
  };

  void append(uint64_t delivery, const Item& item, TimePoint now, std::vector<Batch>& closed);
  void close(uint32_t partition, Closed why, std::vector<Batch>& closed);
  // Closes open batches oldest first: those whose linger ended by `now`,
  // or every one (nullopt).
  std::vector<Batch> closeOldest(std::optional<TimePoint> now, Closed why);
  void dropStaleDeadlines();
  // The batch's record, taken out; its events and bytes no longer held.
  std::optional<Sent> settle(uint64_t batch);

  const Limits limits_;
  std::vector<Open> open_;  // per partition; no events: none open
  // (opened, partition, batch id) of open batches, in opening order; an
  // entry whose batch closed by size stays until it reaches the front.
  std::deque<std::tuple<TimePoint, uint32_t, uint64_t>> deadlines_;
  std::unordered_map<uint64_t, Sent> sent_;         // by batch id
  std::unordered_map<uint64_t, uint32_t> pending_;  // delivery -> batches not yet confirmed
  uint64_t next_batch_ = 1;
  uint64_t held_events_ = 0;
  uint64_t held_bytes_ = 0;
};

}  // namespace cepbus::services::cluster
