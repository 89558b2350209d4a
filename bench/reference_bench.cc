// The reference computation of `make bench-check` (scripts/bench-check.py): a fixed amount of scalar
// arithmetic with a loop-carried dependency, so that its time tracks the core's speed and the machine's
// load but nothing gpuplan does. Every tracked benchmark is recorded as a ratio to it, measured in the
// same process, so that the recorded figures hold on a faster or slower CI machine.
#include <benchmark/benchmark.h>

#include <cstdint>

namespace {

// Steps of the loop: about 10 us on the 2-core CI box, long enough to time, short enough to repeat.
constexpr int kReferenceSteps = 20000;

void BM_Reference(benchmark::State& state) {
  for (auto _ : state) {
    uint64_t x = 0x9E3779B97F4A7C15ull;  // any odd seed; xorshift never reaches 0 from it
    double acc = 1.0;
    for (int i = 0; i < kReferenceSteps; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      acc = acc * 0.999 + static_cast<double>(x >> 40) * 1e-9;
    }
    benchmark::DoNotOptimize(acc);
  }
}
BENCHMARK(BM_Reference);

}  // namespace
