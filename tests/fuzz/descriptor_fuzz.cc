// Deployment descriptor: XML text -> Descriptor with every check of the
// parser (well-formedness, elements, attributes, ranges, references) and of
// the element parsers of the bus's services (<amqp>, <http>, <cluster>), then
// the query texts and filters it carries through their own parsers, as
// `cepbus validate` does. Both as a whole descriptor and as the
// <service-assembly> fragment the admin API deploys.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "bus/app/bus.h"
#include "bus/core/pattern/parser.h"
#include "bus/host/descriptor/parser.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

void checkAssembly(const cepbus::descriptor::ServiceAssembly& assembly) {
  for (const auto& unit : assembly.units) {
    for (const auto& sub : unit.subscriptions) {
      if (!sub.filter.empty()) (void)cepbus::pattern::parseFilter(sub.filter);
    }
    for (const auto& query : unit.queries) (void)cepbus::pattern::parseQuery(query.text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cepbus;
  if (size > 16384) return -1;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  descriptor::ParseReport report;
  auto parsed = descriptor::parseDescriptorString(text, "fuzz.xml", &report, "/nonexistent",
                                                  &app::builtinElementParsers());
  // Failure and a report of errors go together, and every error names the file.
  fuzz::check(parsed.isOk() == report.ok(), "status and report disagree");
  if (parsed) {
    for (const auto& assembly : parsed->assemblies) checkAssembly(assembly);
  } else {
    fuzz::check(!parsed.status().message().empty(), "descriptor refused without a message");
  }

  descriptor::ParseReport fragment_report;
  auto fragment = descriptor::parseServiceAssembly(text, "fragment.xml", &fragment_report);
  fuzz::check(fragment.isOk() == fragment_report.ok(), "fragment status and report disagree");
  if (fragment) checkAssembly(*fragment);
  return 0;
}
