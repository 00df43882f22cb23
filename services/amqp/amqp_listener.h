#pragma once

// AmqpListenerService: the AMQP 1.0 binding component (Qpid Proton C++). The
// bus is the AMQP peer that endpoints connect to: a proton::container on its
// own thread listens on the descriptor's <listeners><amqp host port>.
//
// - A client's sending link publishes: its target address is the topic (no
//   wildcards) and every message becomes an event (services/amqp/message_mapping.h).
//   A message that cannot be mapped is rejected with amqp:invalid-field or
//   amqp:decode-error and a description; the link stays up.
// - Guarantees to publishers: a pre-settled message is published at most
//   once. An unsettled one is published asking for reliable QoS (the
//   delivery policy decides what it gets) and settled once the router has
//   answered: accepted when every target took or queued it (or nobody
//   subscribes), released (the client retries) when admission refused it for
//   a target or a target failed — never dropped silently.
// - Credit follows backpressure: publishers get credit in windows; after a
//   refused or degraded publish the link gets no more credit until a timer
//   finds the stages of the targets that refused it no longer saturated.
// - A client's receiving link subscribes: its source address is a router
//   pattern (`*`, `#`); the link gets a broker endpoint
//   "amqp:<connection>/<link name>" whose consumer buffers at most
//   `subscriber_buffer` events (beyond that it answers Unavailable, which the
//   flow counts and a reliable flow retries), and events go out as unsettled
//   messages while the link has credit.
// - allow-anonymous="true" accepts SASL ANONYMOUS and lets any client publish
//   and subscribe anywhere (development mode). Otherwise every connection is
//   closed with amqp:unauthorized-access: SASL PLAIN and TLS are not
//   implemented yet.
//
// Threading: every Proton object is used on the container thread only.
// Router callbacks from other threads (an endpoint's consumer) hand work to
// it through the connection's proton::work_queue.
// Thread-safety: the Service life cycle calls are made by one thread;
// port() and stats() may be called from any thread. Ownership: owns the
// container, its thread, and the endpoints of its receiving links.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "bus/core/descriptor/descriptor.h"
#include "services/service.h"

namespace cepbus::services::amqp {

struct AmqpListenerOptions {
  std::string name = "amqp";        // the service name (and container id)
  uint32_t credit_window = 100;     // credit granted to a publishing link at a time
  size_t subscriber_buffer = 1000;  // events buffered per subscribing link
  // How often a publishing link that ran into backpressure checks whether it
  // may have credit again.
  std::chrono::milliseconds recheck_interval{20};
  // How long stop() waits for connections to close before aborting them.
  std::chrono::milliseconds close_timeout{2000};
};

struct AmqpListenerStats {
  uint64_t connections = 0;       // accepted since start
  uint64_t published = 0;         // messages published on the router
  uint64_t accepted = 0;          // unsettled messages accepted
  uint64_t released = 0;          // unsettled messages released (admission or target refused)
  uint64_t malformed = 0;         // messages that could not be mapped (rejected if unsettled)
  uint64_t credit_pauses = 0;     // times a publishing link stopped getting credit
  uint64_t sent = 0;              // messages sent to subscribing links
  uint64_t acknowledged = 0;      // of `sent`: accepted by the subscriber
  uint64_t not_acknowledged = 0;  // of `sent`: rejected, released or modified by the subscriber
  uint64_t buffer_full = 0;       // deliveries refused because a subscriber's buffer was full
  uint64_t paused_links = 0;      // publishing links waiting for backpressure to ease (now)
  uint64_t subscriber_links = 0;  // open subscribing links (now)
  uint64_t publish_credit = 0;    // credit granted to publishing links and not yet used (now)
};

class AmqpListenerService final : public Service {
 public:
  AmqpListenerService(descriptor::AmqpListener listener, AmqpListenerOptions options,
                      ServiceContext& context);
  ~AmqpListenerService() override;  // stops

  const std::string& name() const override;
  // Listens; an error names the descriptor location and the address.
  Status start() override;
  // Stops granting credit to publishers, so the bus can drain; subscribing
  // links keep receiving.
  void deactivate() override;
  void stop() override;

  // The bound port (the ephemeral one when the descriptor asked for 0); 0
  // before start().
  int port() const;
  AmqpListenerStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// What the Bus calls for <listeners><amqp>.
std::unique_ptr<Service> makeAmqpListener(const descriptor::AmqpListener& listener,
                                          ServiceContext& context);

}  // namespace cepbus::services::amqp
