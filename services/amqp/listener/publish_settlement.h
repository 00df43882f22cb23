#pragma once

// How the AMQP listener settles what a client publishes
// (services/amqp/listener/amqp_listener.h): an unsettled message is accepted once
// every target took it (on a reliable route: once each target's journal
// commit is in), released when admission refused it or a target failed.
//
// - PublishVerdict reads Broker::publish()'s outcome: settle now (accept or
//   release), or wait for journal commits; and whether the link's credit
//   must pause for congested stages.
// - PublishSettlement hears the outcomes of one unsettled publish: during
//   Broker::publish (on the container thread) the targets that refused or
//   degraded it; on a reliable route then one kAccepted per target that
//   journaled it — from the journal thread when the commit is durable, or
//   from whichever thread acknowledged the delivery first (the reliable flow
//   dispatches while it commits), possibly before publish() returned — and
//   settles the message once all are in, or releases it when a commit
//   failed (a late kRejected).
//
// The Proton deliveries stay with the listener: these decide, it settles.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bus/base/mutex.h"
#include "flows/abstract_flow.h"
#include "flows/exchange.h"

namespace cepbus::services::amqp {

// Thread-safety: a value.
struct PublishVerdict {
  bool refused = false;  // release it: admission refused a target, or one failed
  // Journal commits to wait for before accepting (0: accept now, unless refused).
  uint32_t commits = 0;
  bool pause = false;  // a stage refused or degraded it: hold the link's credit back

  // `journaled`: the route journals reliable publishes (flows::ReliableFlow),
  // so an accept waits for their commits.
  static PublishVerdict of(const flows::SendOutcome& out, bool journaled);
};

// Thread-safety: every member may be called from any thread; onOutcome()
// concurrently with the others. Ownership: shared by the exchange (its
// listener) and the listener for the length of one publish.
class PublishSettlement final : public flows::ExchangeListener {
 public:
  // `settle(accepted)` runs once, on whichever thread completes the count.
  using Settle = std::function<void(bool accepted)>;

  void onOutcome(const flows::Exchange& exchange, const flows::Outcome& outcome) override;
  // After Broker::publish returned: the targets that refused or degraded it.
  // Rejections heard from now on are commits that failed.
  std::vector<std::string> published();
  // Settles once `commits` kAccepted outcomes (or late rejections) came in:
  // accepted unless a commit failed. Now, if they are all in already.
  void awaitCommits(uint32_t commits, Settle settle);

 private:
  // The settle callback once the count is complete (taken: it runs once).
  Settle due(bool& accepted) REQUIRES(mu_);

  Mutex mu_;
  bool published_ GUARDED_BY(mu_) = false;
  uint32_t accepted_ GUARDED_BY(mu_) = 0;
  uint32_t rejected_ GUARDED_BY(mu_) = 0;
  uint32_t sync_rejected_ GUARDED_BY(mu_) = 0;
  uint32_t expected_ GUARDED_BY(mu_) = 0;
  Settle settle_ GUARDED_BY(mu_);
  std::vector<std::string> targets_ GUARDED_BY(mu_);
};

}  // namespace cepbus::services::amqp
