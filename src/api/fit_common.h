// Shared by the fit and validate commands (and later perf): targets from a request, result JSON.
#pragma once

#include <string>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/memory.h"
#include "gpuplan/model.h"
#include "gpuplan/target.h"

namespace gpuplan::api {

// The targets of `request["gpu"]` ("NAME" or "NAMExN"), or every catalog target incl. MIG slices when
// absent; `default_count` devices each unless the name says xN.
Result<std::vector<Target>> fit_targets(const Catalog& catalog, const Json& request, int default_count);
Json model_json(const Model& m);
// "does not fit: needs 41.2 GiB per GPU, 39.6 GiB usable": the reason of a row that does not fit.
std::string out_of_memory_reason(double total_bytes, double limit_bytes);
Json memory_json(const MemoryBreakdown& m);

}  // namespace gpuplan::api
