#include "validate/perf_rows.h"

#include <algorithm>

#include "perf/perf_request.h"
#include "validate/validation.h"

namespace gpuplan::validate {

namespace {

// The units of validation/perf.yaml. The prediction stays in base units (seconds, rates, a fraction);
// the validation loop converts the measured value with base_unit_factor (gpuplan/units.h).
bool is_speed_unit(const std::string& unit) {
  return unit == "seconds" || unit == "ms" || unit == "tokens_per_second" || unit == "samples_per_second" ||
         unit == "TFLOPS" || unit == "GB/s" || unit == "percent";
}

PerfRowPrediction skip(std::string note) {
  PerfRowPrediction p;
  p.note = std::move(note);
  return p;
}

}  // namespace

PerfRowPrediction predict_perf_row(const Catalog& catalog, const Json& row) {
  const std::string metric = row.value("metric", "");
  const std::string unit = row.value("unit", "");
  if (!row.contains("workload") || !row["workload"].is_object()) return skip("row has no workload");
  Json req = row["workload"];
  const std::string gpu = req.value("gpu", "");
  req.erase("gpu");
  if (gpu.empty()) return skip("row names no gpu");
  auto ref = catalog.resolve(gpu);
  if (!ref) return skip("gpu: " + ref.error().message);
  const int count = req.contains("count") && req["count"].is_number_integer() ? req["count"].get<int>() : 1;
  const Target target = Target::linked(*ref, count);
  const PerfDevice device = perf_device(target);
  const PerfEfficiency eff = default_efficiency();
  PerfRowPrediction p;
  auto done = [&](double base, PerfBound bound) {
    if (!is_speed_unit(unit)) return skip("unit '" + unit + "' is not a speed unit");
    p.ok = true;
    p.value = base;
    p.bound = bound;
    return p;
  };
  const std::string model = req.value("model", "");
  if (model == "none" || model.empty()) {
    if (metric == "bandwidth_gbps") return done(predict_stream_bandwidth_gbps(device, eff), PerfBound::kMemory);
    if (metric == "gemm_tflops") {
      auto prec = parse_precision(req.value("weights", "bf16"));
      if (!prec) return skip(prec.error().message);
      const double m = req.value("m", 4096.0), n = req.value("n", 4096.0), k = req.value("k", 4096.0);
      return done(predict_gemm_tflops(device, *prec, m, n, k, eff), PerfBound::kCompute);
    }
    return skip("metric '" + metric + "' needs a model");
  }
  auto setup = perf::parse_perf_setup(req);
  if (!setup) {
    if (setup.error().code == ErrorCode::kNotFound) return skip("model not in zoo: " + model);
    return skip("workload: " + setup.error().message);
  }
  // A row that the refusal rules reject either did not run what it says or a rule is wrong: skip it
  // with the reason, so that `validate` shows it. (The rules are the engine's, or those it borrows.)
  if (auto r = refusal(setup->workload, target)) return skip("refused: " + r->message);
  const Workload& w = setup->workload;
  const PerfRun run = perf::run_for(*setup, device, target.count);
  const PerfArch& a = setup->arch;
  const bool per_gpu = row.value("per_gpu", false);
  const double gpus = std::max(1, target.count);
  if (metric == "train_tokens_per_second" || metric == "train_samples_per_second" || metric == "mfu" ||
      (metric == "step_seconds" && w.task != Task::kInfer)) {
    const TrainPerf t = predict_training(a, device, w, run, eff);
    if (metric == "train_tokens_per_second") return done(t.tokens_per_second_per_gpu, t.bound);
    if (metric == "train_samples_per_second") return done(t.samples_per_second, t.bound);
    if (metric == "mfu") return done(t.mfu, t.bound);
    return done(t.step_seconds, t.bound);
  }
  const InferencePerf inf = predict_inference(a, device, w, run, eff);
  if (metric == "step_seconds") return done(inf.total_seconds, inf.bound);
  if (metric == "ttft_seconds") return done(inf.ttft_seconds, inf.prefill_bound);
  if (metric == "tpot_seconds") return done(inf.tpot_seconds, inf.decode_bound);
  if (metric == "prefill_tokens_per_second") return done(inf.prefill_tokens_per_second, inf.prefill_bound);
  if (metric == "decode_tokens_per_second") {
    // With a stated prompt, published speeds are generated tokens over the whole generation time.
    const bool whole = setup->lengths_given;
    const double v =
        whole ? static_cast<double>(perf_output_tokens(w)) / inf.total_seconds : inf.decode_tokens_per_second;
    return done(v, inf.decode_bound);
  }
  if (metric == "throughput_tokens_per_second") {
    double v = 0;
    PerfBound bound = inf.bound;
    if (setup->batch_given) {
      v = inf.throughput_tokens_per_second;
    } else {
      perf::MemoryCache memory(*setup);
      auto verdict = memory.verdict(target);
      if (!verdict) return skip("memory: " + verdict.error().message);
      const int64_t max_batch = verdict->serving_max_batch;
      if (max_batch < 1) return skip("the model does not fit for serving on this target");
      const ServingPerf s = predict_serving(a, device, w, run, eff, max_batch, 0);
      v = s.max_throughput_tokens_per_second;
      p.note = "serving at the largest batch memory allows: " + std::to_string(max_batch);
    }
    return done(per_gpu ? v / gpus : v, bound);
  }
  return skip("metric '" + metric + "' is not a speed metric");
}

Result<PerfValidation> validate_perf(const Catalog& catalog) {
  GPUPLAN_TRY(answer, run_validation(catalog, "perf"));
  // The bound is held on the rows that shaped the model; held-out rows are reported, not held.
  const Json& s = answer["summary_by_design"]["used"];
  PerfValidation v;
  v.rows = answer["rows"];
  v.comparable = s["comparable_rows"].get<int>();
  v.skipped = s["skipped_rows"].get<int>();
  v.predicted = s["numeric_rows"].get<int>();
  v.within_25 = s["within_25_percent"].get<int>();
  v.within_10 = s["within_10_percent"].get<int>();
  v.median_abs_error_percent = s["median_error_percent"].get<double>();
  v.share_within_25 = s["within_25_percent_share"].get<double>();
  return v;
}

}  // namespace gpuplan::validate
