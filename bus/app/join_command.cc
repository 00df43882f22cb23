#include "bus/app/join_command.h"

#include <cctype>
#include <memory>
#include <nlohmann/json.hpp>

#include "bus/app/event_replay.h"
#include "bus/app/flag_reader.h"
#include "bus/core/event_json.h"
#include "bus/core/pattern/parser.h"
#include "bus/host/detection/detection.h"
#include "bus/host/detection/planner.h"
#include "bus/host/loader/plugin_loader.h"

namespace cepbus::app {
namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

// Prints each pair as one JSON line, or only counts it (--count).
class PairSink final : public detection::DetectionSink {
 public:
  PairSink(std::ostream& out, bool count, Symbol key) : out_(out), count_(count), key_(key) {}

  void onMatch(size_t /*member*/, const plugin::Match& match) override {
    const Event& left = *match.event(0);
    const Event& right = *match.event(1);
    const std::string l = encodeEvent(left);
    const std::string r = encodeEvent(right);
    ++pairs_;
    if (count_) {
      checksum_ += splitmix64(splitmix64(kChecksumSeed ^ fnv1a64(l)) ^ fnv1a64(r));
      return;
    }
    const Value* key = left.find(key_);
    line_ = "{\"key\":";
    if (key != nullptr && key->kind() == Value::Kind::kInt) {
      line_ += std::to_string(key->asInt());
    } else {
      line_ += nlohmann::json(key != nullptr ? key->asString() : std::string()).dump();
    }
    line_ += ",\"left\":" + l + ",\"right\":" + r;
    line_ += ",\"dt\":" + std::to_string(right.ts() - left.ts());
    line_ += ",\"prob\":" + nlohmann::json(left.probability() * right.probability()).dump();
    line_ += "}\n";
    out_ << line_;
  }

  void printCount() const {
    out_ << "{\"pairs\":" << pairs_ << ",\"checksum\":\"" << hex64(checksum_) << "\"}\n";
  }

 private:
  std::ostream& out_;
  const bool count_;
  const Symbol key_;
  std::string line_;
  uint64_t pairs_ = 0;
  uint64_t checksum_ = 0;
};

bool isIdentifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

}  // namespace

const char* joinUsage() {
  return "usage: cepbus join --events FILE --key ATTR --site ATTR --time-matrix CSV\n"
         "                   --threshold P [--window N] [--workers N]\n"
         "                   [--expiry on_insert|batch] [--deletion-interval N]\n"
         "                   [--spill none|window_half|less_than_probability\n"
         "                    --memory-budget BYTES [--spill-dir DIR]]\n"
         "                   [--type TYPE] [--count] [--strict] [--plugin-path DIR]...\n"
         "A line of the events that is no event is named on stderr, counted and skipped\n"
         "(--strict: the first one ends the run, exit status 1).\n";
}

Result<JoinCommandOptions> parseJoinArguments(std::span<const std::string> args) {
  JoinCommandOptions o;
  const std::pair<const char*, std::string JoinCommandOptions::*> kValued[] = {
      {"--events", &JoinCommandOptions::events_file},
      {"--key", &JoinCommandOptions::key},
      {"--site", &JoinCommandOptions::site},
      {"--time-matrix", &JoinCommandOptions::time_matrix},
      {"--threshold", &JoinCommandOptions::threshold},
      {"--window", &JoinCommandOptions::window},
      {"--workers", &JoinCommandOptions::workers},
      {"--expiry", &JoinCommandOptions::expiry},
      {"--deletion-interval", &JoinCommandOptions::deletion_interval},
      {"--spill", &JoinCommandOptions::spill},
      {"--memory-budget", &JoinCommandOptions::memory_budget},
      {"--spill-dir", &JoinCommandOptions::spill_dir},
      {"--type", &JoinCommandOptions::type},
  };
  FlagReader flags(args);
  while (flags.next()) {
    const std::string& flag = flags.flag();
    if (flag == "--count" && !flags.hasInlineValue()) {
      o.count = true;
      continue;
    }
    if (flag == "--strict" && !flags.hasInlineValue()) {
      o.strict = true;
      continue;
    }
    std::string* into = nullptr;
    bool repeatable = false;
    if (flag == "--plugin-path") {
      o.plugin_paths.emplace_back();
      into = &o.plugin_paths.back();
      repeatable = true;
    }
    for (const auto& [name, member] : kValued) {
      if (flag == name) into = &(o.*member);
    }
    if (into == nullptr)
      return Status::invalidArgument("unknown argument '" + flags.argument() + "'");
    if (!repeatable && !into->empty()) return Status::invalidArgument(flag + " given twice");
    Result<std::string> value = flags.value();
    if (!value) return value.status();
    if (value->empty()) return Status::invalidArgument(flag + " needs a non-empty value");
    *into = std::move(*value);
  }
  if (o.events_file.empty()) return Status::invalidArgument("--events is required");
  if (o.key.empty()) return Status::invalidArgument("--key is required");
  if (o.threshold.empty()) return Status::invalidArgument("--threshold is required");
  if (o.time_matrix.empty() != o.site.empty()) {
    return Status::invalidArgument("--time-matrix and --site go together");
  }
  if (o.time_matrix.empty() && o.window.empty()) {
    return Status::invalidArgument("give --time-matrix and --site (or at least --window)");
  }
  if (!isIdentifier(o.key)) return Status::invalidArgument("--key " + o.key + ": not a name");
  if (!o.type.empty() && !isIdentifier(o.type)) {
    return Status::invalidArgument("--type " + o.type + ": not a name");
  }
  return o;
}

int runJoinCommand(const JoinCommandOptions& options, std::ostream& out, std::ostream& err) {
  std::vector<std::string> items;
  auto add = [&](const char* name, const std::string& value) {
    if (!value.empty()) items.push_back(std::string(name) + "=" + value);
  };
  add("time_matrix", options.time_matrix);
  add("site", options.site);
  add("threshold", options.threshold);
  add("window", options.window);
  add("workers", options.workers);
  add("expiry", options.expiry);
  add("deletion_interval", options.deletion_interval);
  add("spill", options.spill);
  add("memory_budget", options.memory_budget);
  add("spill_dir", options.spill_dir);
  auto detector_options = plugin::DetectorOptions::parse(items);
  if (!detector_options) {
    err << "cepbus join: " << detector_options.status().message() << '\n';
    return kExitUsage;
  }

  auto replay =
      EventReplay::open(options.events_file, BadLines{"cepbus join", &err, options.strict});
  if (!replay) {
    err << "cepbus join: " << replay.status().message() << '\n';
    return kExitError;
  }
  // The first batch is read now: its first event names the type to join.
  std::vector<EventPtr> batch;
  Status read = (*replay)->read(batch);
  if (!read && batch.empty()) {
    err << "cepbus join: " << options.events_file << ": " << read.message() << '\n';
    return kExitError;
  }
  const std::string type =
      !options.type.empty()
          ? options.type
          : (!batch.empty() ? std::string(batch[0]->type().name()) : std::string("Reading"));
  if (!isIdentifier(type)) {
    err << "cepbus join: the first event's type '" << type << "' is not a name; give --type\n";
    return kExitError;
  }
  const std::string query =
      "PATTERN AND(" + type + " a, " + type + " b) WHERE a." + options.key + " = b." + options.key;
  auto parsed = pattern::parseQuery(query);
  if (!parsed) {
    err << "cepbus join: " << parsed.status().message() << '\n';
    return kExitError;
  }

  std::vector<std::string> paths = options.plugin_paths;
  for (std::string& p : plugin::PluginLoader::defaultSearchPaths()) paths.push_back(std::move(p));
  plugin::PluginLoader loader(std::move(paths));
  detection::QueryRequest request;
  request.query = std::move(parsed).value();
  request.engine = "join";
  request.options = std::move(detector_options).value();
  detection::PlanOptions one;
  one.one_detector = true;
  auto plan = detection::plan(std::span(&request, 1), one, loader);
  if (!plan) {
    err << "cepbus join: " << plan.status().message() << '\n';
    return kExitError;
  }
  PairSink sink(out, options.count, Symbol::intern(options.key));
  auto made = detection::Detection::create(plan->groups[0], sink);
  if (!made) {
    err << "cepbus join: " << made.status().message() << '\n';
    return kExitError;
  }
  detection::Detection& detection = **made;
  // A failed spill is reported and survived; anything else stops the replay.
  auto check = [&](const Status& s, const std::string& where) {
    if (s) return true;
    if (s.code() == Status::Code::kIoError) {
      err << "cepbus join: warning: " << where << ": " << s.message() << '\n';
      return true;
    }
    err << "cepbus join: " << where << ": " << s.message() << '\n';
    return false;
  };
  while (true) {
    if (!batch.empty() &&
        !check(detection.onEvents(batch), options.events_file + ": " + (*replay)->where())) {
      return kExitError;
    }
    if (!read) {
      err << "cepbus join: " << options.events_file << ": " << read.message() << '\n';
      return kExitError;
    }
    if (batch.empty()) break;
    read = (*replay)->read(batch);
  }
  if (!check(detection.flush(), options.events_file + ": at end of events")) return kExitError;
  if (const uint64_t late = detection.stats().late; late > 0) {
    err << lateLine("cepbus join", options.events_file, late) << '\n';
  }
  if (options.count) sink.printCount();
  out.flush();
  return 0;
}

}  // namespace cepbus::app
