// `gpuplan bench` (issue #16) on the fake GPU: the curves a run recovers against the fake's truth, the
// stopping rule's outcomes, the budget, the calibration file's round trip and bounds, the faults (no fp8
// or int8, no NVML, a busy GPU, throttling, MIG), `bench check`, and the CUDA backend's absence here.
// Everything runs on the virtual clock: milliseconds each.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>

#include "agent/nvml.h"
#include "bench/bench_internal.h"
#include "bench/fake_gpu.h"
#include "bench/stopping.h"
#include "gpuplan/api.h"
#include "gpuplan/bench.h"

namespace gpuplan::bench {
namespace {

const Catalog& catalog() { return *Catalog::embedded(); }

struct Fixture {
  std::unique_ptr<FakeGpu> gpu;
  BenchReport report;
};

Fixture run_fake(const std::string& target, double budget, FakeFaults faults = {}, bool quick = false,
                 bool allow_shared = false, uint64_t seed = 1) {
  Fixture f;
  auto gpu = FakeGpu::open(catalog(), target, faults, seed);
  EXPECT_TRUE(gpu.ok()) << (gpu.ok() ? "" : gpu.error().message);
  if (!gpu.ok()) return f;
  f.gpu = std::move(*gpu);
  BenchOptions o;
  o.backend = "fake";
  o.fake_gpu = target;
  o.budget_seconds = budget;
  o.quick = quick;
  o.allow_shared = allow_shared;
  o.faults = faults;
  o.created_at = "2026-12-01T23:00:00Z";
  auto r = run_bench_on(catalog(), o, *f.gpu);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  if (r.ok()) f.report = std::move(*r);
  return f;
}

double rel(double a, double b) { return std::abs(a - b) / b; }

TEST(Bench, RecoveredCurvesAreWithinTwoPercentOfTheFakesTruth) {
  Fixture f = run_fake("h100-sxm5-80gb", 170);
  const Calibration& c = f.report.calibration;
  ASSERT_GT(c.gemm.size(), 100u);
  for (const GemmPoint& g : c.gemm) {
    const double truth = f.gpu->gemm_tflops_truth(parse_precision(g.precision).value(), g.m, g.n, g.k);
    EXPECT_LT(rel(g.tflops_sustained, truth), 0.02) << g.precision << " " << g.m << "x" << g.n << "x" << g.k;
    EXPECT_GE(g.tflops_burst, g.tflops_sustained);
    EXPECT_TRUE(g.checked);
  }
  ASSERT_GE(c.memory.size(), 18u);
  for (const MemoryPoint& m : c.memory) {
    EXPECT_LT(rel(m.gbps_sustained, f.gpu->memory_gbps_truth(MemKernel::kRead, m.bytes)), 0.02) << m.kernel << m.bytes;
  }
  ASSERT_EQ(c.transfer.size(), 8u);
  for (const TransferPoint& t : c.transfer) {
    EXPECT_LT(rel(t.gbps, f.gpu->transfer_gbps_truth(t.pinned, t.bytes)), 0.02) << t.direction << t.bytes;
  }
  ASSERT_TRUE(c.launch.eager_micros && c.launch.graph_micros);
  EXPECT_LT(rel(*c.launch.eager_micros, f.gpu->launch_micros_truth(false)), 0.02);
  EXPECT_LT(rel(*c.launch.graph_micros, f.gpu->launch_micros_truth(true)), 0.02);
  // Power over the two steady windows: the fake draws 95 % / 70 % of its 700 W board power.
  ASSERT_EQ(c.power.size(), 2u);
  EXPECT_NEAR(c.power[0].watts, 0.95 * 700, 0.02 * 700);
  EXPECT_TRUE(c.power[0].tflops_per_watt.has_value());
  EXPECT_NEAR(c.power[1].watts, 0.70 * 700, 0.02 * 700);
  EXPECT_TRUE(c.power[1].gbps_per_watt.has_value());
  // The operator model fits the fake's own curve: small errors, never blamed.
  ASSERT_FALSE(f.report.model_errors.empty());
  for (const ModelError& e : f.report.model_errors) {
    EXPECT_LT(e.median_error, 0.02) << e.what;
    EXPECT_FALSE(model_at_fault(e)) << e.what;
  }
  EXPECT_EQ(c.device.catalog_id.value_or(""), "h100-80gb-sxm5");  // the name resolved to its id
  EXPECT_FALSE(c.tool.partial);
}

std::vector<double> noisy(double sigma, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> z(0, 1);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(100 * std::exp(sigma * z(rng)));
  return v;
}

TEST(BenchStopping, LowNoiseConverges) {
  StopRule rule;
  PointSamples s;
  Stop stop = Stop::kNone;
  for (double r : noisy(0.002, 100, 3)) {
    s.add(r);
    stop = s.verdict(rule);
    if (stop != Stop::kNone) break;
  }
  EXPECT_EQ(stop, Stop::kConverged);
  EXPECT_EQ(s.count(), rule.min_samples);
  EXPECT_LT(s.spread(), 0.01);
}

TEST(BenchStopping, HighNoiseStopsWhenTheNoiseEstimateIsStable) {
  StopRule rule;
  PointSamples s;
  Stop stop = Stop::kNone;
  for (double r : noisy(0.05, 1000, 5)) {
    s.add(r);
    stop = s.verdict(rule);
    if (stop != Stop::kNone) break;
  }
  EXPECT_EQ(stop, Stop::kNoiseStable);
  EXPECT_GT(s.spread(), 0.01);
  EXPECT_GE(s.count(), rule.min_stable_samples);
}

TEST(BenchStopping, RunsStopByTheirRules) {
  // Low noise: converged everywhere.
  FakeFaults quiet;
  quiet.noise = 0.001;
  Fixture low = run_fake("h100-sxm5-80gb", 30, quiet, true);
  for (const auto& g : low.report.calibration.gemm) EXPECT_EQ(g.stop, "converged") << g.m << "x" << g.n;
  // High noise and a generous budget: the noise estimate settles.
  FakeFaults loud;
  loud.noise = 0.05;
  Fixture high = run_fake("h100-sxm5-80gb", 170, loud, true);
  int stable = 0, converged = 0;
  for (const auto& g : high.report.calibration.gemm) {
    stable += g.stop == "noise_stable" ? 1 : 0;
    converged += g.stop == "converged" ? 1 : 0;
  }
  // 8 samples' quartiles at 5 % noise are under 1 % apart by chance now and then, rarely.
  EXPECT_GT(stable, static_cast<int>(high.report.calibration.gemm.size() * 8 / 10));
  EXPECT_LT(converged, static_cast<int>(high.report.calibration.gemm.size() / 10));
  // High noise and a tiny budget: each point's share runs out first.
  Fixture tight = run_fake("h100-sxm5-80gb", 1, loud, true);
  int budget_stops = 0;
  for (const auto& g : tight.report.calibration.gemm) budget_stops += g.stop == "time_budget" ? 1 : 0;
  EXPECT_GT(budget_stops, 0);
}

TEST(Bench, TheBudgetIsNeverExceeded) {
  for (double budget : {0.05, 0.5, 3.0, 30.0, 170.0, 600.0}) {
    for (bool quick : {false, true}) {
      FakeFaults f;
      f.noise = 0.08;
      f.throttle_after_seconds = budget / 3;
      Fixture r = run_fake("h100-sxm5-80gb", budget, f, quick);
      EXPECT_LE(r.report.elapsed_seconds, budget) << budget << (quick ? " quick" : "");
      if (budget >= 0.5) EXPECT_FALSE(r.report.calibration.gemm.empty()) << budget;
    }
  }
}

TEST(Bench, TheCalibrationFileRoundTrips) {
  FakeFaults f;
  f.no_fp8 = true;
  Fixture r = run_fake("h100-sxm5-80gb", 30, f, true);
  const Calibration& c = r.report.calibration;
  auto back = read_calibration(calibration_json(c).dump(2));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(*back == c);
  EXPECT_EQ(calibration_json(*back).dump(), calibration_json(c).dump());
}

TEST(Bench, MissingFp8AndInt8AreAbsentAndSaidWhy) {
  FakeFaults f;
  f.no_fp8 = true;
  f.no_int8 = true;
  Fixture r = run_fake("h100-sxm5-80gb", 10, f, true);
  for (const auto& g : r.report.calibration.gemm) {
    EXPECT_NE(g.precision, "fp8");
    EXPECT_NE(g.precision, "int8");
  }
  const auto& off = r.report.calibration.conditions.features_off;
  auto has = [&](const std::string& prefix) {
    return std::any_of(off.begin(), off.end(), [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
  };
  EXPECT_TRUE(has("fp8: not supported"));
  EXPECT_TRUE(has("int8: not supported"));
  // A GPU the catalog gives no fp8 rate (A100: Ampere) has none measured either.
  Fixture a100 = run_fake("a100-80gb-sxm4", 10, {}, true);
  for (const auto& g : a100.report.calibration.gemm) EXPECT_NE(g.precision, "fp8");
}

TEST(Bench, ABusyGpuIsRefusedUnlessShared) {
  FakeFaults f;
  f.other_processes = 2;
  auto gpu = FakeGpu::open(catalog(), "h100-sxm5-80gb", f, 1);
  ASSERT_TRUE(gpu.ok());
  BenchOptions o;
  o.budget_seconds = 5;
  o.quick = true;
  auto refused = run_bench_on(catalog(), o, **gpu);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  EXPECT_NE(refused.error().message.find("--allow-shared"), std::string::npos);
  Fixture shared = run_fake("h100-sxm5-80gb", 5, f, true, /*allow_shared=*/true);
  EXPECT_TRUE(shared.report.calibration.conditions.shared);
  EXPECT_EQ(shared.report.calibration.conditions.other_processes, 2);
}

TEST(Bench, ThrottlingIsVisibleInConditions) {
  FakeFaults f;
  f.throttle_after_seconds = 5;
  Fixture r = run_fake("h100-sxm5-80gb", 30, f, true);
  const auto& k = r.report.calibration.conditions;
  ASSERT_EQ(k.throttle_reasons.size(), 1u);
  EXPECT_EQ(k.throttle_reasons[0], "sw_thermal_slowdown");
  EXPECT_GT(k.temperature_c_max.value_or(0), 80);
  Fixture calm = run_fake("h100-sxm5-80gb", 30, {}, true);
  EXPECT_TRUE(calm.report.calibration.conditions.throttle_reasons.empty());
  EXPECT_LT(k.sm_clock_mhz_median.value_or(0), calm.report.calibration.conditions.sm_clock_mhz_median.value_or(0) + 1);
}

TEST(Bench, WithoutNvmlPowerAndProcessesAreUnknown) {
  FakeFaults f;
  f.no_nvml = true;
  Fixture r = run_fake("h100-sxm5-80gb", 10, f, true);
  const Calibration& c = r.report.calibration;
  EXPECT_TRUE(c.power.empty());
  EXPECT_EQ(c.conditions.other_processes, -1);
  EXPECT_FALSE(c.conditions.sm_clock_mhz_median.has_value());
  EXPECT_FALSE(c.gemm.empty());
}

TEST(Bench, AMigInstanceIsMeasuredAgainstItsShare) {
  Fixture r = run_fake("a100-80gb-sxm4:3g.40gb", 10, {}, true);
  const Calibration& c = r.report.calibration;
  EXPECT_EQ(c.device.mig_profile.value_or(""), "3g.40gb");
  EXPECT_EQ(c.device.catalog_id.value_or(""), "a100-80gb-sxm4/3g.40gb");
  auto findings = check_calibration(catalog(), c);
  ASSERT_TRUE(findings.ok()) << findings.error().message;
  EXPECT_TRUE(findings->empty()) << (*findings)[0].point << ": " << (*findings)[0].problem;
}

TEST(Bench, AnInterruptedRunIsPartial) {
  std::atomic<bool> stop{true};
  auto gpu = FakeGpu::open(catalog(), "h100-sxm5-80gb", {}, 1);
  ASSERT_TRUE(gpu.ok());
  BenchOptions o;
  o.budget_seconds = 30;
  o.stop = &stop;
  auto r = run_bench_on(catalog(), o, **gpu);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->calibration.tool.partial);
  EXPECT_TRUE(r->calibration.gemm.empty());
}

TEST(BenchCheck, AFakeRunPasses) {
  Fixture r = run_fake("h100-sxm5-80gb", 30, {}, true);
  auto findings = check_calibration(catalog(), r.report.calibration);
  ASSERT_TRUE(findings.ok());
  EXPECT_TRUE(findings->empty()) << (*findings)[0].point << ": " << (*findings)[0].problem;
}

TEST(BenchCheck, AFigureAbovePeakFailsNamingThePoint) {
  Fixture r = run_fake("h100-sxm5-80gb", 30, {}, true);
  Calibration c = r.report.calibration;
  ASSERT_FALSE(c.gemm.empty());
  c.gemm[0].tflops_sustained = 2000;  // above H100 SXM's dense bf16 989.5: a sparse figure or a timing bug
  c.gemm[0].tflops_burst = 2000;
  c.launch.eager_micros = 0.1;  // under the eager floor
  auto findings = check_calibration(catalog(), c);
  ASSERT_TRUE(findings.ok());
  ASSERT_EQ(findings->size(), 2u);
  EXPECT_EQ((*findings)[0].point, "gemm bf16 square 1024x1024x1024");
  EXPECT_NE((*findings)[0].problem.find("above the dense bf16 peak"), std::string::npos);
  EXPECT_EQ((*findings)[1].point, "launch eager");
  // Through the command: not ok, findings listed.
  Context ctx{Catalog::embedded()};
  auto out = run_command(ctx, "bench.check", Json{{"file", calibration_json(c).dump()}});
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_FALSE((*out)["ok"].get<bool>());
  EXPECT_EQ((*out)["findings"].size(), 2u);
}

TEST(BenchCheck, FloorsCatchABrokenRun) {
  Fixture r = run_fake("h100-sxm5-80gb", 30, {}, true);
  Calibration c = r.report.calibration;
  for (auto& g : c.gemm) {
    if (g.precision == "fp16") g.tflops_sustained = g.tflops_burst = 1;  // 0.1 % of 989 TFLOPS
  }
  for (auto& m : c.memory) m.gbps_sustained = m.gbps_burst = 100;  // 3 % of 3350 GB/s
  auto findings = check_calibration(catalog(), c);
  ASSERT_TRUE(findings.ok());
  std::set<std::string> points;
  for (const auto& f : *findings) points.insert(f.point);
  EXPECT_TRUE(points.count("gemm fp16"));
  EXPECT_TRUE(points.count("memory"));
}

TEST(BenchFile, TheReaderIsBounded) {
  Fixture r = run_fake("h100-sxm5-80gb", 5, {}, true);
  Json j = calibration_json(r.report.calibration);
  // Too many points.
  Json many = j;
  many["gemm"] = Json::array();
  for (size_t i = 0; i <= kMaxPointsPerArray; ++i) many["gemm"].push_back(j["gemm"][0]);
  auto over = read_calibration(many.dump());
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code, ErrorCode::kLimit);
  EXPECT_EQ(over.error().field, "gemm");
  // Too many bytes.
  auto big = read_calibration(std::string(kMaxCalibrationBytes + 1, ' '));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, ErrorCode::kLimit);
  // Deep nesting, not JSON, a wrong schema, a wrong type, a figure that is not finite and positive.
  EXPECT_FALSE(read_calibration(std::string(100000, '[')).ok());
  EXPECT_FALSE(read_calibration("not json").ok());
  Json wrong = j;
  wrong["schema"] = "gpuplan.calibration/2";
  EXPECT_EQ(read_calibration(wrong.dump()).error().field, "schema");
  Json bad = j;
  bad["gemm"][1]["tflops_sustained"] = "fast";
  EXPECT_EQ(read_calibration(bad.dump()).error().field, "gemm[1].tflops_sustained");
  bad = j;
  bad["memory"][0]["gbps_sustained"] = -3;
  EXPECT_EQ(read_calibration(bad.dump()).error().field, "memory[0].gbps_sustained");
  bad = j;
  bad["gemm"][0]["stop"] = "bored";
  EXPECT_EQ(read_calibration(bad.dump()).error().field, "gemm[0].stop");
}

TEST(BenchCommand, TheFakeRunsThroughRunCommand) {
  Context ctx{Catalog::embedded()};
  auto out = run_command(ctx, "bench",
                         Json{{"backend", "fake"},
                              {"fake_gpu", "h100-sxm5-80gb"},
                              {"budget", 5},
                              {"quick", true},
                              {"precisions", Json::array({"bf16", "fp8"})},
                              {"fake_faults", Json::array({"throttle"})}});
  ASSERT_TRUE(out.ok()) << out.error().message;
  std::set<std::string> precisions;
  for (const auto& g : (*out)["calibration"]["gemm"]) precisions.insert(g["precision"].get<std::string>());
  EXPECT_EQ(precisions, (std::set<std::string>{"bf16", "fp8"}));
  EXPECT_EQ((*out)["dense_peak_tflops"]["bf16"].get<double>(), 989.5);
  // A fake target the catalog lacks; --fake-gpu without --backend fake.
  auto unknown = run_command(ctx, "bench", Json{{"backend", "fake"}, {"fake_gpu", "h900-zz"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().field, "fake_gpu");
  auto mixed = run_command(ctx, "bench", Json{{"fake_gpu", "h100-sxm5-80gb"}});
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.error().code, ErrorCode::kUsage);
}

// No GPU on the development and CI machines: the CUDA backend is an error value (no plugin, or no driver
// or device), never a crash. With a GPU this test is skipped; BenchGpu runs instead.
TEST(BenchCuda, AServerNeverHandsItsGpuToARequest) {
  device_access().store(false);  // as in `gpuplan serve`: only the CLI's `bench` sets it
  Context ctx{Catalog::embedded()};
  auto out = run_command(ctx, "bench", Json{{"budget", 1}, {"quick", true}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(out.error().message.find("only --backend fake"), std::string::npos) << out.error().message;
}

TEST(BenchCuda, WithoutAGpuTheCudaBackendIsAClearError) {
  device_access().store(true);
  Context ctx{Catalog::embedded()};
  auto out = run_command(ctx, "bench", Json{{"budget", 1}, {"quick", true}});
  device_access().store(false);
  if (out.ok()) GTEST_SKIP() << "a CUDA GPU is here: BenchGpu.* measures it";
  EXPECT_EQ(out.error().code, ErrorCode::kUnavailable);
  EXPECT_FALSE(out.error().message.empty());
}

// The plugin built beside the CLI binary (GPUPLAN_CUDA found nvcc): it loads here, and with no GPU (or
// no driver) answers an error value naming the CUDA call, never a crash.
TEST(BenchCuda, ThePluginLoadsAndSaysWhyItCannotMeasure) {
  std::string plugin = GPUPLAN_CLI_BINARY;
  plugin = plugin.substr(0, plugin.rfind('/') + 1) + "libgpuplan_bench_cuda.so";
  if (FILE* f = std::fopen(plugin.c_str(), "rb")) {
    std::fclose(f);
  } else {
    GTEST_SKIP() << "no CUDA plugin in this build (no CUDA toolkit)";
  }
  ::setenv("GPUPLAN_BENCH_CUDA_PLUGIN", plugin.c_str(), 1);
  device_access().store(true);
  BenchOptions o;
  o.budget_seconds = 1;
  o.quick = true;
  auto r = run_bench(catalog(), o);
  device_access().store(false);
  ::unsetenv("GPUPLAN_BENCH_CUDA_PLUGIN");
  if (r.ok()) GTEST_SKIP() << "a CUDA GPU is here: BenchGpu.* measures it";
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("no CUDA GPU to measure: cuda"), std::string::npos) << r.error().message;
}

// The bench reads NVML through the agent's loader, which answers whitelisted names only (the stub
// library of the agent's tests exports only NVML's core calls: the sensors are then unavailable).
TEST(BenchNvml, TheLoaderAnswersWhitelistedReadCallsOnly) {
  auto lib = agent::NvmlLibrary::open(GPUPLAN_NVML_STUB);
  ASSERT_TRUE(lib.ok()) << lib.error().message;
  EXPECT_NE((*lib)->symbol("nvmlInit_v2"), nullptr);
  EXPECT_EQ((*lib)->symbol("nvmlDeviceSetPowerManagementLimit"), nullptr);    // not whitelisted
  EXPECT_EQ((*lib)->symbol("nvmlDeviceGetTotalEnergyConsumption"), nullptr);  // whitelisted, not in the stub
  for (std::string_view name : {"nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetClockInfo",
                                "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetCurrentClocksEventReasons"}) {
    const auto w = agent::nvml_whitelist();
    EXPECT_NE(std::find(w.begin(), w.end(), name), w.end()) << name;
  }
  auto missing = agent::NvmlLibrary::open("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kUnavailable);
}

// The `gpu`-labelled ctest (tests/CMakeLists.txt): a quick real run that bench check must pass. Skipped
// where there is no GPU.
TEST(BenchGpu, AQuickRealRunPassesBenchCheck) {
  BenchOptions o;
  o.budget_seconds = 20;
  o.quick = true;
  o.allow_shared = true;
  device_access().store(true);
  auto r = run_bench(catalog(), o);
  device_access().store(false);
  if (!r.ok()) GTEST_SKIP() << "no CUDA GPU: " << r.error().message;
  const Calibration& c = r->calibration;
  EXPECT_FALSE(c.gemm.empty());
  EXPECT_FALSE(c.memory.empty());
  EXPECT_LE(r->elapsed_seconds, o.budget_seconds * 1.05);
  for (const auto& g : c.gemm) EXPECT_TRUE(g.checked) << g.precision << " " << g.m << "x" << g.n << "x" << g.k;
  if (c.device.catalog_id) {
    auto findings = check_calibration(catalog(), c);
    ASSERT_TRUE(findings.ok());
    for (const auto& f : *findings) ADD_FAILURE() << f.point << ": " << f.problem;
  }
}

}  // namespace
}  // namespace gpuplan::bench
