#include "validate/perf_rows.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>

#include "catalog/yaml_util.h"
#include "gpuplan/embedded.h"
#include "perf/perf_request.h"

namespace gpuplan::validate {

namespace {

// Seconds-based prediction -> the row's unit.
Result<double> from_base(double v, const std::string& unit) {
  if (unit == "seconds" || unit == "tokens_per_second" || unit == "samples_per_second" || unit == "TFLOPS" ||
      unit == "GB/s") {
    return v;
  }
  if (unit == "ms") return v * 1e3;
  if (unit == "percent") return v * 100;
  return invalid_data_error("unit '" + unit + "' is not a speed unit", "unit");
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
    auto v = from_base(base, unit);
    if (!v) return skip(v.error().message);
    p.ok = true;
    p.value = *v;
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

Result<std::vector<Json>> perf_rows() {
  std::string_view text;
  for (const auto& f : embedded_files()) {
    if (f.path == "validation/perf.yaml") text = f.contents;
  }
  if (text.empty()) return invalid_data_error("validation/perf.yaml is not embedded", "validation/perf.yaml");
  std::vector<Json> rows;
  try {
    const YAML::Node root = YAML::Load(std::string(text));
    for (const auto& r : root["rows"]) {
      auto row = yaml::to_json(r, "validation/perf.yaml");
      if (!row) return row.error();
      rows.push_back(std::move(*row));
    }
  } catch (const YAML::Exception& e) {
    return invalid_data_error(std::string("validation/perf.yaml: ") + e.what(), "validation/perf.yaml");
  }
  return rows;
}

Result<PerfValidation> validate_perf(const Catalog& catalog) {
  auto rows = perf_rows();
  if (!rows) return rows.error();
  PerfValidation v;
  std::vector<double> errors;
  for (const Json& row : *rows) {
    const PerfRowPrediction p = predict_perf_row(catalog, row);
    const bool comparable = row.value("comparable", true);
    const double measured = row.value("measured", 0.0);
    Json out{{"id", row.value("id", "")},     {"kind", "perf"},           {"metric", row.value("metric", "")},
             {"unit", row.value("unit", "")}, {"comparable", comparable}, {"measured", measured}};
    if (!p.ok) {
      out["status"] = "skipped";
      out["note"] = p.note;
      out["predicted"] = nullptr;
      out["error_percent"] = nullptr;
      if (comparable) ++v.skipped;
    } else {
      const double err = measured != 0 ? (p.value - measured) / measured * 100 : 0;
      out["status"] = "predicted";
      out["predicted"] = std::round(p.value * 1e4) / 1e4;
      out["error_percent"] = std::round(err * 100) / 100;
      out["bound"] = perf_bound_name(p.bound);
      if (!p.note.empty()) out["note"] = p.note;
      if (comparable) {
        ++v.predicted;
        errors.push_back(std::fabs(err));
        v.within_25 += std::fabs(err) <= 25 ? 1 : 0;
        v.within_10 += std::fabs(err) <= 10 ? 1 : 0;
      }
    }
    out["source"] = row.value("source", "");
    v.comparable += comparable ? 1 : 0;
    v.rows.push_back(std::move(out));
  }
  std::sort(errors.begin(), errors.end());
  if (!errors.empty()) {
    const size_t n = errors.size();
    v.median_abs_error_percent = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
    v.share_within_25 = static_cast<double>(v.within_25) / static_cast<double>(n);
  }
  return v;
}

}  // namespace gpuplan::validate
