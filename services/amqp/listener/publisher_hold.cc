#include "services/amqp/listener/publisher_hold.h"

#include <utility>

namespace cepbus::services::amqp {

PublisherHold::PublisherHold(std::shared_ptr<ListenerCounters> counters,
                             std::shared_ptr<LinkCounters> stats)
    : counters_(std::move(counters)), stats_(std::move(stats)) {}

void PublisherHold::pause(std::vector<std::string> congested) {
  if (!paused_) {
    paused_ = true;
    counters_->credit_pauses.inc();
    bump(stats_->credit_withheld);
    if (!waiting_) bumpPausedLinks(true);
  }
  for (auto& target : congested) congested_.push_back(std::move(target));
}

void PublisherHold::unpause() {
  if (!paused_) return;
  paused_ = false;
  congested_.clear();
  if (!waiting_) bumpPausedLinks(false);
}

void PublisherHold::wait() {
  if (waiting_) return;
  waiting_ = true;
  counters_->credit_pauses.inc();
  counters_->subscriber_waits.inc();
  bump(stats_->credit_withheld);
  if (!paused_) bumpPausedLinks(true);
}

void PublisherHold::stopWaiting() {
  if (!waiting_) return;
  waiting_ = false;
  if (!paused_) bumpPausedLinks(false);
}

void PublisherHold::countCredit(int credit) {
  counters_->publish_credit.add(credit - credit_);
  credit_ = credit;
}

void PublisherHold::release() {
  if (held()) bumpPausedLinks(false);
  paused_ = false;
  waiting_ = false;
  countCredit(0);
}

bool PublisherHold::scheduleRecheck() {
  if (recheck_scheduled_) return false;
  recheck_scheduled_ = true;
  return true;
}

void PublisherHold::bumpPausedLinks(bool up) {
  if (up) {
    counters_->paused_links.inc();
  } else {
    counters_->paused_links.dec();
  }
}

}  // namespace cepbus::services::amqp
