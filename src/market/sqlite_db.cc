// The SQLite store: the embedded default (`gpuplan serve --data-dir DIR`, file DIR/gpuplan.db).
// WAL journal, synchronous=FULL (a commit survives power loss: https://www.sqlite.org/pragma.html#pragma_synchronous),
// foreign keys on, a busy timeout. A small pool of connections, each with its prepared statements cached.
// Writers are serialized inside the process by a mutex before BEGIN IMMEDIATE (SQLite allows one writer
// at a time anyway; the mutex queues them fairly instead of letting 64 threads poll the file lock), and
// across processes by the file lock and busy_timeout.
#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>

#include "market/db.h"
#include "market/migrations.h"

namespace gpuplan::market {

namespace {

// How long a writer waits for the write lock (in-process mutex, then SQLite's busy handler for other
// processes) before kUnavailable: 10 s, the design notes' busy_timeout (SkyPilot's "database is locked"
// years came from much shorter waits).
constexpr int kBusyTimeoutMs = 10'000;
// Connections kept open: enough for the server's worker threads to read in parallel under WAL; more
// threads wait for a free one (each connection also caches its prepared statements).
constexpr size_t kMaxConnections = 16;
// Prepared statements cached per connection; the market uses a few dozen distinct statements.
constexpr size_t kMaxCachedStatements = 256;

struct Connection {
  sqlite3* db = nullptr;
  std::map<std::string, sqlite3_stmt*, std::less<>> statements;
  ~Connection() {
    for (auto& [sql, st] : statements) sqlite3_finalize(st);
    if (db != nullptr) sqlite3_close_v2(db);
  }
};

Error engine_error(sqlite3* db, int rc, std::string_view what) {
  const int primary = rc & 0xff;
  const std::string msg = std::string(what) + ": " + (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  if (rc == SQLITE_CONSTRAINT_PRIMARYKEY || rc == SQLITE_CONSTRAINT_UNIQUE) return Error{ErrorCode::kConflict, msg, ""};
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
    return Error{ErrorCode::kUnavailable, "the SQLite store is busy (" + msg + "); retry later", ""};
  }
  return Error{ErrorCode::kInternal, "SQLite: " + msg, ""};
}

class SqliteDb;

class SqliteTx final : public Tx {
 public:
  SqliteTx(SqliteDb* owner, std::unique_ptr<Connection> conn, bool write)
      : owner_(owner), conn_(std::move(conn)), write_(write) {}
  ~SqliteTx() override;
  Result<std::vector<Row>> query(std::string_view sql, std::span<const Value> params) override;
  Result<int64_t> exec(std::string_view sql, std::span<const Value> params) override;
  Status commit() override;

  Status raw(const char* sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(conn_->db, sql, nullptr, nullptr, &err);
    if (err != nullptr) sqlite3_free(err);
    if (rc != SQLITE_OK) return engine_error(conn_->db, rc, sql);
    return Status::Ok();
  }
  bool open = false;  // BEGIN succeeded and neither COMMIT nor ROLLBACK ran yet

 private:
  Result<sqlite3_stmt*> prepare(std::string_view sql, std::span<const Value> params);
  SqliteDb* owner_;
  std::unique_ptr<Connection> conn_;
  bool write_;
  bool done_ = false;
};

class SqliteDb final : public Db {
 public:
  explicit SqliteDb(std::string path) : path_(std::move(path)) {}
  std::string_view dialect() const override { return "sqlite"; }

  Result<std::unique_ptr<Connection>> acquire() {
    {
      std::unique_lock lock(mu_);
      const bool got = cv_.wait_for(lock, std::chrono::milliseconds(kBusyTimeoutMs),
                                    [&] { return !idle_.empty() || open_count_ < kMaxConnections; });
      if (!got)
        return Error{ErrorCode::kUnavailable, "no free SQLite connection within the busy timeout; retry later", ""};
      if (!idle_.empty()) {
        auto c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
      ++open_count_;
    }
    auto c = open_connection();
    if (!c) {
      std::lock_guard lock(mu_);
      --open_count_;
      cv_.notify_one();
    }
    return c;
  }
  void release(std::unique_ptr<Connection> c) {
    std::lock_guard lock(mu_);
    if (c)
      idle_.push_back(std::move(c));
    else
      --open_count_;
    cv_.notify_one();
  }
  bool lock_writer() { return writer_.try_lock_for(std::chrono::milliseconds(kBusyTimeoutMs)); }
  void unlock_writer() { writer_.unlock(); }

  Result<std::unique_ptr<Tx>> begin(TxMode mode) override {
    const bool write = mode == TxMode::kWrite;
    auto acquired = acquire();
    if (!acquired) return acquired.error();
    std::unique_ptr<Connection> conn = std::move(*acquired);
    if (write && !lock_writer()) {
      release(std::move(conn));
      return Error{ErrorCode::kUnavailable, "another writer held the SQLite store for 10 s; retry later", ""};
    }
    auto tx = std::make_unique<SqliteTx>(this, std::move(conn), write);
    Status s = tx->raw(write ? "BEGIN IMMEDIATE" : "BEGIN");
    if (!s) return s.error();  // ~SqliteTx releases the connection and the writer lock
    tx->open = true;
    return std::unique_ptr<Tx>(std::move(tx));
  }

  Status migrate() override {
    const int64_t now =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    return apply_migrations(*this, now);
  }

  Status check_open() {
    auto c = acquire();
    if (!c) return c.error();
    release(std::move(*c));
    return Status::Ok();
  }

 private:
  Result<std::unique_ptr<Connection>> open_connection() {
    auto c = std::make_unique<Connection>();
    const int rc = sqlite3_open_v2(path_.c_str(), &c->db,
                                   SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      return Error{ErrorCode::kUnavailable,
                   "cannot open the SQLite store " + path_ + ": " +
                       (c->db != nullptr ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc)),
                   "data-dir"};
    }
    sqlite3_extended_result_codes(c->db, 1);
    sqlite3_busy_timeout(c->db, kBusyTimeoutMs);
    for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
      char* err = nullptr;
      const int prc = sqlite3_exec(c->db, pragma, nullptr, nullptr, &err);
      if (err != nullptr) sqlite3_free(err);
      if (prc != SQLITE_OK) return engine_error(c->db, prc, pragma);
    }
    return c;
  }

  std::string path_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Connection>> idle_;
  size_t open_count_ = 0;
  std::timed_mutex writer_;
};

SqliteTx::~SqliteTx() {
  if (open && !done_) {
    char* err = nullptr;
    sqlite3_exec(conn_->db, "ROLLBACK", nullptr, nullptr, &err);
    if (err != nullptr) sqlite3_free(err);
  }
  if (write_) owner_->unlock_writer();
  // A connection left inside a transaction (ROLLBACK failed) is closed rather than reused.
  if (conn_ && sqlite3_get_autocommit(conn_->db) == 0) conn_.reset();
  owner_->release(std::move(conn_));
}

Result<sqlite3_stmt*> SqliteTx::prepare(std::string_view sql, std::span<const Value> params) {
  sqlite3_stmt* st = nullptr;
  if (auto it = conn_->statements.find(sql); it != conn_->statements.end()) {
    st = it->second;
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
  } else {
    const int rc = sqlite3_prepare_v2(conn_->db, sql.data(), static_cast<int>(sql.size()), &st, nullptr);
    if (rc != SQLITE_OK) return engine_error(conn_->db, rc, "prepare");
    if (conn_->statements.size() < kMaxCachedStatements) conn_->statements.emplace(std::string(sql), st);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const int idx = static_cast<int>(i + 1);
    const Value& v = params[i];
    int rc = SQLITE_OK;
    if (std::holds_alternative<std::monostate>(v))
      rc = sqlite3_bind_null(st, idx);
    else if (const auto* n = std::get_if<int64_t>(&v))
      rc = sqlite3_bind_int64(st, idx, *n);
    else if (const auto* d = std::get_if<double>(&v))
      rc = sqlite3_bind_double(st, idx, *d);
    else if (const auto* s = std::get_if<std::string>(&v))
      rc = sqlite3_bind_text(st, idx, s->data(), static_cast<int>(s->size()), SQLITE_TRANSIENT);
    else if (const auto* b = std::get_if<Blob>(&v))
      rc = sqlite3_bind_blob(st, idx, b->bytes.data(), static_cast<int>(b->bytes.size()), SQLITE_TRANSIENT);
    if (rc != SQLITE_OK) return engine_error(conn_->db, rc, "bind");
  }
  return st;
}

namespace {
// Finalizes a statement that was not cached once its step loop ends.
struct StmtGuard {
  sqlite3_stmt* st;
  bool cached;
  ~StmtGuard() {
    if (cached)
      sqlite3_reset(st);
    else
      sqlite3_finalize(st);
  }
};
}  // namespace

Result<std::vector<Row>> SqliteTx::query(std::string_view sql, std::span<const Value> params) {
  GPUPLAN_TRY(st, prepare(sql, params));
  StmtGuard guard{st, conn_->statements.count(sql) > 0};
  std::vector<Row> rows;
  const int n = sqlite3_column_count(st);
  for (;;) {
    const int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return engine_error(conn_->db, rc, "query");
    Row row;
    row.columns.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      switch (sqlite3_column_type(st, i)) {
        case SQLITE_INTEGER:
          row.columns.emplace_back(static_cast<int64_t>(sqlite3_column_int64(st, i)));
          break;
        case SQLITE_FLOAT:
          row.columns.emplace_back(sqlite3_column_double(st, i));
          break;
        case SQLITE_TEXT:
          row.columns.emplace_back(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, i)),
                                               static_cast<size_t>(sqlite3_column_bytes(st, i))));
          break;
        case SQLITE_BLOB: {
          const auto* p = static_cast<const char*>(sqlite3_column_blob(st, i));
          row.columns.emplace_back(
              Blob{std::string(p == nullptr ? "" : p, static_cast<size_t>(sqlite3_column_bytes(st, i)))});
          break;
        }
        default:
          row.columns.emplace_back(std::monostate{});
          break;
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

Result<int64_t> SqliteTx::exec(std::string_view sql, std::span<const Value> params) {
  GPUPLAN_TRY(st, prepare(sql, params));
  StmtGuard guard{st, conn_->statements.count(sql) > 0};
  for (;;) {
    const int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return engine_error(conn_->db, rc, "exec");
  }
  return static_cast<int64_t>(sqlite3_changes64(conn_->db));
}

Status SqliteTx::commit() {
  if (!open || done_) return Error{ErrorCode::kInternal, "commit on a finished transaction", ""};
  GPUPLAN_CHECK(raw("COMMIT"));
  done_ = true;
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Db>> open_sqlite(const std::string& path) {
  auto db = std::make_unique<SqliteDb>(path);
  GPUPLAN_CHECK(db->check_open());
  return std::unique_ptr<Db>(std::move(db));
}

}  // namespace gpuplan::market
