// Tests on the throwaway PostgreSQL of scripts/with-postgres.sh: its conninfo (GPUPLAN_TEST_POSTGRES,
// empty when the tests run without it) and a fresh schema per test, so tests never see each other's rows.
#pragma once

#include <unistd.h>
#include <atomic>
#include <cctype>
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

// `conninfo` as a postgresql:// URI, for `gpuplan serve --database` and `admin init --database` (which take
// only URIs): a URI is returned as it is; the key=value form ("host=/tmp/x port=5 user=u dbname=d", values
// optionally in single quotes with backslash escapes, as libpq writes them) becomes
// "postgresql:///?host=%2Ftmp%2Fx&port=5&user=u&dbname=d" (every value percent-encoded).
inline std::string pg_uri(const std::string& conninfo) {
  if (conninfo.find("://") != std::string::npos) return conninfo;
  auto encode = [](const std::string& v) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (const char ch : v) {
      const auto u = static_cast<unsigned char>(ch);
      if (std::isalnum(u) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
        out += ch;
      } else {
        out += '%';
        out += hex[u >> 4];
        out += hex[u & 0xF];
      }
    }
    return out;
  };
  std::string query;
  size_t i = 0;
  const size_t n = conninfo.size();
  while (i < n) {
    while (i < n && std::isspace(static_cast<unsigned char>(conninfo[i]))) ++i;
    if (i == n) break;
    std::string key;
    while (i < n && conninfo[i] != '=' && !std::isspace(static_cast<unsigned char>(conninfo[i]))) key += conninfo[i++];
    while (i < n && std::isspace(static_cast<unsigned char>(conninfo[i]))) ++i;
    if (i < n && conninfo[i] == '=') ++i;
    while (i < n && std::isspace(static_cast<unsigned char>(conninfo[i]))) ++i;
    std::string value;
    if (i < n && conninfo[i] == '\'') {
      for (++i; i < n && conninfo[i] != '\''; ++i) {
        if (conninfo[i] == '\\' && i + 1 < n) ++i;
        value += conninfo[i];
      }
      if (i < n) ++i;  // the closing quote
    } else {
      while (i < n && !std::isspace(static_cast<unsigned char>(conninfo[i]))) value += conninfo[i++];
    }
    if (key.empty()) continue;
    query += (query.empty() ? "?" : "&") + encode(key) + "=" + encode(value);
  }
  return "postgresql:///" + query;
}

// Creates a schema with a new name ("t_<pid>_<n>_<random>") on the throwaway server and returns that name.
inline Result<std::string> fresh_pg_schema_name() {
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
  return schema;
}

// Creates a fresh schema and returns the conninfo that works in it.
inline Result<std::string> fresh_pg_schema() {
  GPUPLAN_TRY(schema, fresh_pg_schema_name());
  return pg_conninfo_in_schema(pg_conninfo(), schema);
}

// Creates a fresh schema and returns a postgresql:// URI that works in it (for the `gpuplan` binary).
inline Result<std::string> fresh_pg_schema_uri() {
  GPUPLAN_TRY(schema, fresh_pg_schema_name());
  return pg_conninfo_in_schema(pg_uri(pg_conninfo()), schema);
}

}  // namespace gpuplan::market::test
