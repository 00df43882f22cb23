// Query text -> parse -> (print -> parse again) -> compile for nfa, algebra
// and petri. A bad query must come back as a Status, never a crash; a query
// that parses must print to text that parses to the same print (the
// printer's documented round trip); compiling it is each engine's call.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "bus/core/pattern/parser.h"
#include "bus/core/pattern/printer.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

class NullSink final : public cepbus::plugin::MatchSink {
 public:
  void onMatch(const cepbus::plugin::Match& match) override { (void)match.size(); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cepbus;
  if (size > 4096) return -1;  // queries are short; long inputs only slow the search
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<pattern::Query> query = pattern::parseQuery(text);
  if (!query) return 0;

  const std::string printed = pattern::toString(*query);
  Result<pattern::Query> again = pattern::parseQuery(printed);
  fuzz::check(again.isOk(), "printed query does not parse:",
              printed + " -- " + (again ? "" : again.status().message()));
  fuzz::check(pattern::toString(*again) == printed, "print/parse round trip differs:", printed);

  static const plugin::DetectorOptions kNoOptions;
  NullSink sink;
  for (const fuzz::Engine& engine : fuzz::patternEngines()) {
    auto detector = engine.plugin->createDetector(engine.name, *query, kNoOptions, sink);
    if (!detector) continue;  // the engine said what it does not support
    Status s = (*detector)->flush();
    fuzz::check(s.code() != Status::Code::kInternal, "engine threw:", s.message());
    fuzz::check((*detector)->exceptionCount() == 0, "engine threw on flush");
  }
  return 0;
}
