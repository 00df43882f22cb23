#include "services/cep/query_checkpoints.h"

#include <gtest/gtest.h>

#include <string>

namespace cepbus::services::cep {
namespace {

TEST(PublishedWindowTest, AnIdIsPublishedOnceWhileTheWindowHoldsIt) {
  PublishedWindow window(3);
  EXPECT_TRUE(window.insert(10));
  EXPECT_FALSE(window.insert(10));
  EXPECT_TRUE(window.insert(11));
  EXPECT_TRUE(window.insert(12));
  EXPECT_TRUE(window.insert(13));  // 10 leaves the window
  EXPECT_EQ(window.size(), 3u);
  EXPECT_TRUE(window.insert(10));
  EXPECT_FALSE(window.insert(13));
}

TEST(PublishedWindowTest, TheWindowSurvivesItsEncoding) {
  PublishedWindow window(4);
  for (uint64_t id : {5ULL, 0xffffffffffffffffULL, 7ULL}) window.insert(id);
  PublishedWindow restored(4);
  ASSERT_TRUE(restored.decode(window.encode()));
  EXPECT_EQ(restored.size(), 3u);
  EXPECT_FALSE(restored.insert(0xffffffffffffffffULL));
  EXPECT_FALSE(restored.insert(5));
  EXPECT_TRUE(restored.insert(6));
}

TEST(PublishedWindowTest, BytesThatAreNoWindowAreRefusedAndChangeNothing) {
  PublishedWindow window(4);
  window.insert(1);
  const std::string good = window.encode();
  EXPECT_FALSE(window.decode(good.substr(0, good.size() - 1)));  // truncated
  EXPECT_FALSE(window.decode("ab"));
  EXPECT_FALSE(window.decode(std::string("\x05\0\0\0", 4)));  // a count beyond the bytes
  EXPECT_FALSE(window.insert(1));                             // still there
}

}  // namespace
}  // namespace cepbus::services::cep
