#pragma once

// RequestRouter: the AMQP listener's request/response bookkeeping
// (services/amqp/listener/amqp_listener.h), both ways.
//
// - Requests from AMQP clients (a message with reply-to): how long each
//   waits, which correlation-id its answer carries, and the answer message
//   (a reply, or a fault message) with the subscribing link it goes to —
//   the link that took the reply-to address: a receiver with a dynamic
//   source (the bus names it "$cepbus.reply.<n>") or, first come, one on a
//   plain address.
// - Requests to AMQP providers: an in-out exchange going out to a provider
//   is marked (reply-to kReplyAddress, a ulong correlation-id) and stays
//   open until the provider answers on kReplyAddress, or until there are
//   too many open and it is the oldest (long timed out by the broker).
//
// The broker calls, the admission of requests and the settlement of
// deliveries stay with the listener: this part maps messages and keeps
// tables, so it is tested with in-memory Proton messages alone.
//
// Thread-safety: not thread-safe; the listener guards it with a lock of its
// own, taken for requests and answers (never for a plain publish).
// Ownership: keeps a copy of each open provider request (its
// listener is the requester's); holds no link, only link numbers.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <proton/error_condition.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <string>

#include "bus/core/event.h"
#include "bus/core/status.h"
#include "flows/exchange.h"
#include "services/amqp/listener/listener_stats.h"

namespace cepbus::services::amqp {

// Where the bus tells an AMQP provider to send its answers (the reply-to of
// the in-out requests it receives); a sending link to it carries replies.
inline constexpr char kReplyAddress[] = "$cepbus.replies";

// An answer on its way to a requester.
struct RoutedAnswer {
  uint64_t link = 0;  // the subscribing link that has its reply-to address
  proton::message message;
};

class RequestRouter {
 public:
  // Beyond this many open provider requests the oldest are forgotten.
  static constexpr size_t kMaxOpenRequests = 10000;

  explicit RequestRouter(std::shared_ptr<ListenerCounters> counters,
                         size_t max_open_requests = kMaxOpenRequests);

  // ---- requests from AMQP clients ----
  // How long the request waits for its answer: its ttl, else `fallback`.
  static std::chrono::nanoseconds timeoutOf(const proton::message& request,
                                            std::chrono::milliseconds fallback);
  // What its answer carries as correlation-id: its correlation-id, else its
  // message-id.
  static proton::message_id correlationOf(const proton::message& request);
  // The answer to a request — `reply` for kReply, else a fault message
  // naming `kind` with `status`'s message — addressed to `reply_to` with
  // `correlation`, and the link that takes it. Counted as an answer or a
  // fault; nullopt (counted unroutable) when no link has `reply_to`.
  std::optional<RoutedAnswer> answer(const std::string& reply_to,
                                     const proton::message_id& correlation, flows::OutcomeKind kind,
                                     const Status& status, const EventPtr& reply);

  // ---- reply addresses ----
  // The address the bus names for subscribing link `link` attached with a
  // dynamic source; it is that link's (assignReplyAddress()).
  static std::string dynamicAddress(uint64_t link);
  // Answers to `address` go to `link`.
  void assignReplyAddress(const std::string& address, uint64_t link);
  // Answers to `address` go to `link` unless another link already has it.
  void offerReplyAddress(const std::string& address, uint64_t link);
  // `link` went away: if it had `address`, answers to it are unroutable.
  void releaseReplyAddress(const std::string& address, uint64_t link);

  // ---- requests to AMQP providers ----
  // `message` carries the in-out `request` to a provider: it gets reply-to
  // kReplyAddress and the request's correlation-id, and the request stays
  // open for the answer.
  void sendingToProvider(const flows::Exchange& request, proton::message& message);
  // A provider's answer on kReplyAddress completes the open request with
  // its correlation-id: a "fault" application property (with
  // "fault-description") fails it, any other message is the reply event.
  // nullopt when it did (accept the delivery); else why the delivery is
  // rejected: no ulong correlation-id, no such open request (already
  // answered or timed out), or a message that cannot be mapped (the request
  // then stays open).
  std::optional<proton::error_condition> providerReply(const proton::message& message);
  size_t openRequests() const { return open_requests_.size(); }

 private:
  const std::shared_ptr<ListenerCounters> counters_;
  const size_t max_open_requests_;
  std::map<std::string, uint64_t> reply_links_;        // answer address -> subscribing link
  std::map<uint64_t, flows::Exchange> open_requests_;  // sent to providers, by correlation id
};

}  // namespace cepbus::services::amqp
