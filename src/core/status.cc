#include "gpuplan/status.h"

namespace gpuplan {

namespace {
struct CodeRow {
  ErrorCode code;
  const char* name;
  int exit_status;
  int http_status;
};
// The one table that maps error codes to the CLI's exit statuses and the server's HTTP statuses.
constexpr CodeRow kCodes[] = {
    {ErrorCode::kUsage, "usage", 2, 400},
    {ErrorCode::kNotFound, "not_found", 3, 404},
    {ErrorCode::kAmbiguous, "ambiguous", 3, 409},
    {ErrorCode::kInvalidData, "invalid_data", 4, 422},
    {ErrorCode::kInvalidLayout, "invalid_layout", 5, 422},
    {ErrorCode::kInternal, "internal", 1, 500},
    {ErrorCode::kLimit, "limit", 6, 413},
    {ErrorCode::kCancelled, "cancelled", 7, 503},
    {ErrorCode::kUnauthenticated, "unauthenticated", 8, 401},
    {ErrorCode::kForbidden, "forbidden", 9, 403},
    {ErrorCode::kConflict, "conflict", 10, 409},
    {ErrorCode::kPaymentRequired, "payment_required", 11, 402},
    {ErrorCode::kPreconditionFailed, "precondition_failed", 12, 412},
    {ErrorCode::kUnavailable, "unavailable", 13, 503},
};
const CodeRow& row(ErrorCode code) {
  for (const auto& r : kCodes) {
    if (r.code == code) return r;
  }
  return kCodes[5];  // kInternal
}
}  // namespace

int exit_code(ErrorCode code) { return row(code).exit_status; }
int http_status(ErrorCode code) { return row(code).http_status; }
const char* error_code_name(ErrorCode code) { return row(code).name; }

}  // namespace gpuplan
