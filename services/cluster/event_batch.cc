#include "services/cluster/event_batch.h"

#include <proton/error.hpp>
#include <proton/value.hpp>
#include <string>
#include <string_view>

#include "bus/core/event_json.h"

namespace cepbus::services::cluster {

void messageFromEventBatch(std::span<const EventPtr> events, proton::message& message) {
  message.clear();
  message.subject(kEventBatchSubject);
  std::string lines;
  for (const EventPtr& e : events) {
    lines += encodeEvent(*e, EventFormat::kFull);
    lines += '\n';
  }
  message.body(lines);
}

MappedBatch eventsFromBatchMessage(const proton::message& message) {
  std::string body;
  try {
    body = proton::get<std::string>(message.body());
  } catch (const proton::error&) {
    return {{}, amqp::kDecodeError, "a batch message (subject cepbus.events) has a string body"};
  }
  MappedBatch batch;
  std::string_view rest = body;
  size_t line_no = 0;
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    ++line_no;
    if (line.empty()) continue;
    Result<EventPtr> event = decodeEvent(line);
    if (!event) {
      return {{},
              amqp::kInvalidField,
              "batch line " + std::to_string(line_no) + ": " + event.status().message()};
    }
    batch.events.push_back(std::move(event).value());
  }
  if (batch.events.empty()) return {{}, amqp::kInvalidField, "a batch message holds no event"};
  return batch;
}

}  // namespace cepbus::services::cluster
