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

}  // namespace cepbus::testing
