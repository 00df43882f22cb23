#include "services/protocols/amqp/listener_config.h"

#include <algorithm>
#include <exception>

#include "bus/host/descriptor/file_checks.h"

namespace cepbus::services::amqp {

const AmqpUser* AmqpListenerConfig::user(std::string_view name) const {
  auto it = std::find_if(users.begin(), users.end(),
                         [name](const AmqpUser& u) { return u.name == name; });
  return it == users.end() ? nullptr : &*it;
}

Result<proton::ssl_server_options> loadServerTls(const AmqpTls& tls) {
  for (const auto& file : {tls.cert, tls.key}) {
    if (auto why = descriptor::unreadableFile(file)) {
      return Status::invalidArgument(tls.where.toString() + ": <tls>: " + *why);
    }
  }
  try {
    return proton::ssl_server_options(proton::ssl_certificate(tls.cert.string(), tls.key.string()));
  } catch (const std::exception& e) {
    return Status::invalidArgument(tls.where.toString() + ": <tls>: certificate " +
                                   tls.cert.string() + " / key " + tls.key.string() +
                                   " not usable: " + e.what());
  }
}

}  // namespace cepbus::services::amqp
