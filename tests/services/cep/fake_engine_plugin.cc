// "cepfake": a small engine plugin for the CEP service tests, loaded through
// the real plugin ABI like any engine. It runs `PATTERN SEQ(A a, B b, ...)`
// (named single events only, no WHERE, no PARTITION BY) with skip-till-next-
// match and no overlap: it binds the next event of the next element's type
// and starts afresh after each match. RETURN goes through the core's
// expression compiler, as a real engine's does.
//
// Options make it misbehave on purpose:
//   batched=true     hold matches until flush()
//   fail_type=T      refuse events of type T with an InvalidArgument status
//   throw_type=T     throw std::runtime_error on events of type T
//   block_type=T     on an event of type T, wait until the gate is open
// The gate is driven by the test through the exported C functions below
// (found with dlsym in the already-loaded library), which also tell the
// largest batch any detector was handed in one onEvents() call.

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "bus/core/pattern/expr_compiler.h"
#include "bus/core/plugin/plugin_export.h"

namespace cepbus::tests::cepfake {
namespace {

struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = true;
  int blocked = 0;
};

Gate& gate() {
  static Gate g;
  return g;
}

std::atomic<size_t>& largestBatch() {
  static std::atomic<size_t> largest{0};
  return largest;
}

struct Plan {
  std::vector<Symbol> types;  // element i's event type
  std::optional<pattern::CompiledReturn> returns;
  size_t slots = 0;
  bool batched = false;
  Symbol fail_type;
  Symbol throw_type;
  Symbol block_type;
};

class Composer final : public plugin::MatchComposer {
 public:
  explicit Composer(std::shared_ptr<const Plan> plan) : plan_(std::move(plan)) {}

  EventPtr compose(const plugin::Match& match) const override {
    EventBuilder builder(plan_->returns ? plan_->returns->type : Symbol::intern("Match"));
    std::vector<pattern::SlotBinding> bindings(plan_->slots);
    for (size_t i = 0; i < match.size(); ++i) {
      builder.constituent(match.event(i));
      bindings[i].event = match.event(i).get();
    }
    if (plan_->returns) plan_->returns->apply(bindings, match.probability(), builder);
    return builder.build();
  }

 private:
  std::shared_ptr<const Plan> plan_;
};

class FakeDetector final : public plugin::Detector {
 public:
  FakeDetector(std::shared_ptr<const Plan> plan, plugin::MatchSink& sink)
      : plan_(plan), composer_(plan), sink_(sink) {}

  Status onEvent(const EventPtr& event) override {
    const Symbol type = event->type();
    if (type == plan_->fail_type) {
      return Status::invalidArgument("cepfake refuses events of type " + std::string(type.name()) +
                                     " (ts " + std::to_string(event->ts()) + ")");
    }
    if (type == plan_->throw_type)
      throw std::runtime_error("cepfake throws on " + std::string(type.name()));
    if (type == plan_->block_type) {
      Gate& g = gate();
      std::unique_lock lock(g.mu);
      ++g.blocked;
      g.cv.notify_all();
      g.cv.wait(lock, [&g] { return g.open; });
      --g.blocked;
    }
    if (type == plan_->types[bound_.size()]) {
      bound_.push_back(event);
      if (bound_.size() == plan_->types.size()) {
        if (plan_->batched) {
          pending_.push_back(std::move(bound_));
        } else {
          emit(bound_);
        }
        bound_.clear();
      }
    }
    return Status::ok();
  }

  Status onEvents(std::span<const EventPtr> events) override {
    size_t largest = largestBatch().load();
    while (events.size() > largest &&
           !largestBatch().compare_exchange_weak(largest, events.size())) {
    }
    return Detector::onEvents(events);
  }

  Status flush() override {
    for (const auto& events : pending_) emit(events);
    pending_.clear();
    return Status::ok();
  }

 private:
  void emit(const std::vector<EventPtr>& events) {
    std::vector<const EventPtr*> pointers;
    std::vector<uint32_t> ends;
    for (const EventPtr& e : events) {
      pointers.push_back(&e);
      ends.push_back(static_cast<uint32_t>(pointers.size()));
    }
    sink_.onMatch(plugin::Match(pointers, ends, &composer_));
  }

  const std::shared_ptr<const Plan> plan_;
  const Composer composer_;
  plugin::MatchSink& sink_;
  std::vector<EventPtr> bound_;
  std::vector<std::vector<EventPtr>> pending_;
};

class FakeFactory final : public plugin::DetectorFactory {
 public:
  Result<std::unique_ptr<plugin::Detector>> create(const pattern::Query& query,
                                                   const plugin::DetectorOptions& options,
                                                   plugin::MatchSink& sink) const override {
    static constexpr std::string_view kKnown[] = {"batched", "fail_type", "throw_type",
                                                  "block_type"};
    if (Status s = options.checkKnown(kKnown, "cepfake"); !s) return s;
    if (query.where) return Status::invalidArgument("cepfake does not support WHERE");
    if (!query.partition_by.empty()) {
      return Status::invalidArgument("cepfake does not support PARTITION BY");
    }
    auto plan = std::make_shared<Plan>();
    std::vector<pattern::PatternPtr> elements;
    if (query.pattern->kind == pattern::PatternKind::kSeq) {
      elements = query.pattern->children;
    } else {
      elements.push_back(query.pattern);
    }
    for (const auto& e : elements) {
      if (e->kind != pattern::PatternKind::kEvent || e->var.empty()) {
        return Status::invalidArgument(
            std::string("cepfake supports only named single events, not ") +
            pattern::operatorName(e->kind));
      }
      plan->types.push_back(Symbol::intern(e->type));
    }
    const pattern::BindingLayout layout = pattern::BindingLayout::forQuery(query);
    plan->slots = layout.size();
    if (query.returns) {
      auto compiled = pattern::compileReturn(*query.returns, layout);
      if (!compiled) return compiled.status();
      plan->returns = std::move(*compiled);
    }
    if (const std::string* b = options.find("batched")) plan->batched = *b == "true";
    if (const std::string* t = options.find("fail_type")) plan->fail_type = Symbol::intern(*t);
    if (const std::string* t = options.find("throw_type")) plan->throw_type = Symbol::intern(*t);
    if (const std::string* t = options.find("block_type")) plan->block_type = Symbol::intern(*t);
    return std::unique_ptr<plugin::Detector>(std::make_unique<FakeDetector>(plan, sink));
  }
};

void registerFactories(plugin::FactoryRegistrar& registrar) {
  registrar.add("cepfake", std::make_unique<FakeFactory>());
}

}  // namespace
}  // namespace cepbus::tests::cepfake

CEPBUS_DEFINE_PLUGIN("cepfake", "1.0.0", cepbus::tests::cepfake::registerFactories)

// The gate of block_type, for the tests.
extern "C" __attribute__((visibility("default"))) void cepfake_close_gate() {
  auto& g = cepbus::tests::cepfake::gate();
  std::lock_guard lock(g.mu);
  g.open = false;
}

extern "C" __attribute__((visibility("default"))) void cepfake_open_gate() {
  auto& g = cepbus::tests::cepfake::gate();
  std::lock_guard lock(g.mu);
  g.open = true;
  g.cv.notify_all();
}

// Detectors waiting at the gate.
extern "C" __attribute__((visibility("default"))) int cepfake_blocked() {
  auto& g = cepbus::tests::cepfake::gate();
  std::lock_guard lock(g.mu);
  return g.blocked;
}

// The largest batch handed to onEvents() since the last reset.
extern "C" __attribute__((visibility("default"))) size_t cepfake_largest_batch() {
  return cepbus::tests::cepfake::largestBatch().load();
}

extern "C" __attribute__((visibility("default"))) void cepfake_reset_batches() {
  cepbus::tests::cepfake::largestBatch().store(0);
}
