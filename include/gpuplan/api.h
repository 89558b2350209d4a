// The one request path. Every command (catalog list/show, compare, fit, perf, mig ..., plan, validate)
// is a function from a request, a JSON object whose keys are the CLI's long options without the
// dashes, to a result, the JSON that `--json` prints and the server returns. The CLI builds the
// request from its arguments and renders the result as text; the server parses the body and returns
// the result: both run the same library code, so their JSON is the same bytes by construction.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/catalog.h"
#include "gpuplan/status.h"

namespace gpuplan {

using Json = nlohmann::ordered_json;

// What a command may use besides its request. Immutable and shared between threads.
struct Context {
  std::shared_ptr<const Catalog> catalog;
};

// Runs `command` ("catalog.list", "catalog.show", "compare", ...) on `request`.
// Unknown commands and unknown request keys are usage errors.
Result<Json> run_command(const Context& ctx, std::string_view command, const Json& request);

// The commands run_command knows, in a stable order.
std::vector<std::string> command_names();
// What a command does, in one line (the CLI's help for it); empty for a command run_command lacks.
std::string command_description(std::string_view command);
// Whether a command is a light read (catalog and MIG table lookups, well under a millisecond): the
// server runs these on workers of their own. False for a command run_command lacks.
bool command_is_light(std::string_view command);

// {"error": {"code", "message", "field"}}: the JSON body of an error, for the server and --json.
Json error_json(const Error& error);

// A catalog figure as JSON: {value, unit, source, checked, verified, derived, derivation, conflicts}.
Json figure_json(const Catalog& catalog, const Figure& figure, bool explain = false);

}  // namespace gpuplan
