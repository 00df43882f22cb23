#include "services/amqp/listener/durable_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "flows/journal/journal.h"
#include "tests/flows/flow_test_util.h"
#include "tests/testing/sqlite_raw.h"

namespace cepbus::services::amqp {
namespace {

using flows::testing::TempDir;

std::unique_ptr<DurableStore> openStore(const std::string& path) {
  auto store = DurableStore::open(path);
  EXPECT_TRUE(store) << store.status().message();
  return store ? std::move(*store) : nullptr;
}

DurableRecord record(const std::string& link, const std::string& pattern,
                     const std::string& user = "alice") {
  return DurableRecord{"client", link, pattern, user, user.empty() ? "client" : user};
}

std::vector<std::string> links(const std::vector<DurableRecord>& records) {
  std::vector<std::string> out;
  for (const auto& r : records) out.push_back(r.link_name + "=" + r.pattern);
  return out;
}

using cepbus::testing::execRaw;

TEST(DurableStoreTest, TheEndpointNamesTheClientAndTheLink) {
  EXPECT_EQ(subscriptionEndpoint("client", "feed"), "amqp:client/feed");
}

TEST(DurableStoreTest, RecordsOutliveTheStoreOldestFirstAndOnePerEndpoint) {
  TempDir dir;
  const std::string path = dir.file("journal.db");
  {
    auto store = openStore(path);
    ASSERT_TRUE(store->record(record("a", "orders.*")));
    ASSERT_TRUE(store->record(record("b", "alerts.#", "")));
    ASSERT_TRUE(store->record(record("c", "x")));
    ASSERT_TRUE(store->record(record("c", "y")));  // the same link again: replaced
  }
  auto store = openStore(path);
  auto loaded = store->load();
  ASSERT_TRUE(loaded) << loaded.status().message();
  EXPECT_EQ(links(loaded->records), (std::vector<std::string>{"a=orders.*", "b=alerts.#", "c=y"}));
  EXPECT_TRUE(loaded->corrupt.empty());
  const DurableRecord& anonymous = loaded->records[1];
  EXPECT_EQ(anonymous.container_id, "client");
  EXPECT_EQ(anonymous.user, "");
  EXPECT_EQ(anonymous.owner, "client");
}

TEST(DurableStoreTest, ARemovedRecordIsGoneAndRemovingAnUnknownOneIsNoError) {
  TempDir dir;
  const std::string path = dir.file("journal.db");
  auto store = openStore(path);
  ASSERT_TRUE(store->record(record("a", "orders.*")));
  ASSERT_TRUE(store->record(record("b", "alerts.*")));
  ASSERT_TRUE(store->remove("amqp:client/a"));
  EXPECT_TRUE(store->remove("amqp:client/nobody"));
  auto loaded = openStore(path)->load();
  ASSERT_TRUE(loaded);
  EXPECT_EQ(links(loaded->records), (std::vector<std::string>{"b=alerts.*"}));
}

TEST(DurableStoreTest, ACorruptRecordIsRefusedWithItsReasonAndRemoved) {
  TempDir dir;
  const std::string path = dir.file("journal.db");
  ASSERT_TRUE(openStore(path)->record(record("good", "orders.*")));
  execRaw(
      path,
      "INSERT INTO durable_subscriptions VALUES('amqp:client/n', 'client', 'n', NULL, 'u', 'u');"
      "INSERT INTO durable_subscriptions VALUES('amqp:other/m', 'client', 'm', 'a', 'u', 'u');"
      "INSERT INTO durable_subscriptions VALUES('amqp:client/p', 'client', 'p', 'a..b', 'u', "
      "'u');"
      "INSERT INTO durable_subscriptions VALUES(x'00ff', 'client', 'q', 'a', x'ff', 'u');");
  auto store = openStore(path);
  auto loaded = store->load();
  ASSERT_TRUE(loaded) << loaded.status().message();
  EXPECT_EQ(links(loaded->records), (std::vector<std::string>{"good=orders.*"}));
  ASSERT_EQ(loaded->corrupt.size(), 4u);
  EXPECT_NE(loaded->corrupt[0].find("durable subscription record 2 in journal " + path +
                                    " does not decode, removed: pattern is not text"),
            std::string::npos)
      << loaded->corrupt[0];
  EXPECT_NE(loaded->corrupt[1].find("endpoint \"amqp:other/m\" is not that of container"),
            std::string::npos)
      << loaded->corrupt[1];
  EXPECT_NE(loaded->corrupt[2].find("pattern \"a..b\""), std::string::npos) << loaded->corrupt[2];
  EXPECT_NE(loaded->corrupt[3].find("endpoint is not text"), std::string::npos)
      << loaded->corrupt[3];
  // Removed: the next start does not meet them again.
  auto again = store->load();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->records.size(), 1u);
  EXPECT_TRUE(again->corrupt.empty());
}

TEST(DurableStoreTest, ItSharesTheFileWithTheJournal) {
  TempDir dir;
  const std::string path = dir.file("journal.db");
  auto journal = flows::Journal::open(path, flows::JournalOptions{});
  ASSERT_TRUE(journal) << journal.status().message();
  auto store = openStore(path);
  ASSERT_TRUE(store->record(record("a", "orders.*")));
  flows::JournalRecord pending;
  pending.seq = 1;
  pending.target = Symbol::intern("amqp:client/a");
  pending.event_id = 7;
  pending.address = Symbol::intern("orders.eu");
  pending.sender = Symbol::intern("test");
  pending.event = EventBuilder("Tick").at(1).build();
  ASSERT_TRUE((*journal)->commit(std::span(&pending, 1), {}));
  ASSERT_TRUE(store->remove("amqp:client/a"));
  auto records = (*journal)->pending();
  ASSERT_TRUE(records);
  EXPECT_EQ(records->size(), 1u);
  auto loaded = store->load();
  ASSERT_TRUE(loaded);
  EXPECT_TRUE(loaded->records.empty());
}

TEST(DurableStoreTest, AFileThatIsNoDatabaseIsAnErrorNamingIt) {
  TempDir dir;
  const std::string path = dir.file("journal.db");
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("this is not an SQLite database, not even its header .............", f);
    std::fclose(f);
  }
  auto store = DurableStore::open(path);
  ASSERT_FALSE(store);
  EXPECT_NE(store.status().message().find("journal " + path), std::string::npos)
      << store.status().message();
}

}  // namespace
}  // namespace cepbus::services::amqp
