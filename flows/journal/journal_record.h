#pragma once

// The values a Journal (journal.h) takes and gives back: a delivery as
// journaled, an acknowledgement of one, an id remembered as delivered. Apart
// from journal.h so that the code storing them (batch_record.h) needs no
// more than these.
//
// Thread-safety: plain values.

#include <cstdint>
#include <string>

#include "bus/core/event.h"
#include "bus/core/symbol.h"
#include "bus/core/wire_names.h"
#include "flows/exchange.h"

namespace cepbus::flows {

// One accepted delivery of an event to a target, as journaled.
struct JournalRecord {
  uint64_t seq = 0;
  SharedName target;  // held while the record lives, as its address
  EventId event_id = 0;
  SharedName address;  // holds a client's address while the record lives
  Symbol sender;
  Pattern pattern = Pattern::kInOnly;
  uint64_t correlation_id = 0;
  // The event as stored (event_record.h: a binary record, or the JSON line
  // of a journal written before it); decodeEventRecord() reads either.
  std::string stored_event;
  // When stored_event is empty, commit() encodes this event instead: the
  // encoding then costs the journal thread, not the sender, and a record
  // that is never written never pays for it. pending() fills one of the two.
  EventPtr event;
};

// A target acknowledged the delivery `seq` of `event_id`.
struct JournalAck {
  uint64_t seq = 0;
  SharedName target;
  EventId event_id = 0;
  // False when the record was never written (cancelled before a transaction
  // took it): there is no pending row to delete, only the id to remember.
  bool written = true;
};

struct DeliveredId {
  SharedName target;
  EventId event_id = 0;
};

}  // namespace cepbus::flows
