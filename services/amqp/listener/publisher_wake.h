#pragma once

// PublisherWake: how a subscribing link on one connection gives credit back
// to a publishing link on another (services/amqp/listener/amqp_listener.h). A
// publishing link that found no room in a subscriber buffer waits; when that
// buffer drains to its low-water mark, the subscriber's connection — often
// served by another container thread — posts the publisher's resume to the
// publisher's own connection through its Waker, which runs it on the thread
// that owns the link. Each resume is posted once until it ran, however many
// buffers drain meanwhile.
//
// Thread-safety: waiting() and post() may be called from any thread; the
// rest by the publishing link's connection only (it owns the link's hold,
// services/amqp/listener/publisher_hold.h, which this mirrors). Ownership: shared by
// the publishing link and the outboxes of the subscriptions it feeds
// (SubscriberOutbox::setPublishers()); holds the connection's Waker, which
// refuses work once the connection is gone, so a wake that outlives its link
// is harmless.

#include <atomic>
#include <functional>
#include <memory>

#include "services/amqp/listener/client_connections.h"

namespace cepbus::services::amqp {

class PublisherWake {
 public:
  // `resume` runs on the link's connection (through `waker`) when a buffer
  // the link waits for drained.
  PublisherWake(std::shared_ptr<Waker> waker, std::function<void()> resume)
      : waker_(std::move(waker)), resume_(std::move(resume)) {}

  PublisherWake(const PublisherWake&) = delete;
  PublisherWake& operator=(const PublisherWake&) = delete;

  // ---- the link's connection ----
  // The link starts or stops waiting for room.
  void setWaiting(bool waiting) { waiting_.store(waiting, std::memory_order_release); }
  // The posted resume runs: the next drain may post another.
  void ran() { posted_.store(false, std::memory_order_release); }

  // ---- any thread ----
  bool waiting() const { return waiting_.load(std::memory_order_acquire); }
  // Posts the resume unless the link is not waiting or one is on its way.
  // False when nothing was posted.
  bool post();

 private:
  const std::shared_ptr<Waker> waker_;
  const std::function<void()> resume_;
  std::atomic<bool> waiting_{false};
  std::atomic<bool> posted_{false};
};

}  // namespace cepbus::services::amqp
