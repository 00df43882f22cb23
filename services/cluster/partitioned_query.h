#pragma once

// What makes a query safe to run partition by partition.
//
// A node sees only its partitions' events, so a query gives across the
// cluster what it gives on the whole stream only if every match's events —
// negated ones included, since an event of another partition could veto a
// match — share a partition. That holds when, for every key attribute k,
// the query names k in PARTITION BY, or its WHERE ties every variable to one
// other by conjuncts `x.k = y.k` (a Kleene variable through `b[i].k`), or
// to one literal. A query must also have WITHIN: a node settles an input
// message only once it has left every window, so an unbounded window would
// hold every message forever. A window query (FROM ... WINDOW) instead
// groups by every key attribute, over tumbling or sliding windows, whose
// length bounds how long a message is needed; a session has no such bound.

#include <span>
#include <string>

#include "bus/core/pattern/ast.h"
#include "bus/core/status.h"

namespace cepbus::services::cluster {

// OK, or InvalidArgument saying which rule `query` (named `name` in the
// message) breaks and what to write instead.
// `engine` matters for order-sensitive semantics: strict contiguity, and the
// algebra engine's `recent` context (its default), look at neighbouring
// events of the whole stream, so they need PARTITION BY over the key.
Status checkPartitionedQuery(const pattern::Query& query, std::string_view name,
                             std::string_view engine, std::span<const std::string> key);

}  // namespace cepbus::services::cluster
