// The CUDA backend, opened at run time: the plugin libgpuplan_bench_cuda.so (cuda/cuda_backend.cu: CUDA
// runtime and cuBLASLt) by dlopen, so that gpuplan starts on a machine with no CUDA at all, plus NVML's
// read calls (the agent's whitelist) for power, clocks, throttling and other processes.
#pragma once

#include <memory>
#include <string>

#include "bench/backend.h"
#include "gpuplan/status.h"

namespace gpuplan::bench {

// The plugin's C entry points (cuda_backend.cu defines them).
extern "C" {
using CudaOpenFn = BenchBackend* (*)(int abi_version, int device, char* error, unsigned long error_size);
using CudaCloseFn = void (*)(BenchBackend*);
}
inline constexpr const char* kCudaPluginName = "libgpuplan_bench_cuda.so";
inline constexpr const char* kCudaOpenSymbol = "gpuplan_bench_cuda_open";
inline constexpr const char* kCudaCloseSymbol = "gpuplan_bench_cuda_close";

// The plugin from $GPUPLAN_BENCH_CUDA_PLUGIN, else beside the running binary, else the loader's path.
// No plugin, no driver or no GPU: kUnavailable saying which, and what to do.
Result<std::unique_ptr<BenchBackend>> open_cuda_backend(int device);

}  // namespace gpuplan::bench
