#include "services/cluster/ingress_batcher.h"

#include <algorithm>
#include <cassert>
#include <iterator>

namespace cepbus::services::cluster {

IngressBatcher::IngressBatcher(uint32_t partitions, const Limits& limits)
    : limits_(limits), open_(partitions) {
  assert(partitions > 0 && limits_.max_events > 0);
}

std::vector<IngressBatcher::Batch> IngressBatcher::add(uint64_t delivery,
                                                       std::span<const Item> items, TimePoint now) {
  assert(!items.empty() && !pending_.contains(delivery));
  std::vector<Batch> closed;
  for (const Item& item : items) append(delivery, item, now, closed);
  // A batch whose linger ended while the timer had not fired yet goes now,
  // and with a linger of 0 every batch goes at once.
  std::vector<Batch> lingered = expire(now);
  std::move(lingered.begin(), lingered.end(), std::back_inserter(closed));
  return closed;
}

void IngressBatcher::append(uint64_t delivery, const Item& item, TimePoint now,
                            std::vector<Batch>& closed) {
  assert(item.partition < open_.size());
  Open& open = open_[item.partition];
  if (!open.batch.events.empty() && open.batch.bytes + item.bytes > limits_.max_bytes) {
    close(item.partition, Closed::kBytes, closed);
  }
  Batch& batch = open.batch;
  if (batch.events.empty()) {
    batch.id = next_batch_++;
    batch.partition = item.partition;
    open.opened = now;
    deadlines_.emplace_back(now, item.partition, batch.id);
  }
  if (batch.deliveries.empty() || batch.deliveries.back() != delivery) {
    batch.deliveries.push_back(delivery);
    ++pending_[delivery];
  }
  batch.events.push_back(item.event);
  batch.bytes += item.bytes;
  held_events_ += 1;
  held_bytes_ += item.bytes;
  if (batch.events.size() >= limits_.max_events) {
    close(item.partition, Closed::kFull, closed);
  } else if (batch.bytes >= limits_.max_bytes) {
    close(item.partition, Closed::kBytes, closed);
  }
}

void IngressBatcher::close(uint32_t partition, Closed why, std::vector<Batch>& closed) {
  Batch& batch = open_[partition].batch;
  batch.closed = why;
  sent_.emplace(batch.id, Sent{batch.deliveries, batch.events.size(), batch.bytes});
  closed.push_back(std::move(batch));
  batch = Batch{};
}

std::vector<IngressBatcher::Batch> IngressBatcher::expire(TimePoint now) {
  return closeOldest(now, Closed::kLinger);
}

std::vector<IngressBatcher::Batch> IngressBatcher::flush() {
  return closeOldest(std::nullopt, Closed::kFlush);
}

std::vector<IngressBatcher::Batch> IngressBatcher::closeOldest(std::optional<TimePoint> now,
                                                               Closed why) {
  std::vector<Batch> closed;
  dropStaleDeadlines();
  while (!deadlines_.empty() &&
         (!now || std::get<0>(deadlines_.front()) + limits_.linger <= *now)) {
    close(std::get<1>(deadlines_.front()), why, closed);
    deadlines_.pop_front();
    dropStaleDeadlines();
  }
  return closed;
}

void IngressBatcher::dropStaleDeadlines() {
  while (!deadlines_.empty()) {
    const auto& [opened, partition, id] = deadlines_.front();
    const Batch& batch = open_[partition].batch;
    if (!batch.events.empty() && batch.id == id) return;
    deadlines_.pop_front();
  }
}

std::optional<IngressBatcher::TimePoint> IngressBatcher::nextDeadline() const {
  // Entries of batches closed by size may lead: the first live one counts.
  for (const auto& [opened, partition, id] : deadlines_) {
    const Batch& batch = open_[partition].batch;
    if (!batch.events.empty() && batch.id == id) return opened + limits_.linger;
  }
  return std::nullopt;
}

std::optional<IngressBatcher::Sent> IngressBatcher::settle(uint64_t batch) {
  const auto it = sent_.find(batch);
  if (it == sent_.end()) return std::nullopt;
  Sent sent = std::move(it->second);
  sent_.erase(it);
  held_events_ -= sent.events;
  held_bytes_ -= sent.bytes;
  return sent;
}

std::vector<uint64_t> IngressBatcher::confirmed(uint64_t batch) {
  std::vector<uint64_t> settleable;
  const std::optional<Sent> sent = settle(batch);
  if (!sent) return settleable;
  for (uint64_t delivery : sent->deliveries) {
    const auto it = pending_.find(delivery);
    if (it == pending_.end()) continue;  // refused through another batch
    if (--it->second == 0) {
      settleable.push_back(delivery);
      pending_.erase(it);
    }
  }
  return settleable;
}

std::vector<uint64_t> IngressBatcher::refused(uint64_t batch) {
  std::vector<uint64_t> refused;
  const std::optional<Sent> sent = settle(batch);
  if (!sent) return refused;
  for (uint64_t delivery : sent->deliveries) {
    if (pending_.erase(delivery) > 0) refused.push_back(delivery);
  }
  return refused;
}

}  // namespace cepbus::services::cluster
