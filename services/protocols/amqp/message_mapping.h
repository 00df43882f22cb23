#pragma once

// The AMQP 1.0 <-> event mapping of the AMQP binding (docs/amqp.md, "Message
// <-> event"), and the Proton details the C++ API does not expose: the error
// condition carried by a `rejected` outcome, both ways, and the settle
// modes of a subscriber's link, the max-message-size of a publisher's.
//
// Message -> event:
//   type       subject, else application property "type" (a string)
//   ts         application property "ts" (an integer) wins, else
//              creation_time (milliseconds since the epoch); neither: refused
//   start      application property "start" (an integer, not after ts): where
//              a composite event's interval starts; absent: at ts
//   attributes application properties (but "type", "ts" and "start") and then the
//              entries of a map body (string or symbol keys; a body entry
//              replaces a property of the same name); values must be scalars
//              (null, bool, integers, float/double, string, symbol, timestamp)
//   id         a ulong message-id becomes the event id (so a redelivered
//              message keeps its id and reliable flows can suppress it)
//   prob, key  application properties "prob" (a number in [0, 1]) and "key"
//              are the event's probability and partition key, not attributes
//   body       empty or a map; anything else is refused
// Event -> message: subject = type, application property "ts" = ts,
// message-id = event id (ulong), body = map of the attributes; a start
// before ts, a non-unit probability and a partition key travel as
// application properties "start", "prob" and "key". Constituents of a
// composite event are not carried.
//
// Faults (request/response): a message with subject "cepbus.fault",
// application properties "fault" (what ended the request: "fault",
// "rejected", "timeout", ...) and "fault-description" (why), no body. A
// provider answering over AMQP sends the same properties to fail a request.
//
// Thread-safety: free functions over values; the Proton objects passed in
// must be used by one thread at a time (Proton's rule).

#include <proton/types.h>

#include <cstddef>
#include <proton/delivery.hpp>
#include <proton/error_condition.hpp>
#include <proton/link.hpp>
#include <proton/message.hpp>
#include <proton/receiver.hpp>
#include <proton/sender.hpp>
#include <proton/session.hpp>
#include <proton/tracker.hpp>
#include <proton/transfer.hpp>
#include <proton/transport.hpp>
#include <string>
#include <string_view>

#include "bus/core/event.h"
#include "bus/core/wire_names.h"

namespace cepbus::services::amqp {

inline constexpr char kInvalidField[] = "amqp:invalid-field";
inline constexpr char kDecodeError[] = "amqp:decode-error";
inline constexpr char kNotFound[] = "amqp:not-found";
// A limit of the receiver: here a new event type, attribute name or address
// beyond the budget of names clients may create (bus/core/wire_names.h).
inline constexpr char kResourceLimitExceeded[] = "amqp:resource-limit-exceeded";
// A message larger than the receiving link's max-message-size.
inline constexpr char kMessageSizeExceeded[] = "amqp:link:message-size-exceeded";
inline constexpr char kFaultSubject[] = "cepbus.fault";
inline constexpr char kFaultProperty[] = "fault";
inline constexpr char kFaultDescriptionProperty[] = "fault-description";

// Either the event or the AMQP error condition that says why there is none.
struct MappedEvent {
  EventPtr event;           // null when the message cannot be mapped
  std::string condition;    // kInvalidField, kDecodeError or kResourceLimitExceeded
  std::string description;  // what is wrong, for the sender
};

// Never throws: a Proton decoding error becomes kDecodeError. New names
// (the type, attribute names) are charged to `names`, the sending client's
// quota, when given (bus/core/wire_names.h).
MappedEvent eventFromMessage(const proton::message& message, WireNameQuota* names = nullptr);

proton::message messageFromEvent(const Event& event);
// The same into `message`, cleared first: a message reused on a hot path
// keeps its allocations (a third of the cost of a fresh one).
void messageFromEvent(const Event& event, proton::message& message);

// The answer to a request that ended without a reply.
proton::message faultMessage(std::string_view fault, std::string_view description);

// Settles `delivery` as rejected, carrying `condition` in the disposition
// (the C++ API's delivery::reject() cannot).
void rejectWithCondition(proton::delivery& delivery, const proton::error_condition& condition);

// The error condition a peer put in the outcome it settled `transfer` with
// (empty when none).
proton::error_condition remoteCondition(const proton::transfer& transfer);

// True when the receiver at the other end of `sender` asked for pre-settled
// messages (snd-settle-mode "settled" in its attach: an at-most-once
// receiver), which the sender should honour.
bool asksPresettled(const proton::sender& sender);

// Sets the max-message-size `receiver` announces in its attach (call before
// open()); the C++ API's receiver_options has no such option.
void setMaxMessageSize(proton::receiver& receiver, uint64_t bytes);

// Bounds the bytes of incoming messages, complete or not, that `session`
// buffers: Proton then grants the peer only the transfer window that is
// left of them. It takes effect only with a max frame size on the
// connection (connection_options::max_frame_size), and must be at least
// that frame size.
void setIncomingCapacity(proton::session& session, size_t bytes);

// The bytes of a message arriving on `receiver` that has not arrived whole
// yet (Proton hands over a message only once it is complete); 0 when none.
size_t incompleteMessageBytes(const proton::receiver& receiver);

// The max-message-size the peer of `link` announced in its attach (0: no
// limit).
uint64_t remoteMaxMessageSize(const proton::link& link);

// Deliveries on `link` not written to the transport yet (pn_link_queued).
int unsentDeliveries(const proton::link& link);

// Lets Proton free `link` (pn_link_free), settling what is unsettled on it.
// Proton keeps every link of a connection, closed or not, until the
// application frees it or the connection goes, and the C++ binding never
// frees one: a client that opens and closes links on one connection would
// otherwise leave some 2.6 kB in the bus per link. Call once per link, after
// its detach is answered (Proton's own close or detach, which follows the
// handler's on_*_close or on_*_detach, must have run) and never use it again.
void freeLink(const proton::link& link);

// A whole message read for a receiver and not yet handed to its handler.
struct WaitingMessage {
  const void* delivery = nullptr;  // its deliveryKey(); null when none waits
  size_t bytes = 0;                // its size as encoded: what Proton will decode
};

// What, after the message its handler has now, waits to be handed to
// `receiver` whole (the current delivery, complete, not aborted, its link
// open): Proton's next on_message for it comes with the same batch of
// events and decodes exactly those bytes. Read before Proton decodes it,
// its size costs nothing; after, only encoding the message again tells it.
WaitingMessage messageWaiting(const proton::receiver& receiver);

// What tells a delivery apart from the others of its link (a WaitingMessage's
// `delivery`), while it is not settled.
const void* deliveryKey(const proton::transfer& delivery);

// True when the message `tracker` follows went out pre-settled: its link
// sends settled (an at-most-once receiver asked for it), so the receiver
// sends no outcome for it and nothing is left to wait for.
bool sentSettled(const proton::tracker& tracker);

// "host:port" of this side of `transport`'s socket (empty when unknown): how
// a broker's management API names the connection's peer, so that another
// process can find and close it.
std::string localAddress(const proton::transport& transport);

// The Proton C transport under `transport`, for what the C++ binding does
// not offer (its socket's addresses).
pn_transport_t* rawTransport(const proton::transport& transport);

}  // namespace cepbus::services::amqp
