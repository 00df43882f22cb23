#pragma once

// Test doubles shared by the flows and router tests: a delivery target that
// records what it got (and what its context said) and can fail, throw or
// block; the journaling side of a delivery's context; a listener that records
// outcomes; and small helpers to build events and wait for conditions.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/status.h"
#include "flows/delivery_context.h"
#include "flows/delivery_target.h"
#include "flows/exchange.h"
#include "flows/wake_hold.h"
#include "tests/testing/wait.h"

namespace cepbus::flows::testing {

inline EventPtr makeEvent(int64_t ts, EventId id = 0, int32_t cost = 0) {
  EventBuilder b("Tick");
  b.at(ts).cost(cost).set(Symbol::intern("n"), Value(ts));
  if (id != 0) b.id(id);
  return b.build();
}

inline Exchange inOnly(EventPtr event, std::string_view address = "test.topic",
                       Qos qos = Qos::kBestEffort, ExchangeListenerPtr listener = nullptr) {
  Exchange ex;
  ex.event = std::move(event);
  ex.address = Symbol::intern(address);
  ex.qos = qos;
  ex.listener = std::move(listener);
  return ex;
}

// Polls `pred` until it holds or `timeout` passes; generous by default so
// that a loaded machine (or a sanitizer) does not make a test flaky.
using cepbus::testing::waitUntil;

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("cepbus-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// The journaling flow's side of one delivery, for tests of what a target
// does with its context: defer() hands out its acknowledgement (with
// `previous` earlier deliveries), which records what it is given.
class FakeJournal final : public DeliveryContext::Journaled {
 public:
  explicit FakeJournal(uint32_t previous = 0) : previous_(previous) {}

  DeferredAck defer() override {
    ++deferred_;
    return DeferredAck(receiver_, kToken, previous_);
  }

  // defer() calls so far.
  uint64_t deferred() const { return deferred_; }
  // The acknowledgements given, in order: token and status.
  std::vector<std::pair<uint64_t, Status>> acknowledged() const {
    std::lock_guard lock(receiver_->mu);
    return receiver_->acknowledged;
  }

 private:
  struct Receiver final : DeferredAck::Receiver {
    void acknowledge(uint64_t token, const Status& status) override {
      std::lock_guard lock(mu);
      acknowledged.emplace_back(token, status);
    }
    mutable std::mutex mu;
    std::vector<std::pair<uint64_t, Status>> acknowledged;  // guarded by mu
  };

  static constexpr uint64_t kToken = 1;
  const uint32_t previous_;
  uint64_t deferred_ = 0;
  const std::shared_ptr<Receiver> receiver_ = std::make_shared<Receiver>();
};

class RecordingTarget final : public DeliveryTarget {
 public:
  enum class Behavior { kAccept, kFail, kThrow };

  explicit RecordingTarget(std::string name) : name_(std::move(name)) {}

  const std::string& name() const override { return name_; }

  Status deliver(const Exchange& exchange, DeliveryContext& context) override {
    entered_.fetch_add(1);
    {
      std::unique_lock lock(mu_);
      gate_cv_.wait(lock, [&] { return gate_open_; });
      last_thread_ = std::this_thread::get_id();
      last_pattern_ = exchange.pattern;
      last_qos_ = exchange.qos;
      last_journaled_ = context.journaled();
      last_wake_hold_ = context.wakeHold();
    }
    switch (behavior_.load()) {
      case Behavior::kFail:
        failures_.fetch_add(1);
        return Status::unavailable(name_ + " is failing on purpose");
      case Behavior::kThrow:
        failures_.fetch_add(1);
        throw std::runtime_error(name_ + " throws on purpose");
      case Behavior::kAccept:
        break;
    }
    std::lock_guard lock(mu_);
    ids_.push_back(exchange.event->id());
    ++counts_[exchange.event->id()];
    return Status::ok();
  }

  void setBehavior(Behavior b) { behavior_.store(b); }
  void closeGate() {
    std::lock_guard lock(mu_);
    gate_open_ = false;
  }
  void openGate() {
    {
      std::lock_guard lock(mu_);
      gate_open_ = true;
    }
    gate_cv_.notify_all();
  }

  size_t delivered() const {
    std::lock_guard lock(mu_);
    return ids_.size();
  }
  std::vector<EventId> ids() const {
    std::lock_guard lock(mu_);
    return ids_;
  }
  std::map<EventId, int> counts() const {
    std::lock_guard lock(mu_);
    return counts_;
  }
  size_t entered() const { return entered_.load(); }
  size_t failures() const { return failures_.load(); }
  std::thread::id lastThread() const {
    std::lock_guard lock(mu_);
    return last_thread_;
  }
  Pattern lastPattern() const {
    std::lock_guard lock(mu_);
    return last_pattern_;
  }
  Qos lastQos() const {
    std::lock_guard lock(mu_);
    return last_qos_;
  }
  // What the last delivery's context said.
  bool lastJournaled() const {
    std::lock_guard lock(mu_);
    return last_journaled_;
  }
  const WakeHold* lastWakeHold() const {
    std::lock_guard lock(mu_);
    return last_wake_hold_;
  }

 private:
  const std::string name_;
  std::atomic<Behavior> behavior_{Behavior::kAccept};
  std::atomic<size_t> entered_{0};
  std::atomic<size_t> failures_{0};
  mutable std::mutex mu_;
  std::condition_variable gate_cv_;
  bool gate_open_ = true;
  std::vector<EventId> ids_;
  std::map<EventId, int> counts_;
  std::thread::id last_thread_;
  Pattern last_pattern_ = Pattern::kInOnly;
  Qos last_qos_ = Qos::kBestEffort;
  bool last_journaled_ = false;
  const WakeHold* last_wake_hold_ = nullptr;
};

// Records every outcome with the event id and correlation id it concerned.
class OutcomeRecorder final : public ExchangeListener {
 public:
  struct Entry {
    OutcomeKind kind;
    std::string target;
    Status status;
    EventId event_id = 0;
    uint64_t correlation_id = 0;
    EventPtr reply;
  };

  void onOutcome(const Exchange& exchange, const Outcome& outcome) override {
    std::lock_guard lock(mu_);
    entries_.push_back(Entry{outcome.kind, std::string(outcome.target), outcome.status,
                             exchange.event ? exchange.event->id() : 0, exchange.correlation_id,
                             outcome.reply});
  }

  std::vector<Entry> entries() const {
    std::lock_guard lock(mu_);
    return entries_;
  }
  size_t count(OutcomeKind kind) const {
    std::lock_guard lock(mu_);
    size_t n = 0;
    for (const Entry& e : entries_) n += e.kind == kind ? 1 : 0;
    return n;
  }
  // Event ids that received `kind`.
  std::multiset<EventId> idsWith(OutcomeKind kind) const {
    std::lock_guard lock(mu_);
    std::multiset<EventId> ids;
    for (const Entry& e : entries_) {
      if (e.kind == kind) ids.insert(e.event_id);
    }
    return ids;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
};

}  // namespace cepbus::flows::testing
