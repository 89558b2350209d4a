// The fake GPU (issue #16): a catalog entry (or one MIG profile of it) whose "measured" timings come from
// known efficiency curves over the catalog's dense peaks, with seeded noise and injectable faults, on a
// VIRTUAL clock: a whole `bench` run takes milliseconds. The tests recover these curves from a run.
#pragma once

#include <memory>
#include <random>

#include "bench/backend.h"
#include "gpuplan/bench.h"

namespace gpuplan::bench {

// The fake's truth (docs/bench.md, "The fake GPU"): exact, noise-free figures the tests compare with.
class FakeGpu final : public BenchBackend {
 public:
  // `target`: a catalog id or "id:mig_profile" (also "id/mig_profile").
  static Result<std::unique_ptr<FakeGpu>> open(const Catalog& catalog, const std::string& target,
                                               const FakeFaults& faults, uint64_t seed);

  std::string name() const override { return "fake"; }
  DeviceInfo device() override { return info_; }
  std::string unsupported(Precision p) override;
  bool set_memory_cap(int64_t bytes, std::string& error) override;
  Timing gemm(Precision p, int64_t m, int64_t n, int64_t k, int reps) override;
  Timing memory(MemKernel kernel, int64_t bytes, int reps) override;
  Timing transfer(bool host_to_device, bool pinned, int64_t bytes, int reps) override;
  Timing launch(bool graph, int launches) override;
  Sensors sensors() override;
  double now_seconds() override { return clock_seconds_; }

  // The truth, noise-free and unthrottled.
  double gemm_tflops_truth(Precision p, int64_t m, int64_t n, int64_t k) const;
  double memory_gbps_truth(MemKernel kernel, int64_t bytes) const;
  double transfer_gbps_truth(bool pinned, int64_t bytes) const;
  double launch_micros_truth(bool graph) const;
  // emax of `p`'s eff(I) curve; I_half is the ridge point peak / bandwidth (FLOP per byte).
  static double gemm_emax(Precision p);
  const Target& target() const { return target_; }

 private:
  FakeGpu(Target target, DeviceInfo info, const FakeFaults& faults, uint64_t seed)
      : target_(target), info_(std::move(info)), faults_(faults), rng_(seed) {}
  double noise();                                // a factor exp(sigma z), z clipped to +-3
  double clock_share() const;                    // 1, or the throttle factor after the drop
  Timing advance(double seconds, double watts);  // moves the virtual clock and the energy counter

  Target target_;
  DeviceInfo info_;
  FakeFaults faults_;
  std::mt19937_64 rng_;
  double clock_seconds_ = 0;
  double energy_joules_ = 0;
  double last_watts_ = 0;
  int64_t cap_bytes_ = 0;
};

}  // namespace gpuplan::bench
