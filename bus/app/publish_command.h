#pragma once

// `cepbus publish ADDRESS`: publishes JSON-lines events (docs/concepts.md,
// "Events") to an address of a running bus over AMQP 1.0, as any client
// would (services/protocols/amqp/message_mapping.h maps each event to its
// message), and reports what became of each.
//
// - Input: --events FILE, or standard input ('-', the default), read as it
//   arrives, so `cepbus publish` may sit at the end of a pipe. A bad line
//   is reported on stderr as "FILE: line N: reason", counted and skipped;
//   with --strict it ends the run (what was sent before is still settled).
// - Pace: as fast as the bus grants credit, or --rate N events per second.
// - Guarantee: at-least-once (default) sends unsettled and waits for each
//   outcome; at-most-once sends pre-settled (no outcome to wait for).
// - Report (stdout, JSON lines): one line per event in the order the bus
//   settles them, {"line":N,"type":T,"ts":TS,"outcome":"accepted"} — or
//   "rejected" with the AMQP "condition" and "description" the bus gave,
//   "released" (refused for now: publish it again), "sent" (at-most-once);
//   --quiet leaves out the accepted ones. Then a summary,
//   {"events":N,"sent":N,"accepted":N,"rejected":N,"released":N,
//    "unsettled":N,"not_sent":N,"bad_lines":N}.
// - Failures, named on stderr: the bus unreachable, the connection or SASL
//   refused, the link to ADDRESS refused (its condition), no answer within
//   --timeout while the bus owes one.
// - SIGINT/SIGTERM stop the reading; what was sent is still settled and the
//   summary printed.
//
// Exit status: 0 when every event read was accepted (at-most-once: sent)
// and every line was an event, 1 otherwise, 2 for a bad command line.

#include <chrono>
#include <ostream>
#include <span>
#include <string>

#include "bus/app/command_spec.h"
#include "bus/core/status.h"
#include "services/protocols/amqp/client_options.h"

namespace cepbus::app {

struct PublishOptions {
  services::amqp::AmqpPeer peer;
  std::string address;
  std::string events_file = "-";  // '-': standard input
  double rate = 0;                // events per second; 0: as fast as credit allows
  bool at_most_once = false;
  bool strict = false;  // a bad line ends the run
  bool quiet = false;   // report only the events not accepted
  // How long the bus may owe an answer (the connection, credit for waiting
  // events, an outcome) before the run gives up.
  std::chrono::milliseconds timeout{30'000};
};

const CommandSpec& publishSpec();
Result<PublishOptions> parsePublishArguments(std::span<const std::string> args);
// Blocks SIGINT and SIGTERM while it runs (call it before any other thread
// starts, as the command line does).
int runPublishCommand(const PublishOptions& options, std::ostream& out, std::ostream& err);

}  // namespace cepbus::app
