// The one schema (data/market/migrations/*.sql) is the same on SQLite and PostgreSQL: after migrate(),
// both engines are introspected (tables; columns with normalised types, NOT NULL; primary keys; unique
// constraints and indexes; other indexes, partial or not) and compared. Runs when GPUPLAN_TEST_POSTGRES
// names a server (scripts/with-postgres.sh, `make test`).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "market/db.h"
#include "market_pg_test_util.h"

namespace gpuplan::market {
namespace {

struct Schema {
  // table -> column -> "type not-null"
  std::map<std::string, std::map<std::string, std::string>> columns;
  // table -> primary key columns, in order
  std::map<std::string, std::string> primary_keys;
  // "table(unique? partial? col,col)" for every index, including the ones behind UNIQUE and PRIMARY KEY
  std::set<std::string> indexes;
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// SQLite's declared type and PostgreSQL's data_type onto one word: what a value is stored as.
std::string normal_type(std::string t) {
  t = lower(t);
  if (t.find("int") != std::string::npos) return "integer";  // INTEGER, BIGINT, integer, bigint, smallint
  if (t.find("char") != std::string::npos || t == "text") return "text";
  if (t == "real" || t.find("double") != std::string::npos || t.find("float") != std::string::npos) return "real";
  if (t == "blob" || t == "bytea") return "blob";
  return t;
}

Status read_sqlite(Tx& tx, Schema& out) {
  GPUPLAN_TRY(
      tables,
      tx.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"));
  for (const auto& t : tables) {
    const std::string table = t.text(0);
    const Value p[] = {table};
    GPUPLAN_TRY(cols, tx.query("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1) ORDER BY cid", p));
    std::map<int64_t, std::string> pk;
    for (const auto& c : cols) {
      // A PRIMARY KEY column is NOT NULL on PostgreSQL always; on SQLite only when declared (a quirk).
      const bool not_null = c.integer(2) != 0 || c.integer(3) != 0;
      out.columns[table][c.text(0)] = normal_type(c.text(1)) + (not_null ? " not null" : "");
      if (c.integer(3) > 0) pk[c.integer(3)] = c.text(0);
    }
    std::string pk_cols;
    for (const auto& [i, name] : pk) pk_cols += (pk_cols.empty() ? "" : ",") + name;
    if (!pk_cols.empty()) out.primary_keys[table] = pk_cols;
    GPUPLAN_TRY(idx, tx.query("SELECT name, \"unique\", origin, partial FROM pragma_index_list(?1)", p));
    bool pk_index = false;
    for (const auto& i : idx) {
      const Value ip[] = {i.text(0)};
      GPUPLAN_TRY(icols, tx.query("SELECT name FROM pragma_index_info(?1) ORDER BY seqno", ip));
      std::string cs;
      for (const auto& c : icols) cs += (cs.empty() ? "" : ",") + c.text(0);
      if (i.text(2) == "pk") pk_index = true;
      out.indexes.insert(table + "(" + (i.integer(1) ? "unique " : "") + (i.integer(3) ? "partial " : "") + cs + ")");
    }
    // An INTEGER PRIMARY KEY is the rowid: no index row in SQLite, a unique index in PostgreSQL.
    if (!pk_index && !pk_cols.empty()) out.indexes.insert(table + "(unique " + pk_cols + ")");
  }
  return Status::Ok();
}

Status read_postgresql(Tx& tx, Schema& out) {
  GPUPLAN_TRY(cols, tx.query("SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
                             "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"));
  for (const auto& c : cols) {
    out.columns[c.text(0)][c.text(1)] = normal_type(c.text(2)) + (c.text(3) == "NO" ? " not null" : "");
  }
  // Every index of the schema's tables, with its columns in key order.
  GPUPLAN_TRY(idx, tx.query("SELECT t.relname, i.indisunique, i.indisprimary, i.indpred IS NOT NULL, "
                            "  (SELECT string_agg(a.attname, ',' ORDER BY k.n) "
                            "     FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) "
                            "     JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum) "
                            "FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid "
                            "JOIN pg_namespace ns ON ns.oid = t.relnamespace WHERE ns.nspname = current_schema()"));
  for (const auto& i : idx) {
    const bool unique = i.integer(1) != 0;
    const bool partial = i.integer(3) != 0;
    out.indexes.insert(i.text(0) + "(" + (unique ? "unique " : "") + (partial ? "partial " : "") + i.text(4) + ")");
    if (i.integer(2) != 0) out.primary_keys[i.text(0)] = i.text(4);
  }
  return Status::Ok();
}

TEST(MarketSchemaParity, SqliteAndPostgresqlHaveTheSameSchema) {
  if (test::pg_conninfo().empty()) {
    GTEST_SKIP() << "GPUPLAN_TEST_POSTGRES is not set (run under scripts/with-postgres.sh)";
  }
  const auto dir = std::filesystem::temp_directory_path() /
                   ("gpuplan-parity-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand()));
  auto lite = open_store(dir.string());
  ASSERT_TRUE(lite.ok()) << lite.error().message;
  auto conninfo = test::fresh_pg_schema();
  ASSERT_TRUE(conninfo.ok()) << conninfo.error().message;
  auto pg = open_postgresql(*conninfo);
  ASSERT_TRUE(pg.ok()) << pg.error().message;
  ASSERT_TRUE((*lite)->migrate().ok());
  ASSERT_TRUE((*pg)->migrate().ok());

  Schema a, b;
  Status sa = with_tx(**lite, TxMode::kRead, [&](Tx& tx) { return read_sqlite(tx, a); });
  Status sb = with_tx(**pg, TxMode::kRead, [&](Tx& tx) { return read_postgresql(tx, b); });
  ASSERT_TRUE(sa.ok()) << sa.error().message;
  ASSERT_TRUE(sb.ok()) << sb.error().message;
  EXPECT_GE(a.columns.size(), 10u);  // the market's tables, not an empty store
  EXPECT_EQ(a.columns, b.columns);
  for (const auto& [table, cols] : a.columns) {
    EXPECT_EQ(cols, b.columns[table]) << table;
  }
  EXPECT_EQ(a.primary_keys, b.primary_keys);
  EXPECT_EQ(a.indexes, b.indexes);
  for (const auto& i : a.indexes) EXPECT_TRUE(b.indexes.count(i)) << "only on SQLite: " << i;
  for (const auto& i : b.indexes) EXPECT_TRUE(a.indexes.count(i)) << "only on PostgreSQL: " << i;
  lite = Error{};
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace gpuplan::market
