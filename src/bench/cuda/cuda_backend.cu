// The CUDA backend of `gpuplan bench` (issue #16), built as the plugin libgpuplan_bench_cuda.so when the
// CUDA toolkit is found (GPUPLAN_CUDA) and opened by dlopen (src/bench/cuda_loader.cc), so that gpuplan
// starts where there is no CUDA. CUDA runtime (linked statically) and cuBLASLt only; no gpuplan library.
// Method (docs/bench.md): GEMMs through cuBLASLt per precision in a linear layer's layout, timed with
// CUDA events around `reps` queued calls, operand sets rotated through a pool of at least twice the L2
// so every call reads from DRAM, random finite data, four outputs per shape checked against a host dot
// product; memory kernels (read, copy, triad) with grid-stride loops; pinned and pageable copies; the
// launch floor of empty kernels, eager and replayed from a graph.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "bench/backend.h"

namespace gpuplan::bench {

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's workspace: what its heuristics ask for on Hopper
constexpr int kPoolL2Multiple = 2;                    // operand pool >= 2x L2: each call misses L2
constexpr int kMaxPoolSets = 4096;                    // operand sets rotated at most (256^3 bf16: 4096 x 384 KiB)
constexpr size_t kAlignBytes = 256;                   // each operand of a set starts on a 256-byte boundary
constexpr int kCheckedOutputs = 4;                    // outputs compared with a host dot product per shape
constexpr int kThreads = 256;                         // block size of every kernel here
constexpr int kBlocksPerSm = 8;                       // grid of the memory kernels: enough to hide latency
constexpr int kGraphKernels = 100;                    // empty kernels captured in the launch graph

std::string cuda_error(const char* what, cudaError_t e) { return std::string(what) + ": " + cudaGetErrorString(e); }
std::string blas_error(const char* what, cublasStatus_t s) {
  return std::string(what) + " failed (cublasStatus " + std::to_string(static_cast<int>(s)) + ")";
}

// --- data -------------------------------------------------------------------------------------------
__device__ float hash_unit(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return static_cast<float>(x >> 40) / static_cast<float>(1u << 24) * 2.0f - 1.0f;  // [-1, 1)
}
template <typename T>
__device__ T from_unit(float u);
template <>
__device__ double from_unit<double>(float u) {
  return u;
}
template <>
__device__ float from_unit<float>(float u) {
  return u;
}
template <>
__device__ __nv_bfloat16 from_unit<__nv_bfloat16>(float u) {
  return __float2bfloat16(u);
}
template <>
__device__ __half from_unit<__half>(float u) {
  return __float2half(u);
}
template <>
__device__ __nv_fp8_e4m3 from_unit<__nv_fp8_e4m3>(float u) {
  return __nv_fp8_e4m3(u);
}
template <>
__device__ int8_t from_unit<int8_t>(float u) {
  return static_cast<int8_t>(lrintf(u * 4.0f));
}  // -4..4: exact sums

template <typename T>
__global__ void fill(T* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    p[i] = from_unit<T>(hash_unit(i, seed));
  }
}

double to_double(const void* p, Precision prec, size_t i) {
  switch (prec) {
    case Precision::kFp64:
      return static_cast<const double*>(p)[i];
    case Precision::kFp32:
    case Precision::kTf32:
      return static_cast<const float*>(p)[i];
    case Precision::kBf16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case Precision::kFp16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case Precision::kFp8:
      return static_cast<float>(static_cast<const __nv_fp8_e4m3*>(p)[i]);
    default:
      return static_cast<const int8_t*>(p)[i];
  }
}
double out_to_double(const void* p, Precision prec, size_t i) {
  switch (prec) {
    case Precision::kFp64:
      return static_cast<const double*>(p)[i];
    case Precision::kFp32:
    case Precision::kTf32:
      return static_cast<const float*>(p)[i];
    case Precision::kFp16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case Precision::kInt8:
      return static_cast<const int32_t*>(p)[i];
    default:  // bf16, fp8 (bf16 out)
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}
// Relative tolerance of an output against the exact dot product, over sum |a b| (the output's rounding
// and the accumulation's: bf16 keeps 8 bits, fp16 11, tf32 inputs 10).
double tolerance(Precision p) {
  switch (p) {
    case Precision::kFp64:
      return 1e-10;
    case Precision::kFp32:
      return 1e-4;
    case Precision::kTf32:
      return 5e-3;
    case Precision::kInt8:
      return 0;
    default:
      return 2e-2;
  }
}

// --- memory kernels ---------------------------------------------------------------------------------
__global__ void read_kernel(const float4* a, size_t n, float* sink) {
  float s = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    const float4 v = a[i];
    s += v.x + v.y + v.z + v.w;
  }
  if (s == 12345.678f) *sink = s;  // never true for the data here: keeps the loads without a store per thread
}
__global__ void copy_kernel(const float4* a, float4* b, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    b[i] = a[i];
}
__global__ void triad_kernel(float4* a, const float4* b, const float4* c, float s, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    const float4 x = b[i], y = c[i];
    a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
  }
}
__global__ void empty_kernel() {}

struct Types {
  cudaDataType_t ab, cd, scale;
  cublasComputeType_t compute;
};
Types types(Precision p) {
  switch (p) {
    case Precision::kFp64:
      return {CUDA_R_64F, CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F};
    case Precision::kFp32:
      return {CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F};  // strict: no TF32
    case Precision::kTf32:
      return {CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32};
    case Precision::kBf16:
      return {CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case Precision::kFp16:
      return {CUDA_R_16F, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case Precision::kFp8:
      return {CUDA_R_8F_E4M3, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    default:
      return {CUDA_R_8I, CUDA_R_32I, CUDA_R_32I, CUBLAS_COMPUTE_32I};
  }
}

class Cuda final : public BenchBackend {
 public:
  ~Cuda() override {
    free_host(pinned_, true);
    free_host(pageable_, false);
    if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
    release_pool();
    if (workspace_) cudaFree(workspace_);
    if (sink_) cudaFree(sink_);
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (stream_) cudaStreamDestroy(stream_);
    if (lt_) cublasLtDestroy(lt_);
  }

  bool init(int device, std::string& error) {
    int count = 0;
    if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
      error = cuda_error("cudaGetDeviceCount", e) + " (no NVIDIA driver, or no GPU this process may use)";
      return false;
    }
    if (device < 0 || device >= count) {
      error = "device " + std::to_string(device) + " does not exist: this machine has " + std::to_string(count) +
              " CUDA device(s)";
      return false;
    }
    if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return fail(error, cuda_error("cudaSetDevice", e));
    cudaDeviceProp prop{};
    if (cudaError_t e = cudaGetDeviceProperties(&prop, device); e != cudaSuccess) {
      return fail(error, cuda_error("cudaGetDeviceProperties", e));
    }
    info_.index = device;
    info_.name = prop.name;
    info_.l2_bytes = prop.l2CacheSize;
    info_.sm_count = prop.multiProcessorCount;
    info_.cc_major = prop.major;
    info_.cc_minor = prop.minor;
    info_.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    char uuid[64];
    const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
    std::snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                  u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    info_.uuid = uuid;
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) == cudaSuccess) info_.pci_bus_id = bus;
    int rt = 0;
    if (cudaRuntimeGetVersion(&rt) == cudaSuccess) {
      info_.cuda_runtime_version = std::to_string(rt / 1000) + "." + std::to_string(rt % 1000 / 10);
    }
    size_t free_bytes = 0, total = 0;
    if (cudaError_t e = cudaMemGetInfo(&free_bytes, &total); e != cudaSuccess) {
      return fail(error, cuda_error("cudaMemGetInfo", e));
    }
    info_.free_bytes = static_cast<int64_t>(free_bytes);
    if (cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking); e != cudaSuccess) {
      return fail(error, cuda_error("cudaStreamCreate", e));
    }
    if (cudaEventCreate(&start_) != cudaSuccess || cudaEventCreate(&stop_) != cudaSuccess) {
      return fail(error, "cudaEventCreate failed");
    }
    if (cublasStatus_t s = cublasLtCreate(&lt_); s != CUBLAS_STATUS_SUCCESS)
      return fail(error, blas_error("cublasLtCreate", s));
    if (cudaMalloc(&workspace_, kWorkspaceBytes) != cudaSuccess || cudaMalloc(&sink_, sizeof(float)) != cudaSuccess) {
      return fail(error, "cudaMalloc of the workspace failed");
    }
    return true;
  }

  std::string name() const override { return "cuda"; }
  DeviceInfo device() override { return info_; }

  std::string unsupported(Precision p) override {
    const int cc = info_.cc_major * 10 + info_.cc_minor;
    constexpr int kTensorCc = 80, kFp8Cc = 89,
                  kInt8Cc = 75;  // Ampere (bf16, tf32, fp64 MMA), Ada/Hopper fp8, Turing int8
    if (p == Precision::kFp8 && cc < kFp8Cc)
      return "fp8: needs compute capability 8.9 (Ada, Hopper); this GPU is " + cc_text();
    if ((p == Precision::kBf16 || p == Precision::kTf32) && cc < kTensorCc) {
      return std::string(p == Precision::kBf16 ? "bf16" : "tf32") + ": needs compute capability 8.0; this GPU is " +
             cc_text();
    }
    if (p == Precision::kInt8 && cc < kInt8Cc) return "int8: needs compute capability 7.5; this GPU is " + cc_text();
    if (p == Precision::kInt4) return "int4: not measured";
    return "";
  }

  bool set_memory_cap(int64_t bytes, std::string& error) override {
    if (bytes < static_cast<int64_t>(kWorkspaceBytes))
      return fail(error, "the memory cap is below cuBLASLt's workspace");
    cap_ = bytes;
    return true;
  }

  double now_seconds() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

  Timing gemm(Precision p, int64_t m, int64_t n, int64_t k, int reps) override {
    Timing t;
    if (std::string why = unsupported(p); !why.empty()) return error(t, why);
    const Key key{static_cast<int>(p), m, n, k};
    if (key != pool_key_) {
      if (std::string e = prepare_gemm(p, m, n, k); !e.empty()) return error(t, e);
      pool_key_ = key;
      t.checked = checked_;
    }
    t.checked = checked_;
    if (cudaEventRecord(start_, stream_) != cudaSuccess) return error(t, "cudaEventRecord failed");
    for (int r = 0; r < reps; ++r) {
      const Set& s = sets_[static_cast<size_t>(r) % sets_.size()];
      if (std::string e = matmul(s); !e.empty()) return error(t, e);
    }
    return finish(t);
  }

  Timing memory(MemKernel kernel, int64_t bytes, int reps) override {
    Timing t;
    if (bytes > cap_) return error(t, "working set over the memory cap");
    if (std::string e = ensure_buffer(static_cast<size_t>(bytes)); !e.empty()) return error(t, e);
    const int arrays = kernel == MemKernel::kRead ? 1 : kernel == MemKernel::kCopy ? 2 : 3;
    const size_t n = static_cast<size_t>(bytes) / arrays / sizeof(float4);
    if (n == 0) return error(t, "working set too small");
    auto* a = static_cast<float4*>(buffer_);
    float4* b = a + n;
    float4* c = b + n;
    const int blocks = info_.sm_count * kBlocksPerSm;
    if (cudaEventRecord(start_, stream_) != cudaSuccess) return error(t, "cudaEventRecord failed");
    for (int r = 0; r < reps; ++r) {
      if (kernel == MemKernel::kRead) read_kernel<<<blocks, kThreads, 0, stream_>>>(a, n, sink_);
      if (kernel == MemKernel::kCopy) copy_kernel<<<blocks, kThreads, 0, stream_>>>(a, b, n);
      if (kernel == MemKernel::kTriad) triad_kernel<<<blocks, kThreads, 0, stream_>>>(a, b, c, 3.0f, n);
    }
    return finish(t);
  }

  Timing transfer(bool h2d, bool pinned, int64_t bytes, int reps) override {
    Timing t;
    if (bytes > cap_) return error(t, "transfer over the memory cap");
    if (std::string e = ensure_buffer(static_cast<size_t>(bytes)); !e.empty()) return error(t, e);
    // Host buffers are kept between calls (a 256 MiB cudaMallocHost takes tens of ms: budget, not work).
    HostBuffer& hb = pinned ? pinned_ : pageable_;
    if (hb.bytes < static_cast<size_t>(bytes)) {
      free_host(hb, pinned);
      void* p = nullptr;
      if (pinned) {
        if (cudaMallocHost(&p, static_cast<size_t>(bytes)) != cudaSuccess) return error(t, "cudaMallocHost failed");
      } else {
        p = std::malloc(static_cast<size_t>(bytes));
        if (p == nullptr) return error(t, "malloc of the pageable buffer failed");
      }
      std::memset(p, 1, static_cast<size_t>(bytes));
      hb = {p, static_cast<size_t>(bytes)};
    }
    void* host = hb.ptr;
    bool ok = cudaEventRecord(start_, stream_) == cudaSuccess;
    for (int r = 0; ok && r < reps; ++r) {
      ok = (h2d ? cudaMemcpyAsync(buffer_, host, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_)
                : cudaMemcpyAsync(host, buffer_, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_)) ==
           cudaSuccess;
    }
    return ok ? finish(t) : error(t, "cudaMemcpyAsync failed");
  }

  Timing launch(bool graph, int launches) override {
    Timing t;
    if (graph && !graph_exec_) {
      cudaGraph_t g = nullptr;
      if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
        return error(t, "capture failed");
      for (int i = 0; i < kGraphKernels; ++i) empty_kernel<<<1, 1, 0, stream_>>>();
      if (cudaStreamEndCapture(stream_, &g) != cudaSuccess) return error(t, "capture failed");
      if (cudaGraphInstantiate(&graph_exec_, g, 0) != cudaSuccess) {
        cudaGraphDestroy(g);
        return error(t, "cudaGraphInstantiate failed");
      }
      cudaGraphDestroy(g);
    }
    if (cudaEventRecord(start_, stream_) != cudaSuccess) return error(t, "cudaEventRecord failed");
    if (graph) {
      for (int i = 0; i < (launches + kGraphKernels - 1) / kGraphKernels; ++i) cudaGraphLaunch(graph_exec_, stream_);
    } else {
      for (int i = 0; i < launches; ++i) empty_kernel<<<1, 1, 0, stream_>>>();
    }
    Timing out = finish(t);
    // A graph call runs whole graphs: scale to the launches asked for.
    if (out.ok && graph) {
      const int run = (launches + kGraphKernels - 1) / kGraphKernels * kGraphKernels;
      out.seconds = out.seconds * launches / run;
    }
    return out;
  }

  Sensors sensors() override { return Sensors{}; }  // NVML: the loader's side

 private:
  using Key = std::tuple<int, int64_t, int64_t, int64_t>;
  struct HostBuffer {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  static void free_host(HostBuffer& b, bool pinned) {
    if (b.ptr != nullptr) {
      if (pinned) {
        cudaFreeHost(b.ptr);
      } else {
        std::free(b.ptr);
      }
    }
    b = {};
  }
  struct Set {
    void* w = nullptr;  // n x k, stored k-major (column-major k x n, transposed: TN)
    void* x = nullptr;  // k x m
    void* d = nullptr;  // n x m
  };

  static bool fail(std::string& out, const std::string& why) {
    out = why;
    return false;
  }
  static Timing error(Timing& t, const std::string& why) {
    t.ok = false;
    t.error = why;
    return t;
  }
  std::string cc_text() const { return std::to_string(info_.cc_major) + "." + std::to_string(info_.cc_minor); }

  Timing finish(Timing& t) {
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return error(t, cuda_error("launch", e));
    if (cudaEventRecord(stop_, stream_) != cudaSuccess) return error(t, "cudaEventRecord failed");
    if (cudaError_t e = cudaEventSynchronize(stop_); e != cudaSuccess) return error(t, cuda_error("synchronize", e));
    float ms = 0;
    if (cudaEventElapsedTime(&ms, start_, stop_) != cudaSuccess) return error(t, "cudaEventElapsedTime failed");
    t.ok = true;
    t.seconds = ms * 1e-3;
    return t;
  }

  std::string ensure_buffer(size_t bytes) {
    if (bytes <= buffer_bytes_) return "";
    release_pool();
    if (buffer_) cudaFree(buffer_);
    buffer_ = nullptr;
    buffer_bytes_ = 0;
    if (cudaError_t e = cudaMalloc(&buffer_, bytes); e != cudaSuccess) return cuda_error("cudaMalloc", e);
    buffer_bytes_ = bytes;
    fill<float><<<info_.sm_count * kBlocksPerSm, kThreads, 0, stream_>>>(static_cast<float*>(buffer_), bytes / 4, 7);
    return cudaStreamSynchronize(stream_) == cudaSuccess ? "" : "filling the buffer failed";
  }

  void release_pool() {
    if (pool_) cudaFree(pool_);
    pool_ = nullptr;
    sets_.clear();
    if (layout_w_) cublasLtMatrixLayoutDestroy(layout_w_);
    if (layout_x_) cublasLtMatrixLayoutDestroy(layout_x_);
    if (layout_d_) cublasLtMatrixLayoutDestroy(layout_d_);
    if (desc_) cublasLtMatmulDescDestroy(desc_);
    layout_w_ = layout_x_ = layout_d_ = nullptr;
    desc_ = nullptr;
    pool_key_ = Key{-1, 0, 0, 0};
  }

  template <typename T>
  void fill_as(void* p, size_t n, uint32_t seed) {
    fill<T><<<info_.sm_count * kBlocksPerSm, kThreads, 0, stream_>>>(static_cast<T*>(p), n, seed);
  }
  void fill_operand(Precision p, void* ptr, size_t n, uint32_t seed) {
    switch (p) {
      case Precision::kFp64:
        fill_as<double>(ptr, n, seed);
        break;
      case Precision::kFp32:
      case Precision::kTf32:
        fill_as<float>(ptr, n, seed);
        break;
      case Precision::kBf16:
        fill_as<__nv_bfloat16>(ptr, n, seed);
        break;
      case Precision::kFp16:
        fill_as<__half>(ptr, n, seed);
        break;
      case Precision::kFp8:
        fill_as<__nv_fp8_e4m3>(ptr, n, seed);
        break;
      default:
        fill_as<int8_t>(ptr, n, seed);
        break;
    }
  }

  // Operand pool, layouts, algorithm and a check of a few outputs for one shape.
  std::string prepare_gemm(Precision p, int64_t m, int64_t n, int64_t k) {
    release_pool();
    if (buffer_) {
      cudaFree(buffer_);
      buffer_ = nullptr;
      buffer_bytes_ = 0;
    }
    prec_ = p;
    m_ = m, n_ = n, k_ = k;
    auto aligned = [](size_t b) { return (b + kAlignBytes - 1) / kAlignBytes * kAlignBytes; };
    const size_t wb = aligned(static_cast<size_t>(n * k) * operand_bytes(p)),
                 xb = aligned(static_cast<size_t>(k * m) * operand_bytes(p)),
                 db = aligned(static_cast<size_t>(n * m) * output_bytes(p));
    const size_t set_bytes = wb + xb + db;
    const size_t want =
        static_cast<size_t>(kPoolL2Multiple) * static_cast<size_t>(std::max<int64_t>(info_.l2_bytes, 1));
    size_t sets = std::clamp<size_t>((want + set_bytes - 1) / set_bytes, 1, kMaxPoolSets);
    sets = std::min(sets, static_cast<size_t>(cap_ - static_cast<int64_t>(kWorkspaceBytes)) / set_bytes);
    if (sets == 0) return "operands (" + std::to_string(set_bytes >> 20) + " MiB) exceed the memory cap";
    // One allocation for the whole pool, carved into sets.
    if (cudaError_t e = cudaMalloc(&pool_, sets * set_bytes); e != cudaSuccess) {
      pool_ = nullptr;
      return cuda_error("cudaMalloc of the operand pool", e);
    }
    for (size_t i = 0; i < sets; ++i) {
      Set s;
      char* base = static_cast<char*>(pool_) + i * set_bytes;
      s.w = base;
      s.x = base + wb;
      s.d = base + wb + xb;
      fill_operand(p, s.w, static_cast<size_t>(n * k), static_cast<uint32_t>(2 * i + 1));
      fill_operand(p, s.x, static_cast<size_t>(k * m), static_cast<uint32_t>(2 * i + 2));
      sets_.push_back(s);
    }
    const Types ty = types(p);
    if (cublasLtMatmulDescCreate(&desc_, ty.compute, ty.scale) != CUBLAS_STATUS_SUCCESS)
      return "cublasLtMatmulDescCreate failed";
    const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT);
    cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN);
    // Column-major: D (n x m) = W^T (W stored k x n) . X (k x m); the layout fp8 and int8 require (TN).
    if (cublasLtMatrixLayoutCreate(&layout_w_, ty.ab, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&layout_x_, ty.ab, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&layout_d_, ty.cd, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n) !=
            CUBLAS_STATUS_SUCCESS) {
      return "cublasLtMatrixLayoutCreate failed";
    }
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulPreferenceCreate(&pref);
    const size_t ws = kWorkspaceBytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt_, desc_, layout_w_, layout_x_, layout_d_, layout_d_, pref, 1,
                                                       &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (hs != CUBLAS_STATUS_SUCCESS || found == 0) {
      return "cuBLASLt has no algorithm for " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    }
    algo_ = result.algo;
    if (std::string e = matmul(sets_[0]); !e.empty()) return e;
    if (cudaStreamSynchronize(stream_) != cudaSuccess) return "the first matmul failed";
    checked_ = check_outputs();
    if (!checked_) return "outputs disagree with a host dot product: the GEMM is wrong, its timings would be too";
    return "";
  }

  std::string matmul(const Set& s) {
    const double one_d = 1, zero_d = 0;
    const float one_f = 1, zero_f = 0;
    const int32_t one_i = 1, zero_i = 0;
    const void* alpha = prec_ == Precision::kFp64   ? static_cast<const void*>(&one_d)
                        : prec_ == Precision::kInt8 ? static_cast<const void*>(&one_i)
                                                    : static_cast<const void*>(&one_f);
    const void* beta = prec_ == Precision::kFp64   ? static_cast<const void*>(&zero_d)
                       : prec_ == Precision::kInt8 ? static_cast<const void*>(&zero_i)
                                                   : static_cast<const void*>(&zero_f);
    cublasStatus_t st = cublasLtMatmul(lt_, desc_, alpha, s.w, layout_w_, s.x, layout_x_, beta, s.d, layout_d_, s.d,
                                       layout_d_, &algo_, workspace_, kWorkspaceBytes, stream_);
    return st == CUBLAS_STATUS_SUCCESS ? "" : blas_error("cublasLtMatmul", st);
  }

  bool check_outputs() {
    const Set& s = sets_[0];
    const size_t ob = static_cast<size_t>(operand_bytes(prec_));
    std::vector<unsigned char> w(static_cast<size_t>(k_) * ob), x(static_cast<size_t>(k_) * ob);
    std::vector<unsigned char> d(static_cast<size_t>(output_bytes(prec_)));
    for (int c = 0; c < kCheckedOutputs; ++c) {
      const int64_t row = (n_ - 1) * c / std::max(kCheckedOutputs - 1, 1),
                    col = (m_ - 1) * (kCheckedOutputs - 1 - c) / std::max(kCheckedOutputs - 1, 1);
      // W column `row` (k contiguous), X column `col` (k contiguous), D(row, col).
      if (cudaMemcpy(w.data(), static_cast<char*>(s.w) + static_cast<size_t>(row * k_) * ob, w.size(),
                     cudaMemcpyDeviceToHost) != cudaSuccess ||
          cudaMemcpy(x.data(), static_cast<char*>(s.x) + static_cast<size_t>(col * k_) * ob, x.size(),
                     cudaMemcpyDeviceToHost) != cudaSuccess ||
          cudaMemcpy(d.data(), static_cast<char*>(s.d) + static_cast<size_t>(col * n_ + row) * d.size(), d.size(),
                     cudaMemcpyDeviceToHost) != cudaSuccess) {
        return false;
      }
      double exact = 0, magnitude = 0;
      for (int64_t i = 0; i < k_; ++i) {
        const double a = to_double(w.data(), prec_, static_cast<size_t>(i)),
                     b = to_double(x.data(), prec_, static_cast<size_t>(i));
        exact += a * b;
        magnitude += std::abs(a * b);
      }
      const double got = out_to_double(d.data(), prec_, 0);
      if (!(std::abs(got - exact) <= tolerance(prec_) * std::max(magnitude, 1.0) + 1e-12)) return false;
    }
    return true;
  }

  DeviceInfo info_;
  int64_t cap_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  float* sink_ = nullptr;
  void* buffer_ = nullptr;
  size_t buffer_bytes_ = 0;
  cudaGraphExec_t graph_exec_ = nullptr;
  HostBuffer pinned_, pageable_;
  void* pool_ = nullptr;  // the operand sets, one allocation
  std::vector<Set> sets_;
  Key pool_key_{-1, 0, 0, 0};
  Precision prec_ = Precision::kBf16;
  int64_t m_ = 0, n_ = 0, k_ = 0;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t layout_w_ = nullptr, layout_x_ = nullptr, layout_d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  bool checked_ = false;
};

}  // namespace

}  // namespace gpuplan::bench

extern "C" __attribute__((visibility("default"))) gpuplan::bench::BenchBackend* gpuplan_bench_cuda_open(
    int abi_version, int device, char* error, unsigned long error_size) {
  auto say = [&](const std::string& why) {
    if (error != nullptr && error_size > 0) {
      std::snprintf(error, error_size, "%s", why.c_str());
    }
  };
  if (abi_version != gpuplan::bench::kBackendAbiVersion) {
    say("libgpuplan_bench_cuda.so is of another build (ABI " + std::to_string(gpuplan::bench::kBackendAbiVersion) +
        ", asked " + std::to_string(abi_version) + ")");
    return nullptr;
  }
  try {
    auto* c = new gpuplan::bench::Cuda();
    std::string why;
    if (!c->init(device, why)) {
      delete c;
      say(why);
      return nullptr;
    }
    return c;
  } catch (const std::exception& e) {
    say(e.what());
    return nullptr;
  }
}

extern "C" __attribute__((visibility("default"))) void gpuplan_bench_cuda_close(gpuplan::bench::BenchBackend* b) {
  delete b;
}
