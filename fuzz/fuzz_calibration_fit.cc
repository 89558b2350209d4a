// Fuzzes the calibration reader (gpuplan/calibration.h): parse_calibration on the input, then the fit
// against two catalog devices (H100 SXM: persistent GEMMs; A100 SXM: wave quantization). Oracles (an
// abort is a libFuzzer crash):
// - an accepted file has every figure finite and positive where the schema says so, and at most
//   kCalibrationMaxPoints points per array;
// - an accepted fit gives efficiency fractions in (0, 1], a finite half intensity in [0, 1e6] and a
//   finite per-kernel cost, whatever the points were.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "fuzz_util.h"
#include "gpuplan/calibration.h"

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz oracle: calibration: %s\n", what);
  std::abort();
}

void check_fraction(double v, const char* what) {
  if (!std::isfinite(v) || v <= 0 || v > 1) fail(what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto c = gpuplan::parse_calibration(text);
  if (!c) return 0;
  for (const auto* arr : {&c->gemm}) {
    if (arr->size() > gpuplan::kCalibrationMaxPoints) fail("too many gemm points accepted");
    for (const auto& g : *arr) {
      if (!(g.tflops_sustained > 0) || !std::isfinite(g.tflops_sustained) || !(g.m >= 1)) fail("bad gemm point");
    }
  }
  for (const auto& m : c->memory) {
    if (!(m.gbps_sustained > 0) || !std::isfinite(m.gbps_sustained) || !(m.bytes > 0)) fail("bad memory point");
  }
  for (const char* gpu : {"h100-sxm5-80gb", "a100-80gb-sxm4"}) {
    auto ref = gpuplan::fuzz::catalog().resolve(gpu);
    if (!ref) continue;
    const gpuplan::PerfDevice d = gpuplan::perf_device(gpuplan::Target::linked(*ref, 1));
    auto fit = gpuplan::fit_calibration(*c, d, gpuplan::default_efficiency());
    if (!fit) continue;
    const gpuplan::PerfEfficiency& e = fit->efficiency;
    check_fraction(e.gemm_peak_fraction, "gemm fraction");
    check_fraction(e.gemm_fp8_peak_fraction, "gemm_fp8 fraction");
    check_fraction(e.bandwidth_fraction, "bandwidth fraction");
    if (!std::isfinite(e.gemm_half_intensity) || e.gemm_half_intensity < 0 || e.gemm_half_intensity > 1e6) {
      fail("half intensity");
    }
    if (!std::isfinite(e.kernel_seconds) || e.kernel_seconds <= 0) fail("kernel seconds");
    for (size_t i = 0; i < e.precision_peak_fraction.size(); ++i) {
      if (e.precision_peak_fraction[i] != 0) check_fraction(e.precision_peak_fraction[i], "precision fraction");
      if (!std::isfinite(e.precision_half_intensity[i]) || e.precision_half_intensity[i] < 0) fail("precision half");
    }
  }
  return 0;
}
