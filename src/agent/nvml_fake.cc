// The fake NVML backend: the same reader (nvml::read_inventory) over a function table whose calls answer
// from a JSON fixture (tests/data/nvml/*.json) and script faults. A fixture:
//   {"boot_id": "...", "driver_version": "550.54.15",
//    "gpus": [{"uuid", "name", "pci_bus_id", "memory_bytes", "mig_mode": "enabled"|"disabled",
//              "instances": [{"profile": "3g.40gb", "start": 0}],
//              "profiles": ["1g.10gb", "3g.40gb", "7g.80gb"]}],   // what dynamic MIG may create
//    (dynamic MIG: a profile of <c>g spans m memory slices of 8, m = 1, 2, 4, 4, 8 for c = 1, 2, 3, 4, 7; it
//     starts at multiples of m with start + m <= 8 and start <= 7 - c, A100's and H100's placements)
//    "missing": ["nvmlDeviceGetPciInfo_v3"],            // symbols the library lacks
//    "faults": [{"call": "nvmlDeviceGetHandleByIndex_v2", "index": 3, "return": "GPU_IS_LOST"},
//               {"call": "nvmlDeviceGetGpuInstances", "return": "INSUFFICIENT_RESOURCES"},
//               {"call": "nvmlDeviceGetName", "slow_ms": 200},
//               {"new_boot_id": "boot-2", "from_read": 2}]}   // "from_read": the fault holds from that read on
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <list>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "agent/nvml_api.h"

namespace gpuplan::agent {

namespace {

using namespace nvml;  // NOLINT(google-build-using-namespace): the NVML names of this file

constexpr int64_t kMaxSlowMs = 10'000;        // a scripted slow call sleeps at most this long
constexpr size_t kMaxFixtureBytes = 1 << 20;  // fixtures are a few KiB
constexpr unsigned kMemoryMarginMib = 256;    // profile memory a little under its name's GB (NVML's shape)

struct Fault {
  std::string call;
  int index = -1;  // a GPU index; -1: every GPU
  Return ret = kSuccess;
  int64_t slow_ms = 0;
  int from_read = 1;
  std::string new_boot_id;
};

struct FakeGpu {
  GpuInfo info;
  std::vector<std::string> profiles;  // distinct instance profiles: profile id = position
};
constexpr int kFakeMemorySlices = 8;  // A100 and H100: 8 memory slices, 7 compute slices
// Memory slices of a profile of `compute` compute slices (A100/H100 MIG tables).
int fake_memory_slices(unsigned compute) { return compute <= 2 ? static_cast<int>(compute) : compute <= 4 ? 4 : 8; }
// A compute instance the fake holds: on GPU `gpu`, GPU instance at `start`.
struct FakeCi {
  int gpu;
  int start;
};

struct Fixture {
  std::string boot_id;
  std::string driver_version;
  std::vector<FakeGpu> gpus;
  std::vector<std::string> missing;
  std::vector<Fault> faults;
};

Result<Return> return_code(const std::string& word) {
  static const std::map<std::string, Return, std::less<>> kCodes = {
      {"SUCCESS", kSuccess},
      {"NOT_SUPPORTED", kErrorNotSupported},
      {"NO_PERMISSION", kErrorNoPermission},
      {"NOT_FOUND", kErrorNotFound},
      {"DRIVER_NOT_LOADED", kErrorDriverNotLoaded},
      {"TIMEOUT", kErrorTimeout},
      {"FUNCTION_NOT_FOUND", kErrorFunctionNotFound},
      {"GPU_IS_LOST", kErrorGpuIsLost},
      {"INSUFFICIENT_RESOURCES", kErrorInsufficientResources},
      {"UNKNOWN", kErrorUnknown},
  };
  auto it = kCodes.find(word);
  if (it == kCodes.end()) return usage_error("unknown NVML return '" + word + "' in the fixture", "faults");
  return it->second;
}

Result<Fixture> parse_fixture(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return Error{ErrorCode::kNotFound, "cannot read the fake NVML fixture " + file, "nvml"};
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (text.size() > kMaxFixtureBytes) return limit_error("the fixture " + file + " is over 1 MiB", "nvml");
  const Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return usage_error(file + " is not a JSON object", "nvml");
  Fixture f;
  try {
    f.boot_id = j.value("boot_id", std::string("fake-boot"));
    f.driver_version = j.value("driver_version", std::string());
    for (const Json& g : j.value("gpus", Json::array())) {
      FakeGpu fg;
      fg.info.uuid = g.at("uuid").get<std::string>();
      fg.info.name = g.at("name").get<std::string>();
      fg.info.pci_bus_id = g.value("pci_bus_id", std::string());
      fg.info.memory_bytes = g.value("memory_bytes", int64_t{0});
      fg.info.mig_mode = g.value("mig_mode", std::string("disabled"));
      for (const Json& p : g.value("profiles", Json::array())) fg.profiles.push_back(p.get<std::string>());
      for (const Json& i : g.value("instances", Json::array())) {
        GpuInstance gi{i.at("profile").get<std::string>(), i.at("start").get<int>()};
        if (std::find(fg.profiles.begin(), fg.profiles.end(), gi.profile) == fg.profiles.end()) {
          fg.profiles.push_back(gi.profile);
        }
        fg.info.instances.push_back(gi);
      }
      f.gpus.push_back(std::move(fg));
    }
    for (const Json& m : j.value("missing", Json::array())) f.missing.push_back(m.get<std::string>());
    for (const Json& x : j.value("faults", Json::array())) {
      Fault fault;
      fault.call = x.value("call", std::string());
      fault.index = x.value("index", -1);
      if (x.contains("return")) {
        GPUPLAN_TRY(r, return_code(x.at("return").get<std::string>()));
        fault.ret = r;
      }
      fault.slow_ms = std::clamp<int64_t>(x.value("slow_ms", int64_t{0}), 0, kMaxSlowMs);
      fault.from_read = x.value("from_read", 1);
      fault.new_boot_id = x.value("new_boot_id", std::string());
      f.faults.push_back(std::move(fault));
    }
  } catch (const Json::exception& e) {
    return usage_error(file + ": " + e.what(), "nvml");
  }
  return f;
}

// The one fake in use (its C-callable functions find it here). Fakes are made one at a time.
class FakeNvml;
std::mutex g_fake_mu;
FakeNvml* g_fake = nullptr;

class FakeNvml final : public NvmlBackend {
 public:
  FakeNvml(Fixture f, std::string file, MigWrites writes) : f_(std::move(f)), file_(std::move(file)), writes_(writes) {
    // Every instance of the fixture has its compute instance, as nvidia-smi mig -cgi P -C leaves them.
    for (size_t g = 0; g < f_.gpus.size(); ++g) {
      for (const GpuInstance& i : f_.gpus[g].info.instances) cis_.push_back(FakeCi{static_cast<int>(g), i.start});
    }
  }
  ~FakeNvml() override {
    std::lock_guard<std::mutex> lock(g_fake_mu);
    if (g_fake == this) g_fake = nullptr;
  }
  FakeNvml(const FakeNvml&) = delete;
  FakeNvml& operator=(const FakeNvml&) = delete;

  Result<NodeInventory> read() override {
    std::lock_guard<std::mutex> lock(g_fake_mu);
    g_fake = this;
    ++reads_;
    Api api = table();
    return read_inventory(api);
  }
  std::string boot_id() override {
    std::lock_guard<std::mutex> lock(g_fake_mu);
    std::string id = f_.boot_id;
    for (const Fault& x : f_.faults) {
      if (!x.new_boot_id.empty() && reads_ >= x.from_read) id = x.new_boot_id;
    }
    return id;
  }
  std::string describe() const override { return "fake (" + file_ + ")"; }
  Status create_instance(const InstanceRef& ref) override {
    if (writes_ != MigWrites::kDynamic) return read_only();
    std::lock_guard<std::mutex> lock(g_fake_mu);
    g_fake = this;
    return nvml::create_instance(table(), write_table(), ref);
  }
  Status destroy_instance(const InstanceRef& ref) override {
    if (writes_ != MigWrites::kDynamic) return read_only();
    std::lock_guard<std::mutex> lock(g_fake_mu);
    g_fake = this;
    return nvml::destroy_instance(table(), write_table(), ref);
  }
  // The symbols a real library would have been asked for: the read whitelist, and the write one only
  // in dynamic mode (the same rule as the dlopen loader; the tests check both).
  std::vector<std::string> looked_up() const override {
    std::vector<std::string> out(nvml_whitelist().begin(), nvml_whitelist().end());
    if (writes_ == MigWrites::kDynamic)
      out.insert(out.end(), nvml_write_whitelist().begin(), nvml_write_whitelist().end());
    return out;
  }
  FakeGpu* mutable_gpu(Device d) {
    const int i = index_of(d);
    return i >= 0 ? &f_.gpus[static_cast<size_t>(i)] : nullptr;
  }
  std::list<FakeCi>& cis() { return cis_; }
  // The GPU and start of a GPU instance handle.
  std::pair<int, const GpuInstance*> locate(GpuInstanceHandle h) const {
    for (size_t g = 0; g < f_.gpus.size(); ++g) {
      for (const GpuInstance& i : f_.gpus[g].info.instances) {
        if (handle_of(i) == h) return {static_cast<int>(g), &i};
      }
    }
    return {-1, nullptr};
  }
  void erase_instance(int gpu, int start) {
    auto& v = f_.gpus[static_cast<size_t>(gpu)].info.instances;
    v.erase(std::remove_if(v.begin(), v.end(), [&](const GpuInstance& i) { return i.start == start; }), v.end());
  }

  // The scripted answer of `call` for GPU `index` (kSuccess: answer from the fixture), after its delay.
  Return fault(std::string_view call, int index) const {
    for (const Fault& x : f_.faults) {
      if (x.call != call || (x.index >= 0 && x.index != index) || reads_ < x.from_read) continue;
      if (x.slow_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(x.slow_ms));
      if (x.ret != kSuccess) return x.ret;
    }
    return kSuccess;
  }
  // Handles are the addresses of the fixture's GPUs and instances (opaque to the reader, never null).
  static Device handle_of(const FakeGpu& g) { return reinterpret_cast<Device>(const_cast<FakeGpu*>(&g)); }
  static GpuInstanceHandle handle_of(const GpuInstance& i) {
    return reinterpret_cast<GpuInstanceHandle>(const_cast<GpuInstance*>(&i));
  }
  const FakeGpu* gpu(Device d) const {
    const int i = index_of(d);
    return i >= 0 ? &f_.gpus[static_cast<size_t>(i)] : nullptr;
  }
  int index_of(Device d) const {
    for (size_t i = 0; i < f_.gpus.size(); ++i) {
      if (handle_of(f_.gpus[i]) == d) return static_cast<int>(i);
    }
    return -1;
  }
  const GpuInstance* instance(GpuInstanceHandle h) const {
    for (const FakeGpu& g : f_.gpus) {
      for (const GpuInstance& i : g.info.instances) {
        if (handle_of(i) == h) return &i;
      }
    }
    return nullptr;
  }
  const Fixture& fixture() const { return f_; }

 private:
  static Status read_only() {
    return Error{ErrorCode::kForbidden, "the node's MIG policy is not dynamic: the agent changes no MIG instance",
                 "mig_policy"};
  }
  Api table() const;
  static WriteApi write_table();
  Fixture f_;
  std::string file_;
  MigWrites writes_;
  std::list<FakeCi> cis_;  // stable addresses: the compute instance handles
  int reads_ = 0;
};

// The fake's C-callable NVML functions (g_fake_mu is held: read() took it).
Return fake_init() { return g_fake->fault("nvmlInit_v2", -1); }
Return fake_shutdown() { return kSuccess; }
const char* fake_error_string(Return) { return "fake NVML error"; }
Return copy_out(const std::string& s, char* buf, unsigned int len) {
  if (s.size() + 1 > len) return kErrorInsufficientSize;
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return kSuccess;
}
Return fake_driver(char* buf, unsigned int len) {
  if (Return r = g_fake->fault("nvmlSystemGetDriverVersion", -1); r != kSuccess) return r;
  return copy_out(g_fake->fixture().driver_version, buf, len);
}
Return fake_count(unsigned int* n) {
  if (Return r = g_fake->fault("nvmlDeviceGetCount_v2", -1); r != kSuccess) return r;
  *n = static_cast<unsigned int>(g_fake->fixture().gpus.size());
  return kSuccess;
}
Return fake_handle(unsigned int i, Device* d) {
  if (Return r = g_fake->fault("nvmlDeviceGetHandleByIndex_v2", static_cast<int>(i)); r != kSuccess) return r;
  if (i >= g_fake->fixture().gpus.size()) return kErrorInvalidArgument;
  *d = FakeNvml::handle_of(g_fake->fixture().gpus[i]);
  return kSuccess;
}
template <typename Field>
Return fake_text(const char* call, Device d, char* buf, unsigned int len, Field field) {
  const FakeGpu* g = g_fake->gpu(d);
  if (g == nullptr) return kErrorInvalidArgument;
  if (Return r = g_fake->fault(call, g_fake->index_of(d)); r != kSuccess) return r;
  return copy_out(field(*g), buf, len);
}
Return fake_uuid(Device d, char* buf, unsigned int len) {
  return fake_text("nvmlDeviceGetUUID", d, buf, len, [](const FakeGpu& g) { return g.info.uuid; });
}
Return fake_name(Device d, char* buf, unsigned int len) {
  return fake_text("nvmlDeviceGetName", d, buf, len, [](const FakeGpu& g) { return g.info.name; });
}
Return fake_pci(Device d, PciInfo* pci) {
  const FakeGpu* g = g_fake->gpu(d);
  if (g == nullptr) return kErrorInvalidArgument;
  if (Return r = g_fake->fault("nvmlDeviceGetPciInfo_v3", g_fake->index_of(d)); r != kSuccess) return r;
  *pci = PciInfo{};
  return copy_out(g->info.pci_bus_id, pci->bus_id, kPciBusIdSize);
}
Return fake_memory(Device d, Memory* m) {
  const FakeGpu* g = g_fake->gpu(d);
  if (g == nullptr) return kErrorInvalidArgument;
  if (Return r = g_fake->fault("nvmlDeviceGetMemoryInfo", g_fake->index_of(d)); r != kSuccess) return r;
  m->total = static_cast<unsigned long long>(g->info.memory_bytes);
  m->free = m->total;
  m->used = 0;
  return kSuccess;
}
Return fake_mig_mode(Device d, unsigned int* current, unsigned int* pending) {
  const FakeGpu* g = g_fake->gpu(d);
  if (g == nullptr) return kErrorInvalidArgument;
  if (Return r = g_fake->fault("nvmlDeviceGetMigMode", g_fake->index_of(d)); r != kSuccess) return r;
  *current = *pending = g->info.mig_mode == "enabled" ? kMigEnabled : 0;
  return kSuccess;
}
// Profile id p of a GPU is its p-th distinct instance profile; "3g.40gb" -> 3 slices, 40 GB less a margin.
Return fake_profile_info(Device d, unsigned int pid, GpuInstanceProfileInfo* info) {
  const FakeGpu* g = g_fake->gpu(d);
  if (g == nullptr) return kErrorInvalidArgument;
  if (Return r = g_fake->fault("nvmlDeviceGetGpuInstanceProfileInfo", g_fake->index_of(d)); r != kSuccess) {
    return r;
  }
  if (pid >= g->profiles.size()) return kErrorNotSupported;
  const std::string& name = g->profiles[pid];
  unsigned slices = 0, gb = 0;
  if (std::sscanf(name.c_str(), "%ug.%ugb", &slices, &gb) != 2) return kErrorInvalidArgument;
  *info = GpuInstanceProfileInfo{};
  info->id = pid;
  info->slice_count = slices;
  info->memory_size_mb = gb * 1024ULL - kMemoryMarginMib;
  return kSuccess;
}
Return fake_instances(Device d, unsigned int pid, GpuInstanceHandle* out, unsigned int* count) {
  const FakeGpu* g = g_fake->gpu(d);
  if (g == nullptr) return kErrorInvalidArgument;
  if (Return r = g_fake->fault("nvmlDeviceGetGpuInstances", g_fake->index_of(d)); r != kSuccess) return r;
  unsigned n = 0;
  for (size_t k = 0; k < g->info.instances.size() && n < kMaxInstancesPerProfile; ++k) {
    if (pid < g->profiles.size() && g->info.instances[k].profile == g->profiles[pid]) {
      out[n++] = FakeNvml::handle_of(g->info.instances[k]);
    }
  }
  *count = n;
  return kSuccess;
}
Return fake_instance_info(GpuInstanceHandle h, GpuInstanceInfo* info) {
  const GpuInstance* i = g_fake->instance(h);
  if (i == nullptr) return kErrorInvalidArgument;
  *info = GpuInstanceInfo{};
  info->placement.start = static_cast<unsigned>(i->start);
  return kSuccess;
}

// --- dynamic MIG: the write calls, over the fixture's state (g_fake_mu is held: create/destroy took it).
Return fake_possible_placements(Device d, unsigned pid, GpuInstancePlacement* out, unsigned* count) {
  const FakeGpu* g = g_fake->gpu(d);
  if (g == nullptr || pid >= g->profiles.size()) return kErrorInvalidArgument;
  unsigned compute = 0, gb = 0;
  if (std::sscanf(g->profiles[pid].c_str(), "%ug.%ugb", &compute, &gb) != 2 || compute == 0) return kErrorNotSupported;
  const int m = fake_memory_slices(compute);
  unsigned n = 0;
  for (int start = 0; start + m <= kFakeMemorySlices && n < *count; start += m) {
    if (start <= 7 - static_cast<int>(compute))
      out[n++] = GpuInstancePlacement{static_cast<unsigned>(start), static_cast<unsigned>(m)};
  }
  *count = n;
  return kSuccess;
}
Return fake_create_gi(Device d, unsigned pid, const GpuInstancePlacement* p, GpuInstanceHandle* out) {
  FakeGpu* g = g_fake->mutable_gpu(d);
  if (g == nullptr || pid >= g->profiles.size() || p == nullptr) return kErrorInvalidArgument;
  if (Return r = g_fake->fault("nvmlDeviceCreateGpuInstanceWithPlacement", g_fake->index_of(d)); r != kSuccess) {
    return r;
  }
  if (g->info.mig_mode != "enabled") return kErrorNotSupported;
  unsigned compute = 0, gb = 0;
  if (std::sscanf(g->profiles[pid].c_str(), "%ug.%ugb", &compute, &gb) != 2) return kErrorNotSupported;
  const int start = static_cast<int>(p->start), size = fake_memory_slices(compute);
  for (const GpuInstance& i : g->info.instances) {
    unsigned c = 0, b = 0;
    if (std::sscanf(i.profile.c_str(), "%ug.%ugb", &c, &b) != 2) continue;
    const int s0 = i.start, s1 = i.start + fake_memory_slices(c);
    if (start < s1 && s0 < start + size) return kErrorInsufficientResources;  // the slices are taken
  }
  g->info.instances.push_back(GpuInstance{g->profiles[pid], start});
  *out = FakeNvml::handle_of(g->info.instances.back());
  return kSuccess;
}
// Compute instance profile cp spans the GPU instance when its slice count is the GPU instance's.
Return fake_ci_profile_info(GpuInstanceHandle h, unsigned cp, unsigned, ComputeInstanceProfileInfo* info) {
  const auto [gpu, gi] = g_fake->locate(h);
  if (gi == nullptr) return kErrorInvalidArgument;
  unsigned compute = 0, gb = 0;
  if (std::sscanf(gi->profile.c_str(), "%ug.%ugb", &compute, &gb) != 2) return kErrorNotSupported;
  if (cp != compute - 1) return kErrorNotSupported;  // one CI profile per GI in the fake: the full one
  *info = ComputeInstanceProfileInfo{};
  info->id = cp;
  info->slice_count = compute;
  return kSuccess;
}
Return fake_create_ci(GpuInstanceHandle h, unsigned, ComputeInstanceHandle* out) {
  const auto [gpu, gi] = g_fake->locate(h);
  if (gi == nullptr) return kErrorInvalidArgument;
  if (Return r = g_fake->fault("nvmlGpuInstanceCreateComputeInstance", gpu); r != kSuccess) return r;
  g_fake->cis().push_back(FakeCi{gpu, gi->start});
  *out = reinterpret_cast<ComputeInstanceHandle>(&g_fake->cis().back());
  return kSuccess;
}
Return fake_get_cis(GpuInstanceHandle h, unsigned, ComputeInstanceHandle* out, unsigned* count) {
  const auto [gpu, gi] = g_fake->locate(h);
  if (gi == nullptr) return kErrorInvalidArgument;
  unsigned n = 0;
  for (FakeCi& c : g_fake->cis()) {
    if (c.gpu == gpu && c.start == gi->start && n < kMaxInstancesPerProfile)
      out[n++] = reinterpret_cast<ComputeInstanceHandle>(&c);
  }
  *count = n;
  return kSuccess;
}
Return fake_destroy_ci(ComputeInstanceHandle h) {
  auto& cis = g_fake->cis();
  for (auto it = cis.begin(); it != cis.end(); ++it) {
    if (reinterpret_cast<ComputeInstanceHandle>(&*it) == h) {
      cis.erase(it);
      return kSuccess;
    }
  }
  return kErrorInvalidArgument;
}
Return fake_destroy_gi(GpuInstanceHandle h) {
  const auto [gpu, gi] = g_fake->locate(h);
  if (gi == nullptr) return kErrorInvalidArgument;
  if (Return r = g_fake->fault("nvmlGpuInstanceDestroy", gpu); r != kSuccess) return r;
  const int start = gi->start;
  for (const FakeCi& c : g_fake->cis()) {
    if (c.gpu == gpu && c.start == start) return kErrorInUse;  // NVML refuses while compute instances exist
  }
  g_fake->erase_instance(gpu, start);
  return kSuccess;
}

WriteApi FakeNvml::write_table() {
  return WriteApi{fake_possible_placements, fake_create_gi, fake_ci_profile_info, fake_create_ci, fake_get_cis,
                  fake_destroy_ci,          fake_destroy_gi};
}

Api FakeNvml::table() const {
  Api api{fake_init,     fake_shutdown,     fake_error_string, fake_driver,       fake_count,
          fake_handle,   fake_uuid,         fake_name,         fake_pci,          fake_memory,
          fake_mig_mode, fake_profile_info, fake_instances,    fake_instance_info};
  auto drop = [&](std::string_view name, auto& ptr) {
    if (std::find(f_.missing.begin(), f_.missing.end(), name) != f_.missing.end()) ptr = nullptr;
  };
  drop("nvmlSystemGetDriverVersion", api.system_get_driver_version);
  drop("nvmlDeviceGetPciInfo_v3", api.device_get_pci_info_v3);
  drop("nvmlDeviceGetMemoryInfo", api.device_get_memory_info);
  drop("nvmlDeviceGetMigMode", api.device_get_mig_mode);
  drop("nvmlDeviceGetGpuInstanceProfileInfo", api.device_get_gpu_instance_profile_info);
  drop("nvmlDeviceGetGpuInstances", api.device_get_gpu_instances);
  drop("nvmlGpuInstanceGetInfo", api.gpu_instance_get_info);
  drop("nvmlDeviceGetName", api.device_get_name);
  return api;
}

}  // namespace

Result<std::unique_ptr<NvmlBackend>> open_fake_nvml(const std::string& file, MigWrites writes) {
  GPUPLAN_TRY(f, parse_fixture(file));
  return std::unique_ptr<NvmlBackend>(std::make_unique<FakeNvml>(f, file, writes));
}

}  // namespace gpuplan::agent
