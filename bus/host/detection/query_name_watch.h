#pragma once

// QueryNameWatch: on the bus, what `cepbus match` says after a run
// (input_vocabulary.h) for one query of a long-running detection, which has
// no end: once its first kSampleEvents events (the events on its inputs,
// whatever their type) are in, the names the query uses that they never had,
// each as a warning, once; and from then on, for ever, how many events of
// the query's types lacked an attribute its predicates read (engine-
// independent: counted here, from the query's text, before any engine sees
// the event).
//
// The count costs, per event, a scan of the query's few event types by
// interned symbol and, for a type it reads, one Event::find() per attribute
// (both a comparison of ids): no string is built or hashed.
//
// Thread safety: onEvents() is called by one thread at a time (the
// detection's); missingAttribute() may be called from any thread.
// Ownership: a plain value owned by its query.

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/pattern/ast.h"
#include "bus/core/symbol.h"
#include "bus/host/detection/input_vocabulary.h"

namespace cepbus::detection {

class QueryNameWatch {
 public:
  // How many events a query's names are checked against, by default.
  static constexpr uint64_t kSampleEvents = 1000;

  QueryNameWatch(const pattern::Query& query, std::string_view text,
                 uint64_t sample_events = kSampleEvents);

  // Counts the events of `events` that lack an attribute the query's
  // predicates read. Returns the warnings of unknownNames() once, on the
  // call that completes the sample (possibly none); otherwise nothing.
  std::vector<std::string> onEvents(std::span<const EventPtr> events);

  // Events of the query's types that lacked an attribute its predicates read.
  uint64_t missingAttribute() const { return missing_.load(std::memory_order_relaxed); }

 private:
  // The attributes the query's predicates read from events of one type.
  struct TypeReads {
    Symbol type;
    std::vector<Symbol> attributes;
  };

  bool lacksRead(const Event& event) const;

  const std::vector<NameUse> uses_;
  const uint64_t sample_events_;
  std::vector<TypeReads> reads_;  // fixed at construction
  InputVocabulary sample_;
  bool checked_ = false;
  std::atomic<uint64_t> missing_{0};
};

}  // namespace cepbus::detection
