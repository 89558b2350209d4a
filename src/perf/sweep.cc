// SweepPoint (gpuplan/sweep.h): one (model, target, format, degrees) of a memory + latency sweep,
// resolved once; at() is the per-configuration loop's body.
#include "gpuplan/sweep.h"

#include <utility>

namespace gpuplan {

namespace {

// The refusal of `w` (already under its rules engine) on `t` at `context`.
std::optional<RefusalCode> refusal_at(Workload w, const Target& t, int64_t context) {
  w.context = context;
  return refusal_code(w, t);
}

}  // namespace

Result<SweepPoint> SweepPoint::make(const Workload& w, const Target& t, const PerfRun& run, const PerfEfficiency& eff) {
  if (!w.model) return usage_error("the workload has no model", "model");
  if (w.task != Task::kInfer) return usage_error("a sweep point answers inference only", "task");
  GPUPLAN_TRY(prepared, prepare(w));
  const TargetFit fit = fit_target(prepared, t);
  // The latency model reads the prompt as min(input_tokens, context): with the context unbounded it is
  // at()'s prompt, as in the configuration's own workload (context = prompt + output >= prompt).
  Workload latency = w;
  latency.context = INT64_MAX;
  SweepPoint point(InferenceSweepLean(perf_arch(*w.model), perf_device(t), latency, run, eff),
                   MemorySweep(prepared, t.link));
  point.output_tokens_ = w.output_tokens;
  point.limit_bytes_ = fit.limit_bytes;
  point.loads_ = fit.loads;  // the load-time peak reads no batch or prompt (memory.h)
  // fit_target refuses under the rules engine's rules. Of its rules only kContext reads the context: it
  // refuses every context above the model's supported one and none below (refusal.cc).
  Workload rules = prepared.workload;
  rules.engine = prepared.rules_engine;
  point.refusal_ = refusal_at(rules, t, 1);
  const std::optional<RefusalCode> longest = refusal_at(rules, t, INT64_MAX);
  if (longest == RefusalCode::kContext && point.refusal_ != RefusalCode::kContext) {
    point.refuse_above_context_ = w.model->max_positions;
  }
  return point;
}

template <class Answer>
void SweepPoint::fill_verdict(Answer& a, int64_t batch, int64_t prompt_tokens) {
  const int64_t context = prompt_tokens + output_tokens_;
  a.refusal = context > refuse_above_context_ ? std::optional<RefusalCode>(RefusalCode::kContext) : refusal_;
  a.total_bytes = memory_.total_bytes(batch, prompt_tokens, context);
  a.headroom_bytes = limit_bytes_ - a.total_bytes;
  a.fits = !a.refusal && a.headroom_bytes >= 0 && loads_;
}

SweepAnswer SweepPoint::at(int64_t batch, int64_t prompt_tokens) {
  SweepAnswer a;
  fill_verdict(a, batch, prompt_tokens);
  a.perf = latency_.exact().at(batch, prompt_tokens);
  return a;
}

SweepLean SweepPoint::at_lean(int64_t batch, int64_t prompt_tokens) {
  SweepLean a;
  fill_verdict(a, batch, prompt_tokens);
  a.perf = latency_.at(batch, prompt_tokens);
  return a;
}

}  // namespace gpuplan
