#include "stages/stage_types.h"

namespace cepbus::stages {

const char* admissionName(Admission admission) {
  switch (admission) {
    case Admission::kAccepted:
      return "accepted";
    case Admission::kDegraded:
      return "degraded";
    case Admission::kRejected:
      return "rejected";
  }
  return "unknown";
}

const char* pressureName(Pressure pressure) {
  switch (pressure) {
    case Pressure::kNormal:
      return "normal";
    case Pressure::kDegraded:
      return "degraded";
    case Pressure::kSaturated:
      return "saturated";
  }
  return "unknown";
}

}  // namespace cepbus::stages
