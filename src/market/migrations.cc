// The schema's migrations, read from the files embedded in the binary (data/market/migrations/*.sql).
#include "market/migrations.h"

#include <algorithm>
#include <charconv>

#include "gpuplan/embedded.h"

namespace gpuplan::market {

namespace {
constexpr std::string_view kMigrationDir = "data/market/migrations/";
constexpr std::string_view kSqlSuffix = ".sql";
}  // namespace

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> all = [] {
    std::vector<Migration> out;
    for (const EmbeddedFile& f : embedded_files()) {
      if (f.path.rfind(kMigrationDir, 0) != 0 || f.path.size() <= kMigrationDir.size() + kSqlSuffix.size() ||
          f.path.substr(f.path.size() - kSqlSuffix.size()) != kSqlSuffix) {
        continue;
      }
      const std::string_view base =
          f.path.substr(kMigrationDir.size(), f.path.size() - kMigrationDir.size() - kSqlSuffix.size());
      int version = 0;
      const auto [end, ec] = std::from_chars(base.data(), base.data() + base.size(), version);
      if (ec != std::errc() || end == base.data()) continue;  // not NNNN_name.sql: not a migration
      out.push_back(Migration{version, std::string(base), f.contents});
    }
    std::sort(out.begin(), out.end(), [](const Migration& a, const Migration& b) { return a.version < b.version; });
    return out;
  }();
  return all;
}

std::vector<std::string> split_statements(std::string_view sql) {
  std::vector<std::string> out;
  std::string current;
  bool in_quote = false;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (!in_quote && c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      while (i < sql.size() && sql[i] != '\n') ++i;  // a comment to the end of the line
      current += '\n';
      continue;
    }
    if (c == '\'') in_quote = !in_quote;  // '' inside a literal toggles twice: still inside
    if (!in_quote && c == ';') {
      const auto first = current.find_first_not_of(" \t\r\n");
      if (first != std::string::npos) out.push_back(current.substr(first));
      current.clear();
      continue;
    }
    current += c;
  }
  const auto first = current.find_first_not_of(" \t\r\n");
  if (first != std::string::npos) out.push_back(current.substr(first));
  return out;
}

Status apply_migrations(Db& db, int64_t now_ms) {
  GPUPLAN_CHECK(with_tx(db, TxMode::kWrite, [](Tx& tx) -> Status {
    auto r = tx.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
        "applied_at BIGINT NOT NULL)");
    if (!r && r.error().code != ErrorCode::kConflict) return r.error();  // PG: a concurrent creator
    return Status::Ok();
  }));
  for (const Migration& m : migrations()) {
    Status s = with_tx(db, TxMode::kWrite, [&](Tx& tx) -> Status {
      const Value v[] = {int64_t{m.version}};
      GPUPLAN_TRY(rows, tx.query("SELECT version FROM schema_migrations WHERE version = ?1", v));
      if (!rows.empty()) return Status::Ok();
      for (const std::string& statement : split_statements(m.sql)) {
        auto r = tx.exec(statement);
        if (!r) {
          Error e = r.error();
          e.message = "migration " + m.name + ": " + e.message;
          return e;
        }
      }
      const Value row[] = {int64_t{m.version}, m.name, now_ms};
      GPUPLAN_TRY(n, tx.exec("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)", row));
      (void)n;
      return Status::Ok();
    });
    // kConflict: another process applied it at the same instant (its row won); the schema is there.
    if (!s && s.error().code != ErrorCode::kConflict) return s;
  }
  return Status::Ok();
}

Result<int> schema_version(Db& db) {
  int version = 0;
  GPUPLAN_CHECK(with_tx(db, TxMode::kRead, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(rows, tx.query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations"));
    version = rows.empty() ? 0 : static_cast<int>(rows[0].integer(0));
    return Status::Ok();
  }));
  return version;
}

}  // namespace gpuplan::market
