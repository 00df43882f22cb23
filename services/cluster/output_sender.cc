#include "services/cluster/output_sender.h"

namespace cepbus::services::cluster {

OutputSender::OutputSender(const ClusterSpec& spec, std::span<const CompiledQuery> queries, Io& io)
    : io_(io), batcher_(spec, queries) {}

void OutputSender::send(uint32_t partition, const OutputMessage& output, TimePoint now) {
  sendBatches(batcher_.add(partition, output, now));
  armTimer();
}

bool OutputSender::lingered(TimePoint now) {
  timer_armed_ = false;
  const std::vector<OutputBatcher::Batch> batches = batcher_.expire(now);
  sendBatches(batches);
  armTimer();
  return !batches.empty();
}

void OutputSender::answered(uint64_t batch, bool accepted) {
  for (const OutputBatcher::Ref& ref :
       accepted ? batcher_.confirmed(batch) : batcher_.refused(batch)) {
    io_.outputDone(ref.partition, ref.seq, accepted);
  }
}

void OutputSender::sendBatches(const std::vector<OutputBatcher::Batch>& batches) {
  for (const OutputBatcher::Batch& batch : batches) {
    batcher_.encode(batch, message_);
    if (!io_.send(batch.id, batcher_.routingKey(batch), batcher_.late(batch), message_)) {
      // No link: the connection is going, and every partition with it.
      batcher_.refused(batch.id);
    }
  }
}

void OutputSender::armTimer() {
  const std::optional<TimePoint> due = batcher_.nextDeadline();
  if (timer_armed_ || !due) return;
  timer_armed_ = true;
  io_.wakeAt(*due);
}

}  // namespace cepbus::services::cluster
