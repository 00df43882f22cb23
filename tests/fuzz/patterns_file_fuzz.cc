// The `cepbus match --patterns FILE` format: the bytes become the patterns
// file of a real `match` run (every engine in turn, over a few fixed events,
// matches only counted). A bad file must end in an exit status and a message,
// never a crash; the run itself is the command's own code, end to end.

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "bus/app/match_command.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

// Events of the types and attributes the seed patterns use.
constexpr char kEvents[] = R"({"type":"A","ts":1,"attrs":{"x":1,"price":10,"symbol":"IBM"}})"
                           "\n"
                           R"({"type":"B","ts":2,"attrs":{"x":2,"price":10,"symbol":"SUN"}})"
                           "\n"
                           R"({"type":"Stock","ts":3,"attrs":{"price":10,"symbol":"IBM","qty":5}})"
                           "\n"
                           R"({"type":"C","ts":4,"attrs":{"x":1,"price":11,"symbol":"IBM"}})"
                           "\n"
                           R"({"type":"Stock","ts":5,"attrs":{"price":12,"symbol":"SUN","qty":50}})"
                           "\n";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cepbus;
  if (size > 8192) return -1;
  static const std::string events_file = [] {
    const std::string path = (fuzz::tempDir() / "events.jsonl").string();
    std::ofstream(path) << kEvents;
    return path;
  }();
  static const std::string patterns_file = (fuzz::tempDir() / "patterns.txt").string();
  {
    std::ofstream out(patterns_file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  for (const fuzz::Engine& engine : fuzz::patternEngines()) {
    app::MatchCommandOptions options;
    options.engine = std::string(engine.name);
    options.patterns_file = patterns_file;
    options.events_file = events_file;
    options.count = true;
    options.plugin_paths = {CEPBUS_FUZZ_PLUGIN_DIR};
    std::ostringstream out, err;
    const int rc = app::runMatchCommand(options, out, err);
    fuzz::check(rc == 0 || !err.str().empty(), "match failed without a message");
    // GuardedDetector's words for an exception; a bad query's message echoes
    // the query, so words the input itself holds say nothing.
    fuzz::check(err.str().find(" threw from ") == std::string::npos ||
                    std::string_view(reinterpret_cast<const char*>(data), size).find("threw") !=
                        std::string_view::npos,
                "engine threw:", err.str());
  }
  return 0;
}
