#include "flows/abstract_flow.h"

#include <exception>
#include <utility>

namespace cepbus::flows {

AbstractFlow::AbstractFlow(std::string name, const stats::Store& stats)
    : name_(std::move(name)),
      scope_(stats.scope(kFlowSchema, {{"flow", name_}})),
      sent_(scope_->counter(flow_stats::kSent)),
      delivered_(scope_->counter(flow_stats::kDelivered)),
      failed_(scope_->counter(flow_stats::kFailed)),
      rejected_(scope_->counter(flow_stats::kRejected)),
      degraded_(scope_->counter(flow_stats::kDegraded)),
      invalid_(scope_->counter(flow_stats::kInvalid)),
      duplicates_(scope_->counter(flow_stats::kDuplicates)),
      listener_errors_(scope_->counter(flow_stats::kListenerErrors)) {}

Status AbstractFlow::start() {
  std::lock_guard lock(lifecycle_mu_);
  if (running()) return Status::ok();
  Status status = doStart();
  if (status.isOk()) running_.store(true, std::memory_order_release);
  return status;
}

void AbstractFlow::stop() {
  std::lock_guard lock(lifecycle_mu_);
  if (!running_.exchange(false, std::memory_order_acq_rel)) return;
  doStop();
}

Status AbstractFlow::attach(DeliveryTarget&) { return Status::ok(); }

void AbstractFlow::detach(DeliveryTarget&) {}

size_t AbstractFlow::queueLength(const DeliveryTarget&) const { return 0; }

SendOutcome AbstractFlow::send(const Exchange& exchange, std::span<DeliveryTarget* const> targets,
                               WakeHold* wake_hold) {
  SendOutcome out;
  out.targets = static_cast<uint32_t>(targets.size());
  sent_.inc();

  Status invalid;
  if (exchange.event == nullptr) {
    invalid = Status::invalidArgument("flow " + name_ + ": exchange without an event");
  } else if (exchange.pattern == Pattern::kInOut && exchange.listener == nullptr) {
    invalid = Status::invalidArgument("flow " + name_ + ": in-out exchange without a listener");
  }
  if (!invalid.isOk()) {
    add(invalid_, 1);
    out.rejected = out.targets;
    Outcome outcome{OutcomeKind::kRejected, {}, invalid, nullptr};
    notify(exchange, outcome);
    out.status = std::move(invalid);
    return out;
  }

  if (!running()) {
    for (DeliveryTarget* target : targets) {
      reject(exchange, *target, Status::unavailable("flow " + name_ + " is not running"), out);
    }
  } else {
    try {
      doSend(exchange, targets, wake_hold, out);
    } catch (const std::exception& e) {
      // Whatever doSend() had not recorded yet is lost to its targets: count it.
      out.failed += out.targets - out.accounted();
      if (out.status.isOk()) out.status = Status::internal("flow " + name_ + ": " + e.what());
    } catch (...) {
      out.failed += out.targets - out.accounted();
      if (out.status.isOk()) out.status = Status::internal("flow " + name_ + ": unknown exception");
    }
  }

  add(delivered_, out.delivered);
  add(failed_, out.failed);
  add(rejected_, out.rejected);
  add(degraded_, out.degraded);
  add(duplicates_, out.duplicates);
  return out;
}

Status AbstractFlow::deliverTo(DeliveryTarget& target, const Exchange& exchange,
                               DeliveryContext& context) noexcept {
  Status status = invoke(target, exchange, context);
  reportDelivery(exchange, target, status);
  return status;
}

Status AbstractFlow::invoke(DeliveryTarget& target, const Exchange& exchange,
                            DeliveryContext& context) noexcept {
  try {
    return target.deliver(exchange, context);
  } catch (const std::exception& e) {
    return Status::internal("target " + target.name() + " threw: " + e.what());
  } catch (...) {
    return Status::internal("target " + target.name() + " threw a non-exception");
  }
}

void AbstractFlow::reportDelivery(const Exchange& exchange, const DeliveryTarget& target,
                                  const Status& status) {
  if (exchange.listener == nullptr) return;
  if (status.isOk()) {
    if (exchange.pattern == Pattern::kRobustInOnly) {
      notify(exchange, Outcome{OutcomeKind::kDelivered, target.name(), {}, nullptr});
    }
  } else if (exchange.pattern != Pattern::kInOnly) {
    notify(exchange, Outcome{OutcomeKind::kFault, target.name(), status, nullptr});
  }
}

void AbstractFlow::countAsync(const Status& status) {
  add(status.isOk() ? delivered_ : failed_, 1);
}

void AbstractFlow::reject(const Exchange& exchange, const DeliveryTarget& target, Status why,
                          SendOutcome& out) {
  ++out.rejected;
  if (exchange.listener != nullptr) {
    notify(exchange, Outcome{OutcomeKind::kRejected, target.name(), why, nullptr});
  }
  if (out.status.isOk()) out.status = std::move(why);
}

void AbstractFlow::degrade(const Exchange& exchange, const DeliveryTarget& target,
                           SendOutcome& out) {
  ++out.degraded;
  if (exchange.listener != nullptr) {
    notify(exchange,
           Outcome{OutcomeKind::kDegraded, target.name(),
                   Status::rejected("reliable delivery degraded to best effort"), nullptr});
  }
}

void AbstractFlow::notify(const Exchange& exchange, const Outcome& outcome) {
  if (exchange.listener != nullptr && !exchange.report(outcome)) {
    add(listener_errors_, 1);
  }
}

FlowMetricsSnapshot AbstractFlow::metrics() const {
  FlowMetricsSnapshot s;
  s.name = name_;
  s.sent = sent_.value();
  s.delivered = delivered_.value();
  s.failed = failed_.value();
  s.rejected = rejected_.value();
  s.degraded = degraded_.value();
  s.invalid = invalid_.value();
  s.duplicates = duplicates_.value();
  s.listener_errors = listener_errors_.value();
  return s;
}

}  // namespace cepbus::flows
