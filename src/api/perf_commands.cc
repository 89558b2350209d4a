// `perf`: how fast a workload runs on each target (inference, serving, training), with its error band
// and what bounds it. Formulas: docs/model.md, "Performance".
#include <algorithm>
#include <cmath>
#include <ctime>

#include "api/commands.h"
#include "api/fit_common.h"
#include "core/format.h"
#include "core/request.h"
#include "gpuplan/cancel.h"
#include "gpuplan/perf.h"
#include "perf/perf_calibration.h"
#include "perf/perf_request.h"

namespace gpuplan::api {

namespace {

// A rate predicted r: the measured rate lies in [r x band.low, r x band.high]; a time t: [t / high, t / low].
void band_rate(Json& low, Json& high, const char* key, double v, PerfBand b) {
  low[key] = sig(v * b.low);
  high[key] = sig(v * b.high);
}
void band_time(Json& low, Json& high, const char* key, double v, PerfBand b) {
  low[key] = sig(v / b.high);
  high[key] = sig(v / b.low);
}

Json efficiency_json(const PerfEfficiency& e) {
  return Json{{"gemm", e.gemm_peak_fraction},
              {"gemm_fp8", e.gemm_fp8_peak_fraction},
              {"gemm_half_intensity", e.gemm_half_intensity},
              {"dequant", e.dequant_gemm_fraction},
              {"attention", e.attention_peak_fraction},
              {"bandwidth", e.bandwidth_fraction},
              {"link", e.link_fraction},
              {"kernel_us", e.kernel_seconds * 1e6},
              {"step_ms", e.step_seconds >= 0 ? Json(e.step_seconds * 1e3) : Json("engine default")},
              {"overlap", e.training_overlap}};
}

// The efficiency with the per-precision curves a calibration set (none in the request's own).
Json calibrated_efficiency_json(const PerfEfficiency& e) {
  Json j = efficiency_json(e);
  for (size_t i = 0; i < e.precision_peak_fraction.size(); ++i) {
    if (e.precision_peak_fraction[i] <= 0) continue;
    const std::string name(precision_name(static_cast<Precision>(i)));
    j["gemm_" + name] = sig(e.precision_peak_fraction[i]);
    j["gemm_half_intensity_" + name] = sig(e.precision_half_intensity[i]);
  }
  return j;
}

// One target's prediction, with the setup it is made from.
struct TargetPrediction {
  const perf::PerfSetup& setup;
  const PerfDevice& device;
  const PerfRun& run;
  const perf::MemoryVerdict& verdict;
  const PerfEfficiency& eff;  // the request's, or the target's calibration on top of it
};

// One forward pass over the batch, no decode: a CNN (the step is the whole pass, in the throughput band)
// or an encoder (BERT: the step is the prefill, in the prefill band, with its tokens per second).
void single_pass_figures(const TargetPrediction& p, Json& row, Json& low, Json& high) {
  const perf::PerfSetup& s = p.setup;
  const InferencePerf inf = predict_inference(s.arch, p.device, s.workload, p.run, p.eff);
  const bool encoder = !s.arch.cnn;
  const double step_seconds = encoder ? inf.ttft_seconds : inf.total_seconds;
  const PerfBand b = perf_band(encoder ? PerfMetricKind::kPrefill : PerfMetricKind::kThroughput);
  const double samples_per_second = static_cast<double>(s.workload.batch) / step_seconds;
  row["bound"] = perf_bound_name(encoder ? inf.prefill_bound : inf.bound);
  row["step_seconds"] = sig(step_seconds);
  if (encoder) row["prefill_tokens_per_second"] = sig(inf.prefill_tokens_per_second);
  row["samples_per_second"] = sig(samples_per_second);
  band_time(low, high, "step_seconds", step_seconds, b);
  if (encoder) band_rate(low, high, "prefill_tokens_per_second", inf.prefill_tokens_per_second, b);
  band_rate(low, high, "samples_per_second", samples_per_second, b);
}

// Continuous batching at the largest batch memory allows (and at the request rate), over the replicas.
Json serving_figures(const TargetPrediction& p) {
  const perf::PerfSetup& s = p.setup;
  if (p.verdict.serving_max_batch <= 0) return nullptr;
  // GPUs beyond tp x pp are replicas: each serves its share of the requests.
  const double replicas = std::max(1, p.run.dp);
  const ServingPerf sp =
      predict_serving(s.arch, p.device, s.workload, p.run, p.eff, p.verdict.serving_max_batch, s.rate / replicas);
  Json sj{{"replicas", p.run.dp},
          {"max_batch", sp.max_batch},
          {"max_tokens_per_second", sig(replicas * sp.max_throughput_tokens_per_second)},
          {"max_requests_per_second", sig(replicas * sp.max_rate_requests_per_second)}};
  if (s.rate > 0) {
    sj["rate_requests_per_second"] = s.rate;
    sj["saturated"] = sp.saturated;
    sj["mean_batch"] = sig(sp.mean_batch);
    sj["ttft_seconds"] = sig(sp.ttft_seconds);
    sj["tpot_seconds"] = sig(sp.tpot_seconds);
    sj["latency_seconds"] = sig(sp.latency_seconds);
    sj["tokens_per_second"] = sig(replicas * sp.throughput_tokens_per_second);
  }
  return sj;
}

// A decoder's inference: prefill, decode, the static batch's throughput, and serving.
void decoder_inference_figures(const TargetPrediction& p, Json& row, Json& low, Json& high) {
  const perf::PerfSetup& s = p.setup;
  const InferencePerf inf = predict_inference(s.arch, p.device, s.workload, p.run, p.eff);
  row["bound"] = perf_bound_name(inf.bound);
  row["prefill_bound"] = perf_bound_name(inf.prefill_bound);
  row["decode_bound"] = perf_bound_name(inf.decode_bound);
  row["ttft_seconds"] = sig(inf.ttft_seconds);
  row["tpot_seconds"] = sig(inf.tpot_seconds);
  row["decode_tokens_per_second"] = sig(inf.decode_tokens_per_second);
  row["prefill_tokens_per_second"] = sig(inf.prefill_tokens_per_second);
  row["tokens_per_second"] = sig(inf.throughput_tokens_per_second);
  row["batch_decode_tokens_per_second"] = sig(inf.batch_decode_tokens_per_second);
  row["total_seconds"] = sig(inf.total_seconds);
  const PerfBand pre = perf_band(PerfMetricKind::kPrefill), dec = perf_band(PerfMetricKind::kDecode),
                 thr = perf_band(PerfMetricKind::kThroughput);
  band_time(low, high, "ttft_seconds", inf.ttft_seconds, pre);
  band_time(low, high, "tpot_seconds", inf.tpot_seconds, dec);
  band_rate(low, high, "decode_tokens_per_second", inf.decode_tokens_per_second, dec);
  band_rate(low, high, "prefill_tokens_per_second", inf.prefill_tokens_per_second, pre);
  band_rate(low, high, "tokens_per_second", inf.throughput_tokens_per_second, thr);
  row["serving"] = serving_figures(p);
}

// Training: one optimizer step, its breakdown, and the time to train `train_tokens`.
void training_figures(const TargetPrediction& p, Json& row, Json& low, Json& high) {
  const perf::PerfSetup& s = p.setup;
  const bool cnn = s.arch.cnn;
  const TrainPerf tr = predict_training(s.arch, p.device, s.workload, p.run, p.eff);
  const PerfBand b = perf_band(PerfMetricKind::kTraining);
  row["bound"] = perf_bound_name(tr.bound);
  row["step_seconds"] = sig(tr.step_seconds);
  row["tokens_per_second"] = cnn ? Json(nullptr) : sig(tr.tokens_per_second);
  row["samples_per_second"] = sig(tr.samples_per_second);
  row["mfu"] = sig(tr.mfu);
  row["data_parallel"] = p.run.dp;
  row["breakdown"] = Json{{"compute_seconds", sig(tr.compute_seconds)},
                          {"bubble_seconds", sig(tr.bubble_seconds)},
                          {"communication_seconds", sig(tr.communication_seconds)},
                          {"optimizer_seconds", sig(tr.optimizer_seconds)}};
  band_time(low, high, "step_seconds", tr.step_seconds, b);
  if (!cnn) band_rate(low, high, "tokens_per_second", tr.tokens_per_second, b);
  band_rate(low, high, "samples_per_second", tr.samples_per_second, b);
  band_rate(low, high, "mfu", tr.mfu, b);
  if (s.train_tokens > 0) {
    const double per_second = cnn ? tr.samples_per_second : tr.tokens_per_second;
    row["train_seconds"] = sig(s.train_tokens / per_second);
    band_time(low, high, "train_seconds", s.train_tokens / per_second, b);
  }
}

// No speed for a target that does not run it: every figure null, with the reason.
void null_figures(Json& row, const perf::MemoryVerdict& verdict) {
  for (auto it = row.begin(); it != row.end(); ++it) {
    const std::string& k = it.key();
    if (k == "target" || k == "name" || k == "count" || k == "fits") continue;
    if (k == "low" || k == "high" || k == "breakdown") {
      for (auto jt = it.value().begin(); jt != it.value().end(); ++jt) jt.value() = nullptr;
    } else {
      it.value() = nullptr;
    }
  }
  if (verdict.refusal) {
    row["refusal"] = refusal_code_name(verdict.refusal->code);
    row["reason"] = verdict.refusal->message;
  } else {
    row["reason"] = out_of_memory_reason(verdict.total_bytes, verdict.limit_bytes);
  }
}

// One target's row: its figures for the workload's kind, with the error band, or nulls and why not.
Result<Json> target_row(const perf::PerfSetup& setup, perf::MemoryCache& memory, const Target& t,
                        const perf::CalibrationSet& calibrations, Json& warnings) {
  const PerfDevice device = perf_device(t);
  const PerfRun run = perf::run_for(setup, device, t.count);
  GPUPLAN_TRY(verdict, memory.verdict(t));
  GPUPLAN_TRY(calibrated, perf::calibrate_target(calibrations, t, device, setup.efficiency));
  Json row{{"target", t.id()}, {"name", t.name()}, {"count", t.count}, {"fits", verdict.fits}};
  Json low = Json::object(), high = Json::object();
  const TargetPrediction p{setup, device, run, verdict, calibrated ? calibrated->efficiency : setup.efficiency};
  if (setup.workload.task != Task::kInfer) {
    training_figures(p, row, low, high);
  } else if (setup.arch.cnn || setup.arch.encoder) {
    single_pass_figures(p, row, low, high);
  } else {
    decoder_inference_figures(p, row, low, high);
  }
  row["low"] = std::move(low);
  row["high"] = std::move(high);
  if (!verdict.fits) null_figures(row, verdict);
  if (calibrated) {
    Json info = calibrated->info;
    info["efficiency"] = calibrated_efficiency_json(calibrated->efficiency);
    row["calibration"] = std::move(info);
    for (const auto& w : calibrated->warnings) {
      if (std::find(warnings.begin(), warnings.end(), Json(w)) == warnings.end()) warnings.push_back(w);
    }
  }
  return row;
}

// The workload as perf read it: fit's reading, with the inference lengths, rate and tokens to train.
Json perf_workload_json(const perf::PerfSetup& setup) {
  const Workload& wl = setup.workload;
  Json wj = workload_json(wl);
  if (wl.task == Task::kInfer) {
    wj["input_tokens"] = perf_input_tokens(wl);
    wj["output_tokens"] = perf_output_tokens(wl);
  }
  if (setup.rate > 0) wj["rate"] = setup.rate;
  if (setup.train_tokens > 0) wj["train_tokens"] = setup.train_tokens;
  return wj;
}

Result<Json> perf_command(const Context& ctx, const Json& body) {
  GPUPLAN_CHECK(Request(body, "perf").check_keys());
  GPUPLAN_TRY(setup, perf::parse_perf_setup(body));
  const Workload& wl = setup.workload;
  GPUPLAN_TRY(targets, fit_targets(*ctx.catalog, body, wl.gpus()));
  GPUPLAN_TRY(calibrations, perf::parse_calibration_set(body, static_cast<int64_t>(std::time(nullptr))));
  GPUPLAN_CHECK(perf::check_calibrations_used(calibrations, targets));
  perf::MemoryCache memory(setup);
  Json rows = Json::array();
  Json warnings = Json::array();
  for (const Target& given : targets) {
    if (cancel_requested()) return cancelled_error();
    if (given.count < wl.tp * wl.pp) {
      if (!body.contains("gpu")) continue;
      return usage_error("a target of " + std::to_string(given.count) +
                             " GPUs cannot hold tp x pp = " + std::to_string(wl.tp * wl.pp) +
                             "; give --gpu NAMExN with N >= " + std::to_string(wl.tp * wl.pp),
                         "gpu");
    }
    auto row = target_row(setup, memory, Target::linked(given.ref, given.count), calibrations, warnings);
    if (!row) return row.error();
    rows.push_back(std::move(row).value());
  }
  Json result;
  result["model"] = model_json(*wl.model);
  result["workload"] = perf_workload_json(setup);
  result["efficiency"] = efficiency_json(setup.efficiency);
  result["targets"] = std::move(rows);
  if (!warnings.empty()) result["warnings"] = std::move(warnings);
  return result;
}

}  // namespace

void register_perf_commands(CommandTable& table) {
  table.push_back(Command{"perf",
                          "How fast? Time to first token, per output token, throughput, serving, training step and MFU",
                          perf_command});
}

}  // namespace gpuplan::api
