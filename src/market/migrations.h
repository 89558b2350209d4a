// The schema's migrations as data: data/market/migrations/NNNN_name.sql, embedded in the binary, one file
// for both engines (the portable subset of SQLite 3.40 and PostgreSQL 15). Each Db implementation's
// migrate() calls apply_migrations(), which both engines share.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/status.h"
#include "market/db.h"

namespace gpuplan::market {

struct Migration {
  int version = 0;       // NNNN of the file name
  std::string name;      // "0001_init"
  std::string_view sql;  // the file's text
};

// The embedded migrations, in version order.
const std::vector<Migration>& migrations();

// Splits a migration into statements: each ends with ";" at the end of a line (comments and blank lines
// dropped). Quotes are respected.
std::vector<std::string> split_statements(std::string_view sql);

// Creates schema_migrations if missing, then applies every migration not recorded there, each in its
// own write transaction (the statements and its schema_migrations row commit together). Safe to run
// from several processes: a second one finds the row (or gets kConflict inserting it) and moves on.
Status apply_migrations(Db& db, int64_t now_ms);

// The newest version recorded in schema_migrations (0 for a fresh store).
Result<int> schema_version(Db& db);

}  // namespace gpuplan::market
