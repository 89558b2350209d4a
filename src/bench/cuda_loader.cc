#include "bench/cuda_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <vector>

#include "bench/nvml_sensors.h"

namespace gpuplan::bench {

namespace {

// The plugin's kernels and timings, with NVML's readings and identity on top.
class CudaBackend final : public BenchBackend {
 public:
  CudaBackend(BenchBackend* inner, CudaCloseFn close, std::unique_ptr<NvmlSensors> nvml)
      : inner_(inner), close_(close), nvml_(std::move(nvml)) {}
  ~CudaBackend() override { close_(inner_); }  // the plugin stays loaded: CUDA's static state outlives it
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  DeviceInfo device() override {
    DeviceInfo d = inner_->device();
    if (nvml_) {
      d.driver_version = nvml_->driver_version();
      d.pcie_gen = nvml_->pcie_gen();
      d.pcie_width = nvml_->pcie_width();
    }
    return d;
  }
  std::string unsupported(Precision p) override { return inner_->unsupported(p); }
  bool set_memory_cap(int64_t bytes, std::string& error) override { return inner_->set_memory_cap(bytes, error); }
  Timing gemm(Precision p, int64_t m, int64_t n, int64_t k, int reps) override {
    return inner_->gemm(p, m, n, k, reps);
  }
  Timing memory(MemKernel kernel, int64_t bytes, int reps) override { return inner_->memory(kernel, bytes, reps); }
  Timing transfer(bool h2d, bool pinned, int64_t bytes, int reps) override {
    return inner_->transfer(h2d, pinned, bytes, reps);
  }
  Timing launch(bool graph, int launches) override { return inner_->launch(graph, launches); }
  Sensors sensors() override { return nvml_ ? nvml_->read() : Sensors{}; }
  double now_seconds() override { return inner_->now_seconds(); }

 private:
  BenchBackend* inner_;
  CudaCloseFn close_;
  std::unique_ptr<NvmlSensors> nvml_;
};

std::string beside_binary() {
  std::array<char, 4096> buf{};
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return "";
  std::string path(buf.data(), static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1) + kCudaPluginName;
}

}  // namespace

Result<std::unique_ptr<BenchBackend>> open_cuda_backend(int device) {
  std::vector<std::string> tried;
  void* handle = nullptr;
  std::string why;
  std::vector<std::string> paths;
  if (const char* env = std::getenv("GPUPLAN_BENCH_CUDA_PLUGIN"); env != nullptr && *env != '\0')
    paths.emplace_back(env);
  if (std::string b = beside_binary(); !b.empty()) paths.push_back(b);
  paths.emplace_back(kCudaPluginName);
  for (const std::string& p : paths) {
    handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    const char* e = dlerror();
    why = p + ": " + (e ? e : "cannot open");
  }
  if (handle == nullptr) {
    return Error{ErrorCode::kUnavailable,
                 "the CUDA backend is not available (" + why +
                     "); build gpuplan where the CUDA toolkit is (GPUPLAN_CUDA=ON), or measure the fake GPU with "
                     "--backend fake --fake-gpu TARGET",
                 "backend"};
  }
  auto open = reinterpret_cast<CudaOpenFn>(dlsym(handle, kCudaOpenSymbol));
  auto close = reinterpret_cast<CudaCloseFn>(dlsym(handle, kCudaCloseSymbol));
  if (open == nullptr || close == nullptr) {
    return Error{ErrorCode::kUnavailable,
                 std::string(kCudaPluginName) + " lacks " + kCudaOpenSymbol + "/" + kCudaCloseSymbol +
                     ": a plugin of another build?",
                 "backend"};
  }
  constexpr unsigned long kErrorSize = 512;
  std::array<char, kErrorSize> err{};
  BenchBackend* inner = open(kBackendAbiVersion, device, err.data(), kErrorSize);
  if (inner == nullptr) {
    err.back() = '\0';
    return Error{ErrorCode::kUnavailable, "no CUDA GPU to measure: " + std::string(err.data()), "device"};
  }
  auto nvml = NvmlSensors::open(inner->device().pci_bus_id);
  return std::unique_ptr<BenchBackend>(new CudaBackend(inner, close, std::move(nvml)));
}

}  // namespace gpuplan::bench
