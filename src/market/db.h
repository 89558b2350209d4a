// The market's one store interface: a transactional SQL database, with two implementations (SQLite, the
// embedded default, and PostgreSQL 15 through libpq for several server processes). The market's logic
// writes each statement once, in the portable subset both engines accept (docs/market.md, "Schema"), and
// every test of the market runs on both.
//
// Contract:
// - Statements use numbered placeholders `?1 ... ?N` (SQLite's syntax; the PostgreSQL implementation
//   rewrites them to `$1 ... $N`). Values are bound, never spliced into the text.
// - A Tx is one transaction. `begin(kWrite)` takes the write lock up front (SQLite `BEGIN IMMEDIATE`;
//   PostgreSQL `BEGIN READ COMMITTED` + `pg_advisory_xact_lock`:
//   one writer per database, the same semantics as SQLite's), so a write transaction never fails half-way on a
//   lock upgrade. A Tx that is destroyed without commit() rolls back. One Tx per thread at a time; a Db
//   is safe to use from many threads (each begin() takes a connection from a pool).
// - Errors are values: a UNIQUE or PRIMARY KEY violation is ErrorCode::kConflict (the caller tries the
//   next candidate: that is how a (gpu, memory slice) claim is never given twice); a lock timeout or a
//   serialization failure is ErrorCode::kUnavailable with `retryable` semantics (with_retry() retries
//   those); anything else from the engine is kInternal with the engine's message.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gpuplan/status.h"

namespace gpuplan::market {

// A bound parameter or a column value. Integers are 64-bit (ids are TEXT, times Unix milliseconds, money
// integer micro-units); BLOB is a byte string (SQLite BLOB, PostgreSQL BYTEA).
struct Blob {
  std::string bytes;
  bool operator==(const Blob&) const = default;
};
using Value = std::variant<std::monostate, int64_t, double, std::string, Blob>;

// One result row; columns by index, in the SELECT's order.
struct Row {
  std::vector<Value> columns;
  bool is_null(size_t i) const { return std::holds_alternative<std::monostate>(columns.at(i)); }
  int64_t integer(size_t i) const;          // 0 for NULL
  double number(size_t i) const;            // an integer column reads as a double too; 0 for NULL
  const std::string& text(size_t i) const;  // "" for NULL
  std::optional<int64_t> maybe_integer(size_t i) const;
  std::optional<std::string> maybe_text(size_t i) const;
};

enum class TxMode { kRead, kWrite };

class Tx {
 public:
  virtual ~Tx() = default;
  // A statement that returns rows (SELECT, or INSERT ... RETURNING).
  virtual Result<std::vector<Row>> query(std::string_view sql, std::span<const Value> params = {}) = 0;
  // A statement that changes rows; returns how many it changed.
  virtual Result<int64_t> exec(std::string_view sql, std::span<const Value> params = {}) = 0;
  virtual Status commit() = 0;
};

class Db {
 public:
  virtual ~Db() = default;
  virtual std::string_view dialect() const = 0;  // "sqlite" or "postgresql"
  virtual Result<std::unique_ptr<Tx>> begin(TxMode mode) = 0;
  // Creates or upgrades the schema to the newest migration (data/market/migrations/*.sql), in one transaction
  // per migration, recording each in schema_migrations. Safe to call on every start, from several
  // processes at once.
  virtual Status migrate() = 0;
};

// `path` is the database file (created if missing): WAL, synchronous=FULL, foreign_keys=ON, busy_timeout.
Result<std::unique_ptr<Db>> open_sqlite(const std::string& path);
// `conninfo` is a libpq connection string or URI (postgresql://user@host/db, host=/tmp/sock dbname=x).
Result<std::unique_ptr<Db>> open_postgresql(const std::string& conninfo);
// "postgresql://..." or "postgres://..." opens PostgreSQL; anything else is a data directory whose
// gpuplan.db is opened with SQLite (the directory is created if missing).
Result<std::unique_ptr<Db>> open_store(const std::string& database_or_data_dir);

// Runs `body` in one transaction of `mode` and commits it when `body` returns Ok (rolls back otherwise);
// retries the whole body (a bounded number of times, with jittered backoff) when the engine reports a
// lock timeout or a serialization failure (kUnavailable). `body` writes its results into captures, and
// must be safe to run again from the start.
Status with_tx(Db& db, TxMode mode, const std::function<Status(Tx&)>& body);

}  // namespace gpuplan::market
