#pragma once

// The vocabulary shared by every part of a stage: the unit of work that moves
// through a stage queue, what admission answers, and the pressure signal a
// stage shows its upstream (P1 SEDA: controllers expose queue state so that
// upstream stages and flows can manage load).

#include <chrono>
#include <cstdint>

#include "bus/core/event.h"

namespace cepbus::stages {

// One unit of work in a stage queue: an event plus what the flow needs to finish it.
struct StageItem {
  EventPtr event;
  bool reliable = false;  // the sender asked for guaranteed delivery
  // Set by the stage when it hands the item to the handler on the offering
  // thread, inside offer() (StageConfig::run_inline_when_idle): what the
  // offering caller's frame holds is still alive and on this thread.
  bool inline_run = false;
  uint64_t token = 0;  // caller-defined (e.g. a journal sequence number to acknowledge)
  std::chrono::steady_clock::time_point enqueued_at{};  // set by the stage on admission
};

enum class Admission : uint8_t {
  kAccepted,  // queued with the QoS asked for
  kDegraded,  // queued, but reliable delivery degraded to best effort (item.reliable cleared)
  kRejected,  // not queued: over the hard limit or stage stopped; the caller must report it
};

// How loaded a stage is, as seen from upstream. kDegraded: admission is
// degrading reliable items (or a downstream is saturated); kSaturated: the
// queue is near its hard limit and upstream should hold its intake.
enum class Pressure : uint8_t { kNormal, kDegraded, kSaturated };

const char* admissionName(Admission admission);
const char* pressureName(Pressure pressure);

}  // namespace cepbus::stages
