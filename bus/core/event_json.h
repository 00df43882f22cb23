#pragma once

// The JSON-lines event codec (docs/concepts.md, "Events"):
//
//   {"type":"A","ts":17,"attrs":{"price":10.5,"symbol":"IBM"}}
//
// `type` (non-empty string) and `ts` (integer) are required; `attrs` (an
// object of scalars), `prob` (number in [0,1], default 1), `key` (string or
// integer partition key), `cost` (integer admission cost) are optional. The
// codec also reads and writes `id`, `source`, `start` (when a composite event's
// interval does not start at `ts`) and `events` (a composite event's
// constituents, written only in full format). Any other field is rejected, so
// a typo such as "timestamp" is caught instead of silently ignored.

#include <istream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/api.h"
#include "bus/core/event.h"
#include "bus/core/status.h"
#include "bus/core/wire_names.h"

namespace cepbus {

class FastEventDecoder;

// Decodes one line. On failure the status says what is wrong with it
// (without a line number; EventLineReader adds that). Names no query knows
// are held by the event (wire_names.h); with `names`, they are charged to
// that client's quota while held.
CEPBUS_API Result<EventPtr> decodeEvent(std::string_view line, WireNameQuota* names = nullptr);
// The decoder that defines the answer (nlohmann::json): decodeEvent() and
// EventLineReader read common lines on a faster path (fast_event_decoder.h)
// and give this function's result, event or error, for every line. Exposed
// for the fuzz target and the benchmark that compare the two.
CEPBUS_API Result<EventPtr> decodeEventReference(std::string_view line,
                                                 WireNameQuota* names = nullptr);

enum class EventFormat {
  kCompact,  // type, ts, attrs and the optional fields that differ from defaults
  kFull,     // also start, id, source and the constituents of composite events
};

// Encodes one event as a single line of JSON, without a trailing newline. A
// string that is not valid UTF-8 (decoders never make one) is written with
// replacement characters rather than failing.
CEPBUS_API std::string encodeEvent(const Event& event, EventFormat format = EventFormat::kCompact);
// The same, for a caller that must get the event back exactly (a spill to
// disk): InvalidArgument, naming the reason, instead of a replacement.
CEPBUS_API Result<std::string> encodeEventExactly(const Event& event,
                                                  EventFormat format = EventFormat::kCompact);

// Reads events from a JSON-lines stream, skipping blank lines. It reads the
// stream ahead in large blocks (without waiting on a pipe for more than is
// there), so the stream must not be read by anyone else meanwhile.
// Not thread-safe.
class CEPBUS_API EventLineReader {
 public:
  explicit EventLineReader(std::istream& in);
  ~EventLineReader();
  EventLineReader(const EventLineReader&) = delete;
  EventLineReader& operator=(const EventLineReader&) = delete;

  // The next event; a NotFound status at end of input; an InvalidArgument
  // status "line N: reason" for a bad line, after which reading may go on.
  Result<EventPtr> next();
  // The 1-based number of the line last read.
  size_t lineNumber() const { return line_no_; }

 private:
  // The next line, without its '\n'; false at end of input.
  bool nextLine(std::string_view& line);
  // Appends what the stream holds to buffer_, waiting for one read at most.
  size_t fill();

  std::istream& in_;
  std::unique_ptr<FastEventDecoder> decoder_;
  // Lines in [begin_, end_); the fast decoder may read padding past end_.
  std::vector<char> buffer_;
  size_t begin_ = 0;
  size_t end_ = 0;
  bool eof_ = false;
  size_t line_no_ = 0;
};

}  // namespace cepbus
