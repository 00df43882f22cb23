#pragma once

// ElementParser: how a service reads a descriptor element it owns, so that
// the descriptor parser knows the bus's own elements (stages, routes, plugins,
// service assemblies, ...) and nothing of a service's: the AMQP listener
// registers <listeners><amqp> with its users, permits and TLS, the admin
// listener <listeners><http>, the cluster node <cluster>. Registered by name,
// as Envoy registers typed-config factories: an element no parser claims is
// an unknown element, reported with a suggestion, never a crash.
//
// A parser turns the element into the service's own configuration, held by
// the descriptor as a ServiceElement (descriptor.h) whose `config` is that
// type; the service that registered the parser reads it back with
// Descriptor::element<Config>().
//
// Thread safety: a parser is immutable and parse() reentrant; ElementParsers
// is filled before the first parse, then read-only and safe from any thread.

#include <any>
#include <memory>
#include <string_view>
#include <vector>

#include "bus/core/status.h"
#include "bus/host/descriptor/element.h"

namespace cepbus::descriptor {

// Where a service's element may stand.
inline constexpr std::string_view kRootElement = "cepbus";
inline constexpr std::string_view kListenersElement = "listeners";

class ElementParser {
 public:
  virtual ~ElementParser() = default;

  // The element it reads: <tag> as a child of <parent> (kRootElement or
  // kListenersElement). Each may appear once.
  virtual std::string_view parent() const = 0;
  virtual std::string_view tag() const = 0;
  // Reads `element` (its attributes and children: an unknown one is the
  // parser's to report) into the service's configuration. Reports every
  // problem through `element` and returns what it could read; the descriptor
  // is refused when anything was reported.
  virtual std::any parse(const Element& element) const = 0;
};

class ElementParsers {
 public:
  // AlreadyExists when a parser for the same parent and tag is registered.
  Status add(std::unique_ptr<ElementParser> parser);
  // nullptr when none reads <tag> under <parent>.
  const ElementParser* find(std::string_view parent, std::string_view tag) const;
  // The tags registered under `parent`, for the parser's list of what may stand there.
  std::vector<std::string_view> tags(std::string_view parent) const;

 private:
  std::vector<std::unique_ptr<ElementParser>> parsers_;  // a handful: found by a scan
};

}  // namespace cepbus::descriptor
