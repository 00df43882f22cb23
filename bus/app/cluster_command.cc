#include "bus/app/cluster_command.h"

#include <charconv>
#include <cstdint>
#include <fstream>
#include <iostream>

#include "bus/app/bus.h"
#include "bus/core/event_json.h"
#include "bus/host/descriptor/parser.h"
#include "services/cluster/cluster_publisher.h"
#include "services/cluster/cluster_service.h"
#include "services/cluster/topology.h"

namespace cepbus::app {
namespace {

constexpr int kOk = 0;
constexpr int kFailure = 1;
constexpr int kUsage = 2;

// The descriptor's <cluster>, or nullopt after printing why there is none.
std::optional<services::cluster::ClusterSpec> loadCluster(const std::string& path,
                                                          std::ostream& err) {
  descriptor::ParseReport report;
  auto d = descriptor::parseDescriptorFile(path, &report, &builtinElementParsers());
  if (!d) {
    err << (report.errors.empty() ? d.status().message() : report.toString()) << "\n";
    return std::nullopt;
  }
  const auto* cluster = d->element<services::cluster::ClusterSpec>();
  if (cluster == nullptr) {
    err << path << ": has no <cluster> element\n";
    return std::nullopt;
  }
  return *cluster;
}

int init(const services::cluster::ClusterSpec& spec, const std::string& password, std::ostream& out,
         std::ostream& err) {
  if (Status s = services::cluster::declareTopology(spec, password); !s) {
    err << "cepbus cluster init: " << s.message() << "\n";
    return kFailure;
  }
  out << "cluster \"" << spec.name << "\": " << spec.partitions
      << " partitions declared (exchanges " << spec.name << ".in, " << spec.name << ".out, "
      << spec.name << ".members; queues " << spec.name << ".p0.." << spec.name << ".p"
      << spec.partitions - 1 << ", " << spec.name << ".composites";
  if (spec.input == services::cluster::ClusterSpec::Input::kStream) {
    out << "; streams " << spec.name << ".p0.log.." << spec.name << ".p" << spec.partitions - 1
        << ".log, retention " << spec.retention << ")\n";
  } else {
    out << ")\n";
  }
  return kOk;
}

// A number option of `cluster publish` in [low, high]; false after saying why not.
template <typename T>
bool numberOption(const ParsedArguments& args, const char* flag, uint64_t low, uint64_t high,
                  T& target, std::ostream& err) {
  if (!args.has(flag)) return true;
  const std::string value = args.value(flag);
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n < low || n > high) {
    err << "cepbus cluster: " << flag << " must be an integer in [" << low << ", " << high
        << "], got \"" << value << "\" (see cepbus cluster --help)\n";
    return false;
  }
  target = static_cast<T>(n);
  return true;
}

int publish(const services::cluster::ClusterSpec& spec, const std::string& password,
            const ParsedArguments& args, std::ostream& out, std::ostream& err) {
  const std::string events_file = args.value("--events");
  services::cluster::PublishOptions options;
  options.end_of_stream = args.has("--end-of-stream");
  if (!numberOption(args, "--rate", 0, UINT64_MAX, options.rate, err) ||
      !numberOption(args, "--batch", 1, services::cluster::kMaxBatch, options.batch, err) ||
      !numberOption(args, "--batch-bytes", 1, UINT64_MAX, options.batch_bytes, err) ||
      !numberOption(args, "--linger-ms", 0, 60000, options.linger_ms, err)) {
    return kUsage;
  }
  std::ifstream file(events_file);
  if (!file) {
    err << "cepbus cluster publish: cannot open " << events_file << "\n";
    return kFailure;
  }
  EventLineReader reader(file);
  std::vector<EventPtr> events;
  for (;;) {
    auto event = reader.next();
    if (!event) {
      if (event.status().code() == Status::Code::kNotFound) break;
      err << events_file << ": " << event.status().message() << "\n";
      return kFailure;
    }
    events.push_back(std::move(*event));
  }
  auto report = services::cluster::publishToCluster(spec, password, events, options);
  if (!report) {
    err << "cepbus cluster publish: " << report.status().message() << "\n";
    return kFailure;
  }
  out << "{\"published\":" << report->published << ",\"messages\":" << report->messages
      << ",\"resent\":" << report->resent << ",\"resent_accepted\":" << report->resent_accepted
      << ",\"read_backs\":" << report->read_backs
      << ",\"read_back_confirmed\":" << report->read_back_confirmed
      << ",\"read_back_switches\":" << report->read_back_switches
      << ",\"reconnects\":" << report->reconnects
      << ",\"confirm_timeouts\":" << report->confirm_timeouts
      << ",\"broker_errors\":" << report->broker_errors << "}\n";
  return kOk;
}

}  // namespace

const CommandSpec& clusterSpec() {
  static const CommandSpec spec = [] {
    CommandSpec s;
    s.name = "cluster";
    s.usage =
        "cepbus cluster init DESCRIPTOR.xml\n"
        "       cepbus cluster publish DESCRIPTOR.xml --events FILE [--rate N] [--batch N]\n"
        "                              [--batch-bytes N] [--linger-ms N] [--end-of-stream]";
    s.summary = "declare a RabbitMQ cluster's partitions, or publish events into them";
    s.description =
        "The operator's side of a scale-out cluster, as the descriptor's <cluster>\n"
        "element describes it (docs/cluster.md).\n"
        "init     declares the cluster's exchanges, partition queues and bindings on\n"
        "         its brokers through their management API (idempotent; refuses a\n"
        "         topology that was declared with another partition count)\n"
        "publish  publishes a JSON-lines event file into the partitions, each event to\n"
        "         the partition of its key attributes, resending what a broker failover\n"
        "         left in doubt or left unanswered for 10 s; with stream input it reads\n"
        "         the streams back after a failover and before it returns, and resends\n"
        "         what they lack. Prints {\"published\":N,\"messages\":N,\"resent\":N,\n"
        "         \"resent_accepted\":N,\"read_backs\":N,\"read_back_confirmed\":N,\n"
        "         \"read_back_switches\":N,\"reconnects\":N,\"confirm_timeouts\":N,\n"
        "         \"broker_errors\":N}: events and end markers, messages, events resent\n"
        "         and of those the ones the broker had accepted, read-back rounds and\n"
        "         the messages they found, rounds read again through another broker\n"
        "         because a stream delivered nothing, connections given up, the\n"
        "         broker's own failures retried.\n";
    s.options = {
        {"--events", "FILE", "publish: the JSON-lines events (required)"},
        {"--rate", "N", "publish: events per second (default: as fast as the broker takes them)"},
        {"--batch", "N",
         "publish: events of one partition per message at most (default 32, at most 1000; 1: "
         "one message per event)"},
        {"--batch-bytes", "N",
         "publish: a batch message closes before an event would take its body past N bytes "
         "(default 65536; a larger event goes alone)"},
        {"--linger-ms", "N",
         "publish: with --rate, a batch waits at most N ms of the schedule for more events of "
         "its partition (default 10; 0: what comes together goes together)"},
        {"--end-of-stream", "",
         "publish: then tell every partition the stream ended: the nodes report the matches "
         "still pending and accept every message"},
        {"--help", "", "show this help and exit"},
    };
    s.examples = {
        {"cepbus cluster init examples/cluster/node.xml", "",
         "declare the walk-through's partitions (examples/cluster/demo.sh does it)"},
        {"cepbus cluster publish node.xml --events ticks.jsonl --rate 2000 --end-of-stream", "",
         "publish a stream into them, then end it"},
    };
    s.environment = {{"(named by <cluster password-env>)", "",
                      "the brokers' password (default: the user guest's)"}};
    s.files = {{"DESCRIPTOR.xml", "", "a descriptor with a <cluster> element"}};
    return s;
  }();
  return spec;
}

int runClusterCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto usage = [&](const std::string& what) {
    err << "cepbus cluster: " << what << " (see cepbus cluster --help)\n";
    return kUsage;
  };
  auto parsed = clusterSpec().parse(args);
  if (!parsed) return usage(parsed.status().message());
  const std::vector<std::string>& positional = parsed->positional;
  if (positional.size() != 2 || (positional[0] != "init" && positional[0] != "publish")) {
    return usage("expected init or publish and one DESCRIPTOR.xml");
  }
  const bool init_verb = positional[0] == "init";
  if (init_verb && !parsed->options.empty()) {
    return usage("init takes no option, got " + parsed->options.front().first);
  }
  if (!init_verb && !parsed->has("--events")) return usage("publish needs --events FILE");
  auto spec = loadCluster(positional[1], err);
  if (!spec) return kFailure;
  auto password = services::cluster::clusterPassword(*spec);
  if (!password) {
    err << password.status().message() << "\n";
    return kFailure;
  }
  if (init_verb) return init(*spec, *password, out, err);
  return publish(*spec, *password, *parsed, out, err);
}

}  // namespace cepbus::app
