// `validate`: predicts every published measurement under validation/ and reports the error. The loop,
// the kinds and the summary live in src/validate/validation.h; this is the command over them.
#include "api/commands.h"
#include "core/request.h"
#include "validate/validation.h"

namespace gpuplan::api {

namespace {

Result<Json> validate(const Context& ctx, const Json& body) {
  const Request req(body, "validate");
  GPUPLAN_CHECK(req.check_keys());
  GPUPLAN_TRY(kind, req.text("kind"));
  return validate::run_validation(*ctx.catalog, kind);
}

}  // namespace

void register_validate_commands(CommandTable& table) {
  table.push_back(
      Command{"validate", "Predict every published measurement in validation/ and report the error", validate});
}

}  // namespace gpuplan::api
