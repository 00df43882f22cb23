#pragma once

// SQLite calls as Status values, worded the same for every file the bus keeps
// in SQLite (the journal and what shares its file): "journal PATH: what:
// SQLite's message".
//
// Thread safety: as the connection passed in (one thread at a time).

#include <sqlite3.h>

#include <string>

#include "bus/core/status.h"

namespace cepbus::flows {

// IoError "journal PATH: WHAT: <sqlite3_errmsg>" for the last call on `db`
// (null: out of memory, as sqlite3_open reports it).
Status sqliteError(sqlite3* db, const std::string& path, const std::string& what);

// Runs `sql` (one or more statements, no results) on `db`.
Status sqliteExec(sqlite3* db, const std::string& path, const char* sql);

}  // namespace cepbus::flows
