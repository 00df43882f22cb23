#include "bus/core/plugin/reorder.h"

#include <gtest/gtest.h>

#include <vector>

namespace cepbus::plugin {
namespace {

EventPtr at(Timestamp ts, const char* type = "A") { return EventBuilder(type).at(ts).build(); }

std::vector<Timestamp> drainReady(ReorderBuffer& b) {
  std::vector<Timestamp> out;
  while (EventPtr e = b.popReady()) out.push_back(e->ts());
  return out;
}

TEST(ReorderBufferTest, ReleasesInTimestampOrderOnceTheSlackHasPassed) {
  ReorderBuffer b(3);
  ASSERT_TRUE(b.push(at(5)).isOk());
  ASSERT_TRUE(b.push(at(3)).isOk());
  ASSERT_TRUE(b.push(at(4)).isOk());
  EXPECT_TRUE(drainReady(b).empty());  // newest 5: only ts <= 2 is safe
  ASSERT_TRUE(b.push(at(7)).isOk());
  EXPECT_EQ(drainReady(b), (std::vector<Timestamp>{3, 4}));
  EXPECT_EQ(b.size(), 2u);
  std::vector<Timestamp> rest;
  while (EventPtr e = b.popAny()) rest.push_back(e->ts());
  EXPECT_EQ(rest, (std::vector<Timestamp>{5, 7}));
}

TEST(ReorderBufferTest, EqualTimestampsKeepArrivalOrder) {
  ReorderBuffer b(1);
  for (const char* type : {"A", "B", "C", "D"}) ASSERT_TRUE(b.push(at(4, type)).isOk());
  ASSERT_TRUE(b.push(at(9)).isOk());
  std::string order;
  while (EventPtr e = b.popReady()) order += e->type().name();
  EXPECT_EQ(order, "ABCD");
}

TEST(ReorderBufferTest, RejectsEventsLaterThanTheSlack) {
  ReorderBuffer b(2);
  ASSERT_TRUE(b.push(at(10)).isOk());
  EXPECT_TRUE(b.push(at(8)).isOk());  // exactly the slack
  Status s = b.push(at(7, "Late"));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "out-of-order event: type Late at ts 7 arrived after ts 10, 3 time units late; the "
            "slack is 2");
}

TEST(ReorderBufferTest, ZeroSlackAdmitsOnlyNonDecreasingTimestamps) {
  ReorderBuffer b(0);
  EXPECT_TRUE(b.admit(*at(1)).isOk());
  EXPECT_TRUE(b.admit(*at(1)).isOk());
  EXPECT_TRUE(b.admit(*at(2)).isOk());
  EXPECT_FALSE(b.admit(*at(1)).isOk());
  EXPECT_EQ(b.size(), 0u);
}

class Recording : public Detector {
 public:
  Status onEvent(const EventPtr& e) override {
    seen.push_back(e->ts());
    return e->ts() == 13 ? Status::invalidArgument("unlucky") : Status::ok();
  }
  Status flush() override {
    ++flushes;
    return Status::ok();
  }
  std::vector<Timestamp> seen;
  int flushes = 0;
};

TEST(ReorderingDetectorTest, FeedsTheInnerDetectorInOrderAndPassesItsErrors) {
  auto inner = std::make_unique<Recording>();
  Recording* rec = inner.get();
  ReorderingDetector d(std::move(inner), 2);
  for (Timestamp ts : {3, 1, 2, 5, 4, 8}) ASSERT_TRUE(d.onEvent(at(ts)).isOk()) << ts;
  EXPECT_EQ(rec->seen, (std::vector<Timestamp>{1, 2, 3, 4, 5}));  // 8 - 2 = 6 releases <= 6
  EXPECT_TRUE(d.onEvent(at(15)).isOk());                          // releases 8
  // 13 is within the slack of 15, so it is released at once, and the inner
  // detector's refusal comes back from this call.
  EXPECT_EQ(d.onEvent(at(13)).message(), "unlucky");
  EXPECT_TRUE(d.onEvent(at(16)).isOk());
  EXPECT_TRUE(d.flush().isOk());
  EXPECT_EQ(rec->seen, (std::vector<Timestamp>{1, 2, 3, 4, 5, 8, 13, 15, 16}));
  EXPECT_EQ(rec->flushes, 1);
}

}  // namespace
}  // namespace cepbus::plugin
