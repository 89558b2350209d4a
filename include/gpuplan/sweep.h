// A sweep of one model's inference: the memory verdict and the latency of every configuration over
// targets x tensor-parallel degrees x weight formats x batch x prompt length, as a planner or the
// bench asks them. What does not depend on the batch and the prompt (the prepared memory workload, the
// refusal rules, the engine's share of the target, the latency model's rates, matmul shapes and
// per-layer constants) is resolved once per (model, target, format, degrees): a SweepPoint. Its at()
// allocates nothing, builds no string, Result or map, and answers bit for bit what the per-configuration
// path (prepare + fit_target + predict_inference of that workload) answers (SweepPoint.* tests).
#pragma once

#include <cstdint>
#include <optional>

#include "gpuplan/memory.h"
#include "gpuplan/perf.h"
#include "gpuplan/refusal.h"
#include "gpuplan/status.h"
#include "gpuplan/target.h"
#include "gpuplan/workload.h"

namespace gpuplan {

// estimate_memory(p, batch, context, link).total_bytes of many batches and contexts of one prepared
// workload, as a sweep asks: for vLLM inference of a decoder everything but the KV cache is resolved once
// (vLLM's profile run and pool do not depend on them), otherwise estimate_memory runs. `prompt_tokens`
// is the workload's input_tokens at that context (the other engines' prefill peak reads it). Equal bit
// for bit to estimate_memory; allocates nothing after construction.
class MemorySweep {
 public:
  MemorySweep(const PreparedWorkload& p, Link link);
  double total_bytes(int64_t batch, int64_t prompt_tokens, int64_t context);

 private:
  PreparedWorkload p_;
  Link link_;
  bool fast_ = false;
  double weights_bytes_ = 0;
  double activations_bytes_ = 0;
  double runtime_overhead_bytes_ = 0;
};

// One configuration's answer: fit_target's verdict fields at that batch and context, and
// predict_inference's latency.
struct SweepAnswer {
  std::optional<RefusalCode> refusal;  // fit_target(...).refusal
  bool fits = false;                   // fit_target(...).fits
  double total_bytes = 0;              // per GPU
  double headroom_bytes = 0;           // limit - total
  InferencePerf perf;
};

class SweepPoint {
 public:
  // `w`: an inference workload (model, engine, weights, tp, pp, output_tokens, ...) whose batch, prompt
  // (input_tokens) and context (prompt + output_tokens) at() varies; `t` its target (t.count GPUs);
  // `run` and `eff` what predict_inference takes for it on perf_device(t).
  static Result<SweepPoint> make(const Workload& w, const Target& t, const PerfRun& run, const PerfEfficiency& eff);

  // The configuration with `batch` sequences of `prompt_tokens` prompt tokens (both >= 1; context =
  // prompt + output_tokens). Ask the prompts of one batch in a row: the decode step's matmuls are
  // resolved once per batch.
  SweepAnswer at(int64_t batch, int64_t prompt_tokens);

  double limit_bytes() const { return limit_bytes_; }

 private:
  SweepPoint(InferenceSweep latency, MemorySweep memory) : latency_(std::move(latency)), memory_(std::move(memory)) {}

  InferenceSweep latency_;
  MemorySweep memory_;
  int64_t output_tokens_ = 0;
  double limit_bytes_ = 0;
  // The refusal at every context up to refuse_above_context, and kContext beyond it (the one refusal
  // rule that reads the context: a vLLM max_model_len or a learned position table).
  std::optional<RefusalCode> refusal_;
  int64_t refuse_above_context_ = INT64_MAX;
  bool loads_ = true;  // TargetFit::loads: the load-time peak fits the GPU (batch-independent)
};

}  // namespace gpuplan
