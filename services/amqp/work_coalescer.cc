#include "services/amqp/work_coalescer.h"

#include <utility>

namespace cepbus::services::amqp {

WorkCoalescer::WorkCoalescer(Post post) : post_(std::move(post)) {}

bool WorkCoalescer::add(Work work) {
  std::vector<Work> refused;  // destroyed outside the lock: a capture may own anything
  std::lock_guard lock(queue_->mu);
  if (queue_->closed) return false;
  queue_->work.push_back(std::move(work));
  if (queue_->woken) return true;
  // Posted under the lock: a producer that finds `woken` set relies on this
  // post having gone through.
  if (post_([queue = queue_] { runQueued(*queue); })) {
    queue_->woken = true;
    ++queue_->wakes;
    return true;
  }
  refused.swap(queue_->work);
  return false;
}

void WorkCoalescer::close() {
  std::lock_guard lock(queue_->mu);
  queue_->closed = true;
}

uint64_t WorkCoalescer::wakes() const {
  std::lock_guard lock(queue_->mu);
  return queue_->wakes;
}

void WorkCoalescer::runQueued(Queue& queue) {
  std::vector<Work> batch;
  {
    std::lock_guard lock(queue.mu);
    batch.swap(queue.work);
    queue.woken = false;
  }
  for (Work& work : batch) work();
}

}  // namespace cepbus::services::amqp
