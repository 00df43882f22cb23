#include "stages/admission_controller.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace cepbus::stages {
namespace {

using std::chrono::milliseconds;
using TimePoint = std::chrono::steady_clock::time_point;

AdmissionLevels levels100() {
  AdmissionConfig c;
  c.static_threshold = 0.75;
  c.soft_threshold = 0.25;
  c.saturation_threshold = 0.9;
  return AdmissionLevels::from(c, 100);
}

AdmissionInput in(size_t queue, bool reliable, bool overloaded = false,
                  bool downstream_saturated = false) {
  return AdmissionInput{queue, reliable, overloaded, downstream_saturated};
}

TEST(AdmissionLevelsTest, DerivedFromFractionsOfCapacity) {
  const AdmissionLevels l = levels100();
  EXPECT_EQ(l.capacity, 100u);
  EXPECT_EQ(l.static_level, 75u);
  EXPECT_EQ(l.soft_level, 25u);
  EXPECT_EQ(l.saturation_level, 90u);
  // Levels round up and never reach 0, so a tiny queue still degrades before it rejects.
  const AdmissionLevels tiny = AdmissionLevels::from(AdmissionConfig{}, 2);
  EXPECT_EQ(tiny.soft_level, 1u);
  EXPECT_EQ(tiny.static_level, 2u);
}

TEST(AdmissionLevelsTest, RejectsBadConfig) {
  AdmissionConfig c;
  EXPECT_THROW(AdmissionLevels::from(c, 0), std::invalid_argument);
  c.soft_threshold = 0.8;  // above static
  EXPECT_THROW(AdmissionLevels::from(c, 10), std::invalid_argument);
  c = AdmissionConfig{};
  c.static_threshold = 0;
  EXPECT_THROW(AdmissionLevels::from(c, 10), std::invalid_argument);
  c = AdmissionConfig{};
  c.saturation_threshold = 1.5;
  EXPECT_THROW(AdmissionLevels::from(c, 10), std::invalid_argument);
  c = AdmissionConfig{};
  c.overload_ratio = 0.5;
  EXPECT_THROW(AdmissionLevels::from(c, 10), std::invalid_argument);
  c = AdmissionConfig{};
  c.rate_window = milliseconds(0);
  EXPECT_THROW(AdmissionLevels::from(c, 10), std::invalid_argument);
}

TEST(AdmissionDecisionTest, StaticThresholdDegradesReliableOnly) {
  const AdmissionLevels l = levels100();
  EXPECT_EQ(decideAdmission(l, in(0, true)), Admission::kAccepted);
  EXPECT_EQ(decideAdmission(l, in(74, true)), Admission::kAccepted);
  EXPECT_EQ(decideAdmission(l, in(75, true)), Admission::kDegraded);
  EXPECT_EQ(decideAdmission(l, in(99, true)), Admission::kDegraded);
  EXPECT_EQ(decideAdmission(l, in(99, false)), Admission::kAccepted);
}

TEST(AdmissionDecisionTest, HardLimitRejectsEverything) {
  const AdmissionLevels l = levels100();
  EXPECT_EQ(decideAdmission(l, in(100, true)), Admission::kRejected);
  EXPECT_EQ(decideAdmission(l, in(100, false)), Admission::kRejected);
  EXPECT_EQ(decideAdmission(l, in(250, false)), Admission::kRejected);
}

TEST(AdmissionDecisionTest, DynamicOverloadDegradesPastSoftLevel) {
  const AdmissionLevels l = levels100();
  EXPECT_EQ(decideAdmission(l, in(24, true, true)), Admission::kAccepted);
  EXPECT_EQ(decideAdmission(l, in(25, true, true)), Admission::kDegraded);
  EXPECT_EQ(decideAdmission(l, in(25, true, false)), Admission::kAccepted);
  EXPECT_EQ(decideAdmission(l, in(50, false, true)), Admission::kAccepted);
}

TEST(AdmissionDecisionTest, SaturatedDownstreamLowersStaticThresholdToSoftLevel) {
  const AdmissionLevels l = levels100();
  EXPECT_EQ(decideAdmission(l, in(24, true, false, true)), Admission::kAccepted);
  EXPECT_EQ(decideAdmission(l, in(25, true, false, true)), Admission::kDegraded);
  EXPECT_EQ(decideAdmission(l, in(99, false, false, true)), Admission::kAccepted);
  EXPECT_EQ(decideAdmission(l, in(100, false, false, true)), Admission::kRejected);
}

TEST(PressureDecisionTest, FollowsTheSameLevels) {
  const AdmissionLevels l = levels100();
  EXPECT_EQ(decidePressure(l, in(0, false)), Pressure::kNormal);
  EXPECT_EQ(decidePressure(l, in(74, false)), Pressure::kNormal);
  EXPECT_EQ(decidePressure(l, in(75, false)), Pressure::kDegraded);
  EXPECT_EQ(decidePressure(l, in(89, false)), Pressure::kDegraded);
  EXPECT_EQ(decidePressure(l, in(90, false)), Pressure::kSaturated);
  EXPECT_EQ(decidePressure(l, in(30, false, true)), Pressure::kDegraded);
  EXPECT_EQ(decidePressure(l, in(10, false, true)), Pressure::kNormal);
  // A saturated downstream is passed upstream even when this queue is empty.
  EXPECT_EQ(decidePressure(l, in(0, false, false, true)), Pressure::kDegraded);
}

TEST(RateMonitorTest, OverloadNeedsAFullWindowOfInputOutrunningOutput) {
  RateMonitor m(milliseconds(100), 1.5);
  const TimePoint t0{};
  m.sample(t0, 0, 0);
  EXPECT_FALSE(m.overloaded());
  m.sample(t0 + milliseconds(50), 100, 50);
  EXPECT_FALSE(m.overloaded()) << "half a window is not persistent";
  m.sample(t0 + milliseconds(100), 200, 100);
  EXPECT_TRUE(m.overloaded());
  EXPECT_DOUBLE_EQ(m.inputRate(), 2000.0);
  EXPECT_DOUBLE_EQ(m.outputRate(), 1000.0);
}

TEST(RateMonitorTest, BalancedOrIdleIsNotOverloaded) {
  RateMonitor m(milliseconds(100), 1.5);
  const TimePoint t0{};
  m.sample(t0, 0, 0);
  m.sample(t0 + milliseconds(100), 140, 100);  // ratio 1.4 < 1.5
  EXPECT_FALSE(m.overloaded());
  RateMonitor idle(milliseconds(100), 1.5);
  idle.sample(t0, 5, 5);
  idle.sample(t0 + milliseconds(200), 5, 5);
  EXPECT_FALSE(idle.overloaded());
}

TEST(RateMonitorTest, StalledOutputWithInputIsOverloaded) {
  RateMonitor m(milliseconds(100), 1.5);
  const TimePoint t0{};
  m.sample(t0, 0, 0);
  m.sample(t0 + milliseconds(100), 10, 0);
  EXPECT_TRUE(m.overloaded());
}

TEST(RateMonitorTest, OldSamplesSlideOutOfTheWindow) {
  RateMonitor m(milliseconds(100), 1.5);
  const TimePoint t0{};
  m.sample(t0, 0, 0);
  m.sample(t0 + milliseconds(100), 1000, 100);  // a burst
  EXPECT_TRUE(m.overloaded());
  // Then a window and more where output keeps up with (or exceeds) input.
  m.sample(t0 + milliseconds(150), 1100, 600);
  m.sample(t0 + milliseconds(200), 1200, 1100);
  m.sample(t0 + milliseconds(250), 1300, 1300);
  EXPECT_FALSE(m.overloaded());
  EXPECT_DOUBLE_EQ(m.inputRate(), 2000.0);  // (1300 - 1100) / 100 ms
}

TEST(AdmissionControllerTest, SamplesDriveTheDynamicMonitor) {
  AdmissionConfig c;
  c.rate_window = milliseconds(100);
  c.overload_ratio = 2.0;
  AdmissionController ac(c, 100);
  EXPECT_EQ(ac.admit(30, true, false), Admission::kAccepted);
  const TimePoint t0{};
  ac.sample(t0, 0, 0);
  ac.sample(t0 + milliseconds(100), 300, 100);
  EXPECT_TRUE(ac.overloaded());
  EXPECT_EQ(ac.admit(30, true, false), Admission::kDegraded);
  EXPECT_EQ(ac.admit(20, true, false), Admission::kAccepted);
  EXPECT_EQ(ac.pressure(30, false), Pressure::kDegraded);
  ac.sample(t0 + milliseconds(200), 400, 400);
  EXPECT_FALSE(ac.overloaded());
  EXPECT_EQ(ac.admit(30, true, false), Admission::kAccepted);
  EXPECT_EQ(ac.admit(100, false, false), Admission::kRejected);
}

}  // namespace
}  // namespace cepbus::stages
