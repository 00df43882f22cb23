// makeAmqpListener(): the listener a descriptor's <amqp> element declares,
// its settings over the listener's defaults (AmqpListenerOptions).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "services/amqp/listener/amqp_listener.h"

namespace cepbus::services::amqp {

std::unique_ptr<Service> makeAmqpListener(const AmqpListenerConfig& listener,
                                          ServiceContext& context, std::string journal) {
  AmqpListenerOptions options;
  options.name = "amqp-listener";
  options.journal = std::move(journal);
  options.credit_window = listener.credit_window.value_or(options.credit_window);
  options.subscriber_buffer =
      static_cast<size_t>(listener.subscriber_buffer.value_or(options.subscriber_buffer));
  options.durable_buffer =
      static_cast<size_t>(listener.durable_buffer.value_or(options.durable_buffer));
  options.threads = listener.threads.value_or(options.threads);
  if (listener.request_timeout_ms) {
    options.request_timeout = std::chrono::milliseconds(*listener.request_timeout_ms);
  }
  if (listener.subscriber_stall_timeout_ms) {
    options.subscriber_stall_timeout =
        std::chrono::milliseconds(*listener.subscriber_stall_timeout_ms);
  }
  if (listener.subscriber_return_timeout_ms) {
    options.subscriber_return_timeout =
        std::chrono::milliseconds(*listener.subscriber_return_timeout_ms);
  }
  if (listener.handshake_timeout_ms) {
    options.handshake_timeout = std::chrono::milliseconds(*listener.handshake_timeout_ms);
  }
  AmqpLimits& limits = options.limits;
  limits.max_connections = listener.max_connections.value_or(limits.max_connections);
  limits.max_sessions = listener.max_sessions.value_or(limits.max_sessions);
  limits.max_links = listener.max_links.value_or(limits.max_links);
  limits.max_durable = listener.max_durable.value_or(limits.max_durable);
  limits.max_pending_requests = listener.max_pending_requests.value_or(limits.max_pending_requests);
  limits.max_message_size = listener.max_message_size.value_or(limits.max_message_size);
  limits.max_user_sessions = listener.max_user_sessions.value_or(limits.max_user_sessions);
  limits.max_user_links = listener.max_user_links.value_or(limits.max_user_links);
  limits.max_names = static_cast<uint32_t>(listener.max_names.value_or(limits.max_names));
  limits.max_user_names =
      static_cast<uint32_t>(listener.max_user_names.value_or(limits.max_user_names));
  limits.max_unsettled = listener.max_unsettled.value_or(limits.max_unsettled);
  limits.max_bytes_in_flight = listener.max_bytes_in_flight.value_or(limits.max_bytes_in_flight);
  limits.max_user_unsettled = listener.max_user_unsettled.value_or(limits.max_user_unsettled);
  limits.max_user_bytes_in_flight =
      listener.max_user_bytes_in_flight.value_or(limits.max_user_bytes_in_flight);

  return std::make_unique<AmqpListenerService>(listener, std::move(options), context);
}

}  // namespace cepbus::services::amqp
