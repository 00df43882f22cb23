#include "services/protocols/amqp/message_mapping.h"

#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/link.h>
#include <proton/netaddr.h>
#include <proton/session.h>
#include <proton/transport.h>

#include <cstdint>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <proton/codec/decoder.hpp>
#include <proton/codec/encoder.hpp>
#include <proton/codec/map.hpp>
#include <proton/codec/vector.hpp>
#include <proton/error.hpp>
#include <proton/scalar.hpp>
#include <proton/symbol.hpp>
#include <proton/timestamp.hpp>
#include <proton/types.hpp>
#include <string_view>
#include <vector>

#include "bus/core/utf8.h"
#include "bus/core/wire_names.h"

namespace cepbus::services::amqp {
namespace {

// The C++ binding keeps its pn_delivery_t protected; a pointer to the member
// named through a derived class is the sanctioned way to reach it.
struct DeliveryAccess : proton::transfer {
  static pn_delivery_t* raw(const proton::transfer& transfer) {
    constexpr auto kGet = &DeliveryAccess::pn_object;
    return (transfer.*kGet)();
  }
};

// The same for a link's pn_link_t.
struct LinkAccess : proton::link {
  static pn_link_t* raw(const proton::link& link) {
    constexpr auto kGet = &LinkAccess::pn_object;
    return (link.*kGet)();
  }
};

// The same for a pn_session_t.
struct SessionAccess : proton::session {
  static pn_session_t* raw(const proton::session& session) {
    constexpr auto kGet = &SessionAccess::pn_object;
    return (session.*kGet)();
  }
};

// The same for a connection's pn_transport_t.
struct TransportAccess : proton::transport {
  static pn_transport_t* raw(const proton::transport& transport) {
    constexpr auto kGet = &TransportAccess::pn_object;
    return (transport.*kGet)();
  }
};

// A scalar AMQP value as an attribute value; nullopt for anything else.
std::optional<Value> scalarValue(const proton::scalar& s) {
  switch (s.type()) {
    case proton::NULL_TYPE:
      return Value();
    case proton::BOOLEAN:
      return Value(proton::get<bool>(s));
    case proton::UBYTE:
    case proton::BYTE:
    case proton::USHORT:
    case proton::SHORT:
    case proton::UINT:
    case proton::INT:
    case proton::LONG:
    case proton::CHAR:
      return Value(proton::coerce<int64_t>(s));
    case proton::ULONG: {
      uint64_t u = proton::get<uint64_t>(s);
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return Value(static_cast<int64_t>(u));
    }
    case proton::FLOAT:
    case proton::DOUBLE:
      return Value(proton::coerce<double>(s));
    case proton::TIMESTAMP:
      return Value(static_cast<int64_t>(proton::get<proton::timestamp>(s).milliseconds()));
    case proton::STRING:
      return Value(proton::get<std::string>(s));
    case proton::SYMBOL:
      return Value(std::string(proton::get<proton::symbol>(s)));
    default:
      return std::nullopt;
  }
}

bool isInteger(proton::type_id t) {
  switch (t) {
    case proton::UBYTE:
    case proton::BYTE:
    case proton::USHORT:
    case proton::SHORT:
    case proton::UINT:
    case proton::INT:
    case proton::LONG:
    case proton::ULONG:
      return true;
    default:
      return false;
  }
}

MappedEvent failure(const char* condition, std::string description) {
  return MappedEvent{nullptr, condition, std::move(description)};
}

// One entry of an AMQP map of attributes (application properties or a map
// body), as encoded.
struct MapEntry {
  std::string name;
  proton::scalar value;
};

// Walks the map in `map` with a decoder into `out`: no std::map and no
// proton::value per entry, which made mapping cost several times the
// decoding itself. `what` names the map in errors ("application property",
// "body entry"); keys are strings, or symbols too when `symbol_keys`.
// Nullopt when every entry was read.
std::optional<MappedEvent> readMap(const proton::value& map, const char* what, bool symbol_keys,
                                   std::vector<MapEntry>& out) {
  proton::codec::decoder d(map);
  proton::codec::start start;
  d >> start;
  if (start.type != proton::MAP) {
    return failure(kDecodeError, std::string(what) + ": a map was expected, not " +
                                     proton::type_name(start.type));
  }
  for (size_t i = 0; i < start.size / 2; ++i) {
    const proton::type_id key_type = d.next_type();
    if (key_type != proton::STRING && (key_type != proton::SYMBOL || !symbol_keys)) {
      return failure(kDecodeError, std::string(what) + " keys must be strings");
    }
    MapEntry entry;
    if (key_type == proton::STRING) {
      d >> entry.name;
    } else {
      proton::symbol key;
      d >> key;
      entry.name = key;
    }
    if (!isValidUtf8(entry.name)) {
      return failure(kDecodeError, std::string(what) + " key is not valid UTF-8");
    }
    const proton::type_id value_type = d.next_type();
    if (value_type == proton::NULL_TYPE || proton::type_id_is_scalar(value_type)) {
      d >> entry.value;
      if ((value_type == proton::STRING || value_type == proton::SYMBOL) &&
          !isValidUtf8(scalarValue(entry.value)->asString())) {
        return failure(kDecodeError,
                       std::string(what) + " \"" + entry.name + "\": not valid UTF-8");
      }
    } else {
      return failure(kInvalidField, std::string(what) + " \"" + entry.name +
                                        "\": " + proton::type_name(value_type) +
                                        " is not a scalar attribute value");
    }
    out.push_back(std::move(entry));
  }
  d >> proton::codec::finish();
  return std::nullopt;
}

// The entry named `name`; of several, the last, as every later one
// overrides an attribute set by an earlier one.
const MapEntry* find(const std::vector<MapEntry>& entries, std::string_view name) {
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->name == name) return &*it;
  }
  return nullptr;
}

// A hold on a name of the message through the client's quota; nullopt with
// `refusal` set when it is refused.
std::optional<NameHold> holdName(std::string_view what, const std::string& name,
                                 WireNameQuota* names, MappedEvent& refusal) {
  std::optional<NameHold> hold = holdWireName(name, names);
  if (!hold) refusal = failure(kResourceLimitExceeded, wireNameRefusal(what, name, names));
  return hold;
}

MappedEvent map(const proton::message& message, WireNameQuota* names) {
  std::vector<MapEntry> props;
  // Read as received: asking the property map whether it is empty decodes it
  // into a std::map, and taking its value then encodes that back, before
  // readMap() decodes it once more. (Without properties, value() holds an
  // empty map.)
  if (const proton::value& properties = message.properties().value(); !properties.empty()) {
    if (auto failed = readMap(properties, "application property", false, props)) {
      return std::move(*failed);
    }
  }

  std::string type = message.subject();
  if (!isValidUtf8(type)) return failure(kDecodeError, "the subject is not valid UTF-8");
  if (type.empty()) {
    if (const MapEntry* e = find(props, "type")) {
      if (e->value.type() != proton::STRING && e->value.type() != proton::SYMBOL) {
        return failure(kInvalidField, "application property \"type\" must be a string");
      }
      type = scalarValue(e->value)->asString();
    }
  }
  if (type.empty()) {
    return failure(kInvalidField,
                   "no event type: the message has no subject and no application property "
                   "\"type\"");
  }
  // The way out carries the type as the subject, which Proton's C core keeps
  // as a C string: a NUL would cut the type short on every event sent on.
  if (type.find('\0') != std::string::npos) {
    return failure(kInvalidField, "the event type must not contain a NUL character");
  }

  Timestamp ts = 0;
  if (const MapEntry* e = find(props, "ts")) {
    if (!isInteger(e->value.type())) {
      return failure(kInvalidField, "application property \"ts\" must be an integer");
    }
    std::optional<Value> v = scalarValue(e->value);
    if (!v) return failure(kInvalidField, "application property \"ts\" is out of range");
    ts = v->asInt();
  } else if (message.creation_time().milliseconds() != 0) {
    ts = message.creation_time().milliseconds();
  } else {
    return failure(kInvalidField,
                   "no timestamp: the message has no application property \"ts\" and no "
                   "creation_time");
  }

  // A composite event's interval starts before its ts (the JSON contract's
  // "start").
  Timestamp start = ts;
  if (const MapEntry* e = find(props, "start")) {
    std::optional<Value> v = isInteger(e->value.type()) ? scalarValue(e->value) : std::nullopt;
    if (!v || v->asInt() > ts) {
      return failure(kInvalidField,
                     "application property \"start\" must be an integer not after \"ts\"");
    }
    start = v->asInt();
  }

  MappedEvent refused;
  std::optional<NameHold> type_name = holdName("event type", type, names, refused);
  if (!type_name) return refused;
  EventBuilder builder(std::move(*type_name));
  builder.interval(start, ts);
  for (const MapEntry& e : props) {
    if (e.name == "type" || e.name == "ts" || e.name == "start") continue;
    std::optional<Value> v = scalarValue(e.value);
    if (!v) {
      return failure(kInvalidField,
                     "application property \"" + e.name + "\": not a scalar attribute value");
    }
    // The event's own fields, as messageFromEvent() writes them.
    if (e.name == "prob") {
      const double p = v->toDouble();
      if (!v->isNumber() || !(p >= 0.0 && p <= 1.0)) {
        return failure(
            kInvalidField,
            "application property \"prob\" must be a number in [0, 1], got " + v->toString());
      }
      builder.probability(p);
      continue;
    }
    if (e.name == "key") {
      // As the JSON-lines contract: a partition key is a string or an integer.
      if (v->kind() != Value::Kind::kString && v->kind() != Value::Kind::kInt) {
        return failure(
            kInvalidField,
            "application property \"key\" must be a string or an integer, got " + v->toString());
      }
      builder.key(std::move(*v));
      continue;
    }
    std::optional<NameHold> name = holdName("attribute name", e.name, names, refused);
    if (!name) return refused;
    builder.set(std::move(*name), std::move(*v));
  }

  const proton::value& body = message.body();
  if (!body.empty() && body.type() != proton::NULL_TYPE) {
    if (body.type() != proton::MAP) {
      return failure(kDecodeError, std::string("the body must be a map of attributes, not ") +
                                       proton::type_name(body.type()));
    }
    std::vector<MapEntry> entries;
    if (auto failed = readMap(body, "body entry", true, entries)) return std::move(*failed);
    for (const MapEntry& e : entries) {
      std::optional<Value> v = scalarValue(e.value);
      if (!v) {
        return failure(kInvalidField, "body entry \"" + e.name +
                                          "\": " + proton::type_name(e.value.type()) +
                                          " is not a scalar attribute value");
      }
      std::optional<NameHold> name = holdName("attribute name", e.name, names, refused);
      if (!name) return refused;
      builder.set(std::move(*name), std::move(*v));
    }
  }

  const proton::message_id id = message.id();
  if (id.type() == proton::ULONG) builder.id(proton::get<uint64_t>(id));
  return MappedEvent{builder.build(), {}, {}};
}

proton::scalar toScalar(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNull:
      return proton::scalar();
    case Value::Kind::kBool:
      return proton::scalar(v.asBool());
    case Value::Kind::kInt:
      return proton::scalar(v.asInt());
    case Value::Kind::kDouble:
      return proton::scalar(v.asDouble());
    case Value::Kind::kString:
      return proton::scalar(v.asString());
  }
  return proton::scalar();
}

}  // namespace

MappedEvent eventFromMessage(const proton::message& message, WireNameQuota* names) {
  try {
    return map(message, names);
  } catch (const std::exception& e) {
    return failure(kDecodeError, std::string("cannot decode the message: ") + e.what());
  }
}

void messageFromEvent(const Event& event, proton::message& message) {
  message.clear();
  message.subject(std::string(event.type().name()));
  message.id(proton::message_id(static_cast<uint64_t>(event.id())));
  message.properties().put("ts", proton::scalar(static_cast<int64_t>(event.ts())));
  if (event.start() != event.ts()) {
    message.properties().put("start", proton::scalar(static_cast<int64_t>(event.start())));
  }
  if (event.probability() != 1.0) message.properties().put("prob", event.probability());
  if (!event.key().isNull()) message.properties().put("key", toScalar(event.key()));
  // Encoded in place: building a std::map of scalars first cost twice the
  // rest of the mapping.
  proton::codec::encoder body(message.body());
  body << proton::codec::start::map();
  for (const Attribute& a : event.attributes()) {
    body << std::string(a.name.name()) << toScalar(a.value);
  }
  body << proton::codec::finish();
}

proton::message messageFromEvent(const Event& event) {
  proton::message message;
  messageFromEvent(event, message);
  return message;
}

proton::message faultMessage(std::string_view fault, std::string_view description) {
  proton::message message;
  message.subject(kFaultSubject);
  message.properties().put(kFaultProperty, std::string(fault));
  message.properties().put(kFaultDescriptionProperty, std::string(description));
  return message;
}

void rejectWithCondition(proton::delivery& delivery, const proton::error_condition& condition) {
  pn_condition_t* c = pn_disposition_condition(pn_delivery_local(DeliveryAccess::raw(delivery)));
  pn_condition_set_name(c, condition.name().c_str());
  pn_condition_set_description(c, condition.description().c_str());
  delivery.reject();
}

proton::error_condition remoteCondition(const proton::transfer& transfer) {
  pn_condition_t* c = pn_disposition_condition(pn_delivery_remote(DeliveryAccess::raw(transfer)));
  if (c == nullptr || !pn_condition_is_set(c)) return {};
  const char* name = pn_condition_get_name(c);
  const char* description = pn_condition_get_description(c);
  return proton::error_condition(name ? name : "", description ? description : "");
}

bool asksPresettled(const proton::sender& sender) {
  return pn_link_remote_snd_settle_mode(LinkAccess::raw(sender)) == PN_SND_SETTLED;
}

void setMaxMessageSize(proton::receiver& receiver, uint64_t bytes) {
  pn_link_set_max_message_size(LinkAccess::raw(receiver), bytes);
}

void setIncomingCapacity(proton::session& session, size_t bytes) {
  pn_session_set_incoming_capacity(SessionAccess::raw(session), bytes);
}

size_t incompleteMessageBytes(const proton::receiver& receiver) {
  pn_delivery_t* d = pn_link_current(LinkAccess::raw(receiver));
  return d != nullptr && pn_delivery_partial(d) ? pn_delivery_pending(d) : 0;
}

uint64_t remoteMaxMessageSize(const proton::link& link) {
  return pn_link_remote_max_message_size(LinkAccess::raw(link));
}

int unsentDeliveries(const proton::link& link) { return pn_link_queued(LinkAccess::raw(link)); }

void freeLink(const proton::link& link) { pn_link_free(LinkAccess::raw(link)); }

WaitingMessage messageWaiting(const proton::receiver& receiver) {
  pn_link_t* link = LinkAccess::raw(receiver);
  pn_delivery_t* next = pn_link_current(link);
  if (next == nullptr || !pn_delivery_readable(next) || pn_delivery_partial(next) ||
      pn_delivery_aborted(next) || (pn_link_state(link) & PN_LOCAL_CLOSED) != 0) {
    return {};
  }
  return WaitingMessage{next, pn_delivery_pending(next)};
}

const void* deliveryKey(const proton::transfer& delivery) { return DeliveryAccess::raw(delivery); }

bool sentSettled(const proton::tracker& tracker) {
  pn_delivery_t* d = DeliveryAccess::raw(tracker);
  return pn_link_snd_settle_mode(pn_delivery_link(d)) == PN_SND_SETTLED;
}

pn_transport_t* rawTransport(const proton::transport& transport) {
  return TransportAccess::raw(transport);
}

std::string localAddress(const proton::transport& transport) {
  pn_transport_t* raw = TransportAccess::raw(transport);
  if (raw == nullptr) return {};
  const pn_netaddr_t* addr = pn_transport_local_addr(raw);
  if (addr == nullptr) return {};
  char buf[128];
  if (pn_netaddr_str(addr, buf, sizeof buf) <= 0) return {};
  return buf;
}

}  // namespace cepbus::services::amqp
