// AMQP message -> event: the bytes are decoded as an AMQP message by
// proton::message::decode() (what the listener's delivery hands over), then
// mapped by eventFromMessage(), which must never throw: a message it cannot
// map comes back with an AMQP error condition and a description. A mapped
// event must survive the way out and back (messageFromEvent, encode, decode,
// map again) unchanged.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <proton/message.hpp>
#include <string>
#include <vector>

#include "bus/core/event_json.h"
#include "services/protocols/amqp/message_mapping.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cepbus;
  using services::amqp::eventFromMessage;
  if (size > 16384) return -1;
  proton::message message;
  try {
    message.decode(std::vector<char>(data, data + size));
  } catch (const std::exception&) {
    return 0;  // not an AMQP message: Proton's to refuse, before the mapping
  }
  const services::amqp::MappedEvent mapped = eventFromMessage(message);
  if (mapped.event == nullptr) {
    fuzz::check(!mapped.condition.empty() && !mapped.description.empty(),
                "refused without a condition or description");
    return 0;
  }
  const std::string before = encodeEvent(*mapped.event, EventFormat::kFull);
  proton::message out = services::amqp::messageFromEvent(*mapped.event);
  proton::message back;
  back.decode(out.encode());
  const services::amqp::MappedEvent again = eventFromMessage(back);
  fuzz::check(again.event != nullptr, "an event's own message is refused:", again.description);
  fuzz::check(encodeEvent(*again.event, EventFormat::kFull) == before,
              "message round trip changes the event:", before);
  return 0;
}
