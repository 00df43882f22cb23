#include "router/request_tracker.h"

#include <string>

namespace cepbus::router {

RequestTracker::~RequestTracker() { stop(); }

void RequestTracker::start() {
  MutexLock lock(mu_);
  if (running_) return;
  running_ = true;
  thread_ = std::thread([this] { run(); });
}

void RequestTracker::stop() {
  std::unordered_map<uint64_t, ReplyCallback> abandoned;
  {
    MutexLock lock(mu_);
    if (!running_) return;
    running_ = false;
    abandoned.swap(pending_);
    deadlines_ = {};
  }
  cv_.notify_all();
  thread_.join();
  const flows::Outcome outcome{flows::OutcomeKind::kFault,
                               {},
                               Status::unavailable("the broker stopped before a reply"),
                               nullptr};
  for (auto& [id, callback] : abandoned) callback(outcome);
}

Result<uint64_t> RequestTracker::track(std::chrono::nanoseconds timeout, ReplyCallback callback) {
  uint64_t id;
  {
    MutexLock lock(mu_);
    if (!running_) return Status::unavailable("request tracker is not running");
    id = next_id_++;
    pending_.emplace(id, std::move(callback));
    deadlines_.emplace(Clock::now() + timeout, id);
  }
  cv_.notify_one();
  return id;
}

bool RequestTracker::complete(uint64_t correlation_id, const flows::Outcome& outcome) {
  ReplyCallback callback;
  {
    MutexLock lock(mu_);
    auto it = pending_.find(correlation_id);
    if (it == pending_.end()) {
      ++late_;
      return false;
    }
    callback = std::move(it->second);
    pending_.erase(it);
  }
  callback(outcome);
  return true;
}

void RequestTracker::onOutcome(const flows::Exchange& exchange, const flows::Outcome& outcome) {
  switch (outcome.kind) {
    case flows::OutcomeKind::kReply:
    case flows::OutcomeKind::kFault:
    case flows::OutcomeKind::kRejected:
    case flows::OutcomeKind::kTimeout:
      complete(exchange.correlation_id, outcome);
      break;
    case flows::OutcomeKind::kAccepted:
    case flows::OutcomeKind::kDegraded:
    case flows::OutcomeKind::kDelivered:
      break;
  }
}

size_t RequestTracker::pending() const {
  MutexLock lock(mu_);
  return pending_.size();
}

uint64_t RequestTracker::timeouts() const {
  MutexLock lock(mu_);
  return timeouts_;
}

uint64_t RequestTracker::lateOutcomes() const {
  MutexLock lock(mu_);
  return late_;
}

void RequestTracker::run() {
  std::vector<std::pair<uint64_t, ReplyCallback>> expired;
  MutexLock lock(mu_);
  while (running_) {
    if (deadlines_.empty()) {
      cv_.wait(mu_);
      continue;
    }
    const Clock::time_point due = deadlines_.top().first;
    if (Clock::now() < due) {
      cv_.waitUntil(mu_, due);
      continue;
    }
    const auto now = Clock::now();
    while (!deadlines_.empty() && deadlines_.top().first <= now) {
      const uint64_t id = deadlines_.top().second;
      deadlines_.pop();
      // Requests that already completed left their deadline behind; skip it.
      if (auto it = pending_.find(id); it != pending_.end()) {
        expired.emplace_back(id, std::move(it->second));
        pending_.erase(it);
        ++timeouts_;
      }
    }
    lock.unlock();
    for (auto& [id, callback] : expired) {
      callback(flows::Outcome{flows::OutcomeKind::kTimeout,
                              {},
                              Status::timeout("no reply to request " + std::to_string(id)),
                              nullptr});
    }
    expired.clear();
    lock.lock();
  }
}

}  // namespace cepbus::router
