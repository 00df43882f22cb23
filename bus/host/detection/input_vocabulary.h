#pragma once

// The names a query relies on, and whether its input ever had them: a query
// whose event type, attribute or PARTITION BY key never occurs in the events
// runs without error and never matches (or, for a key, puts every event in
// one partition), so the host says so instead of staying silent.
//
// namesUsedBy() lists what a query names, each at the line and column of its
// first mention; InputVocabulary collects the event types and the attributes
// of each type that events carried, and unknownNames() turns every name the
// input never had into a warning with the nearest name that did occur
// ("did you mean 'price'?", bus/base/spelling.h).
//
// Thread safety: InputVocabulary is a plain value, used by one thread at a
// time; namesUsedBy() is pure.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/pattern/ast.h"
#include "bus/core/symbol.h"
#include "bus/core/wire_names.h"

namespace cepbus::detection {

// One name a query needs its events to carry.
struct NameUse {
  enum class Kind : uint8_t {
    kEventType,     // an element's type: SEQ(Temp a, ...)
    kAttribute,     // a.price in WHERE, RETURN, a selection or an aggregate
    kPartitionKey,  // PARTITION BY sensor
  };
  Kind kind = Kind::kEventType;
  std::string name;
  // kAttribute: the event type of the variable it is read from; empty for
  // the other kinds (a key is read from every type of the query).
  std::string type;
  pattern::SourcePos pos;
  // kAttribute: read by a predicate (WHERE, a selection, an aggregation's
  // condition), not only by RETURN.
  bool predicate = false;
};

// What `query` (parsed from `text`) names, each name once, at its first
// mention, in the order kinds are listed above. Built-in attributes (ts,
// start, prob, type) are left out: every event has them. PARTITION BY keys
// take their positions from `text`, which the AST does not keep.
std::vector<NameUse> namesUsedBy(const pattern::Query& query, std::string_view text);

class InputVocabulary {
 public:
  // Records the event's type and its attributes' names.
  void observe(const Event& event);
  void observe(std::span<const EventPtr> events);

  // Declares an event type and its attributes (a descriptor's <schemas>)
  // instead of observing events: the warnings then say a name "is not
  // declared" rather than that it "never occurred".
  void declare(std::string_view type, std::span<const std::string> attributes);

  // How many events observe() saw.
  uint64_t events() const { return events_; }
  bool hadType(Symbol type) const { return attributes_.contains(type); }

  // One warning per name in `uses` the input never had, "line L, column C:
  // attribute 'prize' never occurred on a Temp event in the input; did you
  // mean 'price'?", `input` naming what was observed. An attribute or key
  // of a type that never occurred is left out: the warning about the type
  // says it all.
  std::vector<std::string> unknownNames(std::span<const NameUse> uses,
                                        std::string_view input = "the input") const;

 private:
  std::string unknownType(const NameUse& use, std::string_view input) const;
  std::string unknownAttribute(const NameUse& use, std::string_view input) const;
  std::string unknownKey(const NameUse& use, std::span<const NameUse> uses,
                         std::string_view input) const;

  // Holds a name from the wire (symbol.h) that the event observed carries,
  // so that it outlives the event.
  void keep(Symbol name);
  // The symbol of `name` as the input had it, a held one included; the
  // empty symbol for a name it never had.
  Symbol lookup(std::string_view name) const;

  const char* absent() const { return declared_ ? "is not declared" : "never occurred"; }

  std::unordered_map<Symbol, std::unordered_set<Symbol>> attributes_;  // per event type
  std::vector<NameHold> holds_;                              // of the held names among attributes_
  std::map<std::string, Symbol, std::less<>> held_by_name_;  // the same, by name
  uint64_t events_ = 0;
  bool declared_ = false;
};

}  // namespace cepbus::detection
