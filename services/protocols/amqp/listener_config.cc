#include "services/protocols/amqp/listener_config.h"

#include <algorithm>

namespace cepbus::services::amqp {

const AmqpUser* AmqpListenerConfig::user(std::string_view name) const {
  auto it = std::find_if(users.begin(), users.end(),
                         [name](const AmqpUser& u) { return u.name == name; });
  return it == users.end() ? nullptr : &*it;
}

}  // namespace cepbus::services::amqp
