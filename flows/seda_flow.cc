#include "flows/seda_flow.h"

#include <utility>

namespace cepbus::flows {

SedaFlow::SedaFlow(SedaFlowConfig config)
    : AbstractFlow(config.name, config.stats),
      stages_(config.name, statsScope(), std::move(config.stage),
              [this](DeliveryTarget& target, const Attachment&) {
                return [this, &target](stages::StageItem& item) { return handle(target, item); };
              }) {}

SedaFlow::~SedaFlow() { stop(); }

Status SedaFlow::attach(DeliveryTarget& target) {
  Result<Attachment> attached = stages_.attach(target);
  return attached ? Status::ok() : attached.status();
}

void SedaFlow::detach(DeliveryTarget& target) { stages_.detach(target); }

size_t SedaFlow::queueLength(const DeliveryTarget& target) const {
  return stages_.queueLength(target);
}

Status SedaFlow::doStart() {
  stages_.start();
  return Status::ok();
}

void SedaFlow::doStop() { stages_.stop(); }

void SedaFlow::doSend(const Exchange& exchange, std::span<DeliveryTarget* const> targets,
                      WakeHold* wake_hold, SendOutcome& out) {
  const bool reliable = exchange.qos == Qos::kReliable;
  for (DeliveryTarget* target : targets) {
    const uint64_t token = parked_.park(Parked{exchange, wake_hold});
    stages::Admission admission = stages::Admission::kRejected;
    const bool attached = stages_.with(*target, [&](stages::Stage& stage, const Attachment&) {
      admission = stage.offer(
          stages::StageItem{.event = exchange.event, .reliable = reliable, .token = token});
    });
    if (!attached) {
      parked_.take(token);
      reject(exchange, *target,
             Status::notFound("target " + target->name() + " is not attached to flow " + name()),
             out);
      continue;
    }
    switch (admission) {
      case stages::Admission::kAccepted:
        ++out.queued;
        break;
      case stages::Admission::kDegraded:
        ++out.queued;
        degrade(exchange, *target, out);
        break;
      case stages::Admission::kRejected:
        parked_.take(token);
        reject(exchange, *target,
               Status::rejected("stage " + name() + "/" + target->name() + " refused the event"),
               out);
        break;
    }
  }
}

Status SedaFlow::handle(DeliveryTarget& target, stages::StageItem& item) {
  const Parked parked = parked_.take(item.token);
  DeliveryContext context(item.inline_run ? parked.wake_hold : nullptr);
  Status status = deliverTo(target, parked.exchange, context);
  countAsync(status);
  return status;
}

}  // namespace cepbus::flows
