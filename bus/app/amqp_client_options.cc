#include "bus/app/amqp_client_options.h"

#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

namespace cepbus::app {

std::vector<HelpEntry> amqpClientOptions() {
  return {
      {"--url", "URL",
       std::string("the bus's AMQP 1.0 listener, amqp://HOST:PORT or amqps://HOST:PORT (TLS) "
                   "(default ") +
           kDefaultBusUrl + ")"},
      {"--user", "NAME",
       std::string("authenticate with SASL PLAIN as NAME (default: ANONYMOUS); the password "
                   "comes from the environment, $") +
           kDefaultPasswordVariable +
           " or the variable --password-env names, never from the command line. The password "
           "goes only over amqps:// or to a loopback host"},
      {"--password-env", "VAR", "the environment variable that holds --user's password"},
      {"--ca", "FILE",
       "amqps: the PEM file of the CA the bus's certificate must chain to (default: the "
       "system's trust store)"},
      {"--peer-name", "NAME",
       "amqps: the name the bus's certificate must carry (default: the URL's host; give it "
       "when the URL names the bus by IP address)"},
  };
}

std::vector<HelpEntry> amqpClientEnvironment() {
  return {{kDefaultPasswordVariable, "",
           "the password of --user, unless --password-env names another variable"}};
}

Result<services::amqp::AmqpPeer> amqpPeerFrom(const ParsedArguments& args) {
  services::amqp::AmqpPeer peer;
  peer.url = args.value("--url", kDefaultBusUrl);
  peer.user = args.value("--user");
  peer.ca = args.value("--ca");
  peer.peer_name = args.value("--peer-name");
  const std::string variable = args.value("--password-env", kDefaultPasswordVariable);
  if (args.has("--password-env") && peer.user.empty()) {
    return Status::invalidArgument("--password-env needs --user");
  }
  if (!peer.user.empty()) {
    const char* password = std::getenv(variable.c_str());
    if (password == nullptr || *password == '\0') {
      return Status::invalidArgument("--user " + peer.user + ": the environment variable " +
                                     variable + " holds no password");
    }
    peer.password = password;
  }
  if (!peer.tls() && (args.has("--ca") || args.has("--peer-name"))) {
    return Status::invalidArgument("--ca and --peer-name need an amqps:// --url");
  }
  if (Status s = services::amqp::checkPeer(peer); !s) {
    return Status::invalidArgument("--user " + peer.user + ": " + s.message());
  }
  return peer;
}

Result<std::chrono::milliseconds> parseSeconds(std::string_view flag, std::string_view text) {
  double seconds = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, seconds);
  if (ec != std::errc() || p != end || !(seconds > 0) || !std::isfinite(seconds)) {
    return Status::invalidArgument(std::string(flag) + " " + std::string(text) +
                                   ": expected a number of seconds above 0");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000)));
}

void runContainer(proton::container& container, const StopSignals& signals,
                  const std::function<void(int)>& on_signal) {
  // How often this thread looks whether the container has stopped.
  constexpr std::chrono::milliseconds kTick{50};
  std::atomic<bool> done{false};
  std::thread runner([&] {
    container.run();
    done.store(true, std::memory_order_release);
  });
  while (!done.load(std::memory_order_acquire)) {
    if (const int sig = signals.wait(kTick); sig != 0) on_signal(sig);
  }
  runner.join();
}

}  // namespace cepbus::app
