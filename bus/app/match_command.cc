#include "bus/app/match_command.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "bus/app/engine_comparison.h"
#include "bus/app/event_replay.h"
#include "bus/app/flag_reader.h"
#include "bus/app/match_checkpoints.h"
#include "bus/app/pattern_lines.h"
#include "bus/core/event_json.h"
#include "bus/core/pattern/parser.h"
#include "bus/core/pattern/printer.h"
#include "bus/host/detection/checkpoint.h"
#include "bus/host/detection/detection.h"
#include "bus/host/detection/engine_choice.h"
#include "bus/host/detection/input_vocabulary.h"
#include "bus/host/detection/planner.h"
#include "bus/host/loader/plugin_loader.h"
#include "bus/host/time/reorder.h"

namespace cepbus::app {
namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

// `--engine all`: the engines of the pattern language, in the order they run;
// the first that accepts the queries is the reference the others are compared to.
constexpr std::string_view kAllEngines = "all";
constexpr const char* kPatternEngines[] = {"nfa", "algebra", "petri"};

// Writes one pattern's matches, each as one JSON line, or only counts them
// (--count).
class PatternPrinter {
 public:
  PatternPrinter(std::ostream& out, bool full, bool count, std::string pattern_json)
      : out_(out), full_(full), count_(count), pattern_json_(std::move(pattern_json)) {}

  void print(const plugin::Match& match) {
    ++matches_;
    if (count_) {
      uint64_t h = kChecksumSeed;
      for (size_t i = 0; i < match.size(); ++i)
        h = splitmix64(h ^ static_cast<uint64_t>(match.ts(i)));
      checksum_ += h;
      return;
    }
    line_.clear();
    if (!pattern_json_.empty())
      line_ += "{\"pattern\":" + pattern_json_ + (full_ ? ",\"event\":" : ",\"ts\":");
    if (full_) {
      line_ += encodeEvent(*match.composite(), EventFormat::kFull);
    } else {
      line_ += '[';
      for (size_t i = 0; i < match.size(); ++i) {
        if (i > 0) line_ += ',';
        line_ += std::to_string(match.ts(i));
      }
      line_ += ']';
    }
    if (!pattern_json_.empty()) line_ += '}';
    line_ += '\n';
    out_ << line_;
  }

  void printCount() const {
    out_ << '{';
    if (!pattern_json_.empty()) out_ << "\"pattern\":" << pattern_json_ << ',';
    out_ << "\"matches\":" << matches_ << ",\"checksum\":\"" << hex64(checksum_) << "\"}\n";
  }

 private:
  std::ostream& out_;
  const bool full_;
  const bool count_;
  const std::string pattern_json_;  // empty for a single --query
  std::string line_;
  uint64_t matches_ = 0;
  uint64_t checksum_ = 0;
};

// Hands each match of the detection to its pattern's printer, and each late
// event to `late` (as read, one JSON line each) when there is one.
class MatchPrinter final : public detection::DetectionSink {
 public:
  MatchPrinter(std::vector<PatternPrinter> printers, std::ostream* late)
      : printers_(std::move(printers)), late_(late) {}
  void onMatch(size_t pattern, const plugin::Match& match) override {
    printers_[pattern].print(match);
  }
  void onLate(const EventPtr& event, Timestamp /*newest*/) override {
    if (late_ != nullptr) *late_ << encodeEvent(*event) << '\n';
  }
  void printCounts() const {
    for (const PatternPrinter& p : printers_) p.printCount();
  }

 private:
  std::vector<PatternPrinter> printers_;
  std::ostream* const late_;
};

}  // namespace

uint64_t matchChecksum(std::span<const int64_t> ts) {
  uint64_t h = kChecksumSeed;
  for (int64_t t : ts) h = splitmix64(h ^ static_cast<uint64_t>(t));
  return h;
}

namespace {

// `text` as a number of seconds, 0 or more, into `seconds`.
Status parseSeconds(const std::string& text, double& seconds) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) || value < 0) {
    return Status::invalidArgument("--timeout " + text + ": expected seconds, 0 or more");
  }
  seconds = value;
  return Status::ok();
}

// The --engine auto paragraph of the usage; the crossover is a constant of
// the choice, not of this text.
std::string autoUsage() {
  const std::string n = std::to_string(plugin::kMergeFromPatterns);
  return "--engine auto: run the queries on the engine cepbus picks: petri from " + n +
         " patterns on;\n"
         "  for fewer, petri when a predicate over the first variable alone filters where\n"
         "  a match may start (a.x = 3), else nfa. One that refuses the queries (or an\n"
         "  --option) is passed over for the next of nfa, petri, algebra, join. When\n"
         "  both nfa and petri run them, the pick goes on trial against the other on\n"
         "  the first events and the cheaper in CPU is kept. The choice, why, and what\n"
         "  the trial kept go to stderr:\n"
         "  cepbus match: engine petri (auto: 40 patterns, merged Petri net ...; trial ...)\n"
         "  cepbus match: trial kept nfa: petri 5.51 ms, nfa 1.84 ms CPU on 4096 events after\n"
         "  the first 256\n";
}

}  // namespace

const char* matchUsage() {
  static const std::string usage =
      "usage: cepbus match --engine nfa|algebra|petri|auto|all (--query TEXT | --patterns FILE)\n"
      "                    (--events FILE [--format ts|full] [--count] | --export dot|json)\n"
      "                    [--option key=value]... [--plugin-path DIR]... [--strict]\n"
      "                    [--max-delay D] [--late FILE] [--time-unit us|ms|s]\n"
      "                    [--timeout SECONDS]\n"
      "                    [--checkpoint FILE [--stop-after N]] [--resume FILE]\n" +
      autoUsage() +
      "--engine all: run the queries on nfa, algebra and petri over the same events and\n"
      "  print one JSON line comparing them instead of the matches:\n"
      "    "
      "{\"reference\":\"nfa\",\"agree\":false,\"skipped\":N,\"late\":N,\"engines\":[ENGINE,...]}\n"
      "  ENGINE is {\"engine\":NAME,\"accepted\":false,\"refusal\":MESSAGE},\n"
      "    {\"engine\":NAME,\"timed_out\":true,\"after_events\":N} or\n"
      "    {\"engine\":NAME,\"accepted\":true,\"matches\":N,\"checksum\":HEX,\"seconds\":S,\n"
      "     \"cpu_seconds\":S, \"notices\":[...], \"agrees\":BOOL,\n"
      "     \"first_difference\":{\"pattern\":NAME,\n"
      "     \"ts\":[...],\"in_reference\":N,\"in_engine\":N}}\n"
      "  (\"error\":MESSAGE instead of matches when it fails on an event). The reference\n"
      "  is the first engine that completes (\"reference\":true on it); the first\n"
      "  difference is the earliest-ending match the two report a different number\n"
      "  of times. \"agree\" is there only when at least two engines completed;\n"
      "  otherwise \"nothing_to_compare\" says why. Exit status 0 when at least two\n"
      "  engines completed and report the same matches, 1 on a difference, a failure,\n"
      "  or fewer than two completed. Options go to every engine (one that does not\n"
      "  take an option refuses the query). \"late\" counts the events more than the\n"
      "  maximum delay behind (see --max-delay), left out for every engine alike.\n"
      "--timeout SECONDS: with --engine all, how long each engine may run (default " +
      std::to_string(static_cast<int>(kDefaultEngineTimeout)) +
      ",\n"
      "  0: no limit); one still running is stopped and reported as timed out, with\n"
      "  the events it had done. A timed-out engine is not a difference.\n"
      "Context: the algebra engine runs a query without a CONTEXT clause under\n"
      "  CONTEXT recent (at every operator, of the instances ending at one time only\n"
      "  the latest-starting one, chosen before the WHERE conjuncts relating its\n"
      "  variables are checked), so a SEQ gives it fewer matches than nfa and petri,\n"
      "  possibly none; a notice on stderr says so. CONTEXT unrestricted gives every\n"
      "  match.\n"
      "--patterns FILE: one query per line, optionally 'name: PATTERN ...'; blank lines\n"
      "  and lines starting with '#' are skipped; unnamed queries are named 1, 2, ...\n"
      "  All of them run in one detector (the petri engine merges them into one net);\n"
      "  each match line is labelled with its pattern's name.\n"
      "--export dot|json: print the engine's model of the query (the merged net of\n"
      "  the patterns, for petri) as Graphviz DOT or JSON instead of running it.\n"
      "--max-delay D: events may arrive up to D time units behind the newest ts; they\n"
      "  are matched as if sorted by ts (equal ts in the order read). An event more\n"
      "  than D behind is late: it is not matched, the run goes on, and the count\n"
      "  ends the run on stderr (cepbus match: FILE: N late events ...); exit status\n"
      "  0. The same as --option max_delay=D (default 0: any event behind the\n"
      "  newest is late).\n"
      "--late FILE: write each late event to FILE as one JSON line, as read.\n"
      "--time-unit us|ms|s: ts counts microseconds, milliseconds or seconds (since\n"
      "  the epoch); the queries may then write durations with a unit (WITHIN 30 s,\n"
      "  WITHIN 5 min, WITHIN(p, 250 ms); units us, ms, s, min, h), converted to ts\n"
      "  units. A bare number is in ts units, with or without --time-unit.\n"
      "--checkpoint FILE --stop-after N: read the first N events, print their matches,\n"
      "  write the detector's state and the position N to FILE and exit 0, without\n"
      "  ending the stream (matches still pending stay in the state). Without\n"
      "  --stop-after, after every event. The engine must snapshot its state (nfa,\n"
      "  window); another is refused, naming it.\n"
      "--resume FILE: the same query, options and --events after a --checkpoint run:\n"
      "  skip the events FILE was written after and go on from the next. Both outputs\n"
      "  together are the output of one run. A query edited only in WITHIN, WHERE,\n"
      "  HAVING, RETURN, PROBABILITY or EMIT takes over the state FILE holds (see\n"
      "  docs/checkpoints.md). FILE of another query, options or engine, of a newer\n"
      "  cepbus, corrupted or truncated is refused, saying which.\n"
      "--strict: a line of the events that is no event ends the run (exit status 1).\n"
      "  Without it such a line is named on stderr (cepbus match: FILE: line N:\n"
      "  reason (skipped)), counted and skipped; the run goes on and ends with\n"
      "  \"cepbus match: FILE: N bad lines skipped\", exit status 0.\n";
  return usage.c_str();
}

Result<MatchCommandOptions> parseMatchArguments(std::span<const std::string> args) {
  MatchCommandOptions o;
  bool format_seen = false;
  bool timeout_seen = false;
  bool max_delay_seen = false;
  FlagReader flags(args);
  while (flags.next()) {
    const std::string& flag = flags.flag();
    auto take = [&](std::string& into) -> Status {
      Result<std::string> value = flags.value();
      if (!value) return value.status();
      into = std::move(*value);
      return Status::ok();
    };
    auto once = [&](std::string& into) -> Status {
      if (!into.empty()) return Status::invalidArgument(flag + " given twice");
      Status s = take(into);
      if (s && into.empty()) return Status::invalidArgument(flag + " needs a non-empty value");
      return s;
    };
    Status s;
    if (flag == "--engine") {
      s = once(o.engine);
    } else if (flag == "--query") {
      s = once(o.query);
    } else if (flag == "--patterns") {
      s = once(o.patterns_file);
    } else if (flag == "--events") {
      s = once(o.events_file);
    } else if (flag == "--format") {
      std::string f;
      s = take(f);
      if (s && format_seen) s = Status::invalidArgument("--format given twice");
      if (s && f != "full" && f != "ts") {
        s = Status::invalidArgument("--format " + f + ": expected ts or full");
      }
      format_seen = true;
      o.full = f == "full";
    } else if (flag == "--export") {
      s = once(o.export_format);
      if (s && o.export_format != "dot" && o.export_format != "json") {
        s = Status::invalidArgument("--export " + o.export_format + ": expected dot or json");
      }
    } else if (flag == "--count" && !flags.hasInlineValue()) {
      o.count = true;
    } else if (flag == "--strict" && !flags.hasInlineValue()) {
      o.strict = true;
    } else if (flag == "--option") {
      std::string kv;
      s = take(kv);
      if (s && (kv.find('=') == std::string::npos || kv.front() == '=')) {
        s = Status::invalidArgument("--option " + kv + ": expected key=value");
      }
      o.options.push_back(kv);
    } else if (flag == "--max-delay") {
      std::string delay;
      s = take(delay);
      if (s && max_delay_seen) s = Status::invalidArgument("--max-delay given twice");
      if (s) {
        if (auto parsed = plugin::parseMaxDelay(plugin::kMaxDelayOption, delay); !parsed) {
          s = Status::invalidArgument("--max-delay " + delay + ": expected a non-negative integer");
        }
      }
      o.options.push_back(std::string(plugin::kMaxDelayOption) + "=" + delay);
      max_delay_seen = true;
    } else if (flag == "--late") {
      s = once(o.late_file);
    } else if (flag == "--time-unit") {
      std::string unit;
      s = take(unit);
      if (s && o.ts_unit != pattern::TimeUnit::kNone) {
        s = Status::invalidArgument("--time-unit given twice");
      }
      if (s) {
        const std::optional<pattern::TimeUnit> ts_unit = pattern::tsUnitNamed(unit);
        if (ts_unit) {
          o.ts_unit = *ts_unit;
        } else {
          s = Status::invalidArgument("--time-unit " + unit + ": expected us, ms or s");
        }
      }
    } else if (flag == "--timeout") {
      std::string seconds;
      s = take(seconds);
      if (s && timeout_seen) s = Status::invalidArgument("--timeout given twice");
      if (s) s = parseSeconds(seconds, o.timeout_seconds);
      timeout_seen = true;
    } else if (flag == "--checkpoint") {
      s = once(o.checkpoint_file);
    } else if (flag == "--resume") {
      s = once(o.resume_file);
    } else if (flag == "--stop-after") {
      std::string n;
      s = take(n);
      if (s && o.stop_after) s = Status::invalidArgument("--stop-after given twice");
      if (s) {
        char* end = nullptr;
        const unsigned long long v = std::strtoull(n.c_str(), &end, 10);
        if (n.empty() || n[0] == '-' || end != n.c_str() + n.size()) {
          s = Status::invalidArgument("--stop-after " + n + ": expected a number of events");
        }
        o.stop_after = v;
      }
    } else if (flag == "--plugin-path") {
      std::string dir;
      s = take(dir);
      o.plugin_paths.push_back(dir);
    } else {
      s = Status::invalidArgument("unknown argument '" + flags.argument() + "'");
    }
    if (!s) return s;
  }
  if (o.engine.empty()) return Status::invalidArgument("--engine is required");
  if (timeout_seen && o.engine != kAllEngines) {
    return Status::invalidArgument("--timeout limits each engine of --engine all only");
  }
  if (o.engine == kAllEngines &&
      (o.count || format_seen || !o.export_format.empty() || !o.late_file.empty())) {
    return Status::invalidArgument(
        "--engine all prints a comparison of the engines: no --count, --format, --export or "
        "--late");
  }
  if (o.query.empty() == o.patterns_file.empty()) {
    return Status::invalidArgument("give exactly one of --query and --patterns");
  }
  const bool checkpointing = !o.checkpoint_file.empty() || !o.resume_file.empty();
  if (o.stop_after && o.checkpoint_file.empty()) {
    return Status::invalidArgument("--stop-after N needs --checkpoint FILE to keep the state in");
  }
  if (checkpointing && (o.engine == kAllEngines || !o.export_format.empty())) {
    return Status::invalidArgument(
        "--checkpoint and --resume run one engine: no --engine all or "
        "--export");
  }
  if (!o.export_format.empty()) {
    if (!o.events_file.empty() || o.count || format_seen || !o.late_file.empty()) {
      return Status::invalidArgument(
          "--export prints the model instead of running: no --events, --count, --format or "
          "--late");
    }
    return o;
  }
  if (o.events_file.empty()) return Status::invalidArgument("--events is required");
  if (checkpointing && o.events_file == "-") {
    return Status::invalidArgument(
        "--checkpoint and --resume count events in a file: no --events - (standard input)");
  }
  if (o.full && o.count)
    return Status::invalidArgument("--count and --format full exclude each other");
  return o;
}

namespace {

// What a checkpoint of these queries is for (detection/checkpoint.h): the
// queries with their names, and the options (the host's max_delay among
// them), so that a checkpoint is resumed only by the same run or an edit of
// its queries that keeps their state.
detection::CheckpointIdentity identityOf(const std::string& engine,
                                         const std::vector<PatternLine>& lines,
                                         const std::vector<pattern::Query>& queries,
                                         const plugin::DetectorOptions& options) {
  std::vector<detection::CheckpointedQuery> named;
  for (size_t i = 0; i < lines.size(); ++i) named.push_back({lines[i].name, queries[i]});
  return detection::checkpointIdentity(engine, named, options);
}

// The CPU time of the whole process (an engine's workers included): on a
// machine other processes load, steadier than the wall clock for comparing
// engines.
double processCpuSeconds() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// The queries to plan, one per line of `lines`, each with `engine` and `options`.
std::vector<detection::QueryRequest> requestsOf(const std::vector<PatternLine>& lines,
                                                const std::vector<pattern::Query>& queries,
                                                const std::string& engine,
                                                const plugin::DetectorOptions& options) {
  std::vector<detection::QueryRequest> requests;
  for (size_t i = 0; i < lines.size(); ++i) {
    detection::QueryRequest r;
    r.name = lines[i].name;
    r.query = queries[i];
    r.engine = engine;
    r.options = options;
    r.where = lines[i].label();
    requests.push_back(std::move(r));
  }
  return requests;
}

// How `cepbus match` plans: every query in one detector, named patterns
// labelled inside it too, auto's trial only when there are events to run.
detection::PlanOptions planOptions(const std::vector<PatternLine>& lines, bool trial) {
  detection::PlanOptions options;
  options.one_detector = true;
  options.named_patterns = !lines.front().name.empty();
  options.trial = trial;
  return options;
}

// What the group's engine says about how it reads each query (its defaults
// that change the matches), each as "LABEL: NOTICE".
std::vector<std::string> noticesOf(const detection::DetectionGroup& group,
                                   const std::vector<PatternLine>& lines) {
  std::vector<std::string> all;
  for (size_t i = 0; i < lines.size(); ++i) {
    for (const std::string& notice : group.recipe.notices(i)) {
      all.push_back(lines[i].label() + ": " + notice);
    }
  }
  return all;
}

// After the run: every event type, attribute and PARTITION BY key a query
// names that the events never had, since such a query matches nothing
// without any error. The exit status stays as it is.
void warnUnknownNames(const detection::InputVocabulary& input,
                      const std::vector<PatternLine>& lines,
                      const std::vector<pattern::Query>& queries, std::ostream& err) {
  for (size_t i = 0; i < lines.size(); ++i) {
    for (const std::string& w :
         input.unknownNames(detection::namesUsedBy(queries[i], lines[i].text))) {
      err << "cepbus match: warning: " << lines[i].label() << ": " << w << '\n';
    }
  }
}

void printNotices(const std::vector<std::string>& notices, std::ostream& err) {
  for (const std::string& notice : notices) err << "cepbus match: notice: " << notice << '\n';
}

// What the trial of --engine auto did, for `err` once the events are done.
std::string trialLine(const detection::Detection& detection) {
  if (auto outcome = detection.trialOutcome()) return "trial " + outcome->describe();
  return "trial undecided: the events ended within it; " + detection.engine() + " ran them";
}

// After the run: how many events came late, and where they went; an error
// when `late_out` (the --late file) could not be written.
Status reportLate(const detection::Detection& detection, const MatchCommandOptions& options,
                  std::ofstream& late_out, std::ostream& err) {
  if (late_out.is_open()) {
    late_out.close();
    if (!late_out) return Status::ioError("cannot write --late file '" + options.late_file + "'");
  }
  const uint64_t late = detection.stats().late;
  if (late == 0) return Status::ok();
  err << lateLine("cepbus match", options.events_file, late)
      << (options.late_file.empty() ? std::string(", --late FILE keeps them")
                                    : ", written to " + options.late_file)
      << '\n';
  return Status::ok();
}

// The events of one onEvents() call and where they stand in the file.
struct ReplayBatch {
  std::vector<EventPtr> events;
  std::string where;
};

// How the command treats a line that is no event.
BadLines badLines(const MatchCommandOptions& options, std::ostream& err) {
  return BadLines{"cepbus match", &err, options.strict};
}

// Events per onEvents() call under --engine all: a timed-out engine's
// after_events counts whole batches of these.
constexpr size_t kCompareBatch = 32;

// One engine's run over `batches`, in the child process of runInChild(),
// advancing `events_done`: its report as JSON text, {"accepted":false,
// "refusal":...} or {"accepted":true,"notices":[...],"seconds":S,
// "cpu_seconds":S} with "error":MESSAGE or "matches":[[PATTERN,[TS...]],...]
// in stream order.
std::string runEngine(const std::string& engine, plugin::PluginLoader& loader,
                      const std::vector<PatternLine>& lines,
                      const std::vector<pattern::Query>& queries,
                      const plugin::DetectorOptions& detector_options,
                      const std::vector<ReplayBatch>& batches, const std::string& events_file,
                      std::atomic<uint64_t>& events_done) {
  nlohmann::json report;
  const std::vector<detection::QueryRequest> requests =
      requestsOf(lines, queries, engine, detector_options);
  auto plan = detection::plan(requests, planOptions(lines, false), loader);
  MatchRecorder recorder;
  auto made = plan ? detection::Detection::create(plan->groups[0], recorder)
                   : Result<std::unique_ptr<detection::Detection>>(plan.status());
  if (!made) {
    report["accepted"] = false;
    report["refusal"] = made.status().message();
    return report.dump();
  }
  report["accepted"] = true;
  report["notices"] = noticesOf(plan->groups[0], lines);
  detection::Detection& detection = **made;
  const auto started = std::chrono::steady_clock::now();
  const double cpu_started = processCpuSeconds();
  std::string failure;
  for (const ReplayBatch& batch : batches) {
    if (Status s = detection.onEvents(batch.events); !s) {
      failure = events_file + ": " + batch.where + ": " + s.message();
      break;
    }
    events_done.fetch_add(batch.events.size(), std::memory_order_release);
  }
  if (failure.empty()) {
    if (Status s = detection.flush(); !s) failure = "at end of events: " + s.message();
  }
  report["seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  report["cpu_seconds"] = processCpuSeconds() - cpu_started;
  if (!failure.empty()) {
    report["error"] = failure;
    return report.dump();
  }
  nlohmann::json matches = nlohmann::json::array();
  for (const RecordedMatch& m : recorder.takeSorted()) matches.push_back({m.pattern, m.ts});
  report["matches"] = std::move(matches);
  report["late"] = detection.stats().late;
  return report.dump();
}

// The matches of runEngine()'s report.
std::vector<RecordedMatch> recordedMatches(const nlohmann::json& report) {
  std::vector<RecordedMatch> matches;
  for (const nlohmann::json& m : report["matches"]) {
    matches.push_back({m[0].get<size_t>(), m[1].get<std::vector<Timestamp>>()});
  }
  return matches;
}

// `--engine all`: every pattern engine over the same events, each in a child
// process stopped at its --timeout, compared with the first that completes
// (see matchUsage()).
int compareEngines(const MatchCommandOptions& options, plugin::PluginLoader& loader,
                   const std::vector<PatternLine>& lines,
                   const std::vector<pattern::Query>& queries,
                   const plugin::DetectorOptions& detector_options, std::ostream& out,
                   std::ostream& err) {
  auto replay = EventReplay::open(options.events_file, badLines(options, err));
  if (!replay) {
    err << "cepbus match: " << replay.status().message() << '\n';
    return kExitError;
  }
  std::vector<ReplayBatch> batches;
  size_t events = 0;
  detection::InputVocabulary input;
  while (true) {
    ReplayBatch batch;
    Status read = (*replay)->read(batch.events, kCompareBatch);
    if (!read) {
      err << "cepbus match: " << options.events_file << ": " << read.message() << '\n';
      return kExitError;
    }
    if (batch.events.empty()) break;
    input.observe(batch.events);
    batch.where = (*replay)->where();
    events += batch.events.size();
    batches.push_back(std::move(batch));
  }
  warnUnknownNames(input, lines, queries, err);

  const bool patterns = !lines.front().name.empty();
  nlohmann::ordered_json engines = nlohmann::ordered_json::array();
  std::optional<std::vector<RecordedMatch>> reference;
  std::string reference_engine;
  bool agree = true;
  bool any_accepted = false;
  size_t completed = 0;
  uint64_t late = 0;  // events more than the maximum delay behind, as the engines saw them
  std::vector<std::string> incomplete;  // "NAME WHY" of each engine that did not complete
  for (const std::string engine : kPatternEngines) {
    nlohmann::ordered_json report = {{"engine", engine}};
    auto outcome = runInChild(
        [&](std::atomic<uint64_t>& events_done) {
          return runEngine(engine, loader, lines, queries, detector_options, batches,
                           options.events_file, events_done);
        },
        options.timeout_seconds);
    nlohmann::json child;
    if (outcome && !outcome->timed_out) {
      child = nlohmann::json::parse(outcome->output, nullptr, /*allow_exceptions=*/false);
    }
    // An engine that failed, in its child process or on an event.
    auto fail = [&](const std::string& failure) {
      err << "cepbus match: engine '" << engine << "': " << failure << '\n';
      report["error"] = failure;
      engines.push_back(std::move(report));
      incomplete.push_back(engine + " failed");
      agree = false;
    };
    if (!outcome || (!outcome->timed_out && child.is_discarded())) {
      fail(outcome ? std::string("unreadable result of the run") : outcome.status().message());
      continue;
    }
    if (outcome->timed_out) {
      err << "cepbus match: engine '" << engine << "' timed out after " << options.timeout_seconds
          << " s, " << outcome->progress << " of " << events << " events done\n";
      report["timed_out"] = true;
      report["after_events"] = outcome->progress;
      engines.push_back(std::move(report));
      incomplete.push_back(engine + " timed out");
      continue;
    }
    if (!child["accepted"].get<bool>()) {
      report["accepted"] = false;
      report["refusal"] = child["refusal"];
      engines.push_back(std::move(report));
      incomplete.push_back(engine + " refused the " + (patterns ? "patterns" : "query"));
      continue;
    }
    any_accepted = true;
    report["accepted"] = true;
    const auto notices = child["notices"].get<std::vector<std::string>>();
    printNotices(notices, err);
    if (!notices.empty()) report["notices"] = notices;
    report["seconds"] = child["seconds"];
    report["cpu_seconds"] = child["cpu_seconds"];
    if (child.contains("error")) {
      fail(child["error"].get<std::string>());
      continue;
    }
    ++completed;
    // The host decides lateness before any engine: the same for each.
    late = child["late"].get<uint64_t>();
    std::vector<RecordedMatch> matches = recordedMatches(child);
    uint64_t checksum = 0;
    for (const RecordedMatch& m : matches) checksum += matchChecksum(m.ts);
    report["matches"] = matches.size();
    report["checksum"] = hex64(checksum);
    if (!reference) {
      report["reference"] = true;
      reference = std::move(matches);
      reference_engine = engine;
    } else if (auto d = firstDifference(*reference, matches)) {
      agree = false;
      report["agrees"] = false;
      nlohmann::ordered_json diff;
      if (patterns) diff["pattern"] = lines[d->match.pattern].name;
      diff["ts"] = d->match.ts;
      diff["in_reference"] = d->in_reference;
      diff["in_engine"] = d->in_other;
      err << "cepbus match: engine '" << engine << "' differs from '" << reference_engine
          << "' (the reference): " << matches.size() << " matches against " << reference->size()
          << "; first difference " << diff.dump() << '\n';
      report["first_difference"] = std::move(diff);
    } else {
      report["agrees"] = true;
    }
    engines.push_back(std::move(report));
  }
  if (!any_accepted) {
    err << "cepbus match: no engine accepts the " << (patterns ? "patterns" : "query") << '\n';
  }
  nlohmann::ordered_json summary = {{"reference", reference
                                                      ? nlohmann::ordered_json(reference_engine)
                                                      : nlohmann::ordered_json()}};
  if (completed >= 2) {
    summary["agree"] = agree;
  } else {
    std::string why =
        completed == 0 ? "no engine completed" : "only " + reference_engine + " completed";
    for (size_t i = 0; i < incomplete.size(); ++i) why += (i == 0 ? ": " : ", ") + incomplete[i];
    if (any_accepted) err << "cepbus match: nothing to compare: " << why << '\n';
    summary["nothing_to_compare"] = why;
  }
  summary["skipped"] = (*replay)->skipped();
  summary["late"] = late;
  if (late > 0) err << lateLine("cepbus match", options.events_file, late) << '\n';
  summary["engines"] = std::move(engines);
  out << summary.dump() << '\n';
  out.flush();
  return completed >= 2 && agree ? 0 : kExitError;
}

}  // namespace

int runMatchCommand(const MatchCommandOptions& options, std::ostream& out, std::ostream& err) {
  const bool exporting = !options.export_format.empty();
  if (options.engine.empty() || (options.events_file.empty() && !exporting) ||
      options.query.empty() == options.patterns_file.empty()) {
    err << "cepbus match: --engine, --events (or --export) and one of --query/--patterns are "
           "required\n"
        << matchUsage();
    return kExitUsage;
  }
  const bool many = !options.patterns_file.empty();
  std::vector<PatternLine> lines;
  if (many) {
    Status s = readPatterns(options.patterns_file, lines);
    if (!s) {
      err << "cepbus match: " << s.message() << '\n';
      return kExitError;
    }
  } else {
    lines.push_back(PatternLine{"", options.query, "--query"});
  }

  auto detector_options = plugin::DetectorOptions::parse(options.options);
  if (!detector_options) {
    err << "cepbus match: " << detector_options.status().message() << '\n';
    return kExitUsage;
  }
  std::vector<std::string> paths = options.plugin_paths;
  for (std::string& p : plugin::PluginLoader::defaultSearchPaths()) paths.push_back(std::move(p));
  plugin::PluginLoader loader(std::move(paths));

  std::vector<pattern::Query> queries;
  for (const PatternLine& q : lines) {
    auto parsed = pattern::parseQuery(q.text, {.ts_unit = options.ts_unit});
    if (!parsed) {
      err << "cepbus match: " << q.label() << ": bad query: " << parsed.status().message() << '\n';
      return kExitError;
    }
    queries.push_back(std::move(parsed).value());
  }
  if (options.engine == kAllEngines) {
    return compareEngines(options, loader, lines, queries, *detector_options, out, err);
  }
  // --export runs no events: the model of the engine the rule picks, untried.
  const std::vector<detection::QueryRequest> requests =
      requestsOf(lines, queries, options.engine, *detector_options);
  auto plan = detection::plan(requests, planOptions(lines, !exporting), loader);
  if (!plan) {
    err << "cepbus match: " << plan.status().message() << '\n';
    return kExitError;
  }
  detection::DetectionGroup& group = plan->groups[0];
  if (options.engine == plugin::kAutoEngine) {
    err << "cepbus match: engine " << group.engine << " (" << group.reason << ")\n";
  }
  std::vector<PatternPrinter> printers;
  printers.reserve(lines.size());
  for (const PatternLine& q : lines) {
    printers.emplace_back(out, options.full, options.count,
                          many ? nlohmann::json(q.name).dump() : std::string());
  }
  std::ofstream late_out;
  if (!options.late_file.empty()) {
    late_out.open(options.late_file);
    if (!late_out) {
      err << "cepbus match: cannot open --late file '" << options.late_file << "'\n";
      return kExitError;
    }
  }
  MatchPrinter printer(std::move(printers), late_out.is_open() ? &late_out : nullptr);
  auto made = detection::Detection::create(group, printer);
  if (!made) {
    err << "cepbus match: " << made.status().message() << '\n';
    return kExitError;
  }
  detection::Detection& detection = **made;
  printNotices(noticesOf(group, lines), err);

  if (exporting) {
    auto model = detection.exportModel(options.export_format);
    if (!model) {
      err << "cepbus match: engine '" << group.engine << "': " << model.status().message() << '\n';
      return kExitError;
    }
    out << *model;
    out.flush();
    return 0;
  }

  MatchCheckpoints checkpoints(options,
                               identityOf(group.engine, lines, queries, *detector_options));
  if (Status s = checkpoints.start(detection, err); !s) {
    err << "cepbus match: " << s.message() << '\n';
    return kExitError;
  }
  const uint64_t resume_at = checkpoints.resumeAt();
  const uint64_t stop_at = checkpoints.stopAt();

  auto replay = EventReplay::open(options.events_file, badLines(options, err));
  if (!replay) {
    err << "cepbus match: " << replay.status().message() << '\n';
    return kExitError;
  }
  std::vector<EventPtr> batch;
  detection::InputVocabulary input;
  uint64_t position = 0;  // events read so far
  while (position < stop_at) {
    // Batches start at multiples of kReplayBatch in the file whether the
    // run resumes or not, so that the detector hears time pass where one
    // run makes it pass: at the end of each batch, but not at a checkpoint
    // inside one (the resumed run's first batch ends where one run's does).
    const uint64_t want = std::min<uint64_t>(kReplayBatch, stop_at - position);
    Status read = (*replay)->read(batch, want);
    input.observe(batch);
    const uint64_t first = position;
    position += batch.size();
    const bool cut = want < kReplayBatch && batch.size() == want;
    // Skipped events went to the detector before the checkpoint.
    const std::span<const EventPtr> fresh = std::span<const EventPtr>(batch).subspan(
        std::min<uint64_t>(batch.size(), resume_at > first ? resume_at - first : 0));
    if (!fresh.empty()) {
      if (Status s = cut ? detection.onEventsKeepingTime(fresh) : detection.onEvents(fresh); !s) {
        err << "cepbus match: " << options.events_file << ": " << (*replay)->where() << ": "
            << s.message() << '\n';
        return kExitError;
      }
    }
    if (!read) {
      err << "cepbus match: " << options.events_file << ": " << read.message() << '\n';
      return kExitError;
    }
    if (batch.empty()) break;
  }
  if (Status s = checkpoints.finish(detection, position, err); !s) {
    err << "cepbus match: " << s.message() << '\n';
    return kExitError;
  }
  if (detection.onTrial()) err << "cepbus match: " << trialLine(detection) << '\n';
  if (const uint64_t suppressed = detection.stats().suppressed; suppressed > 0) {
    err << "cepbus match: " << suppressed << (suppressed == 1 ? " match" : " matches")
        << " suppressed by output control (EMIT, AFTER MATCH)\n";
  }
  if (const auto state = detection.stats().partial_matches; state && state->evicted > 0) {
    err << "cepbus match: the state caps dropped or refused " << state->evicted
        << " partial matches (held at the most: " << state->peak_partial_matches
        << "; --option max_partial_matches, max_partition_partial_matches and state_policy set "
           "them)\n";
  }
  if (Status s = reportLate(detection, options, late_out, err); !s) {
    err << "cepbus match: " << s.message() << '\n';
    return kExitError;
  }
  warnUnknownNames(input, lines, queries, err);
  if (options.count) printer.printCounts();
  out.flush();
  return 0;
}

}  // namespace cepbus::app
