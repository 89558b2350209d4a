// Glue between requests (JSON keyed by CLI long options, or a validation row's `workload:`) and the
// performance model: resolves the model, the target, the formats and the parallel layout once, so the
// perf command, `gpuplan validate` and the benchmark share one reading of a workload.
#pragma once

#include <string>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/model.h"
#include "gpuplan/perf.h"
#include "gpuplan/target.h"

namespace gpuplan::perf {

// The request keys of a performance workload (the fit options plus the perf ones).
const std::vector<std::string_view>& perf_request_keys();

struct PerfSetup {
  const Model* model = nullptr;
  PerfArch arch;
  WeightFormat weights = WeightFormat::kBf16;
  PerfWorkload workload;    // resolved except `weights`, which depends on the target
  double rate = 0;          // requests/s (serving), 0 = none
  double train_tokens = 0;  // tokens to process (training), 0 = none
  PerfEfficiency efficiency;
  bool batch_given = false;
  int count = 0;  // GPUs per target from the request (0 = tp x pp x dp)
};

// Reads the workload part of `request`; keys outside perf_request_keys() are ignored (the command
// checks its own list). Unknown models are kNotFound.
Result<PerfSetup> parse_perf_setup(const Json& request);

// A target of `count` devices, linked by NVLink when the GPU has it and the devices can all use it
// (SXM boards behind NVSwitch, or a bridged pair of PCIe cards), else by PCIe.
Target make_target(const TargetRef& ref, int count);

// The PerfWorkload for one target (formats resolved on that device).
PerfWorkload workload_for(const PerfSetup& s, const PerfDevice& device);

// Largest serving batch whose KV cache fits next to the weights on the target: capacity x utilization -
// weights - runtime reserve, divided by the KV bytes of a sequence of input + output / 2 tokens (with a
// paged cache, sequences in flight are half-way through their output on average).
// (Stands in until the memory model's fit_target() is merged; see docs/model.md.)
int64_t estimate_max_batch(const PerfSetup& s, const PerfWorkload& w, const Target& t);

}  // namespace gpuplan::perf
