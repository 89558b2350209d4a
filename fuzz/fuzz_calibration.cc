// Fuzzes the calibration file reader (src/bench/calibration.cc, `gpuplan bench check FILE`, issue #16).
// Oracles (an abort is a libFuzzer crash):
// - an accepted file writes back (calibration_json) to text the reader accepts again, equal to it;
// - every figure of an accepted file is finite and not negative;
// - bench check on an accepted file answers (findings or an error value), never throws or crashes.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "fuzz_util.h"
#include "gpuplan/bench.h"

namespace {
[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz oracle: calibration: %s\n", what);
  std::abort();
}
void figure(double v) {
  if (!std::isfinite(v) || v < 0) fail("a figure that is not finite and positive");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace b = gpuplan::bench;
  const auto c = b::read_calibration(gpuplan::fuzz::as_text(data, size));
  if (!c) return 0;
  for (const auto& g : c->gemm) {
    figure(g.tflops_sustained);
    figure(g.tflops_burst);
    figure(g.spread);
  }
  for (const auto& m : c->memory) figure(m.gbps_sustained);
  for (const auto& t : c->transfer) figure(t.gbps);
  const auto back = b::read_calibration(b::calibration_json(*c).dump());
  if (!back) fail("a written file the reader refuses");
  if (!(*back == *c)) fail("a file that does not round-trip");
  (void)b::check_calibration(gpuplan::fuzz::catalog(), *c);
  return 0;
}
