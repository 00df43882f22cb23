#include "services/amqp/listener/work_coalescer.h"

#include <utility>

namespace cepbus::services::amqp {

WorkCoalescer::WorkCoalescer(Post post) : queue_(std::make_shared<Queue>(std::move(post))) {}

bool WorkCoalescer::add(Work work, flows::WakeHold* hold) {
  std::vector<Work> dropped;  // destroyed outside the lock: a capture may own anything
  MutexLock lock(queue_->mu);
  if (queue_->closed) return false;
  queue_->work.push_back(std::move(work));
  if (queue_->woken) return true;
  if (hold != nullptr && hold->holds(queue_)) {
    queue_->woken = true;  // the hold wakes it (Queue::wakeHeld())
    return true;
  }
  return wakeLocked(queue_, dropped);
}

void WorkCoalescer::close() {
  MutexLock lock(queue_->mu);
  queue_->closed = true;
}

uint64_t WorkCoalescer::wakes() const {
  MutexLock lock(queue_->mu);
  return queue_->wakes;
}

bool WorkCoalescer::wakeLocked(const std::shared_ptr<Queue>& queue, std::vector<Work>& dropped) {
  // Posted under the lock: a producer that finds `woken` set relies on this
  // post having gone through.
  if (queue->post([queue] { runQueued(*queue); })) {
    queue->woken = true;
    ++queue->wakes;
    return true;
  }
  dropped.swap(queue->work);
  queue->woken = false;
  return false;
}

void WorkCoalescer::runQueued(Queue& queue) {
  std::vector<Work> batch;
  {
    MutexLock lock(queue.mu);
    batch.swap(queue.work);
    queue.woken = false;
  }
  for (Work& work : batch) work();
}

void WorkCoalescer::Queue::wakeHeld() {
  std::vector<Work> dropped;  // destroyed outside the lock
  const std::shared_ptr<Queue> self = shared_from_this();
  MutexLock lock(self->mu);
  wakeLocked(self, dropped);
}

}  // namespace cepbus::services::amqp
