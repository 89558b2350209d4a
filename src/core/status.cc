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
