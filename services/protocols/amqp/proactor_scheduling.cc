#include "services/protocols/amqp/proactor_scheduling.h"

#include <cstdlib>

namespace cepbus::services::amqp {

void scheduleReadyConnectionsOnAnyFreeThread() {
  // Proton reads only whether the variable is set; 0 keeps what is there.
  ::setenv("PNI_EPOLL_NOWARM", "1", 0);
}

}  // namespace cepbus::services::amqp
