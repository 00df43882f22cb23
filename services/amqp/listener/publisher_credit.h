#pragma once

// PublisherCredit: how much credit the AMQP listener gives a publishing link
// that no stage backpressure, drain or shutdown holds back — the subscriber
// side of "credit follows backpressure" (services/amqp/listener/amqp_listener.h), as
// arithmetic on numbers. The listener reads the numbers off the subscriber
// buffers the link's address matches and makes the Proton calls itself.
//
// A link may hold the credit window, or less when a buffer it feeds has less
// room: room = capacity - load (buffered + in transit to it), shared equally
// among the publishing links that feed the buffer. A buffer whose subscriber
// is stuck (stalled) holds nobody back. A link with no room waits until every
// buffer it feeds is back at or below its low-water mark, half its capacity.
//
// Thread-safety: a value; one is made per decision by the link's connection.

#include <cstddef>
#include <cstdint>

namespace cepbus::services::amqp {

// What a publishing link's credit should do now.
struct CreditGrant {
  bool wait = false;  // no room: the link waits for the buffers to drain
  int add = 0;        // credit to add (0: it holds enough)
};

class PublisherCredit {
 public:
  explicit PublisherCredit(uint32_t window) : room_(window) {}

  // The low-water mark of a buffer of `capacity` events: publishers it held
  // back get credit again at or below it.
  static int64_t lowWater(size_t capacity) { return static_cast<int64_t>(capacity / 2); }

  // Counts in one buffer the link feeds: its capacity, its load and the
  // number of publishing links feeding it (0 counts as 1).
  void feeds(size_t capacity, int64_t load, size_t publishers, bool stalled);

  // The credit the link may hold; 0 or less when a buffer it feeds is full.
  int64_t room() const { return room_; }
  // True while a buffer it feeds (not stalled) is above its low-water mark.
  bool aboveLowWater() const { return above_low_water_; }

  // For a link holding `credit`: wait when there is no room; else top it up
  // to its room once it holds half of that or less, so credit goes out in
  // batches rather than a flow frame per message.
  CreditGrant grant(int credit) const;

 private:
  int64_t room_;
  bool above_low_water_ = false;
};

}  // namespace cepbus::services::amqp
