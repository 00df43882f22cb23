// JSON-lines events: one line -> decodeEvent(), which takes the simdjson fast
// path (fast_event_decoder.h) where it can, must agree with
// decodeEventReference() (nlohmann): both accept with the same event or both
// refuse with the same message. An event that decodes must encode (both
// formats) to a line that decodes to the same encoding. The whole input is
// also read as a stream by EventLineReader, whose block reads must give, line
// by line, what the reference gives, and report each bad line and go on.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "bus/core/event_json.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace cepbus;

// Same outcome; for events, the same compact encoding and source (ids are
// fresh on both sides unless the line gives one).
void checkAgrees(const Result<EventPtr>& got, const Result<EventPtr>& want, std::string_view line,
                 const std::string& prefix) {
  fuzz::check(got.isOk() == want.isOk(), "fast path and reference disagree on:", line);
  if (!want) {
    fuzz::check(got.status().message() == prefix + want.status().message(),
                "fast path words an error differently:", got.status().message());
    return;
  }
  fuzz::check(encodeEvent(**got) == encodeEvent(**want) && (*got)->source() == (*want)->source() &&
                  (*got)->constituents().size() == (*want)->constituents().size(),
              "fast path decodes differently:", line);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return -1;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  Result<EventPtr> event = decodeEvent(text);
  checkAgrees(event, decodeEventReference(text), text, "");
  if (event) {
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
  size_t at = 0;
  size_t line_no = 0;
  for (int i = 0; i < 1000; ++i) {
    // The next non-blank line, split as the reader splits them.
    std::string_view line;
    bool found = false;
    while (!found && at < text.size()) {
      const size_t nl = std::min(text.find('\n', at), text.size());
      line = text.substr(at, nl - at);
      at = nl + 1;
      ++line_no;
      found = line.find_first_not_of(" \t\r") != std::string_view::npos;
    }
    Result<EventPtr> next = reader.next();
    if (!found) {
      fuzz::check(next.status().code() == Status::Code::kNotFound, "reader reads past the end");
      break;
    }
    checkAgrees(next, decodeEventReference(line), line, "line " + std::to_string(line_no) + ": ");
  }
  return 0;
}
