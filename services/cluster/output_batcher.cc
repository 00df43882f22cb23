#include "services/cluster/output_batcher.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <proton/message_id.hpp>

#include "bus/core/event_json.h"
#include "services/cluster/event_batch.h"
#include "services/protocols/amqp/message_mapping.h"

namespace cepbus::services::cluster {
namespace {

constexpr char kLateRoutingKey[] = "late";

IngressBatcher::Limits limitsOf(const ClusterOutputSpec& spec) {
  IngressBatcher::Limits limits;
  limits.max_events = spec.batch_events;
  limits.max_bytes = spec.batch_bytes;
  limits.linger = std::chrono::milliseconds(spec.linger_ms);
  // Outputs are never refused nor held back: what a runner made goes out,
  // and the inputs it came from hold the partition's credit.
  limits.max_held_events = std::numeric_limits<uint64_t>::max();
  limits.max_held_bytes = std::numeric_limits<uint64_t>::max();
  return limits;
}

}  // namespace

OutputBatcher::OutputBatcher(const ClusterSpec& spec, std::span<const CompiledQuery> queries)
    : spec_(spec), limits_(limitsOf(spec.output)), generations_(spec.partitions, 0) {
  for (const CompiledQuery& query : queries) {
    if (lane_of_.emplace(query.output, static_cast<uint32_t>(lanes_.size())).second) {
      lanes_.push_back(query.output);
    }
  }
  lanes_.push_back(kLateRoutingKey);
  clear();
}

void OutputBatcher::clear() {
  batcher_.emplace(static_cast<uint32_t>(lanes_.size()), limits_);
  pending_.clear();
}

void OutputBatcher::forget(uint32_t partition) { ++generations_[partition]; }

std::vector<OutputBatcher::Batch> OutputBatcher::add(uint32_t partition,
                                                     const OutputMessage& output, TimePoint now) {
  const uint32_t lane = output.composite ? lane_of_.at(output.composite->output)
                                         : static_cast<uint32_t>(lanes_.size() - 1);
  const uint64_t id = next_output_++;
  Pending& pending =
      pending_.emplace(id, Pending{Ref{partition, output.seq}, generations_[partition], output, {}})
          .first->second;
  if (limits_.max_events > 1) pending.line = line(partition, output);
  const IngressBatcher::Item item{lane, output.event, pending.line.size() + 1};
  return batcher_->add(id, std::span(&item, 1), now);
}

// A composite's line keeps what its own message carried as message-id and
// properties; a late event's is the full format, which keeps its id.
std::string OutputBatcher::line(uint32_t partition, const OutputMessage& output) const {
  if (!output.composite) return encodeEvent(*output.event, EventFormat::kFull);
  const OutputMessage::Composite& c = *output.composite;
  return "{\"id\":" + std::to_string(c.id) + ",\"query\":" + nlohmann::json(c.query).dump() +
         ",\"match_ts\":" + c.match_ts + ",\"partition\":" + std::to_string(partition) +
         ",\"node\":" + nlohmann::json(spec_.node).dump() +
         ",\"event\":" + encodeEvent(*output.event, EventFormat::kCompact) + "}";
}

void OutputBatcher::encode(const Batch& batch, proton::message& message) const {
  message.clear();
  if (limits_.max_events == 1) {
    encodeOne(pending_.at(batch.deliveries.front()), message);
    return;
  }
  std::string body;
  body.reserve(batch.bytes);
  for (uint64_t id : batch.deliveries) {
    body += pending_.at(id).line;
    body += '\n';
  }
  message.subject(late(batch) ? kEventBatchSubject : kCompositeBatchSubject);
  if (late(batch)) message.properties().put("late", true);
  message.body(body);
}

void OutputBatcher::encodeOne(const Pending& pending, proton::message& message) const {
  const OutputMessage& output = pending.output;
  amqp::messageFromEvent(*output.event, message);
  if (const auto& composite = output.composite) {
    message.id(proton::message_id(composite->id));
    message.properties().put("query", composite->query);
    message.properties().put("match-ts", composite->match_ts);
    message.properties().put("node", spec_.node);
  } else {
    message.properties().put("late", true);
  }
  message.properties().put("partition", pending.ref.partition);
}

std::vector<OutputBatcher::Ref> OutputBatcher::confirmed(uint64_t batch) {
  return answered(batcher_->confirmed(batch));
}

std::vector<OutputBatcher::Ref> OutputBatcher::refused(uint64_t batch) {
  return answered(batcher_->refused(batch));
}

std::vector<OutputBatcher::Ref> OutputBatcher::answered(const std::vector<uint64_t>& outputs) {
  std::vector<Ref> refs;
  refs.reserve(outputs.size());
  for (uint64_t id : outputs) {
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    if (it->second.generation == generations_[it->second.ref.partition]) {
      refs.push_back(it->second.ref);
    }
    pending_.erase(it);
  }
  return refs;
}

}  // namespace cepbus::services::cluster
