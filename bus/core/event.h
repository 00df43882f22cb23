#pragma once

// Event: the immutable unit everything on the bus moves.
//
// An event has an interned type, an interval ⟨start, end⟩ of timestamps in
// the units of its stream (an atomic event has start == end), attributes,
// an existence probability (P4's uncertain tuples; 1 by default), an optional
// partition key, a cost that admission control turns into a priority (P1),
// a process-unique id, the endpoint it came from, and — for a composite
// event — the events it was built from.
//
// Events are built once with EventBuilder and then shared read-only through
// EventPtr (shared_ptr<const Event>); they are safe to read from any thread.
// Attributes are kept sorted by symbol id, so find() is a short scan of ids:
// no string is hashed on the hot path.
//
// An event holds the held names (symbol.h) it carries — type, source,
// attribute names from a client that no query knows — and gives them back
// when it dies; an event of permanent names only holds nothing and pays
// nothing for it.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bus/core/api.h"
#include "bus/core/symbol.h"
#include "bus/core/value.h"
#include "bus/core/wire_names.h"

namespace cepbus {

using Timestamp = int64_t;
using EventId = uint64_t;

class Event;
using EventPtr = std::shared_ptr<const Event>;

struct CEPBUS_API Attribute {
  Symbol name;
  Value value;
};

class CEPBUS_API Event {
 public:
  // Only EventBuilder makes a Key, so only it makes events; the constructor
  // is public for std::make_shared (one allocation for event and count).
  class Key {
    friend class EventBuilder;
    Key() = default;
  };
  explicit Event(Key /*unused*/) {}
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  Symbol type() const { return type_; }
  Timestamp start() const { return start_; }
  Timestamp end() const { return end_; }
  // The event's timestamp as the JSON contract names it: its end.
  Timestamp ts() const { return end_; }

  // The attribute `name`, or nullptr when the event has none.
  const Value* find(Symbol name) const;
  std::span<const Attribute> attributes() const { return attrs_; }

  double probability() const { return probability_; }
  // The partition key; null when the event has none.
  const Value& key() const { return key_; }
  int32_t cost() const { return cost_; }
  EventId id() const { return id_; }
  Symbol source() const { return source_; }

  bool isComposite() const { return !constituents_.empty(); }
  std::span<const EventPtr> constituents() const { return constituents_; }

 private:
  friend class EventBuilder;

  Symbol type_;
  Timestamp start_ = 0;
  Timestamp end_ = 0;
  double probability_ = 1.0;
  int32_t cost_ = 0;
  EventId id_ = 0;
  Symbol source_;
  Value key_;
  std::vector<Attribute> attrs_;
  std::vector<EventPtr> constituents_;
  bool holds_names_ = false;  // some symbol above is held: let go in ~Event()
};

// Returns a fresh process-unique event id. Ids embed a per-process random
// prefix so that ids minted after a restart do not collide with journaled ones.
CEPBUS_API EventId nextEventId();

// Builds one Event. Not thread-safe; use one builder per thread.
class CEPBUS_API EventBuilder {
 public:
  explicit EventBuilder(Symbol type);
  explicit EventBuilder(std::string_view type) : EventBuilder(Symbol::intern(type)) {}
  // The event takes over the hold (a decoder's name from the wire).
  explicit EventBuilder(NameHold type);

  // An atomic event at `ts`.
  EventBuilder& at(Timestamp ts);
  EventBuilder& interval(Timestamp start, Timestamp end);
  // Sets (or replaces) an attribute. A held `name` must be kept alive by
  // the caller meanwhile (read off an event it holds); the event holds it too.
  EventBuilder& set(Symbol name, Value value);
  // The same, the event taking over the hold.
  EventBuilder& set(NameHold name, Value value);
  EventBuilder& set(std::string_view name, Value value);
  // Room for `n` attributes, so that a decoder that knows the count sets them
  // with a single allocation.
  EventBuilder& reserveAttributes(size_t n);
  EventBuilder& probability(double p);
  EventBuilder& key(Value key);
  EventBuilder& cost(int32_t cost);
  EventBuilder& id(EventId id);
  EventBuilder& source(Symbol endpoint);
  EventBuilder& source(NameHold endpoint);
  // Adds a constituent and widens the interval to cover it, so a composite
  // event spans ⟨min start, max end⟩ of its parts (P1).
  EventBuilder& constituent(EventPtr part);

  // Finishes the event; assigns a fresh id when none was set. The builder is
  // left empty and must not be reused.
  EventPtr build();

 private:
  std::shared_ptr<Event> event_;
  bool interval_set_ = false;
};

}  // namespace cepbus
