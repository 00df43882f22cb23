#pragma once

// WakeHold: the wakes a publisher's burst lets the consumers it feeds put off
// until the burst ends.
//
// A consumer that hands what it is given to a writer on another thread wakes
// that thread (a post to its work queue, which usually makes a sleeping
// thread run once more). When a publisher reads a burst of events, each
// consumer it feeds would wake its writer once per event that finds the
// writer idle: one burst read on one thread, written out one event at a time
// on the other. Under a hold, the first wake of each writer in the burst goes
// at once (the writer starts while the rest is read) and the later ones wait
// until the publisher calls flush() at the end of its burst: at most two
// wakes per writer per burst.
//
// The publisher owns the hold and lends it to each publish
// (router::Broker::publish()); a flow hands it to a delivery only while that
// delivery runs on the publisher's thread inside the publish
// (DeliveryContext::wakeHold()), never to one a stage's worker runs later.
//
// Thread-safety: none; a hold is used on its publisher's thread only (by the
// deliveries of its publishes, and flush()). Ownership: shares each Target it
// holds until flush().

#include <memory>
#include <vector>

namespace cepbus::flows {

class WakeHold {
 public:
  // A writer whose wakes a hold may put off (its work queue).
  class Target {
   public:
    // Posts the wake the hold put off.
    virtual void wakeHeld() = 0;

   protected:
    ~Target() = default;
  };

  WakeHold() = default;
  WakeHold(const WakeHold&) = delete;
  WakeHold& operator=(const WakeHold&) = delete;

  // Whether `target`'s wake waits for flush(): false for its first wake in
  // this burst (the caller wakes it now), true for the later ones (flush()
  // calls target->wakeHeld() once for them).
  bool holds(const std::shared_ptr<Target>& target);
  // Wakes put off, waiting for flush().
  bool holding() const { return !held_.empty(); }
  // Ends the burst: wakes what it held, and the next wake of each target goes
  // at once again. Must run, or what was held waits forever: at the latest
  // when the publisher goes away.
  void flush();

 private:
  std::vector<std::shared_ptr<Target>> woken_;  // woken at once in this burst
  std::vector<std::shared_ptr<Target>> held_;
};

}  // namespace cepbus::flows
