#include "services/cluster/partition_ledger.h"

#include <gtest/gtest.h>

namespace cepbus::services::cluster {
namespace {

using Tags = std::vector<uint64_t>;

TEST(PartitionLedgerTest, AMessageWaitsUntilEveryWindowHasPassedIt) {
  PartitionLedger ledger(/*window=*/10);
  ledger.hold(1, 100);
  ledger.hold(2, 105);
  ledger.released(105);
  EXPECT_EQ(ledger.settleable(), Tags{});
  // An event at 110 may still match the one at 100 (WITHIN is inclusive).
  ledger.released(110);
  EXPECT_EQ(ledger.settleable(), Tags{});
  ledger.released(111);
  EXPECT_EQ(ledger.settleable(), Tags{1});
  ledger.released(116);
  EXPECT_EQ(ledger.settleable(), Tags{2});
  EXPECT_EQ(ledger.held(), 0u);
}

TEST(PartitionLedgerTest, OutputsPublishedBeforeHoldBackTheirInputs) {
  PartitionLedger ledger(10);
  ledger.hold(1, 100);
  const uint64_t composite = ledger.published();  // made while 1 was in its window
  ledger.released(200);
  EXPECT_EQ(ledger.settleable(), Tags{});
  EXPECT_EQ(ledger.unacceptedOutputs(), 1u);
  ledger.accepted(composite);
  EXPECT_EQ(ledger.settleable(), Tags{1});
}

TEST(PartitionLedgerTest, OutputsPublishedLaterDoNotHoldBackOlderInputs) {
  PartitionLedger ledger(10);
  ledger.hold(1, 100);
  ledger.released(150);
  EXPECT_EQ(ledger.settleable(), Tags{1});
  ledger.hold(2, 150);
  ledger.published();  // unaccepted, after 1 was settled
  ledger.hold(3, 200);
  ledger.released(200);
  // 2 left its window after the output: it waits for it; 3 is still needed.
  EXPECT_EQ(ledger.settleable(), Tags{});
  EXPECT_EQ(ledger.held(), 2u);
}

TEST(PartitionLedgerTest, DuplicatesAndLateEventsWaitOnlyForOutputs) {
  PartitionLedger ledger(1000);
  ledger.hold(1, 100);
  const uint64_t late = ledger.published();
  ledger.holdUntilOutputsAccepted(2);
  EXPECT_EQ(ledger.settleable(), Tags{});
  ledger.accepted(late);
  EXPECT_EQ(ledger.settleable(), Tags{2});
  EXPECT_EQ(ledger.held(), 1u);  // 1 is still in its window
}

TEST(PartitionLedgerTest, HugeWindowsDoNotOverflow) {
  PartitionLedger ledger(INT64_MAX);
  ledger.hold(1, 0);
  ledger.released(INT64_MAX);
  EXPECT_EQ(ledger.settleable(), Tags{});
  PartitionLedger negative(5);
  negative.hold(1, INT64_MIN);
  negative.released(INT64_MIN + 6);
  EXPECT_EQ(negative.settleable(), Tags{1});
}

}  // namespace
}  // namespace cepbus::services::cluster
