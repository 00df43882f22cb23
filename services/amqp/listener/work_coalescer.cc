#include "services/amqp/listener/work_coalescer.h"

#include <algorithm>
#include <utility>

namespace cepbus::services::amqp {
namespace {

thread_local WakeHold* current_hold = nullptr;

}  // namespace

WorkCoalescer::WorkCoalescer(Post post) : queue_(std::make_shared<Queue>(std::move(post))) {}

bool WorkCoalescer::add(Work work) {
  std::vector<Work> dropped;  // destroyed outside the lock: a capture may own anything
  std::lock_guard lock(queue_->mu);
  if (queue_->closed) return false;
  queue_->work.push_back(std::move(work));
  if (queue_->woken) return true;
  if (WakeHold* hold = WakeHold::current(); hold != nullptr && hold->holds(queue_)) {
    queue_->woken = true;  // the hold posts it
    return true;
  }
  return wakeLocked(queue_, dropped);
}

void WorkCoalescer::close() {
  std::lock_guard lock(queue_->mu);
  queue_->closed = true;
}

uint64_t WorkCoalescer::wakes() const {
  std::lock_guard lock(queue_->mu);
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
    std::lock_guard lock(queue.mu);
    batch.swap(queue.work);
    queue.woken = false;
  }
  for (Work& work : batch) work();
}

WakeHold::Scope::Scope(WakeHold* hold) : outer_(current_hold) { current_hold = hold; }

WakeHold::Scope::~Scope() { current_hold = outer_; }

WakeHold* WakeHold::current() { return current_hold; }

bool WakeHold::holds(const std::shared_ptr<WorkCoalescer::Queue>& queue) {
  // A burst feeds few connections: a linear search is cheaper than a set.
  if (std::find(woken_.begin(), woken_.end(), queue) == woken_.end()) {
    woken_.push_back(queue);
    return false;
  }
  held_.push_back(queue);
  return true;
}

void WakeHold::flush() {
  std::vector<std::shared_ptr<WorkCoalescer::Queue>> held;
  held.swap(held_);
  woken_.clear();
  for (const auto& queue : held) {
    std::vector<WorkCoalescer::Work> dropped;
    std::lock_guard lock(queue->mu);
    WorkCoalescer::wakeLocked(queue, dropped);
  }
}

}  // namespace cepbus::services::amqp
