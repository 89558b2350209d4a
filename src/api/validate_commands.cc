// `validate`: predicts every published measurement under validation/ and reports the error.
// Kinds plug in through kKinds: each names its file and a function that predicts one row. The memory
// kind is here; the performance model adds "perf" with validation/perf.yaml.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>

#include "api/commands.h"
#include "api/fit_common.h"
#include "catalog/yaml_util.h"
#include "core/request.h"
#include "gpuplan/cancel.h"
#include "gpuplan/embedded.h"
#include "gpuplan/memory.h"
#include "validate/perf_rows.h"

namespace gpuplan::api {

namespace {

// A row's value in the unit the model predicts (bytes, tokens, or 0/1 for verdicts).
struct Prediction {
  bool ok = false;
  double value = 0;
  std::string note;  // why not predicted, or what was compared
};

// Converts a published number to bytes or tokens.
Result<double> to_base_unit(double v, const std::string& unit) {
  if (unit == "bytes" || unit == "tokens" || unit == "bool") return v;
  if (unit == "GiB") return v * kBytesPerGib;
  if (unit == "GB") return v * kBytesPerGb;
  if (unit == "MiB") return v * kBytesPerMib;
  if (unit == "MB") return v * 1e6;
  // Speed units (validation/perf.yaml): seconds, rates, fractions.
  if (unit == "seconds" || unit == "tokens_per_second" || unit == "samples_per_second" || unit == "TFLOPS" ||
      unit == "GB/s") {
    return v;
  }
  if (unit == "ms") return v * 1e-3;
  if (unit == "percent") return v / 100;
  return invalid_data_error("unit '" + unit + "' is not a known unit", "unit");
}

Prediction predict_memory_row(const Context& ctx, const Json& row) {
  Prediction p;
  const std::string metric = row.value("metric", "");
  Json request = row.contains("workload") ? row["workload"] : Json::object();
  std::string gpu;
  if (request.contains("gpu")) {
    gpu = request["gpu"].is_string() ? request["gpu"].get<std::string>() : "";
    request.erase("gpu");
  }
  auto w = parse_workload(request);
  if (!w) {
    p.note = "workload: " + w.error().message;
    return p;
  }
  auto prepared = prepare(*w);
  if (!prepared) {
    p.note = prepared.error().message;
    return p;
  }
  if (!gpu.empty()) {
    // A row the refusal rules reject did not run what it says, or a rule is wrong: skip it, with why.
    if (auto ref = ctx.catalog->resolve(gpu)) {
      if (auto r = refusal(*w, Target::linked(*ref, w->gpus())); r && metric != "fits") {
        p.note = "refused: " + r->message;
        return p;
      }
    }
  }
  const MemoryBreakdown m = estimate_memory(*prepared);
  if (metric == "weights_bytes") {
    p.ok = true;
    p.value = m.weights_bytes;
    return p;
  }
  // vLLM fills its share of the GPU with the KV pool, so what it holds depends on the GPU.
  const bool vllm_holds = w->engine == Engine::kVllm &&
                          (metric == "kv_cache_bytes" || metric == "total_bytes" || metric == "reserved_bytes");
  const bool needs_target =
      metric == "fits" || metric == "max_context" || metric == "max_batch" || metric == "kv_cache_tokens" || vllm_holds;
  TargetFit f;
  if (needs_target) {
    if (gpu.empty()) {
      p.note = "no gpu given";
      return p;
    }
    auto ref = ctx.catalog->resolve(gpu);
    if (!ref) {
      p.note = "gpu: " + ref.error().message;
      return p;
    }
    const Target t = Target::linked(*ref, w->gpus());
    f = fit_target(*prepared, t);
  }
  p.ok = true;
  const std::string means = row.value("means", "");
  const bool nvidia_smi = means.find("nvidia-smi") != std::string::npos;
  if (vllm_holds && metric != "kv_cache_bytes") {
    // The pool takes what the budget leaves: PyTorch holds weights + pool + the profile's cached
    // activations; nvidia-smi adds the CUDA context and communication buffers.
    const double outside_torch = m.cuda_context_bytes + m.communication_bytes;
    const double torch_held = f.kv_pool_bytes + (m.total_bytes - m.kv_cache_bytes) - outside_torch;
    p.value = metric == "total_bytes" ? torch_held - m.allocator_slack_bytes
                                      : (nvidia_smi ? torch_held + outside_torch : torch_held);
  } else if (metric == "total_bytes") {
    p.value = m.allocated_bytes();
  } else if (metric == "reserved_bytes") {
    // nvidia-smi's "used" also holds the CUDA context and communication buffers.
    p.value = nvidia_smi ? m.total_bytes : m.reserved_bytes();
  } else if (metric == "kv_cache_bytes") {
    p.value = w->engine == Engine::kVllm ? f.kv_pool_bytes : m.kv_cache_bytes;
  } else if (metric == "kv_cache_tokens") {
    p.value = static_cast<double>(f.kv_pool_tokens);
  } else if (metric == "max_context") {
    p.value = static_cast<double>(f.max_context);
  } else if (metric == "max_batch") {
    p.value = static_cast<double>(f.max_batch);
  } else if (metric == "fits") {
    p.value = f.fits ? 1 : 0;
  } else {
    p.ok = false;
    p.note = "metric '" + metric + "' is not a memory metric";
  }
  return p;
}

// The performance model predicts in the row's unit; the summary compares in base units.
Prediction predict_perf_row(const Context& ctx, const Json& row) {
  const validate::PerfRowPrediction p = validate::predict_perf_row(*ctx.catalog, row);
  Prediction out;
  out.ok = p.ok;
  out.note =
      p.ok ? std::string("bound: ") + std::string(perf_bound_name(p.bound)) + (p.note.empty() ? "" : "; " + p.note)
           : p.note;
  if (p.ok) {
    auto factor = to_base_unit(1.0, row.value("unit", ""));
    if (!factor) {
      out.ok = false;
      out.note = factor.error().message;
    } else {
      out.value = p.value * *factor;
    }
  }
  return out;
}

struct Kind {
  const char* name;
  const char* file;
  Prediction (*predict)(const Context&, const Json&);
};
const Kind kKinds[] = {{"memory", "validation/memory.yaml", predict_memory_row},
                       {"perf", "validation/perf.yaml", predict_perf_row}};

std::string_view embedded_text(std::string_view path) {
  for (const auto& f : embedded_files()) {
    if (f.path == path) return f.contents;
  }
  return {};
}

double round_to(double v, int digits) {
  const double s = std::pow(10.0, digits);
  return std::round(v * s) / s;
}

// Summary over comparable rows (of one kind, or all when `kind` is empty): numeric rows by error,
// verdict rows by being right.
Json summarize(const Json& rows, const std::string& kind) {
  Json sel = Json::array();
  for (const auto& r : rows) {
    if (kind.empty() || r["kind"] == kind) sel.push_back(r);
  }
  int numeric = 0, within10 = 0, within25 = 0, verdicts = 0, right = 0, skipped = 0, comparable = 0;
  double max_err = 0;
  std::string max_id;
  std::vector<double> errs;
  for (const auto& r : sel) {
    if (!r["comparable"].get<bool>()) continue;
    ++comparable;
    if (r["status"] == "skipped") {
      ++skipped;
      continue;
    }
    if (r.contains("verdict_right")) {
      ++verdicts;
      right += r["verdict_right"].get<bool>() ? 1 : 0;
      continue;
    }
    if (r["error_percent"].is_null()) continue;
    const double e = std::fabs(r["error_percent"].get<double>());
    ++numeric;
    within10 += e <= 10 ? 1 : 0;
    within25 += e <= 25 ? 1 : 0;
    errs.push_back(e);
    if (e > max_err) max_err = e, max_id = r["id"].get<std::string>();
  }
  std::sort(errs.begin(), errs.end());
  const double median = errs.empty() ? 0 : errs[errs.size() / 2];
  return Json{{"rows", sel.size()},
              {"comparable_rows", comparable},
              {"skipped_rows", skipped},
              {"numeric_rows", numeric},
              {"within_10_percent", within10},
              {"within_10_percent_share", numeric ? round_to(static_cast<double>(within10) / numeric, 4) : 0.0},
              {"within_25_percent", within25},
              {"within_25_percent_share", numeric ? round_to(static_cast<double>(within25) / numeric, 4) : 0.0},
              {"median_error_percent", round_to(median, 2)},
              {"max_error_percent", round_to(max_err, 2)},
              {"max_error_row", max_id},
              {"verdict_rows", verdicts},
              {"verdicts_right", right},
              {"verdict_accuracy", verdicts ? round_to(static_cast<double>(right) / verdicts, 4) : 1.0}};
}

Result<Json> validate(const Context& ctx, const Json& body) {
  Request req(body);
  GPUPLAN_CHECK(Request(body, "validate").check_keys());
  auto kind = Request(body, "validate").text("kind");
  if (!kind) return kind.error();
  Json rows = Json::array();
  Json kinds = Json::array();
  bool matched = false;
  for (const auto& k : kKinds) {
    if (!kind->empty() && *kind != k.name) continue;
    matched = true;
    kinds.push_back(k.name);
    const std::string_view text = embedded_text(k.file);
    if (text.empty()) continue;
    YAML::Node root;
    try {
      root = YAML::Load(std::string(text));
    } catch (const YAML::Exception& e) {
      return invalid_data_error(std::string(k.file) + ": " + e.what(), k.file);
    }
    for (const auto& rn : root["rows"]) {
      if (cancel_requested()) return cancelled_error();
      auto converted = yaml::to_json(rn, k.file);
      if (!converted) return converted.error();
      const Json row = std::move(*converted);
      Json out{{"id", row.value("id", "")},
               {"kind", k.name},
               {"metric", row.value("metric", "")},
               {"unit", row.value("unit", "")},
               {"comparable", row.value("comparable", true)}};
      if (row.contains("not_comparable_because")) out["not_comparable_because"] = row["not_comparable_because"];
      const std::string unit = row.value("unit", "");
      double measured = 0;
      if (row.contains("measured") && row["measured"].is_boolean())
        measured = row["measured"].get<bool>() ? 1 : 0;
      else if (row.contains("measured") && row["measured"].is_number())
        measured = row["measured"].get<double>();
      out["measured"] = row.contains("measured") ? row["measured"] : Json(nullptr);
      const Prediction pr = k.predict(ctx, row);
      auto base = to_base_unit(measured, unit);
      if (!pr.ok || !base) {
        out["status"] = "skipped";
        out["note"] = pr.ok ? base.error().message : pr.note;
        out["predicted"] = nullptr;
        out["error_percent"] = nullptr;
        rows.push_back(std::move(out));
        continue;
      }
      out["status"] = "predicted";
      if (unit == "bool") {
        out["predicted"] = pr.value > 0.5;
        out["verdict_right"] = (pr.value > 0.5) == (*base > 0.5);
        out["error_percent"] = nullptr;
      } else {
        const double factor = to_base_unit(1.0, unit).value();
        const double predicted = pr.value / factor;
        out["predicted"] = round_to(predicted, 4);
        out["error_percent"] = *base != 0 ? Json(round_to((pr.value - *base) / *base * 100.0, 2)) : Json(nullptr);
      }
      if (!pr.note.empty()) out["note"] = pr.note;
      out["source"] = row.value("source", "");
      rows.push_back(std::move(out));
    }
  }
  if (!matched) return usage_error("unknown kind '" + *kind + "'; kinds: memory, perf", "kind");

  Json summary = summarize(rows, "");
  Json by_kind = Json::object();
  for (const auto& k : kinds) by_kind[k.get<std::string>()] = summarize(rows, k.get<std::string>());
  return Json{{"kinds", kinds}, {"rows", rows}, {"summary", summary}, {"summary_by_kind", by_kind}};
}

}  // namespace

void register_validate_commands(CommandTable& table) { table.push_back(Command{"validate", validate}); }

}  // namespace gpuplan::api
