#include "services/amqp/listener/request_router.h"

#include <exception>
#include <proton/scalar.hpp>
#include <proton/value.hpp>
#include <utility>

#include "services/protocols/amqp/message_mapping.h"

namespace cepbus::services::amqp {
namespace {

// Replies to a requester's dynamic receiver come from addresses like this.
constexpr char kDynamicPrefix[] = "$cepbus.reply.";

}  // namespace

RequestRouter::RequestRouter(std::shared_ptr<ListenerCounters> counters, size_t max_open_requests)
    : counters_(std::move(counters)), max_open_requests_(max_open_requests) {}

std::chrono::nanoseconds RequestRouter::timeoutOf(const proton::message& request,
                                                  std::chrono::milliseconds fallback) {
  const int64_t ttl = request.ttl().milliseconds();
  return ttl > 0 ? std::chrono::nanoseconds(std::chrono::milliseconds(ttl))
                 : std::chrono::nanoseconds(fallback);
}

proton::message_id RequestRouter::correlationOf(const proton::message& request) {
  return request.correlation_id().empty() ? request.id() : request.correlation_id();
}

std::optional<RoutedAnswer> RequestRouter::answer(const std::string& reply_to,
                                                  const proton::message_id& correlation,
                                                  flows::OutcomeKind kind, const Status& status,
                                                  const EventPtr& reply) {
  RoutedAnswer out;
  if (kind == flows::OutcomeKind::kReply && reply != nullptr) {
    out.message = messageFromEvent(*reply);
    counters_->answers.inc();
  } else {
    out.message = faultMessage(flows::outcomeName(kind), status.message());
    counters_->faults.inc();
  }
  out.message.to(reply_to);
  out.message.correlation_id(correlation);
  auto link = reply_links_.find(reply_to);
  if (link == reply_links_.end()) {
    counters_->answers_unroutable.inc();
    return std::nullopt;
  }
  out.link = link->second;
  return out;
}

std::string RequestRouter::dynamicAddress(uint64_t link) {
  return kDynamicPrefix + std::to_string(link);
}

void RequestRouter::assignReplyAddress(const std::string& address, uint64_t link) {
  reply_links_[address] = link;
}

void RequestRouter::offerReplyAddress(const std::string& address, uint64_t link) {
  reply_links_.try_emplace(address, link);
}

void RequestRouter::releaseReplyAddress(const std::string& address, uint64_t link) {
  auto it = reply_links_.find(address);
  if (it != reply_links_.end() && it->second == link) reply_links_.erase(it);
}

void RequestRouter::sendingToProvider(const flows::Exchange& request, proton::message& message) {
  message.reply_to(kReplyAddress);
  message.correlation_id(proton::message_id(request.correlation_id));
  open_requests_[request.correlation_id] = request;
  while (open_requests_.size() > max_open_requests_) open_requests_.erase(open_requests_.begin());
  counters_->provider_requests.inc();
}

std::optional<proton::error_condition> RequestRouter::providerReply(
    const proton::message& message) {
  auto rejected = [this](const std::string& condition, const std::string& description) {
    counters_->rejected.inc();
    return proton::error_condition(condition, description);
  };
  const proton::message_id correlation = message.correlation_id();
  if (correlation.type() != proton::ULONG) {
    return rejected(kInvalidField, "a reply to " + std::string(kReplyAddress) +
                                       " needs the ulong correlation-id of the request");
  }
  const uint64_t key = proton::get<uint64_t>(correlation);
  auto open = open_requests_.find(key);
  if (open == open_requests_.end()) {
    counters_->late_replies.inc();
    return rejected(kNotFound, "no open request with correlation-id " + std::to_string(key) +
                                   " (already answered or timed out)");
  }
  std::string fault;
  std::string description;
  try {
    const auto& props = message.properties();
    if (props.exists(kFaultProperty)) {
      fault = proton::coerce<std::string>(props.get(kFaultProperty));
      if (props.exists(kFaultDescriptionProperty)) {
        description = proton::coerce<std::string>(props.get(kFaultDescriptionProperty));
      }
    }
  } catch (const std::exception& e) {
    return rejected(kInvalidField, std::string("fault properties: ") + e.what());
  }
  if (!fault.empty()) {
    open->second.report(flows::Outcome{flows::OutcomeKind::kFault, "",
                                       Status::internal(fault + ": " + description), nullptr});
  } else {
    MappedEvent mapped = eventFromMessage(message);
    if (!mapped.event) {
      counters_->malformed.inc();
      return rejected(mapped.condition, mapped.description);
    }
    open->second.reply(std::move(mapped.event));
  }
  open_requests_.erase(open);
  counters_->provider_replies.inc();
  return std::nullopt;
}

}  // namespace cepbus::services::amqp
