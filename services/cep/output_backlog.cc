#include "services/cep/output_backlog.h"

#include <algorithm>
#include <thread>
#include <utility>

namespace cepbus::services::cep {

OutputBacklog::OutputBacklog(Publish publish, Lost lost)
    : publish_(std::move(publish)), lost_(std::move(lost)) {}

bool OutputBacklog::retryable(const flows::SendOutcome& out) {
  // The first refusal's reason; a straight-through target's own refusal
  // (a full buffer) counts as failed, with the reason it gave.
  const Status::Code code = out.status.code();
  return code == Status::Code::kRejected || code == Status::Code::kUnavailable;
}

bool OutputBacklog::publish(flows::Exchange exchange) {
  // Only publish() adds to an empty backlog, and its calls do not overlap:
  // seen empty, it stays empty until this call holds something (a retry
  // publishes only while something is held).
  if (!empty()) {
    MutexLock lock(mu_);
    if (!held_.empty() || retrying_) {
      held_.push_back(std::move(exchange));
      size_.store(held_.size(), std::memory_order_release);
      ++held_total_;
      return true;
    }
  }
  const flows::SendOutcome out = publish_(exchange);
  if (out.status.isOk()) return false;
  if (!retryable(out)) {
    lost_(exchange, out);
    return false;
  }
  MutexLock lock(mu_);
  // Nothing was held when it went out, and publish() calls do not overlap:
  // anything held now came after it.
  held_.push_front(std::move(exchange));
  size_.store(held_.size(), std::memory_order_release);
  ++held_total_;
  return true;
}

bool OutputBacklog::retry() {
  for (;;) {
    flows::Exchange next;
    {
      MutexLock lock(mu_);
      if (held_.empty()) return true;
      if (retrying_) return false;
      retrying_ = true;
      next = held_.front();
    }
    // Outside the lock: delivering it may run code that publishes again.
    const flows::SendOutcome out = publish_(next);
    const bool refused_for_now = !out.status.isOk() && retryable(out);
    {
      MutexLock lock(mu_);
      retrying_ = false;
      if (refused_for_now) return false;
      held_.pop_front();
      size_.store(held_.size(), std::memory_order_release);
    }
    if (!out.status.isOk()) lost_(next, out);
  }
}

bool OutputBacklog::drain(std::chrono::steady_clock::time_point deadline) {
  std::chrono::microseconds wait{100};
  constexpr std::chrono::microseconds kLongestWait{20'000};
  while (!retry()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(wait, deadline - now));
    wait = std::min(wait * 2, kLongestWait);
  }
  return true;
}

void OutputBacklog::abandon() {
  std::deque<flows::Exchange> given_up;
  {
    MutexLock lock(mu_);
    given_up.swap(held_);
    // The one a retry() is publishing is that retry's to settle.
    if (retrying_) {
      held_.push_back(std::move(given_up.front()));
      given_up.pop_front();
    }
    size_.store(held_.size(), std::memory_order_release);
  }
  flows::SendOutcome out;
  out.rejected = 1;
  out.status = Status::unavailable("the query stopped while the bus refused its composite event");
  for (const flows::Exchange& exchange : given_up) lost_(exchange, out);
}

uint64_t OutputBacklog::heldTotal() const {
  MutexLock lock(mu_);
  return held_total_;
}

}  // namespace cepbus::services::cep
