#pragma once

// What the offline replays (`cepbus join`, `cepbus match`) share: reading a
// JSON-lines events file (or standard input) in batches for
// Detector::onEvents(), skipping and naming the lines that are no events as
// the bus's <replay> does, the lines of each batch for messages, the line
// that counts late events, and the checksum helpers of their --count output.

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/event_json.h"
#include "bus/core/status.h"

namespace cepbus::app {

// Events per Detector::onEvents() call of a replay: enough to amortise the
// per-call costs, few enough that an error's line range stays readable.
constexpr size_t kReplayBatch = 256;

// What a replay does with a line that is no event (docs/concepts.md, "Events").
struct BadLines {
  std::string command;             // "cepbus match": how messages start
  std::ostream* report = nullptr;  // where each skipped line is named
  bool strict = false;             // --strict: the first one ends the replay
};

// Reads one events file in batches. Not thread-safe; owns the file.
class EventReplay {
 public:
  // Opens `path` ("-": standard input); NotFound "cannot open events file
  // 'PATH'" when it cannot be read.
  static Result<std::unique_ptr<EventReplay>> open(const std::string& path, BadLines bad);
  EventReplay(const EventReplay&) = delete;
  EventReplay& operator=(const EventReplay&) = delete;

  // Replaces `batch` with up to `max` next events; an empty batch at the end
  // of the input. A bad line is named on the report stream as
  // "COMMAND: PATH: line N: reason (skipped)", counted and skipped; at the
  // end of the input, when there were any, "COMMAND: PATH: N bad lines
  // skipped". Under `strict` the first bad line stops the batch before it
  // and is returned as InvalidArgument "line N: reason" (the events before
  // it are in `batch`).
  Status read(std::vector<EventPtr>& batch, size_t max = kReplayBatch);
  // "line N" or "lines A-B": where the last batch read stands in the file.
  std::string where() const;
  // The bad lines skipped so far.
  uint64_t skipped() const { return skipped_; }

 private:
  EventReplay(const std::string& path, BadLines bad);

  const std::string path_;
  const BadLines bad_;
  std::ifstream file_;
  std::istream* in_;
  EventLineReader reader_;
  size_t first_line_ = 0;
  size_t last_line_ = 0;
  uint64_t skipped_ = 0;
  bool ended_ = false;
};

// "COMMAND: PATH: N late events (more than the maximum delay behind the
// newest ts; not matched)", without a newline: what a replay says at the
// end when `late` events of PATH came too late to be matched.
std::string lateLine(const std::string& command, const std::string& path, uint64_t late);

// The seed of the --count checksums (their headers give the formula).
constexpr uint64_t kChecksumSeed = 0xcbf29ce484222325ULL;
// Their mixing step.
uint64_t splitmix64(uint64_t x);
// `v` as 16 lowercase hex digits.
std::string hex64(uint64_t v);

}  // namespace cepbus::app
