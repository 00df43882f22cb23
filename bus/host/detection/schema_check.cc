#include "bus/host/detection/schema_check.h"

#include "bus/core/pattern/parser.h"
#include "bus/host/detection/input_vocabulary.h"

namespace cepbus::detection {

std::vector<std::string> undeclaredNames(std::span<const descriptor::EventSchema> schemas,
                                         const descriptor::QuerySpec& query) {
  auto parsed = pattern::parseQuery(query.text, {.ts_unit = query.ts_unit});
  if (!parsed) return {};
  InputVocabulary declared;
  for (const descriptor::EventSchema& schema : schemas) {
    declared.declare(schema.type, schema.attributes);
  }
  std::vector<std::string> errors;
  for (const std::string& name :
       declared.unknownNames(namesUsedBy(*parsed, query.text), "<schemas>")) {
    errors.push_back(query.where.error("<query name=\"" + query.name + "\">: " + name).toString());
  }
  return errors;
}

}  // namespace cepbus::detection
