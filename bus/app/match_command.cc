#include "bus/app/match_command.h"

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "bus/core/event_json.h"
#include "bus/core/pattern/parser.h"
#include "bus/core/plugin/plugin_loader.h"

namespace cepbus::app {
namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr uint64_t kChecksumSeed = 0xcbf29ce484222325ULL;

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// Writes each match as one JSON line, or only counts it (--count).
class PrintingSink final : public plugin::MatchSink {
 public:
  PrintingSink(std::ostream& out, bool full, bool count, std::string pattern_json)
      : out_(out), full_(full), count_(count), pattern_json_(std::move(pattern_json)) {}

  void onMatch(const plugin::Match& match) override {
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

struct NamedQuery {
  std::string name;
  std::string text;
  std::string where;  // "--query" or "FILE:LINE", for messages
};

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// `name: query` when the text before the first ':' is a single word that is
// not the start of a query (queries begin with PATTERN).
void splitName(const std::string& line, std::string& name, std::string& text) {
  const size_t colon = line.find(':');
  if (colon != std::string::npos) {
    const std::string head = trim(std::string_view(line).substr(0, colon));
    bool word = !head.empty();
    for (char c : head) {
      word &= std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    }
    if (word) {
      name = head;
      text = trim(std::string_view(line).substr(colon + 1));
      return;
    }
  }
  text = trim(line);
}

Status readPatterns(const std::string& file, std::vector<NamedQuery>& out) {
  std::ifstream in(file);
  if (!in) return Status::ioError("cannot open patterns file '" + file + "'");
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    NamedQuery q;
    splitName(t, q.name, q.text);
    if (q.name.empty()) q.name = std::to_string(out.size() + 1);
    q.where = file + ":" + std::to_string(line_no);
    for (const NamedQuery& other : out) {
      if (other.name == q.name) {
        return Status::invalidArgument(q.where + ": duplicate pattern name '" + q.name +
                                       "' (first at " + other.where + ")");
      }
    }
    out.push_back(std::move(q));
  }
  if (out.empty()) return Status::invalidArgument("patterns file '" + file + "' has no query");
  return Status::ok();
}

}  // namespace

uint64_t matchChecksum(std::span<const int64_t> ts) {
  uint64_t h = kChecksumSeed;
  for (int64_t t : ts) h = splitmix64(h ^ static_cast<uint64_t>(t));
  return h;
}

const char* matchUsage() {
  return "usage: cepbus match --engine nfa|algebra|petri (--query TEXT | --patterns FILE)\n"
         "                    --events FILE [--format ts|full] [--count]\n"
         "                    [--option key=value]... [--plugin-path DIR]...\n";
}

Result<MatchCommandOptions> parseMatchArguments(std::span<const std::string> args) {
  MatchCommandOptions o;
  bool format_seen = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    bool has_value = false;
    if (const size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    auto take = [&](std::string& into) -> Status {
      if (!has_value) {
        if (i + 1 >= args.size()) return Status::invalidArgument(flag + " needs a value");
        value = args[++i];
      }
      into = value;
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
    } else if (flag == "--count" && !has_value) {
      o.count = true;
    } else if (flag == "--option") {
      std::string kv;
      s = take(kv);
      if (s && (kv.find('=') == std::string::npos || kv.front() == '=')) {
        s = Status::invalidArgument("--option " + kv + ": expected key=value");
      }
      o.options.push_back(kv);
    } else if (flag == "--plugin-path") {
      std::string dir;
      s = take(dir);
      o.plugin_paths.push_back(dir);
    } else {
      s = Status::invalidArgument("unknown argument '" + args[i] + "'");
    }
    if (!s) return s;
  }
  if (o.engine.empty()) return Status::invalidArgument("--engine is required");
  if (o.query.empty() == o.patterns_file.empty()) {
    return Status::invalidArgument("give exactly one of --query and --patterns");
  }
  if (o.events_file.empty()) return Status::invalidArgument("--events is required");
  if (o.full && o.count)
    return Status::invalidArgument("--count and --format full exclude each other");
  return o;
}

int runMatchCommand(const MatchCommandOptions& options, std::ostream& out, std::ostream& err) {
  if (options.engine.empty() || options.events_file.empty() ||
      options.query.empty() == options.patterns_file.empty()) {
    err << "cepbus match: --engine, --events and one of --query/--patterns are required\n"
        << matchUsage();
    return kExitUsage;
  }
  std::vector<NamedQuery> queries;
  if (!options.patterns_file.empty()) {
    Status s = readPatterns(options.patterns_file, queries);
    if (!s) {
      err << "cepbus match: " << s.message() << '\n';
      return kExitError;
    }
  } else {
    queries.push_back(NamedQuery{"", options.query, "--query"});
  }

  auto detector_options = plugin::DetectorOptions::parse(options.options);
  if (!detector_options) {
    err << "cepbus match: " << detector_options.status().message() << '\n';
    return kExitUsage;
  }
  std::vector<std::string> paths = options.plugin_paths;
  for (std::string& p : plugin::PluginLoader::defaultSearchPaths()) paths.push_back(std::move(p));
  plugin::PluginLoader loader(std::move(paths));
  auto plugin = loader.load(options.engine);
  if (!plugin) {
    err << "cepbus match: " << plugin.status().message() << '\n';
    return kExitError;
  }

  // Sinks are declared before detectors so that they outlive them.
  std::vector<std::unique_ptr<PrintingSink>> sinks;
  std::vector<std::unique_ptr<plugin::GuardedDetector>> detectors;
  for (const NamedQuery& q : queries) {
    const std::string label = q.where + (q.name.empty() ? "" : " (pattern '" + q.name + "')");
    auto parsed = pattern::parseQuery(q.text);
    if (!parsed) {
      err << "cepbus match: " << label << ": bad query: " << parsed.status().message() << '\n';
      return kExitError;
    }
    sinks.push_back(std::make_unique<PrintingSink>(
        out, options.full, options.count,
        options.patterns_file.empty() ? std::string() : nlohmann::json(q.name).dump()));
    auto detector =
        (*plugin)->createDetector(options.engine, *parsed, *detector_options, *sinks.back());
    if (!detector) {
      err << "cepbus match: " << label << ": " << detector.status().message() << '\n';
      return kExitError;
    }
    detectors.push_back(std::move(detector).value());
  }

  std::ifstream file;
  std::istream* in = &std::cin;
  if (options.events_file != "-") {
    file.open(options.events_file);
    if (!file) {
      err << "cepbus match: cannot open events file '" << options.events_file << "'\n";
      return kExitError;
    }
    in = &file;
  }
  EventLineReader reader(*in);
  while (true) {
    auto event = reader.next();
    if (!event) {
      if (event.status().code() == Status::Code::kNotFound) break;
      err << "cepbus match: " << options.events_file << ": " << event.status().message() << '\n';
      return kExitError;
    }
    for (size_t i = 0; i < detectors.size(); ++i) {
      Status s = detectors[i]->onEvent(*event);
      if (!s) {
        err << "cepbus match: " << options.events_file << ": line " << reader.lineNumber()
            << (queries[i].name.empty() ? "" : " (pattern '" + queries[i].name + "')") << ": "
            << s.message() << '\n';
        return kExitError;
      }
    }
  }
  for (size_t i = 0; i < detectors.size(); ++i) {
    Status s = detectors[i]->flush();
    if (!s) {
      err << "cepbus match: " << queries[i].where << ": at end of events: " << s.message() << '\n';
      return kExitError;
    }
  }
  if (options.count) {
    for (const auto& sink : sinks) sink->printCount();
  }
  out.flush();
  return 0;
}

}  // namespace cepbus::app
