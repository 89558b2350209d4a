// What the bench command (src/api/bench_commands.cc) and the tests use of the driver beyond gpuplan/bench.h.
#pragma once

#include "bench/backend.h"
#include "gpuplan/bench.h"

namespace gpuplan::bench {

// run_bench over a backend the caller opened (the tests' fakes with their faults).
Result<BenchReport> run_bench_on(const Catalog& catalog, const BenchOptions& options, BenchBackend& backend);
// Whether the operator model, not the data, is blamed for a re-prediction error (median above 10 %).
bool model_at_fault(const ModelError& e);
// --quick's budget when none is given.
double quick_default_budget_seconds();

}  // namespace gpuplan::bench
