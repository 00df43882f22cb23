#pragma once

// Queries checked against the event types a descriptor declares in
// <schemas>: with a schema, a query that names an event type, an attribute
// or a PARTITION BY key the schema does not declare is a start-up error
// (`cepbus validate` says so) instead of a query that silently never
// matches. Without a schema nothing is checked.
//
// Thread safety: pure.

#include <span>
#include <string>
#include <vector>

#include "bus/host/descriptor/descriptor.h"

namespace cepbus::detection {

// One error per name `query` uses that `schemas` (not empty) do not declare:
// "file:12: <query name=\"q\">: line 2, column 7: attribute 'prize' is not declared
// on a Stock event in <schemas>; did you mean 'price'?". A query that does
// not parse gets none here: its service reports it.
std::vector<std::string> undeclaredNames(std::span<const descriptor::EventSchema> schemas,
                                         const descriptor::QuerySpec& query);

}  // namespace cepbus::detection
