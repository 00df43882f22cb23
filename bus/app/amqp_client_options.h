#pragma once

// The command-line options `cepbus publish` and `cepbus subscribe` share:
// where the bus is and how to authenticate, as the bus's AMQP listener
// takes it (services/protocols/amqp/client_options.h).
//
//   --url URL            amqp://HOST:PORT or amqps://HOST:PORT (default
//                        amqp://127.0.0.1:5672, the quickstart's listener)
//   --user NAME          SASL PLAIN as NAME, the password from the
//                        environment: $CEPBUS_PASSWORD, or the variable
//                        --password-env names (never a flag's value, which
//                        other users could read in the process list)
//   --ca FILE            amqps: the CA the bus's certificate must chain to
//   --peer-name NAME     amqps: the name that certificate must carry
//
// Thread-safety: free functions.

#include <chrono>
#include <functional>
#include <proton/container.hpp>
#include <string_view>
#include <vector>

#include "bus/app/command_spec.h"
#include "bus/app/stop_signals.h"
#include "services/protocols/amqp/client_options.h"

namespace cepbus::app {

inline constexpr char kDefaultBusUrl[] = "amqp://127.0.0.1:5672";
inline constexpr char kDefaultPasswordVariable[] = "CEPBUS_PASSWORD";

// The options above, for a CommandSpec.
std::vector<HelpEntry> amqpClientOptions();
// The environment they read, for a CommandSpec.
std::vector<HelpEntry> amqpClientEnvironment();

// The peer the options describe, with the password read from the
// environment; InvalidArgument naming the option when they do not make one
// the listener would take (a user without a password, a password that would
// travel in clear).
Result<services::amqp::AmqpPeer> amqpPeerFrom(const ParsedArguments& args);

// `text` (seconds, e.g. "2" or "0.5") as a duration; InvalidArgument naming
// `flag` unless it is a positive number.
Result<std::chrono::milliseconds> parseSeconds(std::string_view flag, std::string_view text);

// Runs `container` on a thread of its own until it stops; meanwhile the
// calling thread takes SIGINT and SIGTERM (`signals`, made before any other
// thread started) and calls `on_signal` with each, so that the command can
// wind down through its handler instead of dying mid-delivery.
void runContainer(proton::container& container, const StopSignals& signals,
                  const std::function<void(int)>& on_signal);

}  // namespace cepbus::app
