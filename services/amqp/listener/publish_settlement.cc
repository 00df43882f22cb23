#include "services/amqp/listener/publish_settlement.h"

#include <utility>

namespace cepbus::services::amqp {

PublishVerdict PublishVerdict::of(const flows::SendOutcome& out, bool journaled) {
  PublishVerdict verdict;
  verdict.refused = out.rejected > 0 || out.failed > 0 || (!out.status && out.targets == 0);
  // A degraded target does not journal it; a duplicate is already
  // journaled, and its commit is reported all the same.
  verdict.commits = journaled ? out.queued - out.degraded + out.duplicates : 0;
  verdict.pause = verdict.refused || out.degraded > 0;
  return verdict;
}

void PublishSettlement::onOutcome(const flows::Exchange&, const flows::Outcome& outcome) {
  Settle settle;
  bool accepted = false;
  {
    MutexLock lock(mu_);
    if (outcome.kind == flows::OutcomeKind::kAccepted) ++accepted_;
    if (outcome.kind == flows::OutcomeKind::kRejected) ++rejected_;
    if (!published_ && (outcome.kind == flows::OutcomeKind::kRejected ||
                        outcome.kind == flows::OutcomeKind::kDegraded)) {
      targets_.emplace_back(outcome.target);
    }
    settle = due(accepted);
  }
  if (settle) settle(accepted);
}

std::vector<std::string> PublishSettlement::published() {
  MutexLock lock(mu_);
  published_ = true;
  sync_rejected_ = rejected_;
  return std::move(targets_);
}

void PublishSettlement::awaitCommits(uint32_t commits, Settle settle) {
  bool accepted = false;
  {
    MutexLock lock(mu_);
    expected_ = commits;
    settle_ = std::move(settle);
    settle = due(accepted);
  }
  if (settle) settle(accepted);
}

PublishSettlement::Settle PublishSettlement::due(bool& accepted) {
  if (!settle_) return nullptr;
  const uint32_t late_rejected = rejected_ - sync_rejected_;
  if (accepted_ + late_rejected < expected_) return nullptr;
  accepted = late_rejected == 0;
  return std::exchange(settle_, nullptr);
}

}  // namespace cepbus::services::amqp
