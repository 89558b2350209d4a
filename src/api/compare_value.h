// Value metrics for `compare`: with offers, the cheapest price per GPU-hour of each target and the
// peak rates per dollar; with a workload (the options of perf), its speed on each target per dollar
// and per watt.
#pragma once

#include <string>
#include <vector>

#include "gpuplan/api.h"

namespace gpuplan::api {

// Adds "value" to each of out["targets"] and "value_basis" to `out` when the request asks for it.
Status add_value_metrics(const Context& ctx, const Json& body, const std::vector<TargetRef>& refs, Json& out);

}  // namespace gpuplan::api
