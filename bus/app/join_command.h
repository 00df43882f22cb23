#pragma once

// `cepbus join`: offline replay of a JSON-lines file of uncertain readings
// through the stream-join plugin (P4; docs/engines.md, "cepbus join").
//
//   cepbus join --events FILE --key ATTR --site ATTR --time-matrix CSV
//               --threshold P [--window N] [--workers N] [--expiry on_insert|batch]
//               [--deletion-interval N] [--spill none|window_half|less_than_probability
//               --memory-budget BYTES [--spill-dir DIR]] [--type TYPE] [--count]
//               [--strict] [--plugin-path DIR]...
//
// Runs `PATTERN AND(TYPE a, TYPE b) WHERE a.KEY = b.KEY` on the join engine,
// TYPE being --type or else the type of the first event; events of other
// types are ignored. --time-matrix and --site go together; without them
// --window bounds the pairs.
//
// Output, one JSON line per joined pair, in the order the pairs are found:
//   {"key":K,"left":EVENT,"right":EVENT,"dt":N,"prob":P}
// `left` arrived first, dt = right.ts - left.ts, prob = left.prob * right.prob.
// With --count, instead: {"pairs":N,"checksum":"HEX"}, where the checksum
// (order-independent, so any worker count or spill strategy agrees) is
//   sum over pairs of h  (mod 2^64),
//   h = splitmix64(splitmix64(0xcbf29ce484222325 ^ fnv1a64(LEFT)) ^ fnv1a64(RIGHT))
// with LEFT and RIGHT the compact JSON of the events (as printed) and
// splitmix64 as in match_command.h.
//
// A line that is no event is named on `err`, counted and skipped, as in
// `cepbus match` (event_replay.h); --strict ends the run there instead.
//
// Exit status: 0 on success (bad event lines skipped included); 2 for a bad
// command line; 1 for everything else (plugin not found, bad time matrix, a
// bad event line under --strict, a reading without key
// or with an unknown site — naming the file and line). The readings go to the
// detector in batches (Detector::onEvents, up to kReplayBatch of them), so a
// refused reading is named by the lines of its batch ("lines 257-512"), and
// the pairs of the later readings of that batch are printed before the stop.
// A spill that fails (a full disk) is a warning on `err`: the join goes on in
// memory.

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "bus/core/status.h"

namespace cepbus::app {

struct JoinCommandOptions {
  std::string events_file;                // --events FILE ("-" reads standard input)
  std::string key;                        // --key ATTR
  std::string site;                       // --site ATTR
  std::string time_matrix;                // --time-matrix CSV
  std::string threshold;                  // --threshold P
  std::string window;                     // --window N
  std::string workers;                    // --workers N
  std::string expiry;                     // --expiry on_insert|batch
  std::string deletion_interval;          // --deletion-interval N
  std::string spill;                      // --spill STRATEGY
  std::string memory_budget;              // --memory-budget BYTES
  std::string spill_dir;                  // --spill-dir DIR
  std::string type;                       // --type TYPE
  bool count = false;                     // --count
  bool strict = false;                    // --strict: a line that is no event ends the run
  std::vector<std::string> plugin_paths;  // --plugin-path DIR
};

// Parses the arguments after `join` (`--flag value` or `--flag=value`).
// InvalidArgument names the offending argument.
Result<JoinCommandOptions> parseJoinArguments(std::span<const std::string> args);

// The usage text of the subcommand.
const char* joinUsage();

// Runs the command; returns the exit status.
int runJoinCommand(const JoinCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace cepbus::app
