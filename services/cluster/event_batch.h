#pragma once

// Batch messages: several events of one partition in one AMQP message.
//
// On RabbitMQ's quorum queues the broker's work is per message, and it is
// the largest cost of the cluster's whole path (docs/cluster.md, "Figures"),
// so a publisher may pack consecutive events of a partition into one message
// with subject kEventBatchSubject and a body of JSON lines in the full
// format (bus/core/event_json.h), which keeps every event's id for the
// nodes' duplicate detection. A batch is taken or refused whole.
//
// Thread-safety: stateless functions.

#include <proton/message.hpp>
#include <span>
#include <vector>

#include "bus/core/event.h"
#include "services/protocols/amqp/message_mapping.h"

namespace cepbus::services::cluster {

// The subject of a batch message.
inline constexpr char kEventBatchSubject[] = "cepbus.events";

// Makes `message` (cleared first) the batch of `events`, in order.
void messageFromEventBatch(std::span<const EventPtr> events, proton::message& message);

// The events of a batch message, or the AMQP condition and description
// that say why it is refused (a body that is not a string: decode-error; a
// bad line, named by its number: invalid-field; no event at all).
struct MappedBatch {
  std::vector<EventPtr> events;  // empty when refused
  std::string condition;
  std::string description;
};
MappedBatch eventsFromBatchMessage(const proton::message& message);

}  // namespace cepbus::services::cluster
