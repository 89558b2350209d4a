// `bench` and `bench.check` (issue #16): the measurement run (src/bench/) and the check of its file.
#include <algorithm>

#include "api/commands.h"
#include "bench/bench_internal.h"
#include "core/request.h"
#include "gpuplan/bench.h"

namespace gpuplan::api {

namespace {

Json report_json(const Catalog& catalog, const bench::BenchReport& r, const std::string& out) {
  // The datasheet figures the table sets each measurement against ("92 % of the bf16 dense peak").
  Json peaks = Json::object();
  Json memory_peak = nullptr;
  if (r.calibration.device.catalog_id) {
    if (auto ref = catalog.resolve(*r.calibration.device.catalog_id); ref) {
      const Target t{*ref, 1, Link::kPcie};
      for (Precision p : {Precision::kFp64, Precision::kFp32, Precision::kTf32, Precision::kBf16, Precision::kFp16,
                          Precision::kFp8, Precision::kInt8}) {
        if (auto v = t.peak_tflops(p)) peaks[std::string(precision_name(p))] = *v;
      }
      memory_peak = t.memory_bandwidth_gbps();
    }
  }
  Json errors = Json::array();
  for (const auto& e : r.model_errors) {
    errors.push_back({{"what", e.what},
                      {"points", e.points},
                      {"median_error", e.median_error},
                      {"max_error", e.max_error},
                      {"emax", e.emax},
                      {"i_half", e.i_half},
                      {"model_at_fault", bench::model_at_fault(e)}});
  }
  return Json{{"calibration", bench::calibration_json(r.calibration)},
              {"model_errors", std::move(errors)},
              {"elapsed_seconds", r.elapsed_seconds},
              {"dense_peak_tflops", std::move(peaks)},
              {"memory_peak_gbps", memory_peak},
              {"out", out.empty() ? Json(nullptr) : Json(out)}};
}

Result<Json> bench_run(const Context& ctx, const Json& body) {
  const Request req(body, "bench");
  GPUPLAN_CHECK(req.check_keys());
  bench::BenchOptions o;
  GPUPLAN_TRY(backend, req.text("backend"));
  GPUPLAN_TRY(fake_gpu, req.text("fake_gpu"));
  GPUPLAN_TRY(device, req.whole("device"));
  GPUPLAN_TRY(quick, req.boolean("quick"));
  GPUPLAN_TRY(budget, req.real("budget", quick ? bench::quick_default_budget_seconds() : 170.0));
  GPUPLAN_TRY(precisions, req.words("precisions"));
  GPUPLAN_TRY(allow_shared, req.boolean("allow_shared"));
  GPUPLAN_TRY(seed, req.whole("seed"));
  GPUPLAN_TRY(noise, req.real("fake_noise", 0.005));
  GPUPLAN_TRY(faults, req.words("fake_faults"));
  GPUPLAN_TRY(created_at, req.text("created_at"));
  GPUPLAN_TRY(out, req.text("out"));
  o.backend = backend;
  o.fake_gpu = fake_gpu;
  o.device = static_cast<int>(device);
  o.quick = quick;
  o.budget_seconds = budget;
  for (const std::string& p : precisions) {
    GPUPLAN_TRY(prec, parse_precision(p));
    if (std::find(o.precisions.begin(), o.precisions.end(), prec) == o.precisions.end()) o.precisions.push_back(prec);
  }
  o.allow_shared = allow_shared;
  o.seed = static_cast<uint64_t>(seed);
  o.faults.noise = noise;
  // The fake's faults (docs/bench.md, "The fake GPU"): the clock drops to 80 % after a fifth of the budget.
  constexpr double kThrottleAtBudgetShare = 0.2;
  constexpr int kBusyProcesses = 2;
  for (const std::string& f : faults) {
    if (f == "throttle") o.faults.throttle_after_seconds = budget * kThrottleAtBudgetShare;
    if (f == "no-fp8") o.faults.no_fp8 = true;
    if (f == "no-int8") o.faults.no_int8 = true;
    if (f == "no-nvml") o.faults.no_nvml = true;
    if (f == "busy") o.faults.other_processes = kBusyProcesses;
  }
  if (!faults.empty() && backend != "fake") return usage_error("--fake-faults needs --backend fake", "fake_faults");
  o.created_at = created_at;
  o.stop = &bench::interrupt_flag();
  GPUPLAN_TRY(report, bench::run_bench(*ctx.catalog, o));
  return report_json(*ctx.catalog, report, out);
}

Result<Json> bench_check(const Context& ctx, const Json& body) {
  const Request req(body, "bench.check");
  GPUPLAN_CHECK(req.check_keys());
  if (!req.has("file")) return usage_error("give the calibration FILE `gpuplan bench --out FILE` wrote", "file");
  const Json& v = req.raw("file");
  std::string name = "file", text;
  if (v.is_string()) {
    text = v.get<std::string>();
  } else if (v.is_object()) {
    text = v.dump();
  } else if (v.is_array() && v.size() == 1 && v[0].is_object() && v[0].contains("text") && v[0]["text"].is_string() &&
             (!v[0].contains("name") || v[0]["name"].is_string())) {
    if (v[0].contains("name")) name = v[0]["name"].get<std::string>();
    text = v[0]["text"].get<std::string>();
  } else {
    return usage_error("'file' must be the file's JSON text, an object, or one file [{name, text}]", "file");
  }
  GPUPLAN_TRY(calibration, bench::read_calibration(text));
  GPUPLAN_TRY(findings, bench::check_calibration(*ctx.catalog, calibration));
  Json list = Json::array();
  for (const auto& f : findings) list.push_back({{"point", f.point}, {"problem", f.problem}});
  return Json{{"ok", findings.empty()},
              {"file", name},
              {"catalog_id", *calibration.device.catalog_id},
              {"points", calibration.gemm.size() + calibration.memory.size() + calibration.transfer.size()},
              {"findings", std::move(list)}};
}

}  // namespace

void register_bench_commands(CommandTable& table) {
  table.push_back(
      {"bench", "Measure a GPU (GEMM per precision, memory, PCIe, launch, power) into a calibration file", bench_run});
  table.push_back(
      {"bench.check",
       "Check a calibration file against the catalog's dense peaks and sanity floors; exit 14 when it fails",
       bench_check});
}

}  // namespace gpuplan::api
