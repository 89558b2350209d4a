// The PostgreSQL store (src/market/postgres_db.cc): the placeholder rewrite always; the rest against the
// throwaway server that scripts/with-postgres.sh starts (GPUPLAN_TEST_POSTGRES; `make test` runs ctest
// inside it). Each test works in a schema of its own, so tests never see each other's rows.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "market/db.h"
#include "market/migrations.h"
#include "market_pg_test_util.h"

namespace gpuplan::market {

std::string rewrite_placeholders_for_postgresql(std::string_view sql);  // postgres_db.cc

namespace {

using test::fresh_pg_schema;
using test::pg_conninfo;

TEST(MarketPostgresRewrite, NumberedAndBarePlaceholdersOutsideLiterals) {
  EXPECT_EQ(rewrite_placeholders_for_postgresql("SELECT a FROM t WHERE b = ?1 AND c = ?12"),
            "SELECT a FROM t WHERE b = $1 AND c = $12");
  EXPECT_EQ(rewrite_placeholders_for_postgresql("VALUES (?, ?)"), "VALUES ($1, $2)");
  // Inside a literal, a quoted identifier or a comment a '?' is text.
  EXPECT_EQ(rewrite_placeholders_for_postgresql("SELECT '?1 it''s ?2', \"we?rd\", ?1 -- ?3\n, ?2 /* ?4 */"),
            "SELECT '?1 it''s ?2', \"we?rd\", $1 -- ?3\n, $2 /* ?4 */");
  EXPECT_EQ(rewrite_placeholders_for_postgresql("SELECT $$ ? $$, ?1"), "SELECT $$ ? $$, $1");
  // An unterminated literal does not run past the end.
  EXPECT_EQ(rewrite_placeholders_for_postgresql("SELECT 'abc"), "SELECT 'abc");
}

#define NEED_PG()                                                                            \
  if (pg_conninfo().empty()) {                                                               \
    GTEST_SKIP() << "GPUPLAN_TEST_POSTGRES is not set (run under scripts/with-postgres.sh)"; \
  }

std::unique_ptr<Db> open_in_fresh_schema() {
  auto conninfo = fresh_pg_schema();
  EXPECT_TRUE(conninfo.ok()) << (conninfo.ok() ? "" : conninfo.error().message);
  if (!conninfo.ok()) return nullptr;
  auto db = open_postgresql(*conninfo);
  EXPECT_TRUE(db.ok()) << (db.ok() ? "" : db.error().message);
  return db.ok() ? std::move(*db) : nullptr;
}

void exec_ok(Tx& tx, std::string_view sql, std::vector<Value> params = {}) {
  auto r = tx.exec(sql, params);
  ASSERT_TRUE(r.ok()) << sql << ": " << r.error().message;
}

TEST(MarketPostgres, ValuesRoundTripTyped) {
  NEED_PG();
  auto db = open_in_fresh_schema();
  ASSERT_TRUE(db);
  EXPECT_EQ(db->dialect(), "postgresql");
  auto tx = db->begin(TxMode::kWrite);
  ASSERT_TRUE(tx.ok()) << tx.error().message;
  exec_ok(**tx, "CREATE TABLE t (i BIGINT, n INTEGER, s TEXT, d DOUBLE PRECISION, b BYTEA)");
  const std::string with_nul("a\0b\xff", 4);
  exec_ok(**tx, "INSERT INTO t (i, n, s, d, b) VALUES (?1, ?2, ?3, ?4, ?5)",
          {int64_t{9'000'000'000'000}, int64_t{7}, std::string("it's ?1"), 0.25, Blob{with_nul}});
  exec_ok(**tx, "INSERT INTO t (i, n, s, d, b) VALUES (?1, ?2, ?3, ?4, ?5)",
          {int64_t{1}, std::monostate{}, std::monostate{}, std::monostate{}, std::monostate{}});
  auto rows = (*tx)->query("SELECT i, n, s, d, b FROM t ORDER BY i DESC");
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows->size(), 2u);
  const Row& r = (*rows)[0];
  EXPECT_EQ(r.integer(0), 9'000'000'000'000);
  EXPECT_EQ(r.integer(1), 7);
  EXPECT_EQ(r.text(2), "it's ?1");
  EXPECT_DOUBLE_EQ(r.number(3), 0.25);
  ASSERT_TRUE(std::holds_alternative<Blob>(r.columns[4]));
  EXPECT_EQ(std::get<Blob>(r.columns[4]).bytes, with_nul);
  for (size_t c = 1; c < 5; ++c) EXPECT_TRUE((*rows)[1].is_null(c)) << c;
  // Aggregates read as integers, as on SQLite (SUM(bigint) is numeric in PostgreSQL).
  auto agg = (*tx)->query("SELECT COUNT(*), SUM(i), MAX(n) FROM t");
  ASSERT_TRUE(agg.ok()) << agg.error().message;
  EXPECT_TRUE(std::holds_alternative<int64_t>((*agg)[0].columns[1]));
  EXPECT_EQ((*agg)[0].integer(0), 2);
  EXPECT_EQ((*agg)[0].integer(1), 9'000'000'000'001);
  auto changed = (*tx)->exec("UPDATE t SET n = ?1 WHERE i > ?2", std::vector<Value>{int64_t{3}, int64_t{0}});
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(*changed, 2);
  ASSERT_TRUE((*tx)->commit().ok());
}

TEST(MarketPostgres, KeyViolationIsConflictAndTheTransactionGoesOn) {
  NEED_PG();
  auto db = open_in_fresh_schema();
  ASSERT_TRUE(db);
  {
    auto tx = db->begin(TxMode::kWrite);
    ASSERT_TRUE(tx.ok());
    exec_ok(**tx, "CREATE TABLE claims (gpu TEXT NOT NULL, slice INTEGER NOT NULL, PRIMARY KEY (gpu, slice))");
    ASSERT_TRUE((*tx)->commit().ok());
  }
  auto tx = db->begin(TxMode::kWrite);
  ASSERT_TRUE(tx.ok());
  exec_ok(**tx, "INSERT INTO claims VALUES (?1, ?2)", {std::string("g0"), int64_t{0}});
  auto again = (*tx)->exec("INSERT INTO claims VALUES (?1, ?2)", std::vector<Value>{std::string("g0"), int64_t{0}});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kConflict) << again.error().message;
  // The next candidate, in the same transaction (as on SQLite).
  exec_ok(**tx, "INSERT INTO claims VALUES (?1, ?2)", {std::string("g1"), int64_t{0}});
  ASSERT_TRUE((*tx)->commit().ok());
  auto read = db->begin(TxMode::kRead);
  ASSERT_TRUE(read.ok());
  auto n = (*read)->query("SELECT COUNT(*) FROM claims");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ((*n)[0].integer(0), 2);
}

TEST(MarketPostgres, OtherErrorsFailTheTransaction) {
  NEED_PG();
  auto db = open_in_fresh_schema();
  ASSERT_TRUE(db);
  auto tx = db->begin(TxMode::kWrite);
  ASSERT_TRUE(tx.ok());
  auto bad = (*tx)->query("SELECT * FROM no_such_table");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInternal);
  EXPECT_NE(bad.error().message.find("42P01"), std::string::npos) << bad.error().message;
  EXPECT_FALSE((*tx)->query("SELECT 1").ok());
  EXPECT_FALSE((*tx)->commit().ok());
}

TEST(MarketPostgres, WritersRunOneAtATimeAndSeeWhatTheLastCommitted) {
  NEED_PG();
  auto db = open_in_fresh_schema();
  ASSERT_TRUE(db);
  {
    auto tx = db->begin(TxMode::kWrite);
    ASSERT_TRUE(tx.ok());
    exec_ok(**tx, "CREATE TABLE held (gpu TEXT NOT NULL, who TEXT NOT NULL PRIMARY KEY)");
    ASSERT_TRUE((*tx)->commit().ok());
  }
  // Two writers each check that gpu g0 is free, then take it under a different key (write skew): the
  // second one's begin() waits for the first to commit and then sees its row.
  auto a = db->begin(TxMode::kWrite);
  ASSERT_TRUE(a.ok());
  auto ra = (*a)->query("SELECT COUNT(*) FROM held WHERE gpu = 'g0'");
  ASSERT_TRUE(ra.ok());
  EXPECT_EQ((*ra)[0].integer(0), 0);
  std::atomic<bool> b_began{false};
  int64_t b_saw = -1;
  std::thread b([&] {
    auto tb = db->begin(TxMode::kWrite);
    b_began = true;
    ASSERT_TRUE(tb.ok()) << tb.error().message;
    auto rb = (*tb)->query("SELECT COUNT(*) FROM held WHERE gpu = 'g0'");
    ASSERT_TRUE(rb.ok());
    b_saw = (*rb)[0].integer(0);
  });
  // Give b the time to reach its begin(); it must still be waiting for the writer lock.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(b_began.load());
  exec_ok(**a, "INSERT INTO held VALUES ('g0', 'a')");
  ASSERT_TRUE((*a)->commit().ok());
  b.join();
  EXPECT_EQ(b_saw, 1);
  // A reader does not wait for a writer.
  auto w = db->begin(TxMode::kWrite);
  ASSERT_TRUE(w.ok());
  auto r = db->begin(TxMode::kRead);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE((*r)->query("SELECT COUNT(*) FROM held").ok());
  w = Error{};

  // 8 threads x 20 read-then-increment transactions: no update lost, none refused.
  {
    auto tx = db->begin(TxMode::kWrite);
    ASSERT_TRUE(tx.ok());
    exec_ok(**tx, "CREATE TABLE counter (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)");
    exec_ok(**tx, "INSERT INTO counter VALUES (1, 0)");
    ASSERT_TRUE((*tx)->commit().ok());
  }
  constexpr int kThreads = 8;
  constexpr int kEach = 20;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        Status s = with_tx(*db, TxMode::kWrite, [](Tx& tx) -> Status {
          GPUPLAN_TRY(rows, tx.query("SELECT n FROM counter WHERE id = 1"));
          const Value v[] = {rows[0].integer(0) + 1};
          GPUPLAN_TRY(n, tx.exec("UPDATE counter SET n = ?1 WHERE id = 1", v));
          (void)n;
          return Status::Ok();
        });
        if (!s) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  auto read = db->begin(TxMode::kRead);
  ASSERT_TRUE(read.ok());
  auto n = (*read)->query("SELECT n FROM counter WHERE id = 1");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ((*n)[0].integer(0) + failures.load(), kThreads * kEach);
  EXPECT_EQ(failures.load(), 0);
}

TEST(MarketPostgres, LostConnectionIsUnavailableAndThePoolRecovers) {
  NEED_PG();
  auto db = open_in_fresh_schema();
  ASSERT_TRUE(db);
  auto killer = open_postgresql(pg_conninfo());
  ASSERT_TRUE(killer.ok());
  auto tx = db->begin(TxMode::kWrite);
  ASSERT_TRUE(tx.ok());
  auto pid = (*tx)->query("SELECT pg_backend_pid()");
  ASSERT_TRUE(pid.ok());
  {
    auto k = (*killer)->begin(TxMode::kRead);  // a writer would wait for the victim's writer lock
    ASSERT_TRUE(k.ok());
    auto r = (*k)->query("SELECT pg_terminate_backend(CAST(?1 AS INTEGER))", std::vector<Value>{(*pid)[0].integer(0)});
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_TRUE((*k)->commit().ok());
  }
  auto after = (*tx)->query("SELECT 1");
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.error().code, ErrorCode::kUnavailable) << after.error().message;
  tx = Error{};  // gives the dead connection back (it is dropped)
  auto again = db->begin(TxMode::kRead);
  ASSERT_TRUE(again.ok()) << again.error().message;
  auto one = (*again)->query("SELECT 1");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)[0].integer(0), 1);
}

TEST(MarketPostgres, ServersMigratingAtOnceApplyEachMigrationOnce) {
  NEED_PG();
  auto conninfo = fresh_pg_schema();
  ASSERT_TRUE(conninfo.ok()) << conninfo.error().message;
  constexpr int kServers = 4;
  std::vector<std::unique_ptr<Db>> dbs;
  for (int i = 0; i < kServers; ++i) {
    auto db = open_postgresql(*conninfo);
    ASSERT_TRUE(db.ok()) << db.error().message;
    dbs.push_back(std::move(*db));
  }
  std::vector<Status> results(kServers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kServers; ++i) threads.emplace_back([&, i] { results[i] = dbs[i]->migrate(); });
  for (auto& t : threads) t.join();
  for (const auto& s : results) EXPECT_TRUE(s.ok()) << s.error().message;
  auto read = dbs[0]->begin(TxMode::kRead);
  ASSERT_TRUE(read.ok());
  auto n = (*read)->query("SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations");
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_EQ((*n)[0].integer(0), static_cast<int64_t>(migrations().size()));
  EXPECT_EQ((*n)[0].integer(1), (*n)[0].integer(0));
  // Migrating again is a no-op.
  EXPECT_TRUE(dbs[1]->migrate().ok());
}

TEST(MarketPostgres, WrongConninfoIsUnavailableNamingTheOption) {
  auto db = open_postgresql("host=/nonexistent-gpuplan-socket-dir dbname=x connect_timeout=1");
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(db.error().message.find("--database"), std::string::npos) << db.error().message;
}

}  // namespace
}  // namespace gpuplan::market
