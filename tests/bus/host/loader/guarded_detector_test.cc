#include "bus/host/loader/guarded_detector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

namespace cepbus::plugin {
namespace {

// Counts its own destruction so the test can see the keep-alive outlive it.
class ScriptedDetector : public Detector {
 public:
  explicit ScriptedDetector(bool* destroyed) : destroyed_(destroyed) {}
  ~ScriptedDetector() override { *destroyed_ = true; }
  Status onEvent(const EventPtr& event) override {
    if (event->ts() < 0) throw std::out_of_range("negative ts");
    return event->ts() == 0 ? Status::invalidArgument("zero") : Status::ok();
  }
  Status flush() override { throw std::runtime_error("flush failed"); }

 private:
  bool* destroyed_;
};

TEST(GuardedDetectorTest, TurnsExceptionsIntoCountedStatuses) {
  bool destroyed = false;
  auto keep = std::make_shared<int>(1);
  std::weak_ptr<int> watch = keep;
  {
    GuardedDetector d("test detector", std::move(keep),
                      std::make_unique<ScriptedDetector>(&destroyed));
    EXPECT_TRUE(d.onEvent(EventBuilder("A").at(1).build()).isOk());
    // Statuses from the inner detector pass through untouched and uncounted.
    EXPECT_EQ(d.onEvent(EventBuilder("A").at(0).build()).message(), "zero");
    Status s = d.onEvent(EventBuilder("A").at(-1).build());
    EXPECT_EQ(s.code(), Status::Code::kInternal);
    EXPECT_EQ(s.message(), "test detector threw from onEvent: negative ts");
    EXPECT_EQ(d.flush().message(), "test detector threw from flush: flush failed");
    EXPECT_EQ(d.exceptionCount(), 2u);
    EXPECT_FALSE(watch.expired());
  }
  EXPECT_TRUE(destroyed);
  EXPECT_TRUE(watch.expired());
}

// Consumes a batch in order, throwing on a negative ts: what it saw is what
// it consumed.
class ThrowingBatchDetector final : public Detector {
 public:
  Status onEvent(const EventPtr& event) override {
    if (event->ts() < 0) throw std::runtime_error("negative ts");
    consumed.push_back(event->ts());
    return Status::ok();
  }
  Status onEvents(std::span<const EventPtr> events) override {
    for (const EventPtr& e : events) {
      if (Status s = onEvent(e); !s) return s;
    }
    return Status::ok();
  }
  Status flush() override { return Status::ok(); }
  std::vector<Timestamp> consumed;
};

TEST(GuardedDetectorTest, NamesTheBatchAnExceptionCutShort) {
  auto inner = std::make_unique<ThrowingBatchDetector>();
  ThrowingBatchDetector* raw = inner.get();
  GuardedDetector d("test detector", nullptr, std::move(inner));
  const std::vector<EventPtr> events = {
      EventBuilder("A").at(1).build(), EventBuilder("A").at(2).build(),
      EventBuilder("A").at(-1).build(), EventBuilder("A").at(3).build()};
  Status s = d.onEvents(events);
  EXPECT_EQ(s.code(), Status::Code::kInternal);
  EXPECT_EQ(s.message(),
            "test detector threw from onEvents on a batch of 4 events (ts 1 to 3): negative ts; "
            "the batch was consumed only in part (the events before the one it threw on were, "
            "the later ones were not offered)");
  // As the message says: the prefix before the throwing event, nothing after.
  EXPECT_EQ(raw->consumed, (std::vector<Timestamp>{1, 2}));
  EXPECT_EQ(d.exceptionCount(), 1u);
  // The detector is still usable, one event or a batch at a time.
  EXPECT_TRUE(d.onEvents(std::span<const EventPtr>(events).last(1)));
  EXPECT_TRUE(d.onEvent(EventBuilder("A").at(4).build()));
  EXPECT_EQ(raw->consumed, (std::vector<Timestamp>{1, 2, 3, 4}));
}

TEST(GuardedDetectorTest, BatchesOfAWellBehavedDetectorPassItsFirstError) {
  bool destroyed = false;
  GuardedDetector d("test detector", nullptr, std::make_unique<ScriptedDetector>(&destroyed));
  const std::vector<EventPtr> events = {EventBuilder("A").at(1).build(),
                                        EventBuilder("A").at(0).build(),
                                        EventBuilder("A").at(2).build()};
  EXPECT_EQ(d.onEvents(events).message(), "zero");
  EXPECT_EQ(d.exceptionCount(), 0u);
}

// Reports a fixed state, or throws from state() when told to.
class StatefulDetector final : public Detector {
 public:
  explicit StatefulDetector(bool throws) : throws_(throws) {}
  Status onEvent(const EventPtr&) override { return Status::ok(); }
  Status flush() override { return Status::ok(); }
  std::optional<DetectorState> state() const override {
    if (throws_) throw std::runtime_error("no state");
    return DetectorState{7, 9, 0, 0};
  }

 private:
  bool throws_;
};

TEST(GuardedDetectorTest, ForwardsStateAndCountsAThrowingOneAsAbsent) {
  GuardedDetector counting("d", nullptr, std::make_unique<StatefulDetector>(false));
  ASSERT_TRUE(counting.state().has_value());
  EXPECT_EQ(counting.state()->partial_matches, 7u);
  EXPECT_EQ(counting.state()->peak_partial_matches, 9u);
  GuardedDetector throwing("d", nullptr, std::make_unique<StatefulDetector>(true));
  EXPECT_FALSE(throwing.state().has_value());
  EXPECT_EQ(throwing.exceptionCount(), 1u);
  // A detector that does not count says so, rather than 0.
  bool destroyed = false;
  GuardedDetector silent("d", nullptr, std::make_unique<ScriptedDetector>(&destroyed));
  EXPECT_FALSE(silent.state().has_value());
}

}  // namespace
}  // namespace cepbus::plugin
