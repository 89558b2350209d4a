// A sweep of one model's inference: the memory verdict and the latency of every configuration over
// targets x tensor-parallel degrees x weight formats x batch x prompt length, as a planner or the
// bench asks them. What does not depend on the batch and the prompt (the prepared memory workload, the
// refusal rules, the engine's share of the target, the latency model's rates, matmul shapes and
// per-layer constants) is resolved once per (model, target, format, degrees): a SweepPoint. Its at()
// allocates nothing, builds no string, Result or map, and answers bit for bit what the per-configuration
// path (prepare + fit_target + predict_inference of that workload) answers (SweepPoint.* tests).
#pragma once

#include <cstdint>
#include <memory>
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

// The fields of InferencePerf a sweep reads (InferenceSweepLean::at).
struct InferenceLean {
  double ttft_seconds = 0;
  double tpot_seconds = 0;
  double total_seconds = 0;
  double throughput_tokens_per_second = 0;
};

// The lean latency's largest relative distance from predict_inference (tests/unit/sweep_lean_test.cc
// holds it over a grid): its rewrite reorders a few dozen roundings of 2^-53 each, so 1e-12 leaves a
// thousandfold margin, far below any digit the CLI, the server or a planner's comparison reads.
constexpr double kInferenceLeanTolerance = 1e-12;

// InferenceSweep (perf.h) answering what a sweep reads: TTFT, TPOT, total seconds and throughput,
// without the secondary rates and bounds, each within kInferenceLeanTolerance (relative) of
// predict_inference's, not bit for bit. For a dense transformer (InferenceSweep's fast path) the
// prefill's matmuls are the same rooflines rewritten linear in the step's tokens (their coefficients
// resolved once: no division per matmul), the attention is the batch times per-sequence terms, and
// everything of a step that no prompt changes is resolved once per batch; otherwise it is
// InferenceSweep::at's own answer. Ask the prompt lengths of one batch in a row. Allocation-free.
class InferenceSweepLean {
 public:
  InferenceSweepLean(const PerfArch& arch, const PerfDevice& device, const Workload& w, const PerfRun& run,
                     const PerfEfficiency& eff);
  ~InferenceSweepLean();
  InferenceSweepLean(InferenceSweepLean&&) noexcept;
  InferenceSweepLean& operator=(InferenceSweepLean&&) noexcept;
  InferenceSweepLean(const InferenceSweepLean&) = delete;
  InferenceSweepLean& operator=(const InferenceSweepLean&) = delete;

  InferenceLean at(int64_t batch, int64_t input_tokens);
  // The InferenceSweep of the same workload (the full InferencePerf, bit for bit), which at() answers
  // through where the rewrite does not apply.
  InferenceSweep& exact();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// What a sweep reads of a configuration (SweepPoint::at_lean): the memory verdict (fit_target's refusal,
// fits, bytes and headroom, bit for bit) and the latency (TTFT, TPOT, total seconds and throughput,
// within kInferenceLeanTolerance of predict_inference's: InferenceSweepLean).
struct SweepLean {
  std::optional<RefusalCode> refusal;
  bool fits = false;
  double total_bytes = 0;
  double headroom_bytes = 0;
  InferenceLean perf;
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
  // at()'s memory verdict and the latency a sweep reads (SweepLean), without the secondary rates and
  // bounds: the latency half is InferenceSweepLean::at. Ask the prompts of one batch in a row.
  SweepLean at_lean(int64_t batch, int64_t prompt_tokens);

  double limit_bytes() const { return limit_bytes_; }

 private:
  SweepPoint(InferenceSweepLean latency, MemorySweep memory)
      : latency_(std::move(latency)), memory_(std::move(memory)) {}
  // The verdict fields (refusal, total_bytes, headroom_bytes, fits) of at() and at_lean() alike.
  template <class Answer>
  void fill_verdict(Answer& a, int64_t batch, int64_t prompt_tokens);

  InferenceSweepLean latency_;  // at_lean's, and at()'s through exact()
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
