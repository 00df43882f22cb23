#include "bus/app/cli.h"

#include <Poco/AutoPtr.h>
#include <Poco/ConsoleChannel.h>
#include <Poco/FormattingChannel.h>
#include <Poco/Logger.h>
#include <Poco/PatternFormatter.h>
#include <sys/resource.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "bus/app/bus.h"
#include "bus/app/cluster_command.h"
#include "bus/app/command_spec.h"
#include "bus/app/join_command.h"
#include "bus/app/match_command.h"
#include "bus/app/plugins_command.h"
#include "bus/app/publish_command.h"
#include "bus/app/stop_signals.h"
#include "bus/app/subscribe_command.h"
#include "bus/core/plugin/plugin_abi.h"
#include "bus/core/wire_names.h"
#include "bus/host/descriptor/parser.h"
#include "bus/host/loader/plugin_loader.h"
#include "services/cluster/stall_watchdog.h"
#include "services/protocols/amqp/proactor_scheduling.h"

namespace cepbus::app {
namespace {

constexpr int kOk = 0;
constexpr int kFailure = 1;
constexpr int kUsage = 2;

const HelpEntry kLogLevelOption{
    "--log-level", "LEVEL",
    "trace, debug, information, notice, warning or error (default: the descriptor's "
    "<logging level>, else information); logs go to stderr"};
const HelpEntry kHelpOption{"--help", "", "show this help and exit"};
const HelpEntry kPluginPathVariable{
    "CEPBUS_PLUGIN_PATH", "",
    "folders (colon-separated) searched for plugins after the descriptor's <search-path>s "
    "and before the folders beside the program"};
const HelpEntry kDescriptorVariables{
    "(named by the descriptor)", "",
    "the admin token (<http token-env>), a bridge's password (password-env), the cluster's "
    "password (<cluster password-env>): secrets never go into the descriptor"};
const HelpEntry kDescriptorFile{
    "DESCRIPTOR.xml", "",
    "the deployment descriptor (docs/descriptors.md); relative paths in it are relative to "
    "its folder"};
const HelpEntry kPluginFiles{
    "PREFIX/lib/cepbus/plugins, BUILD/plugins", "",
    "the plugins beside an installed or a built cepbus (libcepbus_plugin_NAME.so), searched "
    "last"};

const CommandSpec& runSpec() {
  static const CommandSpec spec = [] {
    CommandSpec s;
    s.name = "run";
    s.usage = "cepbus run [OPTIONS] DESCRIPTOR.xml";
    s.summary = "run the bus until SIGINT/SIGTERM, then drain and stop";
    s.description =
        "Builds everything the descriptor declares (plugins, flows, routes, services,\n"
        "queries), starts it and logs one line per listener. On SIGINT or SIGTERM\n"
        "it stops in the order that loses nothing: producers first, then every\n"
        "queue drains, services flush what they held back, the flows flush the\n"
        "journal, and the services stop (docs/operations.md, \"Running and\n"
        "stopping\").\n";
    s.options = {
        {"--exit-when-drained", "",
         "stop once every replay source is finished and every queue is empty (batch runs, "
         "the quickstart)"},
        {"--wire-name-budget", "N",
         "how many distinct event types and attribute names from clients the symbol table "
         "may hold at once; beyond it events with new names are refused (default: " +
             std::to_string(kDefaultWireNameBudget) + ")"},
        kLogLevelOption,
        kHelpOption,
    };
    s.examples = {
        {"cepbus run examples/quickstart/quickstart.xml", "",
         "run the quickstart's bus until Ctrl-C"},
        {"cepbus run examples/quickstart/quickstart.xml --exit-when-drained", "",
         "replay the quickstart's stream and stop once it is through"},
    };
    s.environment = {kPluginPathVariable, kDescriptorVariables};
    s.files = {kDescriptorFile,
               {"<journal path>", "",
                "the reliable flows' SQLite journal; what was not delivered is redelivered "
                "from it at the next start"},
               kPluginFiles};
    s.exit_status =
        "0 stopped cleanly, 1 the descriptor is invalid or the bus failed to start, 2 bad "
        "command line.";
    return s;
  }();
  return spec;
}

const CommandSpec& validateSpec() {
  static const CommandSpec spec = [] {
    CommandSpec s;
    s.name = "validate";
    s.usage = "cepbus validate [OPTIONS] DESCRIPTOR.xml";
    s.summary = "check that a descriptor will start: every element, query, filter and file";
    s.description =
        "Builds, without starting, everything the descriptor declares: plugins,\n"
        "routes, services, every query and content filter; and checks the files a\n"
        "run will open: replay files readable, replay-sink and journal folders\n"
        "writable, TLS certificates and keys loadable, plugin libraries loadable.\n"
        "Prints \"FILE: OK\", or every error as FILE:LINE: message.\n";
    s.options = {kLogLevelOption, kHelpOption};
    s.examples = {
        {"cepbus validate examples/quickstart/quickstart.xml", "", "check the quickstart"}};
    s.environment = {kPluginPathVariable, kDescriptorVariables};
    s.files = {kDescriptorFile, kPluginFiles};
    s.exit_status =
        "0 the descriptor will start, 1 it will not (each error named), 2 bad "
        "command line.";
    return s;
  }();
  return spec;
}

// The help of a command whose module writes its own usage and option text
// (match, join): its text, after the summary, then this file's sections.
CommandSpec offlineSpec(const std::string& name, const std::string& summary, std::string text,
                        std::vector<HelpEntry> examples) {
  CommandSpec s;
  s.name = name;
  s.summary = summary;
  // The usage is the text's first line and the indented ones after it.
  if (text.starts_with("usage: ")) text.erase(0, 7);
  size_t end = text.find('\n');
  while (end != std::string::npos && text.compare(end + 1, 1, " ") == 0) {
    end = text.find('\n', end + 1);
  }
  s.usage = text.substr(0, end);
  s.description = end == std::string::npos ? "" : text.substr(end + 1);
  s.examples = std::move(examples);
  s.environment = {kPluginPathVariable};
  s.files = {kPluginFiles};
  return s;
}

const CommandSpec& matchSpec() {
  static const CommandSpec spec = offlineSpec(
      "match", "replay a JSON-lines event file through a CEP engine offline, or export its model",
      matchUsage(),
      {{"cepbus match --engine nfa --events examples/quickstart/stocks.jsonl --query 'PATTERN "
        "SEQ(Stock a, Stock b) WHERE a.symbol = b.symbol AND b.price > a.price * 1.05 WITHIN "
        "100'",
        "", "pairs of ticks of one symbol, the second 5 % above the first"},
       {"cepbus match --engine all --events examples/quickstart/stocks.jsonl --query \"$(cat "
        "examples/cluster/equal-prices.query) CONTEXT unrestricted\"",
        "", "check that nfa, algebra and petri agree"}});
  return spec;
}

const CommandSpec& joinSpec() {
  static const CommandSpec spec = offlineSpec(
      "join", "join uncertain readings on a key under a travel-time matrix offline (P4)",
      joinUsage(),
      {{"cepbus join --events readings.jsonl --key plate --site site --time-matrix "
        "matrix.csv --threshold 0.7 --count",
        "", "count the pairs of readings of one plate too close in time for their sites"}});
  return spec;
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

// "cepbus COMMAND: what (see cepbus COMMAND --help)", the one wording of a
// bad command line.
int usageError(const std::string& command, const std::string& what) {
  std::cerr << "cepbus " << command << ": " << what << " (see cepbus " << command << " --help)\n";
  return kUsage;
}

// The arguments of a command that takes one DESCRIPTOR.xml; nullopt after
// saying what is wrong.
std::optional<ParsedArguments> descriptorArguments(const CommandSpec& spec,
                                                   const std::vector<std::string>& args) {
  auto parsed = spec.parse(args);
  if (!parsed) {
    usageError(spec.name, parsed.status().message());
    return std::nullopt;
  }
  if (parsed->positional.size() != 1) {
    usageError(spec.name, "expected one DESCRIPTOR.xml");
    return std::nullopt;
  }
  return std::move(*parsed);
}

// Parses the descriptor and builds the bus; prints every error and returns
// nullptr when either fails.
std::unique_ptr<Bus> loadBus(const std::string& path, const ParsedArguments& parsed) {
  descriptor::ParseReport report;
  auto d = descriptor::parseDescriptorFile(path, &report, &builtinElementParsers());
  if (!d) {
    std::cerr << (report.errors.empty() ? d.status().message() : report.toString()) << "\n";
    return nullptr;
  }
  const std::string level =
      parsed.value("--log-level", std::string(descriptor::logLevelName(d->logging.level)));
  if (!setUpLogging(level)) return nullptr;
  auto bus = Bus::create(*d);
  if (!bus) {
    std::cerr << bus.status().message() << "\n";
    return nullptr;
  }
  return std::move(*bus);
}

int validateCommand(const std::vector<std::string>& args) {
  auto parsed = descriptorArguments(validateSpec(), args);
  if (!parsed) return kUsage;
  std::unique_ptr<Bus> bus = loadBus(parsed->positional[0], *parsed);
  if (!bus) return kFailure;
  std::cout << parsed->positional[0] << ": OK\n";
  return kOk;
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
  auto parsed = descriptorArguments(runSpec(), args);
  if (!parsed) return kUsage;
  if (parsed->has("--wire-name-budget")) {
    const std::string budget = parsed->value("--wire-name-budget");
    uint32_t n = 0;
    const char* end = budget.data() + budget.size();
    if (auto [p, ec] = std::from_chars(budget.data(), end, n); ec != std::errc() || p != end) {
      return usageError("run", "--wire-name-budget " + budget +
                                   ": expected a number of names from 0 to " +
                                   std::to_string(UINT32_MAX));
    }
    setWireNameBudget(n);
  }
  const StopSignals stop_signals;  // before the bus starts a thread
  std::unique_ptr<Bus> bus = loadBus(parsed->positional[0], *parsed);
  if (!bus) return kFailure;
  Poco::Logger& log = Poco::Logger::get("cepbus");
  raiseDescriptorLimit(log);
  if (Status s = bus->start(); !s) {
    log.fatal("cannot start the bus: %s", s.toString());
    return kFailure;
  }
  const bool exit_when_drained = parsed->has("--exit-when-drained");
  // Drained twice in a row, a poll apart: an event between two hops is in no
  // queue for an instant, and one look could take that instant for the end.
  int drained_polls = 0;
  for (;;) {
    // Polls only to watch for the drained bus; otherwise the signal alone wakes it.
    const int sig =
        exit_when_drained ? stop_signals.wait(std::chrono::milliseconds(50)) : stop_signals.wait();
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

// A command whose module parses its own arguments into OPTIONS and runs.
template <typename Parse, typename Run>
int moduleCommand(const std::string& name, const std::vector<std::string>& args, Parse parse,
                  Run run) {
  auto options = parse(args);
  if (!options) return usageError(name, options.status().message());
  setUpLogging("warning");
  return run(*options, std::cout, std::cerr);
}

struct Command {
  const CommandSpec& (*spec)();
  std::function<int(const std::vector<std::string>&)> run;
};

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {
      {runSpec, runCommand},
      {validateSpec, validateCommand},
      {matchSpec,
       [](const std::vector<std::string>& args) {
         return moduleCommand("match", args, parseMatchArguments, runMatchCommand);
       }},
      {joinSpec,
       [](const std::vector<std::string>& args) {
         return moduleCommand("join", args, parseJoinArguments, runJoinCommand);
       }},
      {publishSpec,
       [](const std::vector<std::string>& args) {
         return moduleCommand("publish", args, parsePublishArguments, runPublishCommand);
       }},
      {subscribeSpec,
       [](const std::vector<std::string>& args) {
         return moduleCommand("subscribe", args, parseSubscribeArguments, runSubscribeCommand);
       }},
      {pluginsSpec,
       [](const std::vector<std::string>& args) {
         return moduleCommand("plugins", args, parsePluginsArguments,
                              [](const PluginsCommandOptions& o, std::ostream& out, std::ostream&) {
                                return runPluginsCommand(o, out);
                              });
       }},
      {clusterSpec,
       [](const std::vector<std::string>& args) {
         setUpLogging("warning");
         return runClusterCommand(args, std::cout, std::cerr);
       }},
  };
  return all;
}

// What a plugin author and a bug report need: the plugin ABI version and
// the build tag a plugin must match exactly (plugin_abi.h).
void printVersion(std::ostream& out) {
  out << "cepbus " << CEPBUS_VERSION << "\n"
      << "plugin ABI " << CEPBUS_PLUGIN_ABI_VERSION << "\n"
      << "build tag " << plugin::hostBuildTag() << "\n";
}

// `cepbus --help`: the commands, as cmake/HelpToMan.cmake reads them
// ("  NAME        summary"), and the sections every command shares.
const CommandSpec& topSpec() {
  static const CommandSpec spec = [] {
    CommandSpec s;
    s.usage = "cepbus [--version] [--help] COMMAND [ARGS]";
    s.summary = "cepbus is an event-driven SOA bus with complex-event-processing plugins.";
    s.description = "Commands:\n";
    for (const Command& c : commands()) {
      std::string left = "  " + c.spec().name;
      left.resize(13, ' ');
      s.description += left + c.spec().summary + "\n";
    }
    s.description +=
        "\n'cepbus COMMAND --help' (or 'cepbus help COMMAND') describes a command;\n"
        "each has a man page, cepbus-COMMAND(1).\n";
    s.examples = {
        {"cepbus validate examples/quickstart/quickstart.xml", "", "check a descriptor"},
        {"cepbus run examples/quickstart/quickstart.xml", "", "run a bus until Ctrl-C"},
        {"cepbus subscribe stocks.equal", "", "print what it detects, from another terminal"},
        {"cepbus publish stocks.ticks --events ticks.jsonl", "", "publish events into it"},
        {"cepbus match --engine nfa --events ticks.jsonl --query 'PATTERN ...'", "",
         "run a query offline"},
    };
    s.environment = {kPluginPathVariable, publishSpec().environment.front(), kDescriptorVariables};
    s.files = {kDescriptorFile, kPluginFiles};
    return s;
  }();
  return spec;
}

}  // namespace

int runCli(int argc, char** argv) {
  services::amqp::scheduleReadyConnectionsOnAnyFreeThread();  // no thread runs yet
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << topSpec().help();
    return kUsage;
  }
  std::string name = args.front();
  args.erase(args.begin());
  if (name == "help" && !args.empty()) {
    // `cepbus help COMMAND` is `cepbus COMMAND --help` (the man pages are made from it).
    name = args.front();
    args.assign({"--help"});
  } else if (name == "--help" || name == "-h" || name == "help") {
    std::cout << topSpec().help();
    return kOk;
  }
  if (name == "--version" || name == "-v" || name == "version") {
    printVersion(std::cout);
    return kOk;
  }
  if (name == "__cluster-watchdog" && args.size() == 1) {
    // A cluster node's stall watchdog (services/cluster/stall_watchdog.h),
    // started by the node itself; not for people.
    return services::cluster::runStallWatchdog(3, 4,
                                               std::chrono::milliseconds(std::stoll(args[0])));
  }
  for (const Command& c : commands()) {
    if (c.spec().name != name) continue;
    // --help anywhere, before anything is read (a descriptor, a file).
    for (const std::string& a : args) {
      if (a == "--help" || a == "-h") {
        std::cout << c.spec().help();
        return kOk;
      }
    }
    try {
      return c.run(args);
    } catch (const std::exception& e) {
      std::cerr << "cepbus " << name << ": " << e.what() << "\n";
      return kFailure;
    }
  }
  std::cerr << "cepbus: unknown command \"" << name << "\"\n\n" << topSpec().help();
  return kUsage;
}

}  // namespace cepbus::app
