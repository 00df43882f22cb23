// Fake engines for the detection host's tests, loaded through the real
// plugin ABI. Built once per engine auto knows (CMakeLists.txt defines
// FAKE_ENGINE as "nfa", "petri", "algebra" or "join"), each module
// registering that one engine, so the planner's choice and trial run on them.
//
// Every fake runs `PATTERN SEQ(A a, B b, ...)` or a single event (named
// single events; WHERE is accepted and ignored) with skip-till-next-match
// and no overlap: it binds the next event of the next element's type and
// starts afresh after each match. It refuses on purpose:
//   - a query with an element of type No_<engine> (No_petri, ...);
//   - several queries in one detector when one has an element of type Alone
//     (it runs each alone);
//   - an option other than fail_type=T (refuse events of type T);
// and it counts its partial matches (the events bound so far) for state(),
// exports "{\"engine\":\"<engine>\"}" for format json, and the algebra fake
// has a notice. fake_detectors_made() tells the tests how many
// detectors of single queries this module made (found with dlsym in the
// loaded library).

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "bus/core/plugin/plugin_export.h"

namespace cepbus::tests::fake {
namespace {

constexpr const char* kEngine = FAKE_ENGINE;

std::atomic<int>& made() {
  static std::atomic<int> n{0};
  return n;
}

class Composer final : public plugin::MatchComposer {
 public:
  EventPtr compose(const plugin::Match& match) const override {
    EventBuilder builder("Match");
    for (size_t i = 0; i < match.size(); ++i) builder.constituent(match.event(i));
    return builder.build();
  }
};

class FakeDetector final : public plugin::Detector {
 public:
  FakeDetector(std::vector<Symbol> types, Symbol fail_type, plugin::MatchSink& sink)
      : types_(std::move(types)), fail_type_(fail_type), sink_(sink) {}

  Status onEvent(const EventPtr& event) override {
    if (event->type() == fail_type_) {
      return Status::invalidArgument(std::string("fake ") + kEngine + " refuses type " +
                                     std::string(fail_type_.name()));
    }
    if (event->type() != types_[bound_.size()]) return Status::ok();
    bound_.push_back(event);
    if (bound_.size() == types_.size()) {
      std::vector<const EventPtr*> pointers;
      std::vector<uint32_t> ends;
      for (const EventPtr& e : bound_) {
        pointers.push_back(&e);
        ends.push_back(static_cast<uint32_t>(pointers.size()));
      }
      sink_.onMatch(plugin::Match(pointers, ends, &composer_));
      bound_.clear();
    }
    peak_ = std::max<uint64_t>(peak_, bound_.size());
    return Status::ok();
  }
  Status flush() override { return Status::ok(); }
  Result<std::string> exportModel(std::string_view format) const override {
    if (format != "json") return Detector::exportModel(format);
    return "{\"engine\":\"" + std::string(kEngine) + "\"}";
  }
  std::optional<plugin::DetectorState> state() const override {
    return plugin::DetectorState{bound_.size(), peak_, 0, 0};
  }

 private:
  const std::vector<Symbol> types_;
  const Symbol fail_type_;
  plugin::MatchSink& sink_;
  Composer composer_;
  std::vector<EventPtr> bound_;
  uint64_t peak_ = 0;
};

bool hasType(const pattern::Query& query, std::string_view type) {
  if (query.pattern->kind == pattern::PatternKind::kEvent) return query.pattern->type == type;
  return std::any_of(query.pattern->children.begin(), query.pattern->children.end(),
                     [type](const pattern::PatternPtr& e) { return e->type == type; });
}

class FakeFactory final : public plugin::DetectorFactory {
 public:
  Result<std::unique_ptr<plugin::Detector>> create(const pattern::Query& query,
                                                   const plugin::DetectorOptions& options,
                                                   plugin::MatchSink& sink) const override {
    static constexpr std::string_view kKnown[] = {"fail_type"};
    if (Status s = options.checkKnown(kKnown, kEngine); !s) return s;
    if (hasType(query, std::string("No_") + kEngine)) {
      return Status::invalidArgument(std::string("fake ") + kEngine + " refuses type No_" +
                                     kEngine);
    }
    std::vector<pattern::PatternPtr> elements;
    if (query.pattern->kind == pattern::PatternKind::kSeq) {
      elements = query.pattern->children;
    } else {
      elements.push_back(query.pattern);
    }
    std::vector<Symbol> types;
    for (const auto& e : elements) {
      if (e->kind != pattern::PatternKind::kEvent || e->var.empty()) {
        return Status::invalidArgument(std::string("fake ") + kEngine +
                                       " runs named single events only");
      }
      types.push_back(Symbol::intern(e->type));
    }
    Symbol fail_type;
    if (const std::string* t = options.find("fail_type")) fail_type = Symbol::intern(*t);
    made().fetch_add(1);
    return std::unique_ptr<plugin::Detector>(
        std::make_unique<FakeDetector>(std::move(types), fail_type, sink));
  }

  Result<std::unique_ptr<plugin::Detector>> createMany(
      std::span<const plugin::NamedQuery> queries, const plugin::DetectorOptions& options,
      plugin::MultiMatchSink& sink) const override {
    const bool alone = std::any_of(queries.begin(), queries.end(),
                                   [](const auto& q) { return hasType(q.query, "Alone"); });
    if (alone && queries.size() > 1) {
      return Status::invalidArgument(std::string("fake ") + kEngine + " runs Alone by itself");
    }
    return DetectorFactory::createMany(queries, options, sink);
  }

  std::vector<std::string> notices(const pattern::Query&) const override {
    if (std::string_view(kEngine) != "algebra") return {};
    return {"fake algebra reads it as recent"};
  }
};

void registerFactories(plugin::FactoryRegistrar& registrar) {
  registrar.add(kEngine, std::make_unique<FakeFactory>());
}

}  // namespace
}  // namespace cepbus::tests::fake

CEPBUS_DEFINE_PLUGIN(FAKE_ENGINE, "1.0.0", cepbus::tests::fake::registerFactories)

extern "C" __attribute__((visibility("default"))) int fake_detectors_made() {
  return cepbus::tests::fake::made().load();
}
