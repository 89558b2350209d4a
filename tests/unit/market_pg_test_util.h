// Tests on the throwaway PostgreSQL of scripts/with-postgres.sh: its conninfo (GPUPLAN_TEST_POSTGRES,
// empty when the tests run without it) and a fresh schema per test, so tests never see each other's rows.
#pragma once

#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>

#include "gpuplan/status.h"
#include "market/db.h"

namespace gpuplan::market::test {

inline std::string pg_conninfo() {
  const char* c = std::getenv("GPUPLAN_TEST_POSTGRES");
  return c ? c : "";
}

// `conninfo` with search_path set to `schema` (key=value form or a postgresql:// URI).
inline std::string pg_conninfo_in_schema(const std::string& conninfo, const std::string& schema) {
  if (conninfo.find("://") != std::string::npos) {
    return conninfo + (conninfo.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + schema;
  }
  return conninfo + " options='-csearch_path=" + schema + "'";
}

// Creates a schema with a new name ("t_<pid>_<n>_<random>") and returns the conninfo that works in it.
inline Result<std::string> fresh_pg_schema() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  const std::string schema = "t_" + std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1)) + "_" +
                             std::to_string(rd() % 1000000);
  auto db = open_postgresql(pg_conninfo());
  if (!db) return db.error();
  GPUPLAN_CHECK(with_tx(**db, TxMode::kWrite, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(n, tx.exec("CREATE SCHEMA " + schema));
    (void)n;
    return Status::Ok();
  }));
  return pg_conninfo_in_schema(pg_conninfo(), schema);
}

}  // namespace gpuplan::market::test
