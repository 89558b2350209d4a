// Errors are values. Every fallible library call returns a Result<T>: either the value or an Error
// that says what was wrong, what to do, and which field or file position it concerns. The CLI maps
// ErrorCode to an exit status and the server to an HTTP status, both from the one table below.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace gpuplan {

enum class ErrorCode {
  kUsage,          // the request is malformed: a missing or bad option, a wrong type
  kNotFound,       // a GPU, profile, model or file that does not exist
  kAmbiguous,      // a name that matches several entries
  kInvalidData,    // a data file (catalog, model, fleet, offers) that breaks its contract
  kInvalidLayout,  // a MIG layout the driver would refuse
  kInternal,       // a bug: should never reach a user
  kLimit,          // a request or file is over a stated bound (items, size, depth); the message names it
  kCancelled,      // the command passed its deadline or was cancelled; its partial work was dropped
  // The market (stateful endpoints):
  kUnauthenticated,     // no token, or an unknown, expired or revoked one
  kForbidden,           // the caller's role or token scope may not do this (never for another tenant's object: 404)
  kConflict,            // the state does not allow it: nothing free to place, a name taken, an edge not allowed
  kPaymentRequired,     // the tenant's credit limit would be crossed
  kPreconditionFailed,  // If-Match names a version that is no longer current
  kUnavailable,         // the store is busy or unreachable; retrying later may succeed
};

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;  // what was wrong and what to do about it
  std::string field;    // the option, key or "file: entry: field" it concerns; may be empty
};

// Exit status of the CLI for an error: 2 usage, 3 not found or ambiguous, 4 invalid data,
// 5 invalid MIG layout, 6 over a limit, 7 cancelled (deadline), 8 unauthenticated, 9 forbidden,
// 10 conflict, 11 payment required, 12 precondition failed, 13 unavailable, 1 internal.
int exit_code(ErrorCode code);
// HTTP status of the server for an error: 400, 401, 402, 403, 404, 409, 412, 413, 422, 503, 500.
int http_status(ErrorCode code);
// Stable machine name ("usage", "not_found", ...), used in JSON error bodies.
const char* error_code_name(ErrorCode code);

inline Error usage_error(std::string message, std::string field = {}) {
  return Error{ErrorCode::kUsage, std::move(message), std::move(field)};
}
inline Error not_found_error(std::string message, std::string field = {}) {
  return Error{ErrorCode::kNotFound, std::move(message), std::move(field)};
}
inline Error invalid_data_error(std::string message, std::string field = {}) {
  return Error{ErrorCode::kInvalidData, std::move(message), std::move(field)};
}
inline Error limit_error(std::string message, std::string field = {}) {
  return Error{ErrorCode::kLimit, std::move(message), std::move(field)};
}

// A value or an Error. Small on purpose: std::expected is C++23.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  const Error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

// Result<void>.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  static Status Ok() { return {}; }
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace gpuplan

// Evaluates `expr` (a Result<T> or Status); on error returns the error from the enclosing function,
// else, for a Result, binds its value to `const auto var`:
//   GPUPLAN_TRY(n, req.integer("batch"));   // n is the int64
//   GPUPLAN_CHECK(validate(x));             // a Status
// NOLINTBEGIN(bugprone-macro-parentheses): `var` is the name being declared; "(var)" would not declare it.
#define GPUPLAN_TRY(var, expr)                      \
  auto var##_result_ = (expr);                      \
  if (!var##_result_) return var##_result_.error(); \
  const auto var = std::move(*var##_result_)
// NOLINTEND(bugprone-macro-parentheses)
#define GPUPLAN_CHECK(expr)                                                              \
  do {                                                                                   \
    if (auto gpuplan_status_ = (expr); !gpuplan_status_) return gpuplan_status_.error(); \
  } while (0)
