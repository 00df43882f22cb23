// JSON-lines events: one line -> decodeEvent(); an event that decodes must
// encode (both formats) to a line that decodes to the same encoding. The
// whole input is also read as a stream by EventLineReader, which must report
// each bad line and go on.

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "bus/core/event_json.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cepbus;
  if (size > 8192) return -1;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  if (Result<EventPtr> event = decodeEvent(text)) {
    for (EventFormat format : {EventFormat::kCompact, EventFormat::kFull}) {
      const std::string line = encodeEvent(**event, format);
      Result<EventPtr> again = decodeEvent(line);
      fuzz::check(again.isOk(), "encoded event does not decode:",
                  line + " -- " + (again ? "" : again.status().message()));
      fuzz::check(encodeEvent(**again, format) == line, "encode/decode round trip differs:", line);
    }
  }

  std::istringstream in{std::string(text)};
  EventLineReader reader(in);
  for (int i = 0; i < 1000; ++i) {
    Result<EventPtr> next = reader.next();
    if (!next && next.status().code() == Status::Code::kNotFound) break;
    if (!next) fuzz::check(next.status().message().starts_with("line "), "error without a line");
  }
  return 0;
}
