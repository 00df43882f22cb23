#include "services/amqp/listener/durable_store.h"

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "flows/journal/sqlite_status.h"
#include "router/topic.h"

namespace cepbus::services::amqp {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS durable_subscriptions(
  endpoint TEXT PRIMARY KEY,
  container_id TEXT,
  link_name TEXT,
  pattern TEXT,
  user TEXT,
  owner TEXT);
)sql";

// Long enough for the journal thread's group commit (one fsync) to finish
// before a subscription's write goes ahead, and the other way round.
constexpr int kBusyTimeoutMs = 5000;

// Frees a statement on every path out of a scope.
class Statement {
 public:
  Statement() = default;
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  sqlite3_stmt** out() { return &stmt_; }
  sqlite3_stmt* get() const { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

void bindText(sqlite3_stmt* stmt, int index, std::string_view text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
}

// Column `column` when it is text (a damaged row may hold anything).
std::optional<std::string> textColumn(sqlite3_stmt* stmt, int column) {
  if (sqlite3_column_type(stmt, column) != SQLITE_TEXT) return std::nullopt;
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, column));
  return std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt, column)));
}

// Why the row in `stmt` (endpoint, container_id, link_name, pattern, user,
// owner) is no subscription; nullopt when it is one, then in `record`.
std::optional<std::string> decode(sqlite3_stmt* stmt, DurableRecord& record) {
  std::optional<std::string> columns[6];
  constexpr const char* kNames[6] = {"endpoint", "container_id", "link_name",
                                     "pattern",  "user",         "owner"};
  for (int i = 0; i < 6; ++i) {
    columns[i] = textColumn(stmt, i + 1);
    if (!columns[i]) return std::string(kNames[i]) + " is not text";
  }
  record = DurableRecord{std::move(*columns[1]), std::move(*columns[2]), std::move(*columns[3]),
                         std::move(*columns[4]), std::move(*columns[5])};
  if (record.container_id.empty() || record.link_name.empty() || record.owner.empty()) {
    return "container id, link name or owner is empty";
  }
  if (*columns[0] != subscriptionEndpoint(record.container_id, record.link_name)) {
    return "endpoint \"" + *columns[0] + "\" is not that of container \"" + record.container_id +
           "\" and link \"" + record.link_name + "\"";
  }
  if (Status valid = router::validatePattern(record.pattern); !valid) {
    return "pattern \"" + record.pattern + "\": " + valid.message();
  }
  return std::nullopt;
}

}  // namespace

std::string subscriptionEndpoint(const std::string& container_id, const std::string& link_name) {
  return std::string(kSubscriptionEndpointPrefix) + container_id + "/" + link_name;
}

Result<std::unique_ptr<DurableStore>> DurableStore::open(const std::string& path) {
  std::unique_ptr<DurableStore> store(new DurableStore(path));
  if (sqlite3_open_v2(path.c_str(), &store->db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                      nullptr) != SQLITE_OK) {
    return store->error("open");
  }
  sqlite3_busy_timeout(store->db_, kBusyTimeoutMs);
  // The journal's own settings (WAL is a property of the file) and a
  // subscription that is on disk once the attach is answered.
  if (Status s = store->exec("PRAGMA journal_mode=WAL"); !s) return s;
  if (Status s = store->exec("PRAGMA synchronous=FULL"); !s) return s;
  if (Status s = store->exec(kSchema); !s) return s;
  return store;
}

DurableStore::~DurableStore() { sqlite3_close(db_); }

Status DurableStore::record(const DurableRecord& record) {
  Statement stmt;
  if (sqlite3_prepare_v2(db_,
                         "INSERT OR REPLACE INTO durable_subscriptions(endpoint, container_id, "
                         "link_name, pattern, user, owner) VALUES(?, ?, ?, ?, ?, ?)",
                         -1, stmt.out(), nullptr) != SQLITE_OK) {
    return error("record a durable subscription");
  }
  const std::string endpoint = subscriptionEndpoint(record.container_id, record.link_name);
  bindText(stmt.get(), 1, endpoint);
  bindText(stmt.get(), 2, record.container_id);
  bindText(stmt.get(), 3, record.link_name);
  bindText(stmt.get(), 4, record.pattern);
  bindText(stmt.get(), 5, record.user);
  bindText(stmt.get(), 6, record.owner);
  if (sqlite3_step(stmt.get()) != SQLITE_DONE) return error("record " + endpoint);
  return Status::ok();
}

Status DurableStore::remove(const std::string& endpoint) {
  Statement stmt;
  if (sqlite3_prepare_v2(db_, "DELETE FROM durable_subscriptions WHERE endpoint = ?", -1,
                         stmt.out(), nullptr) != SQLITE_OK) {
    return error("remove a durable subscription");
  }
  bindText(stmt.get(), 1, endpoint);
  if (sqlite3_step(stmt.get()) != SQLITE_DONE) return error("remove " + endpoint);
  return Status::ok();
}

Result<DurableStore::Loaded> DurableStore::load() {
  Loaded loaded;
  std::vector<int64_t> corrupt_rows;
  {
    Statement stmt;
    if (sqlite3_prepare_v2(db_,
                           "SELECT rowid, endpoint, container_id, link_name, pattern, user, owner "
                           "FROM durable_subscriptions ORDER BY rowid",
                           -1, stmt.out(), nullptr) != SQLITE_OK) {
      return error("read durable subscriptions");
    }
    int rc;
    while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
      DurableRecord record;
      if (std::optional<std::string> why = decode(stmt.get(), record)) {
        const int64_t row = sqlite3_column_int64(stmt.get(), 0);
        corrupt_rows.push_back(row);
        loaded.corrupt.push_back("durable subscription record " + std::to_string(row) +
                                 " in journal " + path_ + " does not decode, removed: " + *why);
        continue;
      }
      loaded.records.push_back(std::move(record));
    }
    if (rc != SQLITE_DONE) return error("read durable subscriptions");
  }
  for (int64_t row : corrupt_rows) {
    Statement stmt;
    if (sqlite3_prepare_v2(db_, "DELETE FROM durable_subscriptions WHERE rowid = ?", -1, stmt.out(),
                           nullptr) != SQLITE_OK) {
      return error("remove a corrupt durable subscription");
    }
    sqlite3_bind_int64(stmt.get(), 1, row);
    if (sqlite3_step(stmt.get()) != SQLITE_DONE)
      return error("remove a corrupt durable subscription");
  }
  return loaded;
}

Status DurableStore::exec(const char* sql) { return flows::sqliteExec(db_, path_, sql); }

Status DurableStore::error(const std::string& what) const {
  return flows::sqliteError(db_, path_, what);
}

}  // namespace cepbus::services::amqp
