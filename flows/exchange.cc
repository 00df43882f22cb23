#include "flows/exchange.h"

#include <atomic>
#include <utility>

namespace cepbus::flows {
namespace {

class FunctionListener final : public ExchangeListener {
 public:
  explicit FunctionListener(std::function<void(const Exchange&, const Outcome&)> fn)
      : fn_(std::move(fn)) {}
  void onOutcome(const Exchange& exchange, const Outcome& outcome) override {
    fn_(exchange, outcome);
  }

 private:
  const std::function<void(const Exchange&, const Outcome&)> fn_;
};

}  // namespace

const char* patternName(Pattern pattern) {
  switch (pattern) {
    case Pattern::kInOnly:
      return "in-only";
    case Pattern::kRobustInOnly:
      return "robust-in-only";
    case Pattern::kInOut:
      return "in-out";
  }
  return "unknown";
}

const char* qosName(Qos qos) {
  switch (qos) {
    case Qos::kBestEffort:
      return "best-effort";
    case Qos::kReliable:
      return "reliable";
  }
  return "unknown";
}

const char* outcomeName(OutcomeKind kind) {
  switch (kind) {
    case OutcomeKind::kAccepted:
      return "accepted";
    case OutcomeKind::kDegraded:
      return "degraded";
    case OutcomeKind::kRejected:
      return "rejected";
    case OutcomeKind::kDelivered:
      return "delivered";
    case OutcomeKind::kFault:
      return "fault";
    case OutcomeKind::kReply:
      return "reply";
    case OutcomeKind::kTimeout:
      return "timeout";
  }
  return "unknown";
}

uint64_t newSource() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

ExchangeListenerPtr makeListener(std::function<void(const Exchange&, const Outcome&)> fn) {
  return std::make_shared<FunctionListener>(std::move(fn));
}

bool Exchange::report(const Outcome& outcome) const noexcept {
  if (!listener) return false;
  try {
    listener->onOutcome(*this, outcome);
    return true;
  } catch (...) {
    return false;
  }
}

bool Exchange::reply(EventPtr answer) const noexcept {
  Outcome outcome;
  outcome.kind = OutcomeKind::kReply;
  outcome.reply = std::move(answer);
  return report(outcome);
}

}  // namespace cepbus::flows
