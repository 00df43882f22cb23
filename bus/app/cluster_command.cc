#include "bus/app/cluster_command.h"

#include <charconv>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <type_traits>

#include "bus/app/bus.h"
#include "bus/app/flag_reader.h"
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

int publish(const services::cluster::ClusterSpec& spec, const std::string& password,
            std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  std::string events_file;
  services::cluster::PublishOptions options;
  FlagReader flags(args);
  while (flags.next()) {
    if (flags.flag() == "--end-of-stream" && !flags.hasInlineValue()) {
      options.end_of_stream = true;
      continue;
    }
    auto value = flags.value();
    if (!value) {
      err << "cepbus cluster publish: " << value.status().message() << "\n";
      return kUsage;
    }
    auto number = [&](auto& target, uint64_t low, uint64_t high) {
      uint64_t n = 0;
      auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), n);
      if (ec != std::errc() || end != value->data() + value->size() || n < low || n > high) {
        err << "cepbus cluster publish: " << flags.flag() << " must be an integer in [" << low
            << ", " << high << "], got \"" << *value << "\"\n";
        return false;
      }
      target = static_cast<std::remove_reference_t<decltype(target)>>(n);
      return true;
    };
    if (flags.flag() == "--events") {
      events_file = *value;
    } else if (flags.flag() == "--rate") {
      if (!number(options.rate, 0, UINT64_MAX)) return kUsage;
    } else if (flags.flag() == "--batch") {
      if (!number(options.batch, 1, services::cluster::kMaxBatch)) return kUsage;
    } else {
      err << "cepbus cluster publish: unknown argument \"" << flags.argument() << "\"\n";
      return kUsage;
    }
  }
  if (events_file.empty()) {
    err << "cepbus cluster publish: --events FILE is required\n";
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

std::string clusterUsage() {
  return "usage: cepbus cluster init DESCRIPTOR.xml\n"
         "       cepbus cluster publish DESCRIPTOR.xml --events FILE [--rate N] "
         "[--batch N] [--end-of-stream]\n\n"
         "init     declare the cluster's exchanges, partition queues and bindings on the\n"
         "         brokers of its <cluster> element (idempotent; refuses a topology that\n"
         "         was declared with another partition count)\n"
         "publish  publish a JSON-lines event file into the partitions, each event to the\n"
         "         partition of its key attributes, resending what a broker failover left\n"
         "         in doubt or left unanswered for 10 s; with stream input it reads the\n"
         "         streams back after a failover and before it returns, and resends what\n"
         "         they lack; prints {\"published\":N,\"messages\":N,\"resent\":N,\n"
         "         \"resent_accepted\":N,\"read_backs\":N,\"read_back_confirmed\":N,\n"
         "         \"read_back_switches\":N,\"reconnects\":N,\"confirm_timeouts\":N,\n"
         "         \"broker_errors\":N} (events and end markers, messages, events resent\n"
         "         and of those the ones the broker had accepted, read-back rounds and\n"
         "         the messages they found, rounds read again through another broker\n"
         "         because a stream delivered nothing, connections given up, the\n"
         "         broker's own failures retried)\n"
         "         --rate N  events per second (default: as fast as the broker takes them)\n"
         "         --batch N  events of one partition per message at most (default 32,\n"
         "                  at most 1000; 1: one message per event); with --rate a batch\n"
         "                  waits at most 10 ms of the schedule for more events\n"
         "         --end-of-stream  then tell every partition the stream ended: the nodes\n"
         "                  report the matches still pending and accept every message\n\n"
         "Exit status: 0 success, 1 failure, 2 bad command line.\n";
}

int runClusterCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? err : out) << clusterUsage();
    return args.empty() ? kUsage : kOk;
  }
  const std::string& verb = args[0];
  if ((verb != "init" && verb != "publish") || args.size() < 2) {
    err << "cepbus cluster: expected init or publish and a DESCRIPTOR.xml\n\n" << clusterUsage();
    return kUsage;
  }
  auto spec = loadCluster(args[1], err);
  if (!spec) return kFailure;
  auto password = services::cluster::clusterPassword(*spec);
  if (!password) {
    err << password.status().message() << "\n";
    return kFailure;
  }
  if (verb == "init") {
    if (args.size() != 2) {
      err << "cepbus cluster init: unexpected argument \"" << args[2] << "\"\n";
      return kUsage;
    }
    return init(*spec, *password, out, err);
  }
  return publish(*spec, *password, std::span(args).subspan(2), out, err);
}

}  // namespace cepbus::app
