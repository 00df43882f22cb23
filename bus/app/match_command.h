#pragma once

// `cepbus match`: offline replay of a JSON-lines event file through a CEP
// engine plugin (docs/operations.md, "Command line").
//
//   cepbus match --engine nfa|algebra|petri|auto|all (--query TEXT | --patterns FILE)
//                (--events FILE [--format ts|full] [--count] | --export dot|json)
//                [--option key=value]... [--plugin-path DIR]... [--strict]
//                [--timeout SECONDS]
//
// Output, one JSON line each:
// - per match: the matched events' ts in pattern order, `[1,3,5]`; with
//   `--format full` the composite event instead (event JSON, full format);
// - with `--patterns FILE` (one query per line, optionally `name: query`;
//   blank lines and lines starting with '#' are skipped; an unnamed query is
//   named by its 1-based ordinal): `{"pattern":"NAME","ts":[...]}`, or
//   `{"pattern":"NAME","event":{...}}` with `--format full`. Every pattern
//   runs in ONE detector (DetectorFactory::createMany: the petri engine
//   merges them into one net, the others run one detector each);
// - with `--export dot|json`, instead of running: the engine's model of the
//   query or patterns (the merged Petri net), Graphviz DOT or JSON; an
//   engine without a model fails with exit status 1;
// - with `--count`, instead of the matches: `{"matches":N,"checksum":"HEX"}`
//   (per pattern, with a leading `"pattern":"NAME"`, under --patterns).
//
// The checksum is order-independent, so engines (and construction methods)
// that report the same matches in a different order agree:
//   checksum = sum over matches of h(ts_1, ..., ts_n)  (mod 2^64)
//   h = 0xcbf29ce484222325; for each ts in pattern order:
//       h = splitmix64(h XOR uint64(ts))
//   splitmix64(x): x += 0x9e3779b97f4a7c15;
//                  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9;
//                  x = (x ^ (x >> 27)) * 0x94d049bb133111eb;
//                  return x ^ (x >> 31)
// printed as 16 lower-case hex digits.
//
// - with `--engine all`, instead of the matches: one JSON line comparing
//   what nfa, algebra and petri report for the same queries and events
//   (matchUsage() gives its fields). Each engine runs in a child process
//   stopped after `--timeout SECONDS` (kDefaultEngineTimeout; 0: no limit)
//   and then reported as timed out with the events it had done. `agree` is
//   reported only when at least two engines completed; exit status 0 when
//   they did and every one reports the matches of the first that completed
//   (the reference), 1 on a difference, a failure, or fewer than two
//   engines completed.
//
// - with `--engine auto`, the matches of the engine plugin::chooseEngine()
//   picks for the queries (their number: 1 for --query), which is named
//   with the reason on `err`: "cepbus match: engine petri (auto: ...)"; when
//   it picks nfa or petri and the other runs the queries too, the two go on
//   trial on the first events (plugin::TrialDetector) and the matches are
//   those of the one kept, said on `err` after the events: "cepbus match:
//   trial kept nfa: petri 5.51 ms, nfa 1.84 ms CPU on 4096 events after the
//   first 256" (or "trial undecided: ..." when the events end within it).
//
// What an engine says about how it reads a query (DetectorFactory::notices:
// the algebra engine's default CONTEXT recent) goes to `err` as
// "cepbus match: notice: WHERE: ..." lines.
//
// A line of the events that is no event is named on `err` ("cepbus match:
// FILE: line N: reason (skipped)"), counted and skipped, and the run goes
// on; "cepbus match: FILE: N bad lines skipped" closes the run then (and
// `--engine all` reports "skipped":N). With `--strict` the first one ends
// the run with exit status 1.
//
// Exit status: 0 on success (bad event lines skipped included); 2 for a bad
// command line; 1 for everything else (plugin not found or unusable, bad
// query, unsupported operator, a bad event line under --strict, a detector
// error), with a message on `err` naming the query, file and line. The events go to the detector in
// batches (Detector::onEvents, up to kReplayBatch of them), so a detector error is named by the
// lines of its batch ("lines 1-256"), and the matches of the later events of that batch are printed
// before the stop.

#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "bus/core/status.h"

namespace cepbus::app {

// How long `--engine all` lets each engine run, in seconds, unless --timeout
// says otherwise (0: no limit).
constexpr double kDefaultEngineTimeout = 60;

struct MatchCommandOptions {
  std::string engine;                     // --engine ("all": compare them, "auto": pick one)
  std::string query;                      // --query TEXT
  std::string patterns_file;              // --patterns FILE
  std::string events_file;                // --events FILE ("-" reads standard input)
  bool full = false;                      // --format full (default: --format ts)
  bool count = false;                     // --count
  std::string export_format;              // --export dot|json (no --events then)
  std::vector<std::string> options;       // --option key=value, in order
  std::vector<std::string> plugin_paths;  // --plugin-path DIR, searched before the defaults
  double timeout_seconds = kDefaultEngineTimeout;  // --timeout, per engine of --engine all
  bool strict = false;                             // --strict: a line that is no event ends the run
  std::string late_file;  // --late FILE: the late events, one JSON line each
  pattern::TimeUnit ts_unit = pattern::TimeUnit::kNone;  // --time-unit us|ms|s
  std::string checkpoint_file;                           // --checkpoint FILE
  std::optional<uint64_t> stop_after;                    // --stop-after N (with --checkpoint)
  std::string resume_file;                               // --resume FILE
};

// Parses the arguments after `match` (`--flag value` or `--flag=value`).
// InvalidArgument names the offending argument.
Result<MatchCommandOptions> parseMatchArguments(std::span<const std::string> args);

// The usage text of the subcommand.
const char* matchUsage();

// The checksum of one match's timestamps (see the file comment); the
// command's checksum is the sum of these over all matches.
uint64_t matchChecksum(std::span<const int64_t> ts);

// Runs the command; returns the exit status.
int runMatchCommand(const MatchCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace cepbus::app
