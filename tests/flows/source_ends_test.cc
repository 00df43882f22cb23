#include "flows/source_ends.h"

#include <gtest/gtest.h>

#include <vector>

namespace cepbus::flows {
namespace {

std::vector<uint64_t> readAll(const SourceEnds& log, uint64_t from, uint64_t to) {
  return log.read(from, to).sources;
}

TEST(SourceEndsTest, AReaderSeesTheEndsAfterItsCursorInOrder) {
  SourceEnds log;
  EXPECT_EQ(log.count(), 0u);
  log.end(7);
  const uint64_t cursor = log.count();
  log.end(3);
  log.end(9);
  EXPECT_EQ(log.count(), 3u);
  EXPECT_EQ(readAll(log, cursor, log.count()), (std::vector<uint64_t>{3, 9}));
  EXPECT_EQ(readAll(log, 0, cursor), (std::vector<uint64_t>{7}));
  EXPECT_TRUE(readAll(log, 3, 3).empty());
  // A bound past what was written reads what there is.
  EXPECT_EQ(readAll(log, 2, 100), (std::vector<uint64_t>{9}));
}

TEST(SourceEndsTest, AReaderTooFarBehindLearnsHowManyItLost) {
  SourceEnds log;
  const uint64_t total = SourceEnds::kKept + 10;
  for (uint64_t s = 1; s <= total; ++s) log.end(s);
  const SourceEnds::Ends ends = log.read(0, log.count());
  const std::vector<uint64_t>& kept = ends.sources;
  EXPECT_EQ(ends.lost, 10u);
  ASSERT_EQ(kept.size(), SourceEnds::kKept);
  EXPECT_EQ(kept.front(), 11u);  // the oldest kept
  EXPECT_EQ(kept.back(), total);
}

}  // namespace
}  // namespace cepbus::flows
