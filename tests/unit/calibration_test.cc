// The calibration reader (gpuplan/calibration.h): its refusals, and the fit of the model's curves to a
// file written from a known truth (calibration_util.h).
#include "gpuplan/calibration.h"

#include <gtest/gtest.h>

#include <cmath>

#include "calibration_util.h"
#include "gpuplan/bench.h"
#include "gpuplan/catalog.h"
#include "gpuplan/model.h"
#include "gpuplan/perf.h"

namespace gpuplan {
namespace {

using calibration_testing::calibration_json;
using calibration_testing::CalibrationTruth;
using calibration_testing::truth_efficiency;
using calibration_testing::TruthCurve;

PerfDevice device(const char* name) {
  auto ref = Catalog::embedded()->resolve(name);
  EXPECT_TRUE(ref.ok()) << name;
  return perf_device(Target::linked(*ref, 1));
}

Json good_file() {
  CalibrationTruth t;
  t.created_at = "2026-12-01T22:00:00Z";
  return calibration_json(t, device("h100-80gb-sxm5"));
}

// The error of parsing `j`: its field and message.
Error refusal(const Json& j) {
  auto c = parse_calibration(j.dump());
  EXPECT_FALSE(c.ok());
  return c.ok() ? Error{} : c.error();
}

TEST(Calibration, ReadsTheSchemasFields) {
  auto c = parse_calibration(good_file().dump());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->device.catalog_id, "h100-80gb-sxm5");
  EXPECT_EQ(c->device.key(), "h100-80gb-sxm5");
  EXPECT_EQ(c->device.driver_version, "570.86.15");
  EXPECT_EQ(c->device.pcie_gen, 5);
  EXPECT_EQ(c->backend, "fake");
  EXPECT_EQ(c->created_unix_seconds, 1796162400);  // 2026-12-01T22:00:00Z
  EXPECT_FALSE(c->gemm.empty());
  EXPECT_EQ(c->memory.size(), 5u);
  EXPECT_DOUBLE_EQ(c->launch_graph_micros, 1.5);
}

TEST(Calibration, RefusesBadValuesNamingTheField) {
  Json j = good_file();
  j["gemm"][2]["tflops_sustained"] = -1;
  EXPECT_EQ(refusal(j).field, "gemm[2].tflops_sustained");
  j = good_file();
  j["gemm"][0]["precision"] = "bf17";
  EXPECT_EQ(refusal(j).field, "gemm[0].precision");
  j = good_file();
  j["memory"][1]["bytes"] = "lots";
  EXPECT_EQ(refusal(j).field, "memory[1].bytes");
  j = good_file();
  j["schema"] = "gpuplan.calibration/2";
  EXPECT_EQ(refusal(j).field, "schema");
  j = good_file();
  j["created_at"] = "yesterday";
  EXPECT_EQ(refusal(j).field, "created_at");
  j = good_file();
  j.erase("device");
  EXPECT_EQ(refusal(j).field, "device");
  j = good_file();
  j["launch"]["graph_micros"] = 1e300;
  EXPECT_EQ(refusal(j).field, "launch.graph_micros");
  j = good_file();
  j["device"]["driver_version"] = std::string(1000, 'x');
  EXPECT_EQ(refusal(j).code, ErrorCode::kLimit);
  EXPECT_FALSE(parse_calibration("[1,2]").ok());
  EXPECT_FALSE(parse_calibration("{").ok());
  EXPECT_FALSE(parse_calibration("{\"schema\": 1e999}").ok());
  EXPECT_FALSE(parse_calibration(std::string(100000, '[')).ok());
}

TEST(Calibration, BoundsArraysAndSize) {
  Json j = good_file();
  Json many = Json::array();
  for (size_t i = 0; i <= kCalibrationMaxPoints; ++i) many.push_back(j["memory"][0]);
  j["memory"] = many;
  const Error e = refusal(j);
  EXPECT_EQ(e.code, ErrorCode::kLimit);
  EXPECT_EQ(e.field, "memory");
  EXPECT_NE(e.message.find("4096"), std::string::npos) << e.message;
  const auto big = parse_calibration(std::string(kCalibrationMaxBytes + 1, ' '));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, ErrorCode::kLimit);
}

// One reader (issue #16): perf reads every file the bench writes, a run without NVML included (its
// other_processes is -1, "unknown", which perf's former reader of its own refused), and refuses what the
// bench's reader refuses, with the same field, as a usage error.
TEST(Calibration, PerfReadsWhatTheBenchWritesThroughTheBenchsReader) {
  bench::BenchOptions o;
  o.backend = "fake";
  o.fake_gpu = "h100-80gb-sxm5";
  o.budget_seconds = 5;
  o.quick = true;
  o.faults.no_nvml = true;
  o.created_at = "2026-12-01T22:00:00Z";
  auto run = bench::run_bench(*Catalog::embedded(), o);
  ASSERT_TRUE(run.ok()) << run.error().message;
  ASSERT_EQ(run->calibration.conditions.other_processes, -1);
  const std::string text = bench::calibration_json(run->calibration).dump();
  auto c = parse_calibration(text);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->gemm.size(), run->calibration.gemm.size());
  EXPECT_EQ(c->memory.size(), run->calibration.memory.size());
  EXPECT_EQ(c->device.key(), "h100-80gb-sxm5");
  EXPECT_EQ(c->created_unix_seconds, 1796162400);
  // The bench's reader takes an integral number written as a double (the test writer's "m": 256.0).
  EXPECT_TRUE(bench::read_calibration(good_file().dump()).ok());
  Json j = good_file();
  j["gemm"][0]["m"] = 256.5;
  EXPECT_EQ(bench::read_calibration(j.dump()).error().field, "gemm[0].m");
  EXPECT_EQ(refusal(j).field, "gemm[0].m");
  EXPECT_EQ(refusal(j).code, ErrorCode::kUsage);
  EXPECT_EQ(bench::read_calibration(j.dump()).error().code, ErrorCode::kInvalidData);
  j = good_file();
  j["gemm"][1]["tflops_burst"] = j["gemm"][1]["tflops_sustained"].get<double>() / 2;
  EXPECT_EQ(bench::read_calibration(j.dump()).error().field, "gemm[1].tflops_burst");
}

TEST(Calibration, Rfc3339) {
  EXPECT_EQ(parse_rfc3339_seconds("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(parse_rfc3339_seconds("1970-01-01T01:00:00+01:00"), 0);
  EXPECT_EQ(parse_rfc3339_seconds("2000-03-01T00:00:00.250Z"), 951868800);
  EXPECT_FALSE(parse_rfc3339_seconds("2000-13-01T00:00:00Z"));
  EXPECT_FALSE(parse_rfc3339_seconds("2000-01-01 00:00:00"));
  EXPECT_FALSE(parse_rfc3339_seconds("2000-01-01T00:00:00Zjunk"));
}

// The fit recovers the truth's curve, bandwidth and kernel cost, on a persistent-GEMM GPU (H100) and on
// one with wave quantization (A100).
TEST(Calibration, FitRecoversTheTruth) {
  for (const char* gpu : {"h100-80gb-sxm5", "a100-80gb-sxm4"}) {
    CalibrationTruth t;
    t.catalog_id = gpu;
    t.curves = {TruthCurve{Precision::kBf16, 0.78, 90}, TruthCurve{Precision::kTf32, 0.7, 40}};
    const PerfDevice d = device(gpu);
    auto c = parse_calibration(calibration_json(t, d).dump());
    ASSERT_TRUE(c.ok()) << c.error().message;
    auto fit = fit_calibration(*c, d, default_efficiency());
    ASSERT_TRUE(fit.ok()) << fit.error().message;
    const PerfEfficiency& e = fit->efficiency;
    EXPECT_NEAR(e.gemm_peak_fraction, 0.78, 0.78 * 0.02) << gpu;
    EXPECT_NEAR(e.gemm_half_intensity, 90, 90 * 0.05) << gpu;
    EXPECT_NEAR(e.precision_peak_fraction[static_cast<size_t>(Precision::kTf32)], 0.7, 0.7 * 0.02) << gpu;
    EXPECT_NEAR(e.bandwidth_fraction, 0.85, 1e-9) << gpu;
    EXPECT_NEAR(e.kernel_seconds, 5e-6, 1e-12) << gpu;
    EXPECT_EQ(e.precision_peak_fraction[static_cast<size_t>(Precision::kFp8)], 0) << "fp8 was not measured";
    ASSERT_EQ(fit->curves.size(), 2u);
    for (const auto& curve : fit->curves) EXPECT_LT(curve.rms_error, 0.02) << gpu;
  }
}

// perf with the calibration reproduces the truth's timings within 3 %: GEMMs of every size and a whole
// inference (prefill, decode) of a 7B model.
TEST(Calibration, PerfWithTheFitReproducesTheTruthWithin3Percent) {
  CalibrationTruth t;
  t.curves = {TruthCurve{Precision::kBf16, 0.74, 110}, TruthCurve{Precision::kFp8, 0.62, 150}};
  t.bandwidth_fraction = 0.8;
  t.graph_micros = 2.5;
  const PerfDevice d = device("h100-80gb-sxm5");
  auto c = parse_calibration(calibration_json(t, d).dump());
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto fit = fit_calibration(*c, d, default_efficiency());
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  const PerfEfficiency truth = truth_efficiency(t);
  for (Precision p : {Precision::kBf16, Precision::kFp8}) {
    for (double s : {128.0, 512.0, 1000.0, 3000.0, 8192.0}) {
      const double want = predict_gemm_tflops(d, p, s, s, s, truth);
      const double got = predict_gemm_tflops(d, p, s, s, s, fit->efficiency);
      EXPECT_NEAR(got / want, 1, 0.03) << precision_name(p) << " " << s;
    }
  }
  auto m = zoo_model("llama-2-7b");
  ASSERT_TRUE(m.ok());
  const PerfArch a = perf_arch(**m);
  Workload w;
  w.engine = Engine::kVllm;
  w.batch = 16;
  w.input_tokens = 2048;
  w.output_tokens = 256;
  w.context = w.input_tokens + w.output_tokens;
  for (WeightFormat f : {WeightFormat::kBf16, WeightFormat::kFp8}) {
    PerfRun run;
    run.weights = perf_weights(f, **m, d, w.engine);
    const InferencePerf want = predict_inference(a, d, w, run, truth);
    const InferencePerf got = predict_inference(a, d, w, run, fit->efficiency);
    EXPECT_NEAR(got.ttft_seconds / want.ttft_seconds, 1, 0.03);
    EXPECT_NEAR(got.tpot_seconds / want.tpot_seconds, 1, 0.03);
    EXPECT_NEAR(got.prefill_tokens_per_second / want.prefill_tokens_per_second, 1, 0.03);
  }
}

// A calibration that measures bf16 20 % below the default curve lowers the compute-bound prefill
// throughput by about that much.
TEST(Calibration, LowerBf16EfficiencyLowersPrefill) {
  const PerfDevice d = device("h100-80gb-sxm5");
  CalibrationTruth t;
  t.curves = {TruthCurve{Precision::kBf16, default_efficiency().gemm_peak_fraction * 0.8,
                         default_efficiency().gemm_half_intensity}};
  t.bandwidth_fraction = default_efficiency().bandwidth_fraction;
  t.graph_micros = 1.5;  // the default kernel cost
  auto c = parse_calibration(calibration_json(t, d).dump());
  ASSERT_TRUE(c.ok());
  auto fit = fit_calibration(*c, d, default_efficiency());
  ASSERT_TRUE(fit.ok());
  auto m = zoo_model("llama-2-7b");
  ASSERT_TRUE(m.ok());
  Workload w;
  w.engine = Engine::kVllm;
  w.batch = 8;
  w.input_tokens = 4096;
  w.output_tokens = 1;
  w.context = w.input_tokens + 1;
  PerfRun run;
  run.weights = perf_weights(WeightFormat::kBf16, **m, d, w.engine);
  const PerfArch a = perf_arch(**m);
  const InferencePerf base = predict_inference(a, d, w, run, default_efficiency());
  const InferencePerf cal = predict_inference(a, d, w, run, fit->efficiency);
  ASSERT_EQ(base.prefill_bound, PerfBound::kCompute);
  const double ratio = cal.prefill_tokens_per_second / base.prefill_tokens_per_second;
  // Attention (flash, its own fraction) and element-wise work do not change: the matmuls are ~85 % of it.
  EXPECT_LT(ratio, 0.86);
  EXPECT_GT(ratio, 0.78);
}

TEST(Calibration, RefusesAFigureAboveTheCatalogPeak) {
  const PerfDevice d = device("h100-80gb-sxm5");
  Json j = good_file();
  j["gemm"][3]["tflops_sustained"] = 5000.0;  // H100 SXM: 989 dense bf16 TFLOPS
  j["gemm"][3]["tflops_burst"] = 5000.0;
  auto c = parse_calibration(j.dump());
  ASSERT_TRUE(c.ok());
  auto fit = fit_calibration(*c, d, default_efficiency());
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(fit.error().field, "gemm[3].tflops_sustained");
  j = good_file();
  j["memory"][4]["gbps_sustained"] = 9000.0;
  c = parse_calibration(j.dump());
  ASSERT_TRUE(c.ok());
  fit = fit_calibration(*c, d, default_efficiency());
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(fit.error().field, "memory[4].gbps_sustained");
}

}  // namespace
}  // namespace gpuplan
