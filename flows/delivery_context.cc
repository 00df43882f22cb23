#include "flows/delivery_context.h"

namespace cepbus::flows {

void DeferredAck::storeCheckpoint(std::span<const DeferredAck> acks, CheckpointRecord checkpoint,
                                  CheckpointDone done) const {
  if (!receiver_) {
    done(Status::invalidArgument("checkpoint " + checkpoint.name + ": no flow to store it in"));
    return;
  }
  std::vector<uint64_t> tokens;
  tokens.reserve(acks.size());
  for (const DeferredAck& ack : acks) {
    if (ack.receiver_ != receiver_) {
      done(Status::invalidArgument("checkpoint " + checkpoint.name +
                                   ": its input came through more than one journaling flow"));
      return;
    }
    tokens.push_back(ack.token_);
  }
  receiver_->acknowledgeWithCheckpoint(std::move(tokens), std::move(checkpoint), std::move(done));
}

}  // namespace cepbus::flows
