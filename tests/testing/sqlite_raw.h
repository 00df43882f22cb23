#pragma once

// Runs SQL on a database file through a connection of the test's own, behind
// the back of whatever the bus has open on it: how a test damages or
// hand-edits a journal.

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

namespace cepbus::testing {

inline void execRaw(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
  EXPECT_EQ(rc, SQLITE_OK) << (message != nullptr ? message : "");
  sqlite3_free(message);
  sqlite3_close(db);
}

// The first column of the first row `sql` selects, as bytes ("" when none).
inline std::string readBlobRaw(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string out;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_open(path.c_str(), &db) == SQLITE_OK &&
      sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    const auto* bytes = static_cast<const char*>(sqlite3_column_blob(stmt, 0));
    out.assign(bytes != nullptr ? bytes : "", static_cast<size_t>(sqlite3_column_bytes(stmt, 0)));
  }
  EXPECT_NE(stmt, nullptr) << sqlite3_errmsg(db);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

// Runs `sql`, whose one parameter ?1 is bound to `blob`.
inline void writeBlobRaw(const std::string& path, const std::string& sql, const std::string& blob) {
  sqlite3* db = nullptr;
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_bind_blob(stmt, 1, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(stmt), SQLITE_DONE) << sqlite3_errmsg(db);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

}  // namespace cepbus::testing
