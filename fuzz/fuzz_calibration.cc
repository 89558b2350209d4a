// Fuzzes the calibration file's one reader (src/bench/calibration.cc, `gpuplan bench check FILE`, issue
// #16) and what perf does with an accepted file (its projection, gpuplan/calibration.h, and the fit of the
// model's curves against two catalog devices: H100 SXM, persistent GEMMs; A100 SXM, wave quantization).
// Oracles (an abort is a libFuzzer crash):
// - an accepted file writes back (calibration_json) to text the reader accepts again, equal to it;
// - every figure of an accepted file is finite, the rates above 0, at most kMaxPointsPerArray per array;
// - bench check on an accepted file answers (findings or an error value), never throws or crashes;
// - an accepted fit gives efficiency fractions in (0, 1], a finite half intensity in [0, 1e6] and a
//   finite per-kernel cost, whatever the points were.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "fuzz_util.h"
#include "gpuplan/bench.h"
#include "gpuplan/calibration.h"

namespace {
[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz oracle: calibration: %s\n", what);
  std::abort();
}
void figure(double v) {
  if (!std::isfinite(v) || v < 0) fail("a figure that is not finite and positive");
}
void rate(double v) {
  if (!std::isfinite(v) || !(v > 0)) fail("a rate that is not finite and above 0");
}
void check_fraction(double v, const char* what) {
  if (!std::isfinite(v) || v <= 0 || v > 1) fail(what);
}

void check_fit(const gpuplan::Calibration& c) {
  for (const char* gpu : {"h100-sxm5-80gb", "a100-80gb-sxm4"}) {
    auto ref = gpuplan::fuzz::catalog().resolve(gpu);
    if (!ref) continue;
    const gpuplan::PerfDevice d = gpuplan::perf_device(gpuplan::Target::linked(*ref, 1));
    auto fit = gpuplan::fit_calibration(c, d, gpuplan::default_efficiency());
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
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace b = gpuplan::bench;
  const auto c = b::read_calibration(gpuplan::fuzz::as_text(data, size));
  if (!c) return 0;
  for (const size_t n : {c->gemm.size(), c->memory.size(), c->transfer.size(), c->power.size()}) {
    if (n > b::kMaxPointsPerArray) fail("too many points accepted");
  }
  for (const auto& g : c->gemm) {
    rate(g.tflops_sustained);
    rate(g.tflops_burst);
    figure(g.spread);
    if (g.m < 1 || g.n < 1 || g.k < 1) fail("a GEMM dimension under 1");
  }
  for (const auto& m : c->memory) rate(m.gbps_sustained);
  for (const auto& t : c->transfer) rate(t.gbps);
  const auto back = b::read_calibration(b::calibration_json(*c).dump());
  if (!back) fail("a written file the reader refuses");
  if (!(*back == *c)) fail("a file that does not round-trip");
  (void)b::check_calibration(gpuplan::fuzz::catalog(), *c);
  check_fit(gpuplan::project_calibration(*c));
  return 0;
}
