#pragma once

// PublisherHold: why one publishing link of the AMQP listener gets no more
// credit now, and the counters that show it ("credit follows
// backpressure", services/amqp/listener/amqp_listener.h). Two holds, independent of
// each other:
//
// - paused: a stage serving one of the link's targets refused or degraded
//   a publish. It ends when a recheck finds none of the congested targets'
//   stages saturated any more.
// - waiting: a subscriber buffer the link feeds had no room for its credit
//   (publisher_credit.h). It ends when every buffer it feeds is back at its
//   low-water mark.
//
// A link held for either reason counts once in paused_links; each hold that
// starts counts a credit pause (a wait also a subscriber wait) and one
// credit_withheld for the link. It also keeps the link's outstanding credit
// as counted into publish_credit, and whether a recheck is already on its
// way, so that it is scheduled once (a resume from another connection is
// PublisherWake's, services/amqp/listener/publisher_wake.h). When to recheck, how
// much credit to grant and the Proton calls are the listener's.
//
// Thread-safety: not thread-safe; one per publishing link, used by that
// link's connection only (the counters it bumps are atomics read
// anywhere). Ownership: shares the listener's and the link's counters.

#include <memory>
#include <string>
#include <vector>

#include "services/amqp/listener/listener_stats.h"

namespace cepbus::services::amqp {

class PublisherHold {
 public:
  PublisherHold(std::shared_ptr<ListenerCounters> counters, std::shared_ptr<LinkCounters> stats);

  bool held() const { return paused_ || waiting_; }
  bool paused() const { return paused_; }
  bool waiting() const { return waiting_; }

  // Stages serving `congested` targets refused or degraded a publish: they
  // join the targets a recheck looks at.
  void pause(std::vector<std::string> congested);
  // The targets whose stages paused the link (none named: a straight-through
  // target failed).
  const std::vector<std::string>& congested() const { return congested_; }
  // The stages are no longer saturated.
  void unpause();

  // A subscriber buffer it feeds has no room.
  void wait();
  // Every buffer it feeds drained to its low-water mark.
  void stopWaiting();

  // The link now holds `credit` (0 once it is gone).
  void countCredit(int credit);
  // As last counted.
  int credit() const { return credit_; }
  // The link went away: it no longer counts as held nor holds credit.
  void release();

  // True when no recheck was on its way: the caller schedules one.
  bool scheduleRecheck();
  void recheckRan() { recheck_scheduled_ = false; }

 private:
  void bumpPausedLinks(bool up);

  const std::shared_ptr<ListenerCounters> counters_;
  const std::shared_ptr<LinkCounters> stats_;
  bool paused_ = false;
  bool waiting_ = false;
  std::vector<std::string> congested_;
  int credit_ = 0;  // as last counted into publish_credit
  bool recheck_scheduled_ = false;
};

}  // namespace cepbus::services::amqp
