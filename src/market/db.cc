// The store interface's shared parts: Row accessors, with_tx's bounded retry, open_store's dispatch.
#include "market/db.h"

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

namespace gpuplan::market {

namespace {

// Attempts with_tx makes when the engine reports a lock timeout or a serialization failure: with the
// jittered backoff below (1, 2, 4, ... 64 ms, capped) a body gets ~0.5 s of retries before kUnavailable.
constexpr int kMaxTxAttempts = 12;
// First backoff and its cap, in microseconds; each attempt doubles it, and sleeps a uniform random
// fraction in [1/2, 1] of it so that contending threads do not retry in lockstep.
constexpr int64_t kFirstBackoffMicros = 1000;
constexpr int64_t kMaxBackoffMicros = 64'000;

}  // namespace

int64_t Row::integer(size_t i) const {
  const Value& v = columns.at(i);
  if (const auto* n = std::get_if<int64_t>(&v)) return *n;
  if (const auto* d = std::get_if<double>(&v)) return static_cast<int64_t>(*d);
  if (const auto* s = std::get_if<std::string>(&v)) {
    try {
      return std::stoll(*s);
    } catch (...) {
      return 0;
    }
  }
  return 0;
}

double Row::number(size_t i) const {
  const Value& v = columns.at(i);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* n = std::get_if<int64_t>(&v)) return static_cast<double>(*n);
  return 0;
}

const std::string& Row::text(size_t i) const {
  static const std::string kEmpty;
  const Value& v = columns.at(i);
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* b = std::get_if<Blob>(&v)) return b->bytes;
  return kEmpty;
}

std::optional<int64_t> Row::maybe_integer(size_t i) const {
  if (is_null(i)) return std::nullopt;
  return integer(i);
}

std::optional<std::string> Row::maybe_text(size_t i) const {
  if (is_null(i)) return std::nullopt;
  const Value& v = columns.at(i);
  if (const auto* n = std::get_if<int64_t>(&v)) return std::to_string(*n);
  return text(i);
}

Status with_tx(Db& db, TxMode mode, const std::function<Status(Tx&)>& body) {
  thread_local std::minstd_rand jitter(static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id())));
  int64_t backoff = kFirstBackoffMicros;
  Error last{ErrorCode::kUnavailable, "the store stayed busy", ""};
  for (int attempt = 0; attempt < kMaxTxAttempts; ++attempt) {
    if (attempt > 0) {
      std::uniform_int_distribution<int64_t> d(backoff / 2, backoff);
      std::this_thread::sleep_for(std::chrono::microseconds(d(jitter)));
      backoff = std::min(backoff * 2, kMaxBackoffMicros);
    }
    auto tx = db.begin(mode);
    if (!tx) {
      if (tx.error().code == ErrorCode::kUnavailable) {
        last = tx.error();
        continue;
      }
      return tx.error();
    }
    Status s = body(**tx);
    if (!s) {
      if (s.error().code == ErrorCode::kUnavailable) {
        last = s.error();
        continue;
      }
      return s;  // the Tx rolls back when destroyed
    }
    Status c = (*tx)->commit();
    if (!c) {
      if (c.error().code == ErrorCode::kUnavailable) {
        last = c.error();
        continue;
      }
      return c;
    }
    return Status::Ok();
  }
  last.message += " (after " + std::to_string(kMaxTxAttempts) + " attempts; retry later)";
  return last;
}

#ifndef GPUPLAN_HAVE_POSTGRESQL
// Without libpq (src/market/postgres_db.cc defines GPUPLAN_HAVE_POSTGRESQL for the whole library).
Result<std::unique_ptr<Db>> open_postgresql(const std::string&) {
  return Error{ErrorCode::kUnavailable, "this gpuplan was built without PostgreSQL support (libpq-dev)", "database"};
}
#endif

Result<std::unique_ptr<Db>> open_store(const std::string& database_or_data_dir) {
  if (database_or_data_dir.rfind("postgresql://", 0) == 0 || database_or_data_dir.rfind("postgres://", 0) == 0) {
    return open_postgresql(database_or_data_dir);
  }
  if (database_or_data_dir.empty())
    return usage_error("a data directory or a postgresql:// URL is required", "data-dir");
  std::error_code ec;
  std::filesystem::create_directories(database_or_data_dir, ec);
  if (ec) {
    return usage_error("cannot create the data directory " + database_or_data_dir + ": " + ec.message(), "data-dir");
  }
  return open_sqlite((std::filesystem::path(database_or_data_dir) / "gpuplan.db").string());
}

}  // namespace gpuplan::market
