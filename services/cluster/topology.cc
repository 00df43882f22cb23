#include "services/cluster/topology.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "services/cluster/management_client.h"
#include "services/cluster/stream_checkpoint.h"

namespace cepbus::services::cluster {
namespace {

using nlohmann::json;

const std::string kVhost = "%2F";  // "/", percent-encoded once for every path

std::string queuePath(std::string_view queue) {
  return "/api/queues/" + kVhost + "/" + percentEncode(queue);
}
std::string exchangePath(std::string_view exchange) {
  return "/api/exchanges/" + kVhost + "/" + percentEncode(exchange);
}
std::string bindingPath(std::string_view exchange, std::string_view queue) {
  return "/api/bindings/" + kVhost + "/e/" + percentEncode(exchange) + "/q/" + percentEncode(queue);
}

// An Erlang `re` pattern matching `s` literally.
std::string regexLiteral(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) out += '\\';
    out += c;
  }
  return out;
}

std::string stringField(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool boolField(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

std::vector<std::string> stringsField(const json& j, const char* key) {
  std::vector<std::string> out;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& v : *it) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

// (destination queue, routing key) of every queue binding in a
// /api/exchanges/.../bindings/source answer.
std::set<std::pair<std::string, std::string>> parseBindings(const json& list) {
  std::set<std::pair<std::string, std::string>> out;
  if (!list.is_array()) return out;
  for (const auto& b : list) {
    if (!b.is_object() || stringField(b, "destination_type") != "queue") continue;
    out.emplace(stringField(b, "destination"), stringField(b, "routing_key"));
  }
  return out;
}

// An exchange as GET shows it; NotFound is "does not exist".
Result<ExchangeState> fetchExchange(const ManagementClient& client, const std::string& name) {
  auto j = client.getJson(exchangePath(name));
  if (!j) {
    if (j.status().code() == Status::Code::kNotFound) return ExchangeState{};
    return j.status();
  }
  return parseExchange(*j);
}

Result<std::optional<QueueState>> fetchQueue(const ManagementClient& client,
                                             const std::string& name) {
  auto j = client.getJson(queuePath(name));
  if (!j) {
    if (j.status().code() == Status::Code::kNotFound) return std::optional<QueueState>();
    return j.status();
  }
  auto q = parseQueue(*j);
  if (!q) return q.status();
  return std::optional<QueueState>(std::move(*q));
}

Result<std::set<std::pair<std::string, std::string>>> fetchBindings(const ManagementClient& client,
                                                                    const std::string& exchange) {
  auto j = client.getJson(exchangePath(exchange) + "/bindings/source");
  if (!j) return j.status();
  return parseBindings(*j);
}

// Every "<cluster>.p<i><suffix>" queue, through the paginated, regex-filtered
// list (one request per 500 queues rather than one per partition).
template <typename PartitionOf>
Result<std::map<uint32_t, QueueState>> fetchPartitions(const ManagementClient& client,
                                                       const std::string& cluster,
                                                       std::string_view suffix,
                                                       PartitionOf partition_of) {
  std::map<uint32_t, QueueState> out;
  const std::string filter =
      percentEncode("^" + regexLiteral(cluster) + "\\.p[0-9]+" + regexLiteral(suffix) + "$");
  for (int page = 1;; ++page) {
    auto j = client.getJson("/api/queues/" + kVhost + "?use_regex=true&name=" + filter +
                            "&page=" + std::to_string(page) + "&page_size=500");
    if (!j) return j.status();
    const auto items = j->find("items");
    if (items == j->end() || !items->is_array()) {
      return Status::ioError("GET /api/queues/%2F?page=" + std::to_string(page) +
                             ": the answer has no \"items\" list");
    }
    for (const auto& item : *items) {
      auto q = parseQueue(item);
      if (!q) return q.status();
      if (auto i = partition_of(cluster, q->name)) out.emplace(*i, std::move(*q));
    }
    const auto pages = j->value("page_count", 1);
    if (page >= pages) break;
  }
  return out;
}

std::string describeQueue(const QueueState& q) {
  std::string s = q.type.empty() ? "of unknown type" : q.type;
  s += q.durable ? ", durable" : ", not durable";
  s += q.single_active_consumer ? ", single active consumer" : ", no single active consumer";
  return s;
}

Status conflict(const ClusterSpec& spec, const std::string& what) {
  return Status::invalidArgument("cluster '" + spec.name + "' with " +
                                 std::to_string(spec.partitions) + " partitions: " + what);
}

Status checkExchange(const ClusterSpec& spec, const std::string& name, const ExchangeState& e,
                     const char* type) {
  if (!e.exists) return Status::ok();
  if (e.type != type || !e.durable) {
    return conflict(spec, "exchange '" + name + "' exists as " + e.type +
                              (e.durable ? ", durable" : ", not durable") + "; expected " + type +
                              ", durable");
  }
  return Status::ok();
}

Status checkSpec(const ClusterSpec& spec) {
  if (spec.name.empty()) return Status::invalidArgument("cluster: empty name");
  if (spec.partitions == 0) {
    return Status::invalidArgument("cluster '" + spec.name + "': partitions must be > 0");
  }
  if (spec.brokers.empty()) {
    return Status::invalidArgument("cluster '" + spec.name + "': no broker");
  }
  return Status::ok();
}

Status declareQueue(const ManagementClient& client, const std::string& name, bool sac) {
  json arguments = {{"x-queue-type", "quorum"}};
  if (sac) arguments["x-single-active-consumer"] = true;
  return client.sendJson(HttpMethod::kPut, queuePath(name),
                         {{"durable", true}, {"auto_delete", false}, {"arguments", arguments}});
}

Status declareStream(const ManagementClient& client, const std::string& name,
                     const std::string& retention) {
  return client.sendJson(HttpMethod::kPut, queuePath(name),
                         {{"durable", true},
                          {"auto_delete", false},
                          {"arguments", {{"x-queue-type", "stream"}, {"x-max-age", retention}}}});
}

// The first lease token of a partition (stream_checkpoint.h): its events
// are read from the stream's beginning.
Status putFirstToken(const ManagementClient& client, const std::string& lease) {
  auto answer = client.postJson("/api/exchanges/" + kVhost + "/amq.default/publish",
                                {{"properties", {{"delivery_mode", 2}}},
                                 {"routing_key", lease},
                                 {"payload", leaseTokenBody(LeaseMark{})},
                                 {"payload_encoding", "string"}});
  if (!answer) return answer.status();
  if (!answer->value("routed", false)) {
    return Status::unavailable("the lease token for queue '" + lease + "' was not routed to it");
  }
  return Status::ok();
}

Status declareExchange(const ManagementClient& client, const std::string& name, const char* type) {
  return client.sendJson(HttpMethod::kPut, exchangePath(name),
                         {{"type", type}, {"durable", true}, {"auto_delete", false}});
}

Status bindQueue(const ManagementClient& client, const std::string& exchange,
                 const std::string& queue, const std::string& key) {
  return client.sendJson(HttpMethod::kPost, bindingPath(exchange, queue), {{"routing_key", key}});
}

// Closes the connections `pick` selects; a connection gone meanwhile is fine.
template <typename Pick>
Result<size_t> closeSelected(const ClusterSpec& spec, const std::string& password,
                             const std::vector<BrokerConnection>& connections,
                             const std::string& reason, Pick pick) {
  const auto client = ManagementClient::forCluster(spec, password);
  size_t closed = 0;
  for (const auto& c : connections) {
    if (!pick(c)) continue;
    Status s = client.remove("/api/connections/" + percentEncode(c.name), reason);
    if (!s && s.code() != Status::Code::kNotFound) return s;
    if (s) ++closed;
  }
  return closed;
}

}  // namespace

std::string inExchange(std::string_view cluster) { return std::string(cluster) + ".in"; }
std::string outExchange(std::string_view cluster) { return std::string(cluster) + ".out"; }
std::string membersExchange(std::string_view cluster) { return std::string(cluster) + ".members"; }
std::string compositesQueue(std::string_view cluster) {
  return std::string(cluster) + ".composites";
}
std::string partitionQueue(std::string_view cluster, uint32_t partition) {
  return std::string(cluster) + "." + partitionRoutingKey(partition);
}
std::string partitionStream(std::string_view cluster, uint32_t partition) {
  return partitionQueue(cluster, partition) + ".log";
}
std::string partitionRoutingKey(uint32_t partition) { return "p" + std::to_string(partition); }

std::optional<uint32_t> partitionOf(std::string_view cluster, std::string_view queue) {
  if (queue.size() <= cluster.size() + 2 || queue.substr(0, cluster.size()) != cluster ||
      queue.substr(cluster.size(), 2) != ".p") {
    return std::nullopt;
  }
  const std::string_view digits = queue.substr(cluster.size() + 2);
  if (digits.size() > 1 && digits[0] == '0') return std::nullopt;
  uint32_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return value;
}

std::optional<uint32_t> partitionStreamOf(std::string_view cluster, std::string_view queue) {
  constexpr std::string_view kSuffix = ".log";
  if (queue.size() <= kSuffix.size() || queue.substr(queue.size() - kSuffix.size()) != kSuffix) {
    return std::nullopt;
  }
  return partitionOf(cluster, queue.substr(0, queue.size() - kSuffix.size()));
}

uint32_t Topology::partitionCount() const {
  const uint32_t queues = partitions.empty() ? 0 : partitions.rbegin()->first + 1;
  const uint32_t logs = streams.empty() ? 0 : streams.rbegin()->first + 1;
  return std::max(queues, logs);
}

Result<QueueState> parseQueue(const json& queue) {
  if (!queue.is_object() || stringField(queue, "name").empty()) {
    return Status::ioError("a queue in the management API's answer has no name: " +
                           queue.dump().substr(0, 200));
  }
  QueueState q;
  q.name = stringField(queue, "name");
  q.type = stringField(queue, "type");
  q.durable = boolField(queue, "durable");
  if (const auto args = queue.find("arguments"); args != queue.end() && args->is_object()) {
    q.single_active_consumer = boolField(*args, "x-single-active-consumer");
    // Older brokers list no "type"; the declaring argument says it.
    if (q.type.empty()) q.type = stringField(*args, "x-queue-type");
  }
  if (q.type.empty()) q.type = "classic";
  q.members = stringsField(queue, "members");
  q.online = stringsField(queue, "online");
  q.leader = stringField(queue, "leader");
  if (const auto it = queue.find("messages"); it != queue.end() && it->is_number_unsigned()) {
    q.messages = it->get<uint64_t>();
  }
  return q;
}

ExchangeState parseExchange(const json& exchange) {
  ExchangeState e;
  e.exists = exchange.is_object();
  e.type = stringField(exchange, "type");
  e.durable = boolField(exchange, "durable");
  return e;
}

Status checkConflicts(const Topology& found, const ClusterSpec& spec) {
  if (Status s = checkSpec(spec); !s) return s;
  const bool streams = spec.input == ClusterSpec::Input::kStream;
  const uint32_t p = spec.partitions;
  // What carries the events; declareTopology() creates it first, highest
  // partition first.
  const std::map<uint32_t, QueueState>& inputs = streams ? found.streams : found.partitions;
  auto inputName = [&](uint32_t i) {
    return streams ? partitionStream(spec.name, i) : partitionQueue(spec.name, i);
  };
  if (!streams && !found.streams.empty()) {
    return conflict(spec, "queue '" + found.streams.begin()->second.name +
                              "' exists: the broker's topology takes its events on streams "
                              "(input=\"stream\"), this descriptor on quorum queues");
  }
  for (const auto& [queue, key] : found.in_bindings) {
    if (streams && partitionOf(spec.name, queue)) {
      return conflict(spec, "exchange '" + inExchange(spec.name) + "' routes key '" + key +
                                "' to queue '" + queue +
                                "': the broker's topology takes its events on quorum queues "
                                "(input=\"queue\"), this descriptor on streams");
    }
  }
  if (found.partitionCount() > p) {
    const uint32_t last = found.partitionCount() - 1;
    const std::string name = found.partitions.count(last) ? partitionQueue(spec.name, last)
                                                          : partitionStream(spec.name, last);
    return conflict(spec, "queue '" + name + "' exists: the broker's topology has at least " +
                              std::to_string(found.partitionCount()) + " partitions");
  }
  // A declaration cut short still has the highest partition: without it,
  // the queues are another topology's.
  if (!inputs.empty() && !inputs.count(p - 1)) {
    return conflict(spec, "queue '" + inputName(p - 1) + "' is missing while '" +
                              inputs.rbegin()->second.name +
                              "' exists: the broker's topology has " +
                              std::to_string(inputs.rbegin()->first + 1) + " partitions");
  }
  for (const auto& [i, q] : found.partitions) {
    if (q.type != "quorum" || !q.durable || !q.single_active_consumer) {
      return conflict(spec, "queue '" + q.name + "' is " + describeQueue(q) +
                                "; expected quorum, durable, single active consumer");
    }
  }
  for (const auto& [i, q] : found.streams) {
    if (q.type != "stream" || !q.durable) {
      return conflict(
          spec, "queue '" + q.name + "' is " + describeQueue(q) + "; expected stream, durable");
    }
  }
  if (found.composites && (found.composites->type != "quorum" || !found.composites->durable)) {
    return conflict(spec, "queue '" + found.composites->name + "' is " +
                              describeQueue(*found.composites) + "; expected quorum, durable");
  }
  for (const auto& [queue, key] : found.in_bindings) {
    auto i = streams ? partitionStreamOf(spec.name, queue) : partitionOf(spec.name, queue);
    if (i && key != partitionRoutingKey(*i)) {
      return conflict(spec, "exchange '" + inExchange(spec.name) + "' routes key '" + key +
                                "' to queue '" + queue + "'; expected key '" +
                                partitionRoutingKey(*i) + "'");
    }
  }
  if (Status s = checkExchange(spec, inExchange(spec.name), found.in, "direct"); !s) return s;
  if (Status s = checkExchange(spec, outExchange(spec.name), found.out, "topic"); !s) return s;
  return checkExchange(spec, membersExchange(spec.name), found.members, "fanout");
}

Status checkComplete(const Topology& found, const ClusterSpec& spec) {
  if (Status s = checkConflicts(found, spec); !s) return s;
  auto missing = [&](const std::string& what) {
    return Status::notFound("cluster '" + spec.name + "' with " + std::to_string(spec.partitions) +
                            " partitions: " + what + " is missing (declare the topology first)");
  };
  if (!found.in.exists) return missing("exchange '" + inExchange(spec.name) + "'");
  if (!found.out.exists) return missing("exchange '" + outExchange(spec.name) + "'");
  if (!found.members.exists) return missing("exchange '" + membersExchange(spec.name) + "'");
  if (!found.composites) return missing("queue '" + compositesQueue(spec.name) + "'");
  if (!found.composites_keys.count("#")) {
    return missing("binding '#' of '" + outExchange(spec.name) + "' to '" +
                   compositesQueue(spec.name) + "'");
  }
  const bool streams = spec.input == ClusterSpec::Input::kStream;
  for (uint32_t i = 0; i < spec.partitions; ++i) {
    const std::string queue = partitionQueue(spec.name, i);
    if (!found.partitions.count(i)) return missing("queue '" + queue + "'");
    const std::string input = streams ? partitionStream(spec.name, i) : queue;
    if (streams && !found.streams.count(i)) return missing("stream '" + input + "'");
    if (!found.in_bindings.count({input, partitionRoutingKey(i)})) {
      return missing("binding '" + partitionRoutingKey(i) + "' of '" + inExchange(spec.name) +
                     "' to '" + input + "'");
    }
  }
  return Status::ok();
}

Result<Topology> inspectTopology(const ClusterSpec& spec, const std::string& password) {
  if (Status s = checkSpec(spec); !s) return s;
  const auto client = ManagementClient::forCluster(spec, password);
  Topology t;
  t.name = spec.name;
  for (auto [name, state] :
       {std::pair{inExchange(spec.name), &t.in}, std::pair{outExchange(spec.name), &t.out},
        std::pair{membersExchange(spec.name), &t.members}}) {
    auto e = fetchExchange(client, name);
    if (!e) return e.status();
    *state = *e;
  }
  auto partitions = fetchPartitions(client, spec.name, "", partitionOf);
  if (!partitions) return partitions.status();
  t.partitions = std::move(*partitions);
  auto streams = fetchPartitions(client, spec.name, ".log", partitionStreamOf);
  if (!streams) return streams.status();
  t.streams = std::move(*streams);
  auto composites = fetchQueue(client, compositesQueue(spec.name));
  if (!composites) return composites.status();
  t.composites = std::move(*composites);
  if (t.in.exists) {
    auto bindings = fetchBindings(client, inExchange(spec.name));
    if (!bindings) return bindings.status();
    t.in_bindings = std::move(*bindings);
  }
  if (t.out.exists) {
    auto bindings = fetchBindings(client, outExchange(spec.name));
    if (!bindings) return bindings.status();
    for (const auto& [queue, key] : *bindings) {
      if (queue == compositesQueue(spec.name)) t.composites_keys.insert(key);
    }
  }
  return t;
}

Status declareTopology(const ClusterSpec& spec, const std::string& password) {
  auto found = inspectTopology(spec, password);
  if (!found) return found.status();
  if (Status s = checkConflicts(*found, spec); !s) {
    return Status::invalidArgument("refusing to declare the topology: " + s.message());
  }
  const auto client = ManagementClient::forCluster(spec, password);
  const std::string in = inExchange(spec.name);
  const std::string out = outExchange(spec.name);
  const std::string composites = compositesQueue(spec.name);
  if (!found->in.exists) {
    if (Status s = declareExchange(client, in, "direct"); !s) return s;
  }
  // Highest partition first, its input first: see checkConflicts().
  const bool streams = spec.input == ClusterSpec::Input::kStream;
  for (uint32_t i = spec.partitions; i-- > 0;) {
    const std::string queue = partitionQueue(spec.name, i);
    const std::string input = streams ? partitionStream(spec.name, i) : queue;
    if (streams && !found->streams.count(i)) {
      if (Status s = declareStream(client, input, spec.retention); !s) return s;
    }
    const auto lease = found->partitions.find(i);
    if (lease == found->partitions.end()) {
      if (Status s = declareQueue(client, queue, /*sac=*/true); !s) return s;
    }
    if (streams && (lease == found->partitions.end() || lease->second.messages == 0u)) {
      if (Status s = putFirstToken(client, queue); !s) return s;
    }
    if (!found->in_bindings.count({input, partitionRoutingKey(i)})) {
      if (Status s = bindQueue(client, in, input, partitionRoutingKey(i)); !s) return s;
    }
  }
  if (!found->out.exists) {
    if (Status s = declareExchange(client, out, "topic"); !s) return s;
  }
  if (!found->composites) {
    if (Status s = declareQueue(client, composites, /*sac=*/false); !s) return s;
  }
  if (!found->composites_keys.count("#")) {
    if (Status s = bindQueue(client, out, composites, "#"); !s) return s;
  }
  if (!found->members.exists) {
    if (Status s = declareExchange(client, membersExchange(spec.name), "fanout"); !s) return s;
  }
  return Status::ok();
}

BrokerConnection parseConnection(const json& connection) {
  BrokerConnection c;
  c.name = stringField(connection, "name");
  c.node = stringField(connection, "node");
  c.protocol = stringField(connection, "protocol");
  c.user = stringField(connection, "user");
  c.peer_host = stringField(connection, "peer_host");
  if (const auto it = connection.find("peer_port"); it != connection.end() && it->is_number()) {
    c.peer_port = it->get<int>();
  }
  // Where a broker that keeps the container id would show it.
  c.container_id = stringField(connection, "container_id");
  if (const auto props = connection.find("client_properties");
      c.container_id.empty() && props != connection.end() && props->is_object()) {
    c.container_id = stringField(*props, "container_id");
    if (c.container_id.empty()) c.container_id = stringField(*props, "container-id");
  }
  return c;
}

std::string peerAddress(const BrokerConnection& connection) {
  return connection.peer_host + ":" + std::to_string(connection.peer_port);
}

Result<std::vector<BrokerConnection>> listConnections(const ClusterSpec& spec,
                                                      const std::string& password) {
  if (Status s = checkSpec(spec); !s) return s;
  const auto client = ManagementClient::forCluster(spec, password);
  auto j = client.getJson("/api/connections");
  if (!j) return j.status();
  if (!j->is_array()) return Status::ioError("GET /api/connections: the answer is not a list");
  std::vector<BrokerConnection> out;
  for (const auto& c : *j) {
    if (c.is_object()) out.push_back(parseConnection(c));
  }
  return out;
}

Status closeConnectionsOf(const ClusterSpec& spec, const std::string& password,
                          const std::string& container_id) {
  auto connections = listConnections(spec, password);
  if (!connections) return connections.status();
  bool amqp10_without_id = false, any_match = false;
  for (const auto& c : *connections) {
    if (c.protocol.rfind("AMQP 1.0", 0) != 0) continue;
    if (c.container_id.empty()) amqp10_without_id = true;
    if (c.container_id == container_id) any_match = true;
  }
  if (!any_match && amqp10_without_id) {
    return Status::unavailable(
        "the broker does not show the container id of its AMQP 1.0 connections (RabbitMQ "
        "3.10 does not), so those of '" +
        container_id + "' cannot be told apart; close them by peer address instead");
  }
  auto closed = closeSelected(
      spec, password, *connections, "cepbus: container '" + container_id + "' left the cluster",
      [&](const BrokerConnection& c) { return c.container_id == container_id; });
  return closed ? Status::ok() : closed.status();
}

Result<size_t> closeConnectionsFrom(const ClusterSpec& spec, const std::string& password,
                                    const std::vector<std::string>& peer_addresses) {
  auto connections = listConnections(spec, password);
  if (!connections) return connections.status();
  return closeSelected(spec, password, *connections, "cepbus: the node left the cluster",
                       [&](const BrokerConnection& c) {
                         return std::find(peer_addresses.begin(), peer_addresses.end(),
                                          peerAddress(c)) != peer_addresses.end();
                       });
}

}  // namespace cepbus::services::cluster
