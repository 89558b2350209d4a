#include "bench/fake_gpu.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace gpuplan::bench {

namespace {

// The fake's efficiency curves (docs/bench.md, "The fake GPU"). Plausible, not measured: large dense
// GEMMs through cuBLAS reach 70-90 % of the dense datasheet rate (NVIDIA's cuBLAS performance pages:
// ~750 of 989 bf16 TFLOPS on H100 SXM), DRAM streams ~90 % of the pin bandwidth.
constexpr double kEmaxFp64 = 0.90;
constexpr double kEmaxFp32 = 0.85;
constexpr double kEmaxTf32 = 0.70;
constexpr double kEmaxHalf = 0.78;  // bf16, fp16
constexpr double kEmaxFp8 = 0.70;
constexpr double kEmaxInt8 = 0.72;
constexpr double kDramEfficiency = 0.90;       // share of the datasheet bandwidth a large stream reaches
constexpr double kL2BandwidthFactor = 2.5;     // an L2-resident stream runs this many times faster
constexpr double kMemoryLaunchSeconds = 2e-6;  // per memory kernel: its launch and tail (the small-size ramp)
constexpr double kPinnedLinkShare = 0.82;      // pinned copies reach this share of the PCIe x16 payload rate
constexpr double kPageableLinkShare = 0.45;    // pageable: staged through a bounce buffer
constexpr double kTransferLatencySeconds = 8e-6;
constexpr double kEagerLaunchMicros = 2.4;      // back-to-back empty kernels (typical of CUDA 12 on Hopper)
constexpr double kGraphLaunchMicros = 1.1;      // the same replayed from a graph
constexpr double kCallOverheadSeconds = 20e-6;  // host side of one timed call: event records, synchronize
constexpr double kComputeTdpShare = 0.95;       // a compute-bound GEMM draws near the board limit
constexpr double kMemoryTdpShare = 0.70;        // a stream draws less
constexpr double kIdleTdpShare = 0.30;          // launches, copies, host work
constexpr double kNoiseClipSigmas = 3;          // noise factors are exp(sigma z), |z| <= 3
constexpr double kFakeBaseClockMhz = 1980;      // the H100 SXM's boost clock, for every fake GPU
constexpr double kFakeTemperatureC = 55;
constexpr int kDefaultPcieWidth = 16;

// Compute capability by architecture (CUDA programming guide, "Compute Capabilities").
void set_compute_capability(const std::string& arch, DeviceInfo& info) {
  struct Row {
    const char* arch;
    int major, minor;
  };
  constexpr Row kRows[] = {{"volta", 7, 0}, {"turing", 7, 5}, {"ampere", 8, 0},
                           {"ada", 8, 9},   {"hopper", 9, 0}, {"blackwell", 10, 0}};
  for (const Row& r : kRows) {
    if (arch.find(r.arch) != std::string::npos) {
      info.cc_major = r.major;
      info.cc_minor = r.minor;
      return;
    }
  }
  info.cc_major = 8;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

Result<std::unique_ptr<FakeGpu>> FakeGpu::open(const Catalog& catalog, const std::string& spec,
                                               const FakeFaults& faults, uint64_t seed) {
  if (spec.empty()) {
    return usage_error("--backend fake needs --fake-gpu TARGET (a catalog id, or id:mig_profile)", "fake_gpu");
  }
  std::string name = spec;
  if (const size_t colon = name.find(':'); colon != std::string::npos) name[colon] = '/';
  auto ref = catalog.resolve(name);
  if (!ref) {
    Error e = ref.error();
    e.field = "fake_gpu";
    return e;
  }
  Target target{*ref, 1, Link::kPcie};
  DeviceInfo info;
  info.name = ref->gpu->name + (ref->profile ? " MIG " + ref->profile->name : "");
  info.uuid = "GPU-fake-" + ref->gpu->id;
  info.pci_bus_id = "00000000:01:00.0";
  info.cuda_runtime_version = "";
  info.mig_profile = ref->profile ? ref->profile->name : "";
  info.memory_bytes = static_cast<int64_t>(target.memory_total_bytes());
  info.free_bytes = info.memory_bytes;
  info.l2_bytes = static_cast<int64_t>(ref->gpu->number("l2_cache_mb", 0) * kBytesPerMib * target.compute_fraction());
  info.sm_count = target.sm_count();
  set_compute_capability(lower(ref->gpu->architecture), info);
  info.pcie_gen = static_cast<int>(ref->gpu->number("pcie_gen", 4));
  info.pcie_width = kDefaultPcieWidth;
  if (target.memory_bandwidth_gbps() <= 0) {
    return invalid_data_error("the catalog has no memory bandwidth for " + ref->id() + ": the fake needs it",
                              "fake_gpu");
  }
  return std::unique_ptr<FakeGpu>(new FakeGpu(target, std::move(info), faults, seed));
}

double FakeGpu::gemm_emax(Precision p) {
  switch (p) {
    case Precision::kFp64:
      return kEmaxFp64;
    case Precision::kFp32:
      return kEmaxFp32;
    case Precision::kTf32:
      return kEmaxTf32;
    case Precision::kFp8:
      return kEmaxFp8;
    case Precision::kInt8:
    case Precision::kInt4:
      return kEmaxInt8;
    default:
      return kEmaxHalf;
  }
}

std::string FakeGpu::unsupported(Precision p) {
  const std::string name(precision_name(p));
  if (p == Precision::kFp8 && faults_.no_fp8) return "fp8: not supported on this GPU (fake fault)";
  if (p == Precision::kInt8 && faults_.no_int8) return "int8: not supported on this GPU (fake fault)";
  if (!target_.peak_tflops(p)) return name + ": the catalog has no dense " + name + " rate for this GPU";
  return "";
}

bool FakeGpu::set_memory_cap(int64_t bytes, std::string& error) {
  if (bytes <= 0) {
    error = "no device memory to work in";
    return false;
  }
  cap_bytes_ = bytes;
  return true;
}

double FakeGpu::noise() {
  // Box-Muller over mt19937_64's raw bits: the same numbers on every standard library.
  constexpr double kTwoPi = 6.283185307179586;
  constexpr double kInv53 = 1.0 / 9007199254740992.0;  // 2^-53
  const double u1 = (static_cast<double>(rng_() >> 11) + 0.5) * kInv53;
  const double u2 = static_cast<double>(rng_() >> 11) * kInv53;
  double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
  z = std::clamp(z, -kNoiseClipSigmas, kNoiseClipSigmas);
  return std::exp(faults_.noise * z);
}

double FakeGpu::clock_share() const {
  if (faults_.throttle_after_seconds >= 0 && clock_seconds_ >= faults_.throttle_after_seconds) {
    return faults_.throttle_factor;
  }
  return 1.0;
}

Timing FakeGpu::advance(double seconds, double watts) {
  clock_seconds_ += seconds + kCallOverheadSeconds;
  energy_joules_ += watts * seconds + kIdleTdpShare * target_.tdp_w() * kCallOverheadSeconds;
  last_watts_ = watts;
  Timing t;
  t.ok = true;
  t.seconds = seconds;
  t.checked = true;
  return t;
}

double FakeGpu::gemm_tflops_truth(Precision p, int64_t m, int64_t n, int64_t k) const {
  const double peak = target_.peak_tflops(p).value_or(0);
  const double ridge = peak * 1e12 / (target_.memory_bandwidth_gbps() * 1e9);  // FLOP per byte
  const double intensity = gemm_flops(m, n, k) / gemm_bytes(p, m, n, k);
  return peak * gemm_emax(p) * intensity / (intensity + ridge);
}

Timing FakeGpu::gemm(Precision p, int64_t m, int64_t n, int64_t k, int reps) {
  if (std::string why = unsupported(p); !why.empty()) return Timing{false, 0, false, why};
  const double pool_bytes = 2 * gemm_bytes(p, m, n, k);
  if (pool_bytes > static_cast<double>(cap_bytes_)) return Timing{false, 0, false, "operands exceed the memory cap"};
  const double one = gemm_flops(m, n, k) / (gemm_tflops_truth(p, m, n, k) * 1e12 * clock_share());
  return advance(one * reps * noise(), kComputeTdpShare * target_.tdp_w() * clock_share());
}

double FakeGpu::memory_gbps_truth(MemKernel, int64_t bytes) const {
  const double dram = target_.memory_bandwidth_gbps() * 1e9 * kDramEfficiency;
  const double plateau = bytes <= info_.l2_bytes ? dram * kL2BandwidthFactor : dram;
  const double seconds = kMemoryLaunchSeconds + static_cast<double>(bytes) / plateau;
  return static_cast<double>(bytes) / seconds / 1e9;
}

Timing FakeGpu::memory(MemKernel kernel, int64_t bytes, int reps) {
  if (bytes > cap_bytes_) return Timing{false, 0, false, "working set exceeds the memory cap"};
  const double one = static_cast<double>(bytes) / (memory_gbps_truth(kernel, bytes) * 1e9);
  return advance(one * reps * noise(), kMemoryTdpShare * target_.tdp_w());
}

double FakeGpu::transfer_gbps_truth(bool pinned, int64_t bytes) const {
  const double link = target_.link_gbps() * 1e9 * (pinned ? kPinnedLinkShare : kPageableLinkShare);
  const double seconds = kTransferLatencySeconds + static_cast<double>(bytes) / link;
  return static_cast<double>(bytes) / seconds / 1e9;
}

Timing FakeGpu::transfer(bool, bool pinned, int64_t bytes, int reps) {
  const double one = static_cast<double>(bytes) / (transfer_gbps_truth(pinned, bytes) * 1e9);
  return advance(one * reps * noise(), kIdleTdpShare * target_.tdp_w());
}

double FakeGpu::launch_micros_truth(bool graph) const { return graph ? kGraphLaunchMicros : kEagerLaunchMicros; }

Timing FakeGpu::launch(bool graph, int launches) {
  const double one = launch_micros_truth(graph) * 1e-6;
  return advance(one * launches * noise(), kIdleTdpShare * target_.tdp_w());
}

Sensors FakeGpu::sensors() {
  Sensors s;
  if (faults_.no_nvml) return s;
  s.available = true;
  s.energy_joules = energy_joules_;
  s.power_watts = last_watts_;
  s.power_limit_watts = target_.tdp_w();
  s.sm_clock_mhz = kFakeBaseClockMhz * clock_share();
  s.temperature_c = kFakeTemperatureC + (clock_share() < 1 ? 30 : 0);
  if (clock_share() < 1) s.throttle_reasons.emplace_back("sw_thermal_slowdown");
  s.other_processes = faults_.other_processes;
  return s;
}

}  // namespace gpuplan::bench
