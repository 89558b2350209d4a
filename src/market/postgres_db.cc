// The PostgreSQL 15 store (db.h) over libpq: a small connection pool, `?N` placeholders rewritten to
// `$N`, values bound as text parameters (bytea in binary), results typed from the column's type.
//
// Isolation: a write transaction takes the write lock up front, as db.h's contract says and as SQLite's
// `BEGIN IMMEDIATE` does: `BEGIN ISOLATION LEVEL READ COMMITTED` then `pg_advisory_xact_lock(writer
// key)`, one lock per database that every gpuplan process takes, released with the transaction (at
// COMMIT, at ROLLBACK, or when a crashed process's connection goes away). Writers therefore run one at
// a time, and each statement of the one writer sees everything committed before it: the same
// semantics as SQLite's single writer, for the same portable statements, with no serialization failure
// to retry. Not SERIALIZABLE (measured: 8 threads incrementing one row: 2 of 160 increments still failed
// after with_tx's 12 attempts, and a reservation reads the claims of every candidate GPU, so two concurrent
// reservations almost always conflict and one is aborted anyway), and not READ COMMITTED with
// `SELECT ... FOR UPDATE` row locks: the market's statements are written once for both engines and
// SQLite has no FOR UPDATE. The cost is that writes are serialized across servers (as on SQLite); reads
// (`REPEATABLE READ READ ONLY`: one snapshot, never a serialization error) take no lock and run in
// parallel. A writer waits at most lock_timeout (5 s) for the lock, then gets kUnavailable (503).
//
// Parameters: integers are bound as bigint (int8), doubles as double precision, strings untyped (the
// server takes the column's type), blobs as bytea. A function that takes an integer needs a CAST.
//
// Statement-level atomicity. In PostgreSQL an error aborts the whole transaction, in SQLite only the
// statement. db.h lets a caller go on after kConflict (a claim's primary-key violation: try the next
// candidate), so each INSERT/UPDATE/DELETE of a write transaction runs under a savepoint that is
// rolled back on kConflict; the transaction stays usable, as on SQLite. Any other error leaves the
// transaction failed: later statements and commit() return that error again.
#include <dlfcn.h>
#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "market/db.h"
#include "market/migrations.h"

namespace gpuplan::market {
namespace {

// libpq is loaded when the first PostgreSQL store opens (dlopen of libpq.so.5), not linked: the library
// and its dependencies (Kerberos, LDAP, GnuTLS: 20 shared objects) cost every gpuplan process about 8 ms
// of start-up (measured on the 2-core CI machine: a hello-world linked with -lpq starts in 8.7 ms, without
// it in 0.9 ms), and only `--database postgresql://` needs them. The signatures are libpq-fe.h's own
// (decltype), so a mismatch is a compile error; the symbols are resolved once, all or none.
// One function a line, left as written: clang-format re-flows an X-macro list differently on each pass.
// clang-format off
#define GPUPLAN_PQ_FUNCTIONS(X) \
  X(PQclear) \
  X(PQcmdStatus) \
  X(PQcmdTuples) \
  X(PQconnectdbParams) \
  X(PQerrorMessage) \
  X(PQexec) \
  X(PQexecParams) \
  X(PQfinish) \
  X(PQfreemem) \
  X(PQftype) \
  X(PQgetisnull) \
  X(PQgetlength) \
  X(PQgetvalue) \
  X(PQnfields) \
  X(PQntuples) \
  X(PQresultErrorField) \
  X(PQresultErrorMessage) \
  X(PQresultStatus) \
  X(PQsetNoticeProcessor) \
  X(PQstatus) \
  X(PQtransactionStatus) \
  X(PQunescapeBytea)
// clang-format on

struct PqApi {
#define GPUPLAN_PQ_MEMBER(name) decltype(&::name) name = nullptr;
  GPUPLAN_PQ_FUNCTIONS(GPUPLAN_PQ_MEMBER)
#undef GPUPLAN_PQ_MEMBER
  std::string error;  // empty once every symbol resolved
};

// The soname Debian's libpq5 installs (the ABI major version libpq-fe.h describes).
constexpr const char* kLibpqSoname = "libpq.so.5";

const PqApi& load_pq() {
  static const PqApi api = [] {
    PqApi a;
    void* handle = dlopen(kLibpqSoname, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      a.error = std::string("cannot load ") + kLibpqSoname + " (" + (why ? why : "not found") +
                "): install libpq5 (Debian: apt-get install libpq5) to use a postgresql:// database";
      return a;
    }
#define GPUPLAN_PQ_RESOLVE(name)                                      \
  a.name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name)); \
  if (!a.name && a.error.empty()) a.error = std::string(kLibpqSoname) + " has no " #name;
    GPUPLAN_PQ_FUNCTIONS(GPUPLAN_PQ_RESOLVE)
#undef GPUPLAN_PQ_RESOLVE
    return a;  // the handle stays open for the process's life
  }();
  return api;
}

// Every call below goes through this table; open_postgresql checks load_pq().error first, so no call
// is reached with a missing symbol.
const PqApi& pq() { return load_pq(); }

// Connections one Db opens at most: the HTTP server's workers each hold one during a transaction; a
// PostgreSQL 15 default allows 100 connections, so 2-3 server processes fit with room for psql.
constexpr size_t kMaxConnections = 32;
// A begin() waits this long for a free connection before it answers kUnavailable (the HTTP request
// then gets 503 with Retry-After): a transaction holds one for milliseconds.
constexpr std::chrono::milliseconds kPoolWait{5000};
// A statement that waits longer than this for a lock (the writer lock, or a row lock) fails with
// 55P03, which is kUnavailable and retried: well under the request deadline (10 s).
constexpr const char* kLockTimeout = "5s";
// libpq's connect_timeout (seconds) when the conninfo names none: a dead host answers 503 quickly.
constexpr const char* kConnectTimeoutSeconds = "5";
// The advisory lock migrate() holds (pg_advisory_xact_lock): any fixed 64-bit number, the same in
// every gpuplan process. "gpuplan" in ASCII.
constexpr int64_t kMigrationLockKey = 0x677075706c616eLL;
// The advisory lock every write transaction takes first (see "Isolation" above): "gpuplaW".
constexpr int64_t kWriterLockKey = 0x67707570616c57LL;

// PostgreSQL type oids (src/include/catalog/pg_type.dat), for typed parameters and results.
constexpr Oid kBoolOid = 16;
constexpr Oid kByteaOid = 17;
constexpr Oid kInt8Oid = 20;
constexpr Oid kInt2Oid = 21;
constexpr Oid kInt4Oid = 23;
constexpr Oid kOidOid = 26;
constexpr Oid kFloat4Oid = 700;
constexpr Oid kFloat8Oid = 701;
constexpr Oid kNumericOid = 1700;

Error unavailable(std::string message) { return Error{ErrorCode::kUnavailable, std::move(message), "database"}; }
Error internal(std::string message) { return Error{ErrorCode::kInternal, std::move(message), "database"}; }

std::string trim_message(const char* text) {
  std::string s = text ? text : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (char& c : s) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  return s;
}

// The error a failed result (or a lost connection) means, from its SQLSTATE (Appendix A of the manual).
Error error_from(PGconn* conn, const PGresult* res) {
  const char* state = res ? pq().PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string sqlstate = state ? state : "";
  std::string message = trim_message(res ? pq().PQresultErrorMessage(res) : nullptr);
  if (message.empty()) message = trim_message(pq().PQerrorMessage(conn));
  // No SQLSTATE: libpq's own error, not the server's (the connection dropped mid-statement, measured
  // under `pg_ctl stop -m immediate`: "server closed the connection unexpectedly", while PQstatus still
  // said CONNECTION_OK).
  if (pq().PQstatus(conn) == CONNECTION_BAD || sqlstate.empty() || sqlstate.rfind("08", 0) == 0) {
    return unavailable("the PostgreSQL connection was lost (" + message + "); retry");
  }
  if (sqlstate == "23505") return Error{ErrorCode::kConflict, "a unique key is already taken: " + message, "database"};
  if (sqlstate == "40001" || sqlstate == "40P01") {
    return unavailable("a concurrent transaction conflicted (" + sqlstate + "); retry");
  }
  // 55P03 lock timeout, 57014 statement cancelled, 57P01-57P03 the server is shutting down or starting.
  if (sqlstate == "55P03" || sqlstate == "57014" || sqlstate.rfind("57P0", 0) == 0 || sqlstate == "53300") {
    return unavailable("PostgreSQL is busy or restarting (" + sqlstate + ": " + message + "); retry");
  }
  return internal("PostgreSQL " + (sqlstate.empty() ? std::string("error") : sqlstate) + ": " + message);
}

struct ResultDeleter {
  void operator()(PGresult* r) const { pq().PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

}  // namespace

// `?N` -> `$N` (and a bare `?` -> the next number) outside string literals, quoted identifiers,
// dollar-quoted strings and comments. Exposed for the unit test (tests/unit/market_postgres_test.cc).
std::string rewrite_placeholders_for_postgresql(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 8);
  size_t next = 1;
  size_t i = 0;
  const size_t n = sql.size();
  auto copy_until = [&](size_t end) {
    out.append(sql.substr(i, end - i));
    i = end;
  };
  while (i < n) {
    const char c = sql[i];
    if (c == '\'' || c == '"') {
      // A literal or identifier; a doubled quote inside is an escaped quote.
      size_t j = i + 1;
      while (j < n) {
        if (sql[j] == c) {
          if (j + 1 < n && sql[j + 1] == c) {
            j += 2;
            continue;
          }
          ++j;
          break;
        }
        ++j;
      }
      copy_until(std::min(j, n));
    } else if (c == '-' && i + 1 < n && sql[i + 1] == '-') {
      size_t j = sql.find('\n', i);
      copy_until(j == std::string_view::npos ? n : j);
    } else if (c == '/' && i + 1 < n && sql[i + 1] == '*') {
      size_t j = sql.find("*/", i + 2);
      copy_until(j == std::string_view::npos ? n : j + 2);
    } else if (c == '$' && i + 1 < n && (sql[i + 1] == '$' || std::isalpha(static_cast<unsigned char>(sql[i + 1])))) {
      // $tag$ ... $tag$ (a $N parameter starts with a digit and is copied as it is).
      size_t close = sql.find('$', i + 1);
      if (close == std::string_view::npos) {
        copy_until(n);
        continue;
      }
      std::string_view tag = sql.substr(i, close - i + 1);
      bool is_tag = std::all_of(tag.begin() + 1, tag.end() - 1,
                                [](char t) { return std::isalnum(static_cast<unsigned char>(t)) || t == '_'; });
      if (!is_tag) {
        out.push_back(c);
        ++i;
        continue;
      }
      size_t end = sql.find(tag, close + 1);
      copy_until(end == std::string_view::npos ? n : end + tag.size());
    } else if (c == '?') {
      size_t j = i + 1;
      while (j < n && std::isdigit(static_cast<unsigned char>(sql[j]))) ++j;
      out.push_back('$');
      if (j > i + 1) {
        out.append(sql.substr(i + 1, j - i - 1));
      } else {
        out.append(std::to_string(next));
      }
      ++next;
      i = j;
    } else {
      out.push_back(c);
      ++i;
    }
  }
  return out;
}

namespace {

// A connection with its own state; the pool owns them.
struct Conn {
  PGconn* pg = nullptr;
  ~Conn() {
    if (pg) pq().PQfinish(pg);
  }
};

class PgDb;

class PgTx final : public Tx {
 public:
  PgTx(PgDb& db, std::unique_ptr<Conn> conn, TxMode mode) : db_(db), conn_(std::move(conn)), mode_(mode) {}
  ~PgTx() override;

  Result<std::vector<Row>> query(std::string_view sql, std::span<const Value> params) override;
  Result<int64_t> exec(std::string_view sql, std::span<const Value> params) override;
  Status commit() override;

  // Runs BEGIN; an error when the connection is unusable.
  Status begin();

 private:
  Result<PgResult> run(std::string_view sql, std::span<const Value> params);
  Result<PgResult> run_once(const std::string& text, std::span<const Value> params);
  Status simple(const char* sql);

  PgDb& db_;
  std::unique_ptr<Conn> conn_;
  TxMode mode_;
  bool open_ = false;            // BEGIN ran and neither COMMIT nor ROLLBACK has
  bool savepoint_ = false;       // gpuplan_stmt is set and not released yet (the next guarded statement does)
  std::optional<Error> failed_;  // the error that aborted the transaction
};

class PgDb final : public Db {
 public:
  explicit PgDb(std::string conninfo) : conninfo_(std::move(conninfo)) {}
  ~PgDb() override = default;

  std::string_view dialect() const override { return "postgresql"; }
  Result<std::unique_ptr<Tx>> begin(TxMode mode) override;
  Status migrate() override;

  Result<std::unique_ptr<Conn>> connect();
  void give_back(std::unique_ptr<Conn> conn);
  // Opens the first connection (open_postgresql: a wrong conninfo is reported at start).
  Status prime();

 private:
  Result<std::unique_ptr<PgTx>> begin_tx(TxMode mode);

  std::string conninfo_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Conn>> idle_;
  size_t open_count_ = 0;  // connections lent out or idle
};

Result<std::unique_ptr<Conn>> PgDb::connect() {
  // The conninfo may be a URI or key=value pairs; expand_dbname lets libpq take either, and the
  // defaults below apply only where the conninfo names nothing.
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {kConnectTimeoutSeconds, "gpuplan", conninfo_.c_str(), nullptr};
  auto conn = std::make_unique<Conn>();
  conn->pg = pq().PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (!conn->pg) return unavailable("cannot allocate a PostgreSQL connection");
  if (pq().PQstatus(conn->pg) != CONNECTION_OK) {
    return unavailable("cannot connect to PostgreSQL (" + trim_message(pq().PQerrorMessage(conn->pg)) +
                       "); check --database and that the server is running");
  }
  // Fewer surprises across servers: UTC, no notices on stderr, a bound on waiting for a row lock.
  pq().PQsetNoticeProcessor(
      conn->pg, [](void*, const char*) {}, nullptr);
  std::string setup =
      std::string("SET TIME ZONE 'UTC'; SET lock_timeout = '") + kLockTimeout + "'; SET client_min_messages = warning";
  PgResult res(pq().PQexec(conn->pg, setup.c_str()));
  if (pq().PQresultStatus(res.get()) != PGRES_COMMAND_OK) return error_from(conn->pg, res.get());
  return conn;
}

void PgDb::give_back(std::unique_ptr<Conn> conn) {
  std::lock_guard lock(mu_);
  if (conn && conn->pg && pq().PQstatus(conn->pg) == CONNECTION_OK &&
      pq().PQtransactionStatus(conn->pg) == PQTRANS_IDLE) {
    idle_.push_back(std::move(conn));
  } else {
    --open_count_;  // dropped: a later begin() opens a fresh one
  }
  cv_.notify_one();
}

Status PgDb::prime() {
  auto conn = connect();
  if (!conn) return conn.error();
  std::lock_guard lock(mu_);
  ++open_count_;
  idle_.push_back(std::move(*conn));
  return Status::Ok();
}

Result<std::unique_ptr<PgTx>> PgDb::begin_tx(TxMode mode) {
  std::unique_ptr<Conn> conn;
  {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, kPoolWait, [&] { return !idle_.empty() || open_count_ < kMaxConnections; })) {
      return unavailable("all " + std::to_string(kMaxConnections) + " PostgreSQL connections are busy; retry");
    }
    if (!idle_.empty()) {
      conn = std::move(idle_.back());
      idle_.pop_back();
    } else {
      ++open_count_;
    }
  }
  if (!conn) {
    auto fresh = connect();
    if (!fresh) {
      give_back(nullptr);
      return fresh.error();
    }
    conn = std::move(*fresh);
  }
  auto tx = std::make_unique<PgTx>(*this, std::move(conn), mode);
  GPUPLAN_CHECK(tx->begin());
  return tx;
}

Result<std::unique_ptr<Tx>> PgDb::begin(TxMode mode) {
  auto tx = begin_tx(mode);
  if (!tx) {
    // An idle connection may have died with a server restart: one more try opens a fresh one.
    if (tx.error().code != ErrorCode::kUnavailable) return tx.error();
    tx = begin_tx(mode);
    if (!tx) return tx.error();
  }
  return std::unique_ptr<Tx>(std::move(*tx));
}

PgTx::~PgTx() {
  if (open_ && conn_ && pq().PQstatus(conn_->pg) == CONNECTION_OK) {
    PgResult res(pq().PQexec(conn_->pg, "ROLLBACK"));
  }
  db_.give_back(std::move(conn_));
}

Status PgTx::simple(const char* sql) {
  PgResult res(pq().PQexec(conn_->pg, sql));
  if (pq().PQresultStatus(res.get()) != PGRES_COMMAND_OK) return error_from(conn_->pg, res.get());
  return Status::Ok();
}

Status PgTx::begin() {
  if (mode_ == TxMode::kRead) {
    GPUPLAN_CHECK(simple("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
    open_ = true;
    return Status::Ok();
  }
  GPUPLAN_CHECK(simple("BEGIN ISOLATION LEVEL READ COMMITTED"));
  open_ = true;
  const std::string lock = "SELECT pg_advisory_xact_lock(" + std::to_string(kWriterLockKey) + ")";
  PgResult res(pq().PQexec(conn_->pg, lock.c_str()));
  if (pq().PQresultStatus(res.get()) != PGRES_TUPLES_OK) {
    failed_ = error_from(conn_->pg, res.get());
    return *failed_;
  }
  return Status::Ok();
}

bool changes_rows(std::string_view sql) {
  size_t i = 0;
  while (i < sql.size() && std::isspace(static_cast<unsigned char>(sql[i]))) ++i;
  auto starts = [&](std::string_view word) {
    if (sql.size() - i < word.size()) return false;
    for (size_t k = 0; k < word.size(); ++k) {
      if (std::toupper(static_cast<unsigned char>(sql[i + k])) != word[k]) return false;
    }
    return true;
  };
  return starts("INSERT") || starts("UPDATE") || starts("DELETE") || starts("WITH");
}

Result<PgResult> PgTx::run_once(const std::string& text, std::span<const Value> params) {
  std::vector<std::string> storage(params.size());
  std::vector<const char*> values(params.size(), nullptr);
  std::vector<int> lengths(params.size(), 0);
  std::vector<int> formats(params.size(), 0);
  std::vector<Oid> types(params.size(), 0);
  for (size_t k = 0; k < params.size(); ++k) {
    const Value& v = params[k];
    if (std::holds_alternative<std::monostate>(v)) continue;  // NULL
    if (const auto* i = std::get_if<int64_t>(&v)) {
      storage[k] = std::to_string(*i);
      types[k] = kInt8Oid;
    } else if (const auto* d = std::get_if<double>(&v)) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", *d);
      storage[k] = buf;
      types[k] = kFloat8Oid;
    } else if (const auto* s = std::get_if<std::string>(&v)) {
      storage[k] = *s;  // type left to the server (unknown): it takes the column's
    } else if (const auto* b = std::get_if<Blob>(&v)) {
      storage[k] = b->bytes;
      types[k] = kByteaOid;
      formats[k] = 1;  // binary: the bytes as they are
    }
    values[k] = storage[k].data();
    lengths[k] = static_cast<int>(storage[k].size());
  }
  PgResult res(pq().PQexecParams(conn_->pg, text.c_str(), static_cast<int>(params.size()), types.data(), values.data(),
                                 lengths.data(), formats.data(), /*resultFormat=*/0));
  const auto st = pq().PQresultStatus(res.get());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return error_from(conn_->pg, res.get());
  return res;
}

Result<PgResult> PgTx::run(std::string_view sql, std::span<const Value> params) {
  if (failed_) return *failed_;
  if (!open_) return internal("the transaction is already committed or rolled back");
  const std::string text = rewrite_placeholders_for_postgresql(sql);
  const bool guarded = mode_ == TxMode::kWrite && changes_rows(sql);
  if (guarded) {
    // The previous statement's savepoint is released in the same round trip that sets this one's
    // (and COMMIT releases the last): one round trip per guarded statement instead of two.
    if (auto s =
            simple(savepoint_ ? "RELEASE SAVEPOINT gpuplan_stmt; SAVEPOINT gpuplan_stmt" : "SAVEPOINT gpuplan_stmt");
        !s) {
      failed_ = s.error();
      return *failed_;
    }
    savepoint_ = true;
  }
  auto res = run_once(text, params);
  if (!res) {
    if (guarded && res.error().code == ErrorCode::kConflict && pq().PQstatus(conn_->pg) == CONNECTION_OK) {
      if (simple("ROLLBACK TO SAVEPOINT gpuplan_stmt; RELEASE SAVEPOINT gpuplan_stmt")) {
        savepoint_ = false;
        return res.error();  // the transaction goes on, as after a failed statement on SQLite
      }
    }
    failed_ = res.error();
    return *failed_;
  }
  return res;
}

Value column_value(const PGresult* res, int row, int col) {
  if (pq().PQgetisnull(res, row, col)) return std::monostate{};
  const char* text = pq().PQgetvalue(res, row, col);
  const int len = pq().PQgetlength(res, row, col);
  const std::string_view s(text, static_cast<size_t>(len));
  switch (pq().PQftype(res, col)) {
    case kBoolOid:
      return int64_t{s == "t" ? 1 : 0};
    case kInt2Oid:
    case kInt4Oid:
    case kInt8Oid:
    case kOidOid: {
      int64_t v = 0;
      std::from_chars(s.data(), s.data() + s.size(), v);
      return v;
    }
    case kNumericOid: {
      // SUM(bigint) is numeric in PostgreSQL and an integer in SQLite: a whole number reads as one.
      if (s.find_first_of(".eE") == std::string_view::npos) {
        int64_t v = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec == std::errc() && p == s.data() + s.size()) return v;
      }
      return std::strtod(std::string(s).c_str(), nullptr);
    }
    case kFloat4Oid:
    case kFloat8Oid:
      return std::strtod(std::string(s).c_str(), nullptr);
    case kByteaOid: {
      size_t out_len = 0;
      unsigned char* raw = pq().PQunescapeBytea(reinterpret_cast<const unsigned char*>(text), &out_len);
      Blob b;
      if (raw) {
        b.bytes.assign(reinterpret_cast<const char*>(raw), out_len);
        pq().PQfreemem(raw);
      }
      return b;
    }
    default:
      return std::string(s);
  }
}

Result<std::vector<Row>> PgTx::query(std::string_view sql, std::span<const Value> params) {
  GPUPLAN_TRY(res, run(sql, params));
  const int rows = pq().PQntuples(res.get());
  const int cols = pq().PQnfields(res.get());
  std::vector<Row> out;
  out.reserve(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    Row row;
    row.columns.reserve(static_cast<size_t>(cols));
    for (int c = 0; c < cols; ++c) row.columns.push_back(column_value(res.get(), r, c));
    out.push_back(std::move(row));
  }
  return out;
}

Result<int64_t> PgTx::exec(std::string_view sql, std::span<const Value> params) {
  GPUPLAN_TRY(res, run(sql, params));
  const char* tuples = pq().PQcmdTuples(res.get());
  int64_t changed = 0;
  if (tuples && *tuples) std::from_chars(tuples, tuples + std::strlen(tuples), changed);
  return changed;
}

Status PgTx::commit() {
  if (failed_) return *failed_;
  if (!open_) return internal("the transaction is already committed or rolled back");
  PgResult res(pq().PQexec(conn_->pg, "COMMIT"));
  open_ = false;
  if (pq().PQresultStatus(res.get()) != PGRES_COMMAND_OK) return error_from(conn_->pg, res.get());
  // An aborted transaction "commits" as ROLLBACK: that is a failure, not a success.
  if (std::strcmp(pq().PQcmdStatus(res.get()), "COMMIT") != 0) return internal("the transaction was rolled back");
  return Status::Ok();
}

Status PgDb::migrate() {
  // apply_migrations() (migrations.cc, shared with SQLite) runs one write transaction per migration.
  // Around it, a transaction on a connection of its own holds pg_advisory_xact_lock: a second server
  // that starts at the same time waits here, then finds every migration recorded and applies none. The
  // lock goes with that transaction (its COMMIT below, or the connection when this process dies).
  GPUPLAN_TRY(guard, connect());
  PgResult begin(pq().PQexec(guard->pg, "BEGIN"));
  if (pq().PQresultStatus(begin.get()) != PGRES_COMMAND_OK) return error_from(guard->pg, begin.get());
  const std::string lock = "SELECT pg_advisory_xact_lock(" + std::to_string(kMigrationLockKey) + ")";
  PgResult locked(pq().PQexec(guard->pg, lock.c_str()));
  if (pq().PQresultStatus(locked.get()) != PGRES_TUPLES_OK) return error_from(guard->pg, locked.get());
  const auto now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  Status applied = apply_migrations(*this, static_cast<int64_t>(now_ms));
  PgResult done(pq().PQexec(guard->pg, "COMMIT"));
  return applied;
}

}  // namespace

Result<std::unique_ptr<Db>> open_postgresql(const std::string& conninfo) {
  if (const PqApi& api = load_pq(); !api.error.empty()) return unavailable(api.error);
  auto db = std::make_unique<PgDb>(conninfo);
  // Connect once now, so that a wrong --database is reported at start and not at the first request.
  GPUPLAN_CHECK(db->prime());
  return std::unique_ptr<Db>(std::move(db));
}

}  // namespace gpuplan::market
