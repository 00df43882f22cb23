#include "services/protocols/amqp/proactor_scheduling.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace cepbus::services::amqp {
namespace {

// Proton 0.37's epoll proactor reads PNI_EPOLL_NOWARM when it is created.
constexpr const char* kProtonSetting = "PNI_EPOLL_NOWARM";

TEST(ProactorScheduling, TurnsProtonsWarmSchedulingOff) {
  ::unsetenv(kProtonSetting);
  scheduleReadyConnectionsOnAnyFreeThread();
  const char* value = std::getenv(kProtonSetting);
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(std::string(value), "1");
}

TEST(ProactorScheduling, LeavesAnOperatorsOwnSettingAsItIs) {
  ::setenv(kProtonSetting, "yes", 1);
  scheduleReadyConnectionsOnAnyFreeThread();
  EXPECT_EQ(std::string(std::getenv(kProtonSetting)), "yes");
  ::unsetenv(kProtonSetting);
}

}  // namespace
}  // namespace cepbus::services::amqp
