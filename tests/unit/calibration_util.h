// Writes a calibration file (schema gpuplan.calibration/1) from a known truth: per precision a GEMM curve
// eff_max x I / (I + I_half) against a device's catalog peaks, a streaming-bandwidth fraction and a launch
// floor. The rates are what the performance model itself predicts for those figures (the roofline of
// each GEMM, wave quantization on pre-Hopper GPUs), so a calibration fitted from the file must give back
// the truth's predictions.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>
#include <string>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/perf.h"

namespace gpuplan::calibration_testing {

// Now, as a calibration's created_at: a fixture that must not grow old (the 90-day warning) uses it.
inline std::string now_rfc3339() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

struct TruthCurve {
  Precision precision = Precision::kBf16;
  double peak_fraction = 0.8;
  double half_intensity = 64;
};

struct CalibrationTruth {
  std::vector<TruthCurve> curves{TruthCurve{}};
  double bandwidth_fraction = 0.85;
  double graph_micros = 1.5;
  std::string created_at = now_rfc3339();
  std::string catalog_id = "h100-80gb-sxm5";
  std::string mig_profile;  // empty: a whole GPU
  std::string driver = "570.86.15";
  std::string uuid = "GPU-00000000-0000-0000-0000-000000000001";
  int pcie_gen = 5;
  int pcie_width = 16;
};

// The efficiency that the truth stands for, on top of the defaults.
inline PerfEfficiency truth_efficiency(const CalibrationTruth& t) {
  PerfEfficiency e = default_efficiency();
  for (const auto& c : t.curves) {
    e.precision_peak_fraction[static_cast<size_t>(c.precision)] = c.peak_fraction;
    e.precision_half_intensity[static_cast<size_t>(c.precision)] = c.half_intensity;
    if (c.precision == Precision::kBf16)
      e.gemm_peak_fraction = c.peak_fraction, e.gemm_half_intensity = c.half_intensity;
    if (c.precision == Precision::kFp8) e.gemm_fp8_peak_fraction = c.peak_fraction;
  }
  e.bandwidth_fraction = t.bandwidth_fraction;
  e.kernel_seconds = t.graph_micros * 1e-6 + 3.5e-6;  // calibration.cc: launch floor + ramp and tail
  return e;
}

inline Json calibration_json(const CalibrationTruth& t, const PerfDevice& d) {
  const PerfEfficiency e = truth_efficiency(t);
  Json gemm = Json::array();
  // Square shapes from 256 to 16384, rectangular ones of real layer sizes, and decode shapes (M 1..64).
  std::vector<std::array<double, 3>> shapes;
  for (double s = 256; s <= 16384; s *= 2) shapes.push_back({s, s, s});
  for (double m : {512.0, 2048.0, 8192.0}) shapes.push_back({m, 4096, 11008}), shapes.push_back({m, 14336, 4096});
  for (double m : {1.0, 4.0, 16.0, 64.0}) shapes.push_back({m, 4096, 4096});
  for (const auto& c : t.curves) {
    for (const auto& s : shapes) {
      // The model's own GEMM time, without the per-kernel cost (the bench times queued work).
      PerfEfficiency no_launch = e;
      no_launch.kernel_seconds = 0;
      const double tflops = predict_gemm_tflops(d, c.precision, s[0], s[1], s[2], no_launch);
      gemm.push_back(Json{{"precision", std::string(precision_name(c.precision))},
                          {"shape", s[0] < 128 ? "decode" : "square"},
                          {"m", s[0]},
                          {"n", s[1]},
                          {"k", s[2]},
                          {"tflops_sustained", tflops},
                          {"tflops_burst", tflops * 1.01},
                          {"samples", 40},
                          {"spread", 0.005},
                          {"stop", "converged"},
                          {"checked", true}});
    }
  }
  Json memory = Json::array();
  const double gbps = d.bandwidth_bytes_per_second * t.bandwidth_fraction / 1e9;
  for (double mib : {16.0, 64.0, 256.0, 1024.0, 4096.0}) {
    // L2-resident sizes run faster than the large-size rate (not above the peak).
    const double rate = mib < 256 ? std::min(gbps * 1.1, d.bandwidth_bytes_per_second / 1e9) : gbps;
    memory.push_back(Json{{"kernel", "copy"},
                          {"bytes", mib * 1048576},
                          {"gbps_sustained", rate},
                          {"gbps_burst", rate * 1.01},
                          {"samples", 30},
                          {"spread", 0.004},
                          {"stop", "converged"}});
  }
  return Json{{"schema", "gpuplan.calibration/1"},
              {"created_at", t.created_at},
              {"tool",
               {{"gpuplan_version", "0.test"},
                {"backend", "fake"},
                {"budget_seconds", 170},
                {"quick", false},
                {"partial", false}}},
              {"device",
               {{"index", 0},
                {"name", "test GPU"},
                {"catalog_id", t.catalog_id.empty() ? Json(nullptr) : Json(t.catalog_id)},
                {"mig_profile", t.mig_profile.empty() ? Json(nullptr) : Json(t.mig_profile)},
                {"uuid", t.uuid},
                {"pci_bus_id", "00000000:1B:00.0"},
                {"driver_version", t.driver},
                {"cuda_runtime_version", "13.0"},
                {"memory_bytes", d.memory_bytes},
                {"sm_count", d.sm_count},
                {"pcie_gen", t.pcie_gen},
                {"pcie_width", t.pcie_width}}},
              {"conditions",
               {{"shared", false},
                {"other_processes", 0},
                {"power_limit_watts", 700},
                {"sm_clock_mhz_median", 1980},
                {"temperature_c_max", 61},
                {"throttle_reasons", Json::array()},
                {"features_off", Json::array()}}},
              {"gemm", gemm},
              {"memory", memory},
              {"transfer", Json::array({Json{{"direction", "h2d"},
                                             {"pinned", true},
                                             {"bytes", 268435456},
                                             {"gbps", 52.1},
                                             {"samples", 10},
                                             {"spread", 0.01},
                                             {"stop", "converged"}}})},
              {"launch", {{"eager_micros", 2.4}, {"graph_micros", t.graph_micros}}},
              {"power", Json::array({Json{{"phase", "compute"},
                                          {"watts", 690.0},
                                          {"tflops_per_watt", 1.03},
                                          {"gbps_per_watt", nullptr},
                                          {"seconds", 5.0}}})}};
}

}  // namespace gpuplan::calibration_testing
