#pragma once

// `cepbus subscribe PATTERN`: prints what a running bus publishes on the
// addresses PATTERN matches ('*' one segment, '#' any number), one event a
// line in the JSON-lines format (bus/core/event_json.h, compact: a composite
// event with its "start", as the replay sink prints it), as an AMQP 1.0
// client attaching a receiving link (services/protocols/amqp/message_mapping.h
// maps each message back to its event).
//
// - At least once by default: a message is accepted once its line is
//   written and flushed; --at-most-once asks the bus for pre-settled ones.
// - A message that is no event (a foreign client's, a fault) is named on
//   stderr, counted and rejected with the reason; the run goes on.
// - The bus need not be up yet: the command waits for it (saying so once
//   on stderr) and connects when it listens, so it can be started before a
//   bus whose first events it must not miss; it waits again if the bus
//   goes away. --timeout ends the wait, and the run, once nothing arrived
//   for that long.
// - --count N stops after N events (credit is never granted beyond them).
// - SIGINT/SIGTERM end the run; stderr then says how many events arrived.
//
// Exit status: 0 when --count events arrived, or without --count when the
// run ended (signal, --timeout, the bus closing); 1 when --count was not
// reached, the bus refused the subscription or the credentials; 2 for a bad
// command line.

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>

#include "bus/app/command_spec.h"
#include "bus/core/status.h"
#include "services/protocols/amqp/client_options.h"

namespace cepbus::app {

struct SubscribeOptions {
  services::amqp::AmqpPeer peer;
  std::string pattern;
  std::optional<uint64_t> count;                     // stop after this many events
  std::optional<std::chrono::milliseconds> timeout;  // stop after this long without one
  bool at_most_once = false;
};

const CommandSpec& subscribeSpec();
Result<SubscribeOptions> parseSubscribeArguments(std::span<const std::string> args);
// Blocks SIGINT and SIGTERM while it runs (call it before any other thread
// starts, as the command line does).
int runSubscribeCommand(const SubscribeOptions& options, std::ostream& out, std::ostream& err);

}  // namespace cepbus::app
