// The library's vocabularies (the names of tasks, formats, engines, ...) and its declared options
// (data/options.yaml), as the page, the CLI and the OpenAPI document read them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/options.h"

namespace gpuplan::api {

// The vocabularies an option may name (`vocabulary:` in data/options.yaml): the request keys of the
// tables of gpuplan/vocabulary.h (engine, task, optimizer, checkpointing, amp, weights, kv_cache,
// lora_targets).
const std::vector<std::string_view>& vocabulary_ids();
// The canonical names of one vocabulary, in the library's order: a workload vocabulary above or one of
// the market's (gpuplan/market_vocabulary.h: tenant_kind, role, scope, interconnect, mig_policy,
// node_state, rental_state); an internal error for an unknown id.
Result<std::vector<std::string>> vocabulary_names(std::string_view vocabulary);
// The allowed words of an option: its vocabulary's names or its declared values (empty: any).
Result<std::vector<std::string>> option_words(const OptionSpec& o);

// One option as GET /api/v1/vocabulary lists it: name, type, unit, default, range, values, commands...
Json option_json(const OptionSpec& o);
// The JSON Schema of a command's request object, from the declaration (web/openapi.json's request
// bodies are these; tests/unit/options_test.cc fails when the file is stale). A strict command's
// strings carry maxLength, its lists maxItems; an open command's object allows other keys.
Result<Json> request_schema(std::string_view command);
// The OpenAPI document with every operation's request body and query parameters made from the
// declaration (operationId = command name with '.' as '_').
Result<Json> openapi_with_declared_requests(Json doc);

}  // namespace gpuplan::api
