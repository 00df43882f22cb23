#pragma once

// The normalized message exchange (JBI NMR, P1): what the broker hands a flow
// and a flow hands a delivery target. It names the event, the address it was
// published to, the message exchange pattern, the QoS the sender asked for,
// the sender, a correlation id, and — only when the sender wants to hear back —
// a listener that receives outcomes.
//
// What each pattern reports to the listener (never more than listed):
//
//   pattern          | outcomes
//   -----------------+----------------------------------------------------------
//   kInOnly          | kRejected, kDegraded, kAccepted (reliable: journaled, or
//                    |   acknowledged by the target before the journal commit)
//   kRobustInOnly    | the above, plus kDelivered / kFault per target
//   kInOut           | kReply, kFault, kRejected, kTimeout (kTimeout: the broker)
//
// A fire-and-forget exchange (in-only, no listener) costs one EventPtr and a few
// scalars: nothing is allocated for it on the hot path.

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "bus/core/event.h"
#include "bus/core/status.h"
#include "bus/core/symbol.h"
#include "bus/core/wire_names.h"

namespace cepbus::flows {

// JBI message exchange patterns.
enum class Pattern : uint8_t {
  kInOnly,        // fire and forget
  kRobustInOnly,  // one way, but a target's fault goes back to the sender
  kInOut,         // request/response, correlated by correlation id, with a timeout
};

enum class Qos : uint8_t {
  kBestEffort,  // in memory; may be lost on a crash or shed under load
  kReliable,    // journaled before it is acknowledged, redelivered after a restart
};

enum class OutcomeKind : uint8_t {
  kAccepted,   // reliable: journaled (or `target` acknowledged it first); the bus owns delivery
  kDegraded,   // queued for `target`, but reliable delivery degraded to best effort under load
  kRejected,   // admission refused it for `target`; it will not be delivered there
  kDelivered,  // robust in-only: `target` took it
  kFault,      // `target` failed it (robust in-only, in-out); `status` says why
  kReply,      // in-out: `reply` is the provider's answer
  kTimeout,    // in-out: no reply within the deadline
};

const char* patternName(Pattern pattern);
const char* qosName(Qos qos);
const char* outcomeName(OutcomeKind kind);

// One thing that happened to an exchange. `target` names the endpoint concerned
// (empty when none) and is valid only during the listener call.
struct Outcome {
  OutcomeKind kind = OutcomeKind::kDelivered;
  std::string_view target;
  Status status;   // why, for kRejected / kDegraded / kFault / kTimeout
  EventPtr reply;  // kReply only
};

struct Exchange;

// Receives the outcomes of the exchanges that carry it.
// Thread-safety: called from whichever thread produced the outcome (the
// publisher, a stage worker, the journal thread, the broker's timer), possibly
// concurrently; implementations must be thread-safe, fast, and must not throw
// (a throw is caught and counted by the flow, and the outcome is lost to it).
class ExchangeListener {
 public:
  virtual ~ExchangeListener() = default;
  virtual void onOutcome(const Exchange& exchange, const Outcome& outcome) = 0;
};

// Shared and never reassigned once the exchange is built, so copies of an
// exchange (queued in a stage, parked in a journal) all report to one listener.
using ExchangeListenerPtr = std::shared_ptr<ExchangeListener>;

// A listener that calls `fn`; `fn` must follow the ExchangeListener contract.
ExchangeListenerPtr makeListener(std::function<void(const Exchange&, const Outcome&)> fn);

// A number no other source of events in this process has (never 0): what a
// publishing link puts in Exchange::source. Thread-safe.
uint64_t newSource();

// A value type; copy it to keep it past a call. Thread-safety: immutable
// after construction by convention (fields are public for cheap aggregate
// construction); the event and the listener are shared read-only.
struct Exchange {
  EventPtr event;
  // The destination topic, e.g. "stocks.ibm"; a client's address that no
  // query or descriptor knows is a held name, which every copy holds.
  SharedName address;
  Pattern pattern = Pattern::kInOnly;
  Qos qos = Qos::kBestEffort;
  Symbol sender;  // the sending endpoint; empty for anonymous senders
  uint64_t correlation_id = 0;
  ExchangeListenerPtr listener;  // null: nobody to tell
  // The publishing link it came by (newSource()); 0 when no link is known.
  // A query's event time is the slowest of its sources (services/cep).
  uint64_t source = 0;
  // Its sender cannot tell whether it reached its targets before (a
  // checkpointed CEP query publishing again the composites a crash may have
  // cut short): a journaling flow delivers it marked as a redelivery
  // (DeferredAck::previousDeliveries() of at least 1).
  bool redelivery = false;
  // A reliable exchange whose sender cannot take a loss: under admission
  // pressure a journaling flow refuses it (kRejected, and the sender holds
  // it and sends again) rather than degrade it to best effort, which a full
  // subscriber would then drop. A CEP query's output_qos=reliable
  // composites (services/cep/output_backlog.h) are sent so.
  bool degrade_under_load = true;

  // Hands `outcome` to the listener. False when there is no listener or it
  // threw (the throw is swallowed here so that no exception crosses a stage).
  bool report(const Outcome& outcome) const noexcept;
  // An in-out provider's answer: reports kReply carrying `answer`.
  bool reply(EventPtr answer) const noexcept;
};

}  // namespace cepbus::flows
