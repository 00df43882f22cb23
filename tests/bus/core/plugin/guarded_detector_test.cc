#include "bus/core/plugin/guarded_detector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>

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

}  // namespace
}  // namespace cepbus::plugin
