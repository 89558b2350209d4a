// The one interface `gpuplan bench` measures through (issue #16): a fake GPU on a virtual clock
// (fake_gpu.cc) and the CUDA plugin (cuda/cuda_backend.cu, libgpuplan_bench_cuda.so, opened by dlopen
// from cuda_loader.cc). Header-only and plain types on purpose: the plugin implements it without linking
// anything of gpuplan (same compiler, same C++ ABI: the plugin is built in the same tree).
// A backend times work; the driver (bench.cc) decides what to run, how often, and when to stop.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpuplan/target.h"  // Precision (the enum only: the plugin calls no gpuplan function)

namespace gpuplan::bench {

// The plugin's entry points check this: a plugin of another build refuses to open.
inline constexpr int kBackendAbiVersion = 1;

struct DeviceInfo {
  int index = 0;
  std::string name;  // the driver's product name ("NVIDIA H100 80GB HBM3")
  std::string uuid;  // "GPU-..."
  std::string pci_bus_id;
  std::string driver_version;        // "" when unknown (the CUDA plugin leaves it to NVML)
  std::string cuda_runtime_version;  // "13.0"; "" for the fake
  std::string mig_profile;           // "3g.40gb" on a MIG instance, else ""
  int64_t memory_bytes = 0;
  int64_t free_bytes = 0;
  int64_t l2_bytes = 0;
  int sm_count = 0;
  int cc_major = 0;  // compute capability
  int cc_minor = 0;
  int pcie_gen = 0;  // 0 when unknown
  int pcie_width = 0;
};

// One timed call: `reps` queued repetitions of the same work, timed as a whole.
struct Timing {
  bool ok = false;
  double seconds = 0;    // the whole call: every rep
  bool checked = false;  // GEMM: outputs were compared with a host dot product and agreed
  std::string error;     // why not ok
};

// What the driver reads between points (NVML on the CUDA backend). Negative: not available.
struct Sensors {
  bool available = false;     // false: NVML absent (every figure below is unknown)
  double energy_joules = -1;  // the total-energy counter (monotonic)
  double power_watts = -1;
  double power_limit_watts = -1;
  double sm_clock_mhz = -1;
  double temperature_c = -1;
  std::vector<std::string> throttle_reasons;  // "sw_power_cap", "hw_slowdown", ... (active now)
  int other_processes = -1;                   // compute processes on the GPU besides this one; -1 unknown
};

enum class MemKernel { kRead, kCopy, kTriad };

// Bytes of one operand element of a GEMM in `p`, and of one output element (fp8 writes bf16, int8 int32:
// what cuBLASLt takes for them).
constexpr int operand_bytes(Precision p) {
  switch (p) {
    case Precision::kFp64:
      return 8;
    case Precision::kFp32:
    case Precision::kTf32:
      return 4;
    case Precision::kBf16:
    case Precision::kFp16:
      return 2;
    default:  // fp8, int8 (int4 is not measured)
      return 1;
  }
}
constexpr int output_bytes(Precision p) {
  switch (p) {
    case Precision::kFp64:
      return 8;
    case Precision::kFp32:
    case Precision::kTf32:
    case Precision::kInt8:
      return 4;
    default:  // bf16, fp16, fp8 (bf16 out)
      return 2;
  }
}
// FLOPs (int8: integer operations) of one GEMM, and the bytes it must move at least (operands read
// once, output written once): their ratio is its arithmetic intensity.
constexpr double gemm_flops(int64_t m, int64_t n, int64_t k) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
}
constexpr double gemm_bytes(Precision p, int64_t m, int64_t n, int64_t k) {
  const double md = static_cast<double>(m), nd = static_cast<double>(n), kd = static_cast<double>(k);
  return operand_bytes(p) * (md * kd + nd * kd) + output_bytes(p) * md * nd;
}

class BenchBackend {
 public:
  virtual ~BenchBackend() = default;
  virtual std::string name() const = 0;  // "cuda" | "fake"
  virtual DeviceInfo device() = 0;
  // "" when `p` runs here, else why not ("fp8 needs compute capability 8.9").
  virtual std::string unsupported(Precision p) = 0;
  // Device memory the backend may hold at once from now on (the driver's stated cap); false with `error`
  // when it cannot allocate its fixed buffers within it.
  virtual bool set_memory_cap(int64_t bytes, std::string& error) = 0;
  // D[n x m] = W[n x k] . X[k x m] in the layout of a linear layer (m tokens, n outputs, k inputs), `reps`
  // times over operand sets rotated through a pool larger than L2.
  virtual Timing gemm(Precision p, int64_t m, int64_t n, int64_t k, int reps) = 0;
  // A kernel over a working set of `bytes` (read: one array; copy: two halves; triad: three thirds).
  virtual Timing memory(MemKernel kernel, int64_t bytes, int reps) = 0;
  virtual Timing transfer(bool host_to_device, bool pinned, int64_t bytes, int reps) = 0;
  // `launches` empty kernels, eager or replayed from one CUDA graph.
  virtual Timing launch(bool graph, int launches) = 0;
  virtual Sensors sensors() = 0;
  // Seconds on the backend's clock (the fake's virtual clock; steady_clock on CUDA).
  virtual double now_seconds() = 0;
};

}  // namespace gpuplan::bench
