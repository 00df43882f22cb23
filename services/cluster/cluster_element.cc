#include "services/cluster/cluster_element.h"

#include <algorithm>
#include <string>
#include <utility>

#include "bus/host/descriptor/address.h"
#include "services/cluster/cluster_publisher.h"
#include "services/cluster/cluster_spec.h"

namespace cepbus::services::cluster {
namespace {

using descriptor::Element;
using descriptor::quote;

constexpr uint64_t kMaxPartitions = 1024;
constexpr uint64_t kMaxDelay = uint64_t{1} << 40;
constexpr uint64_t kMaxBatchBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxHeldEvents = uint64_t{1} << 30;

void input(const Element& e, ClusterSpec& c) {
  if (auto kind = e.string("input", false)) {
    if (*kind == "stream") {
      c.input = ClusterSpec::Input::kStream;
    } else if (*kind != "queue") {
      e.reportAttribute("input", "must be \"queue\" or \"stream\", got " + quote(*kind));
    }
  }
  if (!e.has("retention")) return;
  if (c.input != ClusterSpec::Input::kStream) {
    e.reportAttribute("retention",
                      "applies to input=\"stream\" only (a queue keeps what is unsettled)");
    return;
  }
  // RabbitMQ's x-max-age: a positive count and one unit letter.
  const std::string_view age = e.raw("retention");
  const bool valid =
      age.size() >= 2 && age.size() <= 10 &&
      std::string_view("YMDhms").find(age.back()) != std::string_view::npos && age.front() != '0' &&
      std::all_of(age.begin(), age.end() - 1, [](char ch) { return ch >= '0' && ch <= '9'; });
  if (!valid) {
    e.reportAttribute("retention",
                      "must be a positive count and a unit (Y, M, D, h, m or s), such as \"7D\", "
                      "got " +
                          quote(age));
    return;
  }
  c.retention = std::string(age);
}

// The partition's event time: the unit of its events' ts and the silence
// after which, with a unit, it follows the wall clock.
void eventTime(const Element& e, ClusterSpec& c) {
  if (auto unit = e.timeUnit("time-unit")) c.ts_unit = *unit;
  c.source_idle_timeout_ms = e.integer("source-idle-timeout", 1, descriptor::kMaxTimeoutMs)
                                 .value_or(c.source_idle_timeout_ms);
}

// <ingress host port batch-events batch-bytes linger-ms max-held-events credit>
ClusterIngressSpec ingress(const Element& e) {
  e.allowAttributes(
      {"host", "port", "batch-events", "batch-bytes", "linger-ms", "max-held-events", "credit"});
  e.noChildren();
  ClusterIngressSpec in;
  in.where = e.where();
  if (!e.has("port")) e.report("missing required attribute \"port\"");
  e.hostAndPort(in.host, in.port);
  in.batch_events =
      static_cast<uint32_t>(e.integer("batch-events", 1, kMaxBatch).value_or(in.batch_events));
  in.batch_bytes = e.integer("batch-bytes", 1, kMaxBatchBytes).value_or(in.batch_bytes);
  in.linger_ms = e.integer("linger-ms", 0, descriptor::kMaxTimeoutMs).value_or(in.linger_ms);
  in.max_held_events = e.integer("max-held-events", 1, kMaxHeldEvents).value_or(in.max_held_events);
  in.credit = static_cast<uint32_t>(
      e.integer("credit", 1, descriptor::kMaxCreditWindow).value_or(in.credit));
  return in;
}

// <output batch-events batch-bytes linger-ms>
ClusterOutputSpec output(const Element& e) {
  e.allowAttributes({"batch-events", "batch-bytes", "linger-ms"});
  e.noChildren();
  ClusterOutputSpec out;
  out.batch_events =
      static_cast<uint32_t>(e.integer("batch-events", 1, kMaxBatch).value_or(out.batch_events));
  out.batch_bytes = e.integer("batch-bytes", 1, kMaxBatchBytes).value_or(out.batch_bytes);
  out.linger_ms = e.integer("linger-ms", 0, descriptor::kMaxTimeoutMs).value_or(out.linger_ms);
  return out;
}

}  // namespace

std::any ClusterElement::parse(const Element& e) const {
  e.allowAttributes({"name", "node", "partitions", "key", "user", "password-env", "heartbeat",
                     "idle-timeout", "max-unsettled", "input", "retention", "max-delay", "slack",
                     "time-unit", "source-idle-timeout"});
  ClusterSpec c;
  c.where = e.where();
  c.name = e.name("name", true).value_or("");
  c.node = e.name("node", true).value_or("");
  if (!e.has("partitions")) e.report("missing required attribute \"partitions\"");
  c.partitions = static_cast<uint32_t>(e.integer("partitions", 1, kMaxPartitions).value_or(0));
  if (!e.has("key")) {
    e.report("missing required attribute \"key\"");
  } else {
    c.key = e.nameList("key");
  }
  if (auto user = e.name("user", false)) c.user = *user;
  c.password_env = e.envName("password-env").value_or("");
  if (c.password_env.empty() && c.user != "guest" && !e.has("password-env")) {
    e.report("user " + quote(c.user) +
             " needs \"password-env\" naming the variable that holds its password");
  }
  c.heartbeat_ms = e.integer("heartbeat", 1, descriptor::kMaxTimeoutMs).value_or(c.heartbeat_ms);
  c.idle_timeout_ms =
      e.integer("idle-timeout", 1, descriptor::kMaxTimeoutMs).value_or(c.idle_timeout_ms);
  if (c.idle_timeout_ms < 2 * c.heartbeat_ms) {
    e.report("\"idle-timeout\" (" + std::to_string(c.idle_timeout_ms) +
             " ms) must be at least twice \"heartbeat\" (" + std::to_string(c.heartbeat_ms) +
             " ms), or one late heartbeat would make a live node look gone");
  }
  c.max_unsettled = static_cast<uint32_t>(
      e.integer("max-unsettled", 1, descriptor::kMaxCreditWindow).value_or(c.max_unsettled));
  input(e, c);
  // `slack` is the attribute's older name, kept so that no descriptor breaks.
  if (e.has("max-delay") && e.has("slack")) {
    e.report("attributes \"max-delay\" and \"slack\": give one (slack is a synonym of max-delay)");
  }
  const char* delay = e.has("slack") ? "slack" : "max-delay";
  c.max_delay = static_cast<int64_t>(e.integer(delay, 0, kMaxDelay).value_or(0));
  eventTime(e, c);
  descriptor::NameScope queries;
  const std::vector<descriptor::ChildSpec> kinds = {
      {"broker"}, {"tls", true}, {"ingress", true}, {"output", true}, {"query"}};
  e.children(kinds, [&](const Element& child) {
    const std::string_view kind = child.tag();
    if (kind == "ingress") {
      c.ingress = ingress(child);
      return;
    }
    if (kind == "output") {
      c.output = output(child);
      return;
    }
    if (kind == "broker") {
      child.allowAttributes({"host", "port", "management-port"});
      child.noChildren();
      ClusterBroker& b = c.brokers.emplace_back();
      b.where = child.where();
      child.hostAndPort(b.host, b.port);
      if (auto port = child.integer("management-port", 1, descriptor::kMaxPort)) {
        b.management_port = static_cast<uint16_t>(*port);
      }
      return;
    }
    if (kind == "tls") {
      child.allowAttributes({"ca", "peer-name"});
      child.noChildren();
      ClusterTls& tls = c.tls.emplace();
      tls.where = child.where();
      if (auto ca = child.string("ca", true)) tls.ca = child.path(*ca);
      if (auto peer = child.string("peer-name", false)) tls.peer_name = *peer;
      return;
    }
    auto q = child.query(descriptor::QueryInput::kNone);
    if (!q) return;
    // The partition's events have one unit: the cluster's, which a query
    // inherits and may only repeat.
    if (q->ts_unit == pattern::TimeUnit::kNone) {
      q->ts_unit = c.ts_unit;
    } else if (c.ts_unit != pattern::TimeUnit::kNone && q->ts_unit != c.ts_unit) {
      child.reportAttribute("time-unit", "differs from the <cluster>'s " +
                                             quote(e.raw("time-unit")) +
                                             " (a partition's events have one unit)");
    }
    child.unique(queries, "query", q->name);
    c.queries.push_back(std::move(*q));
  });
  if (c.brokers.empty()) e.report("needs at least one <broker host=... port=.../>");
  // SASL PLAIN sends the password as it is: only inside TLS or this machine.
  for (const ClusterBroker& b : c.brokers) {
    if (c.tls || descriptor::isLoopbackHost(b.host)) continue;
    e.reportAt(b.where.line, "<broker> host " + quote(b.host) +
                                 " is not a loopback host: add <tls ca=...> to the <cluster> "
                                 "(SASL PLAIN would send the password in clear)");
  }
  if (c.queries.empty()) e.report("needs at least one <query> to run on the partitions");
  return c;
}

}  // namespace cepbus::services::cluster
