#pragma once

// DeliveryContext: what a flow tells a target about one delivery besides the
// exchange (DeliveryTarget::deliver()):
// - whether the flow journaled it. A journaled delivery comes again when the
//   target refuses it (Rejected only delays it), and its target may take the
//   acknowledgement to give it later (DeferredAck) instead of by the status
//   deliver() returns — the AMQP listener does, until its remote subscriber
//   settles the message. Any other delivery is acknowledged by that status,
//   and one refused is gone.
// - the wakes its publisher lets it put off until the publisher's burst ends
//   (WakeHold, flows/wake_hold.h), when the delivery runs on the publisher's
//   thread inside its publish.
//
// A flow makes one per delivery, on the delivering thread's stack, and the
// target sees it only during deliver(); only a DeferredAck taken from it
// lives on.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bus/core/status.h"
#include "flows/journal/checkpoint_record.h"
#include "flows/wake_hold.h"

namespace cepbus::flows {

// A journaled delivery's acknowledgement, taken by its target to give later.
// Thread-safety: call it from any thread; copies share one delivery and only
// the first call counts. Harmless after the flow stopped (the record then
// waits in the journal for the next start). Ownership: shares the flow's
// Receiver, which outlives the flow while acknowledgements are out.
class DeferredAck {
 public:
  // Where the acknowledgements of a journaling flow go (ReliableFlow's).
  class Receiver {
   public:
    // Acknowledges the delivery parked under `token`: OK forgets its record,
    // anything else is a failed attempt. Ignores a token it already had.
    virtual void acknowledge(uint64_t token, const Status& status) = 0;
    // Acknowledges OK the deliveries parked under `tokens` in the journal
    // transaction that stores `checkpoint` (checkpoint_record.h); `done`
    // gets its status. When it fails none is acknowledged: they stay parked,
    // for a later checkpoint to acknowledge. By default a receiver keeps no
    // checkpoints (Unavailable).
    virtual void acknowledgeWithCheckpoint(std::vector<uint64_t> tokens,
                                           CheckpointRecord checkpoint, CheckpointDone done) {
      (void)tokens;
      done(Status::unavailable("flow stores no checkpoint " + checkpoint.name));
    }
    // The journal file its checkpoints go to; empty when none.
    virtual std::string journalPath() const { return {}; }

   protected:
    ~Receiver() = default;
  };

  DeferredAck() = default;
  DeferredAck(std::shared_ptr<Receiver> receiver, uint64_t token, uint32_t previous_deliveries)
      : receiver_(std::move(receiver)), token_(token), previous_deliveries_(previous_deliveries) {}

  void operator()(const Status& status) const {
    if (receiver_) receiver_->acknowledge(token_, status);
  }
  // False for a default-constructed one (nothing to acknowledge).
  explicit operator bool() const { return receiver_ != nullptr; }
  // Stores `checkpoint` in the journal of this acknowledgement's flow and
  // acknowledges OK every one of `acks` in the same transaction
  // (Receiver::acknowledgeWithCheckpoint()). This one may be acknowledged
  // already: it only names the flow. InvalidArgument (to `done`) when an
  // acknowledgement of `acks` comes from another flow; Unavailable from a
  // flow that keeps no checkpoints.
  void storeCheckpoint(std::span<const DeferredAck> acks, CheckpointRecord checkpoint,
                       CheckpointDone done) const;
  // The journal file of its flow (Receiver::journalPath()); empty when none.
  std::string journalPath() const { return receiver_ ? receiver_->journalPath() : std::string(); }
  // How often this record was delivered before without an OK (in this run,
  // or 1 when it comes back from the journal); 0 the first time.
  uint32_t previousDeliveries() const { return previous_deliveries_; }

 private:
  std::shared_ptr<Receiver> receiver_;
  uint64_t token_ = 0;
  uint32_t previous_deliveries_ = 0;
};

// Thread-safety: used by the delivering thread only (the flow, then the
// target inside deliver()). Ownership: owns nothing; the WakeHold is the
// publisher's and the Journaled the flow's, both alive for the delivery.
class DeliveryContext {
 public:
  // The journaling flow's side of one journaled delivery.
  class Journaled {
   public:
    // The delivery's acknowledgement: the first call parks the delivery
    // until it is given, later calls return the same one.
    virtual DeferredAck defer() = 0;

   protected:
    ~Journaled() = default;
  };

  // A delivery nobody journaled: the status deliver() returns acknowledges it.
  explicit DeliveryContext(WakeHold* wake_hold = nullptr, Journaled* journaled = nullptr)
      : wake_hold_(wake_hold), journaled_(journaled) {}
  DeliveryContext(const DeliveryContext&) = delete;
  DeliveryContext& operator=(const DeliveryContext&) = delete;

  bool journaled() const { return journaled_ != nullptr; }

  // Takes the acknowledgement of a journaled delivery: the status deliver()
  // returns then counts only in the target's own metrics, and the flow keeps
  // the record journaled and in flight until the returned DeferredAck is
  // called. Empty when the delivery is not journaled. Calling it again
  // returns the same acknowledgement.
  DeferredAck deferAcknowledgement() {
    if (journaled_ == nullptr) return {};
    deferred_ = true;
    return journaled_->defer();
  }
  // Whether the target took the acknowledgement (the flow asks, after deliver()).
  bool deferred() const { return deferred_; }

  // The publisher's hold over the wakes of this delivery's burst; null when
  // there is none (the delivery does not run inside its publish).
  WakeHold* wakeHold() const { return wake_hold_; }

 private:
  // Nothing to destroy: a delivery nobody journaled costs two pointers and a flag.
  WakeHold* const wake_hold_;
  Journaled* const journaled_;
  bool deferred_ = false;
};

}  // namespace cepbus::flows
