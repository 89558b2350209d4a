// A stub libnvidia-ml.so.1 for the agent's loader test (tests/unit/agent_test.cc): it exports NVML's core
// calls (init, count, handle, UUID, name), memory info, and a MIG mode call that answers NOT_SUPPORTED, and
// NOT nvmlSystemGetDriverVersion, nvmlDeviceGetPciInfo_v3 or the GPU instance calls: the agent must turn
// exactly those features off and still report the two GPUs.
#include <cstring>

namespace {
constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kInsufficientSize = 7;
constexpr unsigned kGpus = 2;
const char* const kUuids[kGpus] = {"GPU-stub-0000", "GPU-stub-0001"};
int copy(const char* s, char* buf, unsigned len) {
  if (std::strlen(s) + 1 > len) return kInsufficientSize;
  std::memcpy(buf, s, std::strlen(s) + 1);
  return kSuccess;
}
}  // namespace

extern "C" {
struct nvmlMemory_st {
  unsigned long long total, free, used;
};
__attribute__((visibility("default"))) int nvmlInit_v2() { return kSuccess; }
__attribute__((visibility("default"))) int nvmlShutdown() { return kSuccess; }
__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned* n) {
  *n = kGpus;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) {
  if (i >= kGpus) return kInvalidArgument;
  *d = reinterpret_cast<void*>(static_cast<unsigned long>(i) + 1);
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetUUID(void* d, char* buf, unsigned len) {
  return copy(kUuids[reinterpret_cast<unsigned long>(d) - 1], buf, len);
}
__attribute__((visibility("default"))) int nvmlDeviceGetName(void*, char* buf, unsigned len) {
  return copy("NVIDIA A100-SXM4-80GB", buf, len);
}
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void*, nvmlMemory_st* m) {
  m->total = 85899345920ULL;
  m->free = m->total;
  m->used = 0;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMigMode(void*, unsigned*, unsigned*) { return kNotSupported; }
}
