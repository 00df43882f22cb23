#include "flows/journal/sqlite_status.h"

namespace cepbus::flows {

Status sqliteError(sqlite3* db, const std::string& path, const std::string& what) {
  return Status::ioError("journal " + path + ": " + what + ": " +
                         (db != nullptr ? sqlite3_errmsg(db) : "out of memory"));
}

Status sqliteExec(sqlite3* db, const std::string& path, const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message != nullptr ? message : "unknown error";
    sqlite3_free(message);
    return Status::ioError("journal " + path + ": " + text);
  }
  return Status::ok();
}

}  // namespace cepbus::flows
