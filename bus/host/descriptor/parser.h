#pragma once

// Parsing and validating deployment descriptors (TinyXML2).
//
// The parser does not stop at the first problem: it checks the whole
// document and reports every error it finds, each naming the file, the line
// and what was expected, e.g.
//
//   quickstart.xml:12: <stage name="dispatch">: attribute "capacity" must be a
//   positive integer, got "-3"
//
// so that `cepbus validate` can list them all at once. The one exception is
// XML that is not well formed: TinyXML2 stops at its first error, so that is
// the only error reported.
//
// Checked: well-formedness; unknown elements and attributes (typos, with a
// suggestion when one is close); required attributes; numbers and their
// ranges; enum values; unique names (stages, plugins, assemblies, units in an
// assembly, queries, params and options in their unit or query, durable
// subscriptions); stage references of routes; reject-at >= degrade-at and
// max-threads >= min-threads; address syntax (bus/host/descriptor/address.h).
// The elements services own (the AMQP and HTTP listeners, the cluster) are
// checked by the element parsers they register (element_parser.h). Not
// checked: query text and filter expressions (other modules compile them) and
// service-unit types and params (service factories check them at
// deployment).
//
// Relative paths (journal, plugin search path, params resolved through
// ServiceAssembly::resolvePath) are relative to the descriptor's folder.
//
// Thread safety: every function is reentrant; nothing is shared between calls.

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/status.h"
#include "bus/host/descriptor/descriptor.h"
#include "bus/host/descriptor/element_parser.h"

namespace cepbus::descriptor {

// Every error found by one parse, in document order (cross-reference errors,
// found after the whole document was read, come last).
struct ParseReport {
  std::vector<DescriptorError> errors;

  bool ok() const { return errors.empty(); }
  // One error per line, each as DescriptorError::toString().
  std::string toString() const;
};

// Reads and parses the descriptor at `path`; messages name the file as
// `path` was given. On failure the status (IoError when the file cannot be
// read, InvalidArgument otherwise) holds every error, one per line; `report`,
// when given, receives them one by one.
// `elements` reads the elements services own (element_parser.h); without it,
// such an element is an unknown one.
Result<Descriptor> parseDescriptorFile(const std::filesystem::path& path,
                                       ParseReport* report = nullptr,
                                       const ElementParsers* elements = nullptr);

// Parses a descriptor held in memory. `name` is the file name messages use;
// relative paths resolve against `base_dir` (none when it is empty).
Result<Descriptor> parseDescriptorString(std::string_view text, std::string_view name,
                                         ParseReport* report = nullptr,
                                         const std::filesystem::path& base_dir = {},
                                         const ElementParsers* elements = nullptr);

// Parses a fragment: a document whose root is a single <service-assembly>,
// as the admin API deploys at run time. Checks are those of a full
// descriptor, except that nothing outside the assembly can be referenced.
Result<ServiceAssembly> parseServiceAssembly(std::string_view text, std::string_view name,
                                             ParseReport* report = nullptr,
                                             const std::filesystem::path& base_dir = {});

}  // namespace cepbus::descriptor
