#include "bus/app/cli.h"

#include <Poco/AutoPtr.h>
#include <Poco/ConsoleChannel.h>
#include <Poco/FormattingChannel.h>
#include <Poco/Logger.h>
#include <Poco/PatternFormatter.h>
#include <Poco/Util/HelpFormatter.h>
#include <Poco/Util/Option.h>
#include <Poco/Util/OptionException.h>
#include <Poco/Util/OptionProcessor.h>
#include <Poco/Util/OptionSet.h>
#include <signal.h>
#include <sys/resource.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "bus/app/bus.h"
#include "bus/app/cluster_command.h"
#include "bus/app/join_command.h"
#include "bus/app/match_command.h"
#include "bus/app/plugins_command.h"
#include "bus/core/plugin/plugin_abi.h"
#include "bus/core/wire_names.h"
#include "bus/host/descriptor/parser.h"
#include "bus/host/loader/plugin_loader.h"
#include "services/cluster/stall_watchdog.h"
#include "services/protocols/amqp/proactor_scheduling.h"

namespace cepbus::app {
namespace {

using Poco::Util::Option;
using Poco::Util::OptionSet;

constexpr int kOk = 0;
constexpr int kFailure = 1;
constexpr int kUsage = 2;

struct Command {
  const char* name;
  const char* args;
  const char* summary;
};

constexpr Command kCommands[] = {
    {"run", "DESCRIPTOR.xml", "run the bus until SIGINT/SIGTERM, then drain and stop"},
    {"validate", "DESCRIPTOR.xml", "check a descriptor and every query and filter in it"},
    {"match", "--engine E (--query Q | --patterns F) (--events F | --export dot|json)",
     "replay a JSON-lines event file through a CEP engine offline, or export its model"},
    {"join", "--events F --key A --site A --time-matrix CSV --threshold P",
     "join uncertain readings on a key under a travel-time matrix offline (P4)"},
    {"plugins", "[--plugin-path DIR]...",
     "list the plugins in the search path with their engines and options"},
    {"cluster", "init|publish DESCRIPTOR.xml [--events F]",
     "declare a RabbitMQ cluster's partitions, or publish events into them"},
};

// Parsed arguments of one command: Poco's option processor fills `values`,
// the rest are positional.
struct ParsedArgs {
  std::vector<std::pair<std::string, std::string>> values;
  std::vector<std::string> positional;

  bool has(const std::string& name) const {
    for (const auto& [n, v] : values) {
      if (n == name) return true;
    }
    return false;
  }
  std::optional<std::string> value(const std::string& name) const {
    std::optional<std::string> last;
    for (const auto& [n, v] : values) {
      if (n == name) last = v;
    }
    return last;
  }
};

// Throws Poco::Util::OptionException with a message naming the bad option.
ParsedArgs parseArgs(const OptionSet& options, const std::vector<std::string>& args) {
  ParsedArgs out;
  Poco::Util::OptionProcessor processor(options);
  processor.setUnixStyle(true);
  for (const std::string& arg : args) {
    std::string name, value;
    if (processor.process(arg, name, value)) {
      if (!name.empty()) out.values.emplace_back(name, value);
    } else {
      out.positional.push_back(arg);
    }
  }
  processor.checkRequired();
  return out;
}

void addCommonOptions(OptionSet& options) {
  options.addOption(Option("help", "h", "show this help and exit"));
  options.addOption(Option("log-level", "l",
                           "trace, debug, information, notice, warning or error "
                           "(default: the descriptor's, else information)")
                        .argument("LEVEL"));
}

void printHelp(const OptionSet& options, const std::string& command, const std::string& args,
               const std::string& summary) {
  Poco::Util::HelpFormatter help(options);
  help.setUnixStyle(true);
  help.setCommand("cepbus " + command);
  help.setUsage("[OPTIONS] " + args);
  help.setHeader(summary);
  help.setFooter("Exit status: 0 success, 1 failure, 2 bad command line.");
  help.format(std::cout);
}

// Logs go to stderr so that stdout carries only data (events, matches).
bool setUpLogging(const std::string& level) {
  Poco::AutoPtr<Poco::PatternFormatter> formatter(
      new Poco::PatternFormatter("%Y-%m-%d %H:%M:%S.%i %q %s: %t"));
  Poco::AutoPtr<Poco::ConsoleChannel> console(new Poco::ConsoleChannel(std::cerr));
  Poco::AutoPtr<Poco::FormattingChannel> channel(new Poco::FormattingChannel(formatter, console));
  Poco::Logger::root().setChannel(channel);
  try {
    Poco::Logger::setLevel("", Poco::Logger::parseLevel(level));
  } catch (const Poco::Exception&) {
    std::cerr << "cepbus: --log-level: unknown level \"" << level
              << "\" (expected trace, debug, information, notice, warning or error)\n";
    return false;
  }
  return true;
}

// Parses the descriptor and builds the bus; prints every error and returns
// nullptr when either fails.
std::unique_ptr<Bus> loadBus(const std::string& path, const ParsedArgs& parsed) {
  descriptor::ParseReport report;
  auto d = descriptor::parseDescriptorFile(path, &report, &builtinElementParsers());
  if (!d) {
    std::cerr << (report.errors.empty() ? d.status().message() : report.toString()) << "\n";
    return nullptr;
  }
  const std::string level =
      parsed.value("log-level").value_or(std::string(descriptor::logLevelName(d->logging.level)));
  if (!setUpLogging(level)) return nullptr;
  auto bus = Bus::create(*d);
  if (!bus) {
    std::cerr << bus.status().message() << "\n";
    return nullptr;
  }
  return std::move(*bus);
}

int validateCommand(const std::vector<std::string>& args) {
  OptionSet options;
  addCommonOptions(options);
  const Command& cmd = kCommands[1];
  ParsedArgs parsed = parseArgs(options, args);
  if (parsed.has("help")) {
    printHelp(options, cmd.name, cmd.args, cmd.summary);
    return kOk;
  }
  if (parsed.positional.size() != 1) {
    std::cerr << "cepbus validate: expected one DESCRIPTOR.xml (see cepbus validate --help)\n";
    return kUsage;
  }
  std::unique_ptr<Bus> bus = loadBus(parsed.positional[0], parsed);
  if (!bus) return kFailure;
  std::cout << parsed.positional[0] << ": OK\n";
  return kOk;
}

// Blocks SIGINT and SIGTERM in this thread before any other thread exists, so
// every thread the bus starts inherits the mask and the signals are taken
// only by the sigtimedwait() below.
sigset_t blockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// Every client socket costs the bus a file descriptor before it can be
// refused: Proton's listener sees an AMQP connection only once its open has
// arrived, so clients that connect and stall hold descriptors no limit of
// the bus's can count. The soft limit (often 1,024) is raised to the hard
// one, as servers do, so that exhausting them takes far more sockets than
// one client host can open (docs/operations.md).
void raiseDescriptorLimit(Poco::Logger& log) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t was = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    log.information("file descriptor limit raised from %s to %s", std::to_string(was),
                    std::to_string(limit.rlim_max));
  }
}

int runCommand(const std::vector<std::string>& args) {
  OptionSet options;
  addCommonOptions(options);
  options.addOption(Option("exit-when-drained", "",
                           "stop once every replay source is finished and every queue is empty"));
  options.addOption(Option("wire-name-budget", "",
                           "how many distinct event types and attribute names clients may add "
                           "to the symbol table; beyond it events with new names are refused "
                           "(default: " +
                               std::to_string(kDefaultWireNameBudget) + ")")
                        .argument("N"));
  const Command& cmd = kCommands[0];
  ParsedArgs parsed = parseArgs(options, args);
  if (parsed.has("help")) {
    printHelp(options, cmd.name, cmd.args, cmd.summary);
    return kOk;
  }
  if (parsed.positional.size() != 1) {
    std::cerr << "cepbus run: expected one DESCRIPTOR.xml (see cepbus run --help)\n";
    return kUsage;
  }
  if (std::optional<std::string> budget = parsed.value("wire-name-budget")) {
    uint32_t n = 0;
    const char* end = budget->data() + budget->size();
    if (auto [p, ec] = std::from_chars(budget->data(), end, n); ec != std::errc() || p != end) {
      std::cerr << "cepbus run: --wire-name-budget " << *budget
                << ": expected a number of names from 0 to " << UINT32_MAX << "\n";
      return kUsage;
    }
    setWireNameBudget(n);
  }
  const sigset_t stop_signals = blockStopSignals();
  std::unique_ptr<Bus> bus = loadBus(parsed.positional[0], parsed);
  if (!bus) return kFailure;
  Poco::Logger& log = Poco::Logger::get("cepbus");
  raiseDescriptorLimit(log);
  if (Status s = bus->start(); !s) {
    log.fatal("cannot start the bus: %s", s.toString());
    return kFailure;
  }
  const bool exit_when_drained = parsed.has("exit-when-drained");
  // Drained twice in a row, a poll apart: an event between two hops is in no
  // queue for an instant, and one look could take that instant for the end.
  int drained_polls = 0;
  for (;;) {
    // Polls only to watch for the drained bus; otherwise the signal alone wakes it.
    timespec poll{0, 50'000'000};
    const int sig = sigtimedwait(&stop_signals, nullptr, exit_when_drained ? &poll : nullptr);
    if (sig == SIGINT || sig == SIGTERM) {
      log.information("%s received: draining and stopping", std::string(strsignal(sig)));
      break;
    }
    if (exit_when_drained) {
      drained_polls = bus->drained() ? drained_polls + 1 : 0;
      if (drained_polls >= 2) {
        log.information("every source finished and every queue drained: stopping");
        break;
      }
    }
  }
  bus->stop();
  return kOk;
}

int matchCommand(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      std::cout << "usage: cepbus match " << kCommands[2].args << " [OPTIONS]\n\n"
                << kCommands[2].summary << "\n\n"
                << matchUsage();
      return kOk;
    }
  }
  auto options = parseMatchArguments(args);
  if (!options) {
    std::cerr << "cepbus match: " << options.status().message() << " (see cepbus match --help)\n";
    return kUsage;
  }
  setUpLogging("warning");
  return runMatchCommand(*options, std::cout, std::cerr);
}

int joinCommand(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      std::cout << "usage: cepbus join " << kCommands[3].args << " [OPTIONS]\n\n"
                << kCommands[3].summary << "\n\n"
                << joinUsage();
      return kOk;
    }
  }
  auto options = parseJoinArguments(args);
  if (!options) {
    std::cerr << "cepbus join: " << options.status().message() << " (see cepbus join --help)\n";
    return kUsage;
  }
  setUpLogging("warning");
  return runJoinCommand(*options, std::cout, std::cerr);
}

int pluginsCommand(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      std::cout << kCommands[4].summary << "\n\n" << pluginsUsage();
      return kOk;
    }
  }
  auto options = parsePluginsArguments(args);
  if (!options) {
    std::cerr << "cepbus plugins: " << options.status().message()
              << " (see cepbus plugins --help)\n";
    return kUsage;
  }
  setUpLogging("warning");
  return runPluginsCommand(*options, std::cout);
}

// What a plugin author and a bug report need: the plugin ABI version and
// the build tag a plugin must match exactly (plugin_abi.h).
void printVersion(std::ostream& out) {
  out << "cepbus " << CEPBUS_VERSION << "\n"
      << "plugin ABI " << CEPBUS_PLUGIN_ABI_VERSION << "\n"
      << "build tag " << plugin::hostBuildTag() << "\n";
}

void printUsage(std::ostream& out) {
  out << "usage: cepbus [--version] [--help] COMMAND [ARGS]\n\n"
         "cepbus is an event-driven SOA bus with complex-event-processing plugins.\n\n"
         "Commands:\n";
  for (const Command& c : kCommands) {
    std::string left = std::string("  ") + c.name;
    left.resize(12, ' ');
    out << left << c.summary << "\n";
  }
  out << "\n'cepbus COMMAND --help' (or 'cepbus help COMMAND') describes a command.\n"
         "Exit status: 0 success, 1 failure, 2 bad command line.\n";
}

}  // namespace

int runCli(int argc, char** argv) {
  services::amqp::scheduleReadyConnectionsOnAnyFreeThread();  // no thread runs yet
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    printUsage(std::cerr);
    return kUsage;
  }
  std::string command = args.front();
  args.erase(args.begin());
  if (command == "help" && !args.empty()) {
    // `cepbus help COMMAND` is `cepbus COMMAND --help` (the man pages are made from it).
    command = args.front();
    args.assign({"--help"});
  } else if (command == "--help" || command == "-h" || command == "help") {
    printUsage(std::cout);
    return kOk;
  }
  if (command == "--version" || command == "-v" || command == "version") {
    printVersion(std::cout);
    return kOk;
  }
  try {
    if (command == "run") return runCommand(args);
    if (command == "validate") return validateCommand(args);
    if (command == "match") return matchCommand(args);
    if (command == "join") return joinCommand(args);
    if (command == "__cluster-watchdog" && args.size() == 1) {
      // A cluster node's stall watchdog (services/cluster/stall_watchdog.h),
      // started by the node itself; not for people.
      return services::cluster::runStallWatchdog(3, 4,
                                                 std::chrono::milliseconds(std::stoll(args[0])));
    }
    if (command == "cluster") {
      setUpLogging("warning");
      return runClusterCommand(args, std::cout, std::cerr);
    }
    if (command == "plugins") return pluginsCommand(args);
  } catch (const Poco::Util::OptionException& e) {
    std::cerr << "cepbus " << command << ": " << e.displayText() << " (see cepbus " << command
              << " --help)\n";
    return kUsage;
  } catch (const std::exception& e) {
    std::cerr << "cepbus " << command << ": " << e.what() << "\n";
    return kFailure;
  }
  std::cerr << "cepbus: unknown command \"" << command << "\"\n\n";
  printUsage(std::cerr);
  return kUsage;
}

}  // namespace cepbus::app
