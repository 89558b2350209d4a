// `perf`: how fast a workload runs on each target (inference, serving, training), with its error band
// and what bounds it. Formulas: docs/model.md, "Performance".
#include <algorithm>
#include <cmath>

#include "api/commands.h"
#include "api/fit_common.h"
#include "core/request.h"
#include "gpuplan/cancel.h"
#include "gpuplan/perf.h"
#include "perf/perf_request.h"

namespace gpuplan::api {

namespace {

// Four significant digits: the model is good to a few percent at best.
Json sig(double v) {
  if (!std::isfinite(v)) return nullptr;
  if (v == 0) return 0.0;
  const double scale = std::pow(10.0, 3 - static_cast<int>(std::floor(std::log10(std::fabs(v)))));
  return std::round(v * scale) / scale;
}

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

Result<Json> perf_command(const Context& ctx, const Json& body) {
  GPUPLAN_CHECK(Request(body, "perf").check_keys());
  auto setup = perf::parse_perf_setup(body);
  if (!setup) return setup.error();
  const Workload& wl = setup->workload;
  auto targets = fit_targets(*ctx.catalog, body, wl.gpus());
  if (!targets) return targets.error();
  perf::MemoryCache memory(*setup);
  const PerfArch& a = setup->arch;
  const bool infer = wl.task == Task::kInfer;
  const bool cnn = a.cnn;

  Json rows = Json::array();
  for (const Target& given : *targets) {
    if (cancel_requested()) return cancelled_error();
    if (given.count < wl.tp * wl.pp) {
      if (!body.contains("gpu")) continue;
      return usage_error("a target of " + std::to_string(given.count) +
                             " GPUs cannot hold tp x pp = " + std::to_string(wl.tp * wl.pp) +
                             "; give --gpu NAMExN with N >= " + std::to_string(wl.tp * wl.pp),
                         "gpu");
    }
    const Target t = Target::linked(given.ref, given.count);
    const PerfDevice device = perf_device(t);
    const PerfWorkload w = perf::workload_for(*setup, device, t.count);
    auto verdict = memory.verdict(t);
    if (!verdict) return verdict.error();
    Json row{{"target", t.id()}, {"name", t.name()}, {"count", t.count}, {"fits", verdict->fits}};
    Json low = Json::object(), high = Json::object();
    if (infer && cnn) {
      const InferencePerf inf = predict_inference(a, device, w, setup->efficiency);
      const PerfBand b = perf_band(PerfMetricKind::kThroughput);
      row["bound"] = perf_bound_name(inf.bound);
      row["step_seconds"] = sig(inf.total_seconds);
      row["samples_per_second"] = sig(static_cast<double>(w.batch) / inf.total_seconds);
      band_time(low, high, "step_seconds", inf.total_seconds, b);
      band_rate(low, high, "samples_per_second", static_cast<double>(w.batch) / inf.total_seconds, b);
    } else if (infer && a.encoder) {
      // An encoder (BERT) runs one forward pass over the batch: no decode.
      const InferencePerf inf = predict_inference(a, device, w, setup->efficiency);
      const PerfBand b = perf_band(PerfMetricKind::kPrefill);
      row["bound"] = perf_bound_name(inf.prefill_bound);
      row["step_seconds"] = sig(inf.ttft_seconds);
      row["prefill_tokens_per_second"] = sig(inf.prefill_tokens_per_second);
      row["samples_per_second"] = sig(static_cast<double>(w.batch) / inf.ttft_seconds);
      band_time(low, high, "step_seconds", inf.ttft_seconds, b);
      band_rate(low, high, "prefill_tokens_per_second", inf.prefill_tokens_per_second, b);
      band_rate(low, high, "samples_per_second", static_cast<double>(w.batch) / inf.ttft_seconds, b);
    } else if (infer) {
      const InferencePerf inf = predict_inference(a, device, w, setup->efficiency);
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
      if (verdict->serving_max_batch > 0) {
        // GPUs beyond tp x pp are replicas: each serves its share of the requests.
        const double replicas = std::max(1, w.dp);
        const ServingPerf s =
            predict_serving(a, device, w, setup->efficiency, verdict->serving_max_batch, setup->rate / replicas);
        Json sj{{"replicas", w.dp},
                {"max_batch", s.max_batch},
                {"max_tokens_per_second", sig(replicas * s.max_throughput_tokens_per_second)},
                {"max_requests_per_second", sig(replicas * s.max_rate_requests_per_second)}};
        if (setup->rate > 0) {
          sj["rate_requests_per_second"] = setup->rate;
          sj["saturated"] = s.saturated;
          sj["mean_batch"] = sig(s.mean_batch);
          sj["ttft_seconds"] = sig(s.ttft_seconds);
          sj["tpot_seconds"] = sig(s.tpot_seconds);
          sj["latency_seconds"] = sig(s.latency_seconds);
          sj["tokens_per_second"] = sig(replicas * s.throughput_tokens_per_second);
        }
        row["serving"] = std::move(sj);
      } else {
        row["serving"] = nullptr;
      }
    } else {
      const TrainPerf tr = predict_training(a, device, w, setup->efficiency);
      const PerfBand b = perf_band(PerfMetricKind::kTraining);
      row["bound"] = perf_bound_name(tr.bound);
      row["step_seconds"] = sig(tr.step_seconds);
      row["tokens_per_second"] = cnn ? Json(nullptr) : sig(tr.tokens_per_second);
      row["samples_per_second"] = sig(tr.samples_per_second);
      row["mfu"] = sig(tr.mfu);
      row["data_parallel"] = w.dp;
      row["breakdown"] = Json{{"compute_seconds", sig(tr.compute_seconds)},
                              {"bubble_seconds", sig(tr.bubble_seconds)},
                              {"communication_seconds", sig(tr.communication_seconds)},
                              {"optimizer_seconds", sig(tr.optimizer_seconds)}};
      band_time(low, high, "step_seconds", tr.step_seconds, b);
      if (!cnn) band_rate(low, high, "tokens_per_second", tr.tokens_per_second, b);
      band_rate(low, high, "samples_per_second", tr.samples_per_second, b);
      band_rate(low, high, "mfu", tr.mfu, b);
      if (setup->train_tokens > 0) {
        const double per_second = cnn ? tr.samples_per_second : tr.tokens_per_second;
        row["train_seconds"] = sig(setup->train_tokens / per_second);
        band_time(low, high, "train_seconds", setup->train_tokens / per_second, b);
      }
    }
    row["low"] = std::move(low);
    row["high"] = std::move(high);
    if (!verdict->fits) {
      // No speed for a target that does not run it: every figure null, with the reason.
      for (auto it = row.begin(); it != row.end(); ++it) {
        const std::string& k = it.key();
        if (k == "target" || k == "name" || k == "count" || k == "fits") continue;
        if (k == "low" || k == "high") {
          for (auto jt = it.value().begin(); jt != it.value().end(); ++jt) jt.value() = nullptr;
        } else if (k == "breakdown") {
          for (auto jt = it.value().begin(); jt != it.value().end(); ++jt) jt.value() = nullptr;
        } else {
          it.value() = nullptr;
        }
      }
      if (verdict->refusal) {
        row["refusal"] = refusal_code_name(verdict->refusal->code);
        row["reason"] = verdict->refusal->message;
      } else {
        row["reason"] = out_of_memory_reason(verdict->total_bytes, verdict->limit_bytes);
      }
    }
    rows.push_back(std::move(row));
  }
  Json result;
  result["model"] = model_json(*wl.model);
  Json wj = workload_json(wl);
  wj["engine"] = perf_engine_name(setup->perf.engine);
  if (infer) {
    wj["input_tokens"] = setup->perf.input_tokens;
    wj["output_tokens"] = setup->perf.output_tokens;
  }
  if (setup->rate > 0) wj["rate"] = setup->rate;
  if (setup->train_tokens > 0) wj["train_tokens"] = setup->train_tokens;
  result["workload"] = std::move(wj);
  result["efficiency"] = efficiency_json(setup->efficiency);
  result["targets"] = std::move(rows);
  return result;
}

}  // namespace

void register_perf_commands(CommandTable& table) { table.push_back(Command{"perf", perf_command}); }

}  // namespace gpuplan::api
