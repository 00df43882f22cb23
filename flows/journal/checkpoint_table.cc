#include "flows/journal/checkpoint_table.h"

#include <sqlite3.h>

#include <bit>
#include <cstdint>
#include <filesystem>

#include "flows/journal/sqlite_status.h"

namespace cepbus::flows {
namespace {

// Closes the connection and frees the statement on every path out.
struct Connection {
  sqlite3* db = nullptr;
  sqlite3_stmt* stmt = nullptr;
  ~Connection() {
    sqlite3_finalize(stmt);
    sqlite3_close(db);
  }
};

std::string bytesColumn(sqlite3_stmt* stmt, int column) {
  const auto* data = static_cast<const char*>(sqlite3_column_blob(stmt, column));
  return data == nullptr
             ? std::string()
             : std::string(data, static_cast<size_t>(sqlite3_column_bytes(stmt, column)));
}

}  // namespace

Result<std::optional<CheckpointRecord>> readCheckpoint(const std::string& path,
                                                       const std::string& name) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<CheckpointRecord>();
  Connection c;
  if (sqlite3_open_v2(path.c_str(), &c.db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    return sqliteError(c.db, path, "open to read checkpoint " + name);
  }
  // The journal thread may be committing: wait for it as the durable store does.
  sqlite3_busy_timeout(c.db, 5000);
  if (sqlite3_prepare_v2(c.db,
                         "SELECT engine, version, fingerprint, position, state, published "
                         "FROM checkpoints WHERE name = ?",
                         -1, &c.stmt, nullptr) != SQLITE_OK) {
    // A journal written before checkpoints existed, or not yet opened by its flow.
    if (std::string(sqlite3_errmsg(c.db)).find("no such table") != std::string::npos) {
      return std::optional<CheckpointRecord>();
    }
    return sqliteError(c.db, path, "read checkpoint " + name);
  }
  sqlite3_bind_text(c.stmt, 1, name.data(), static_cast<int>(name.size()), SQLITE_STATIC);
  const int rc = sqlite3_step(c.stmt);
  if (rc == SQLITE_DONE) return std::optional<CheckpointRecord>();
  if (rc != SQLITE_ROW) return sqliteError(c.db, path, "read checkpoint " + name);
  constexpr int kTypes[] = {SQLITE_TEXT,    SQLITE_INTEGER, SQLITE_INTEGER,
                            SQLITE_INTEGER, SQLITE_BLOB,    SQLITE_BLOB};
  constexpr const char* kColumns[] = {"engine",   "version", "fingerprint",
                                      "position", "state",   "published"};
  for (int i = 0; i < 6; ++i) {
    const int type = sqlite3_column_type(c.stmt, i);
    // An empty blob may read back as one.
    if (type != kTypes[i] && !(kTypes[i] == SQLITE_BLOB && type == SQLITE_NULL)) {
      std::string why = "journal " + path;
      why.append(": checkpoint ").append(name).append(": column ").append(kColumns[i]);
      why.append(" holds no ")
          .append(kTypes[i] == SQLITE_TEXT      ? "text"
                  : kTypes[i] == SQLITE_INTEGER ? "integer"
                                                : "bytes");
      return Status::invalidArgument(why);
    }
  }
  CheckpointRecord record;
  record.name = name;
  const auto* engine = reinterpret_cast<const char*>(sqlite3_column_text(c.stmt, 0));
  record.engine.assign(engine, static_cast<size_t>(sqlite3_column_bytes(c.stmt, 0)));
  record.version = static_cast<uint32_t>(sqlite3_column_int64(c.stmt, 1));
  record.fingerprint = std::bit_cast<uint64_t>(sqlite3_column_int64(c.stmt, 2));
  record.position = std::bit_cast<uint64_t>(sqlite3_column_int64(c.stmt, 3));
  record.state = bytesColumn(c.stmt, 4);
  record.published = bytesColumn(c.stmt, 5);
  return std::optional<CheckpointRecord>(std::move(record));
}

}  // namespace cepbus::flows
