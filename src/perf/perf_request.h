// Glue between requests (JSON keyed by CLI long options, or a validation row's `workload:`) and the
// performance model. The workload part is read by parse_workload() (workload.h), the same reading as
// `gpuplan fit`; the perf options (lengths, rate, tokens to train, parallel layout, efficiency) are read
// here. The perf command, `gpuplan validate` and the benchmark share this one reading.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/memory.h"
#include "gpuplan/model.h"
#include "gpuplan/perf.h"
#include "gpuplan/refusal.h"
#include "gpuplan/target.h"
#include "gpuplan/workload.h"

namespace gpuplan::perf {

// The request keys of a performance workload: the workload keys of `gpuplan fit` plus the perf ones.
const std::vector<std::string_view>& perf_request_keys();

struct PerfSetup {
  Workload workload;  // as `gpuplan fit` reads it (context = input + output for inference)
  PerfArch arch;
  PerfRun run;              // resolved except `weights` (the target's device) and `dp` (0: from the count)
  double rate = 0;          // requests/s (serving), 0 = none
  double train_tokens = 0;  // tokens to process (training), 0 = none
  PerfEfficiency efficiency;
  bool batch_given = false;
  bool lengths_given = false;  // input_tokens or output_tokens in the request
};

// Reads the workload; keys outside perf_request_keys() are ignored (the command checks its own list).
// Validation rows may also say micro_batch / seq_len (= batch / context; parse_workload reads them) and
// checkpointing: true/false (= full/none).
Result<PerfSetup> parse_perf_setup(const Json& request);

// The PerfRun for one target (formats resolved on that device; data parallel = count / (tp x pp)
// unless the request gave dp).
PerfRun run_for(const PerfSetup& s, const PerfDevice& device, int count);

// What the memory model says for this setup on a target: whether it fits, and the largest batch a
// serving engine holds (paged KV: pool tokens / (input + output / 2); else the largest static batch at
// input + output / 2 tokens).
struct MemoryVerdict {
  bool fits = false;               // false when refused
  std::optional<Refusal> refusal;  // why no engine runs it (refusal.h); then serving_max_batch is 0
  int64_t serving_max_batch = 0;
  double total_bytes = 0;
  double capacity_bytes = 0;
  double limit_bytes = 0;  // what the engine may use of the capacity
};
class MemoryCache {
 public:
  explicit MemoryCache(const PerfSetup& s) : s_(s) {}
  Result<MemoryVerdict> verdict(const Target& t);

 private:
  const PerfSetup& s_;
  std::map<int, PreparedWorkload> fit_;      // per device count, at the workload's batch and context
  std::map<int, PreparedWorkload> serving_;  // per device count, at the mean serving context
};

}  // namespace gpuplan::perf
