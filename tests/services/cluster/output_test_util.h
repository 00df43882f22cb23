#pragma once

// What the tests of a node's output path (output_batcher_test,
// output_sender_test, partition_runner_test) publish and read back: queries
// with an output, composites and late events as a runner hands them over,
// and the composite ids a batch message carries.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <proton/message.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "services/cluster/cluster_queries.h"
#include "services/cluster/partition_runner.h"

namespace cepbus::services::cluster::testing {

// A query named `name` whose composites go with the routing key `output`.
inline CompiledQuery query(const std::string& name, const std::string& output) {
  CompiledQuery q;
  q.name = name;
  q.output = output;
  return q;
}

// Output `seq` of a runner: a composite of `query`, whose id is `id`.
inline OutputMessage composite(uint64_t seq, const std::string& query, const std::string& output,
                               uint64_t id) {
  return OutputMessage{seq, EventBuilder("Equal").id(0).at(7).set("price", Value(10.5)).build(),
                       OutputMessage::Composite{query, output, id, "[5,7]"}};
}

// Output `seq` of a runner: the late event `id`.
inline OutputMessage late(uint64_t seq, EventId id) {
  return OutputMessage{seq, EventBuilder("Stock").id(id).at(1).build(), std::nullopt};
}

// The composite ids a composite batch message carries, in order.
inline std::vector<uint64_t> compositeIds(const proton::message& batch) {
  std::vector<uint64_t> out;
  std::istringstream lines(proton::get<std::string>(batch.body()));
  for (std::string line; std::getline(lines, line);) {
    out.push_back(nlohmann::json::parse(line).at("id").get<uint64_t>());
  }
  return out;
}

}  // namespace cepbus::services::cluster::testing
