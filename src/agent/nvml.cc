// The NVML reader (read_inventory over the function table), the dlopen loader and the inventory's JSON.
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <set>

#include "agent/nvml_api.h"

namespace gpuplan::agent {

namespace {

// Every NVML function the agent looks up: READ calls only (tests/unit/agent_test.cc checks that no name
// sets, creates, destroys, resets or clears anything). The loader looks up nothing else.
constexpr std::array<std::string_view, 25> kWhitelist = {
    "nvmlInit_v2",
    "nvmlShutdown",
    "nvmlErrorString",
    "nvmlSystemGetDriverVersion",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetName",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetGpuInstanceProfileInfo",
    "nvmlDeviceGetGpuInstances",
    "nvmlGpuInstanceGetInfo",
    // gpuplan bench's sensors (src/bench/nvml_sensors.cc, issue #16), read calls too:
    "nvmlDeviceGetHandleByPciBusId_v2",
    "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetPowerManagementLimit",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
};

// The calls of dynamic MIG, looked up only when the node's MIG policy is dynamic (MigWrites::kDynamic).
// nvmlDeviceGetGpuInstancePossiblePlacements_v2 and nvmlGpuInstanceGetComputeInstanceProfileInfo read, but
// only creating needs them, so they are here and the read-only agent never looks them up either.
constexpr std::array<std::string_view, 7> kWriteWhitelist = {
    "nvmlDeviceGetGpuInstancePossiblePlacements_v2",
    "nvmlDeviceCreateGpuInstanceWithPlacement",
    "nvmlGpuInstanceGetComputeInstanceProfileInfo",
    "nvmlGpuInstanceCreateComputeInstance",
    "nvmlGpuInstanceGetComputeInstances",
    "nvmlComputeInstanceDestroy",
    "nvmlGpuInstanceDestroy",
};

// A C string of at most `size` bytes from an NVML buffer (NUL-terminated by NVML; bounded here anyway).
std::string from_buffer(const char* buf, size_t size) { return std::string(buf, strnlen(buf, size)); }

class DlopenNvml final : public NvmlBackend {
 public:
  DlopenNvml(void* handle, std::string path, MigWrites writes)
      : handle_(handle), path_(std::move(path)), writes_(writes) {}
  ~DlopenNvml() override {
    if (handle_ != nullptr) dlclose(handle_);
  }
  DlopenNvml(const DlopenNvml&) = delete;
  DlopenNvml& operator=(const DlopenNvml&) = delete;

  void load() {
    api_.init_v2 = sym<decltype(api_.init_v2)>("nvmlInit_v2");
    api_.shutdown = sym<decltype(api_.shutdown)>("nvmlShutdown");
    api_.error_string = sym<decltype(api_.error_string)>("nvmlErrorString");
    api_.system_get_driver_version = sym<decltype(api_.system_get_driver_version)>("nvmlSystemGetDriverVersion");
    api_.device_get_count_v2 = sym<decltype(api_.device_get_count_v2)>("nvmlDeviceGetCount_v2");
    api_.device_get_handle_by_index_v2 =
        sym<decltype(api_.device_get_handle_by_index_v2)>("nvmlDeviceGetHandleByIndex_v2");
    api_.device_get_uuid = sym<decltype(api_.device_get_uuid)>("nvmlDeviceGetUUID");
    api_.device_get_name = sym<decltype(api_.device_get_name)>("nvmlDeviceGetName");
    api_.device_get_pci_info_v3 = sym<decltype(api_.device_get_pci_info_v3)>("nvmlDeviceGetPciInfo_v3");
    api_.device_get_memory_info = sym<decltype(api_.device_get_memory_info)>("nvmlDeviceGetMemoryInfo");
    api_.device_get_mig_mode = sym<decltype(api_.device_get_mig_mode)>("nvmlDeviceGetMigMode");
    api_.device_get_gpu_instance_profile_info =
        sym<decltype(api_.device_get_gpu_instance_profile_info)>("nvmlDeviceGetGpuInstanceProfileInfo");
    api_.device_get_gpu_instances = sym<decltype(api_.device_get_gpu_instances)>("nvmlDeviceGetGpuInstances");
    api_.gpu_instance_get_info = sym<decltype(api_.gpu_instance_get_info)>("nvmlGpuInstanceGetInfo");
    if (writes_ != MigWrites::kDynamic) return;  // read-only: no write symbol is even looked up
    w_.device_get_gpu_instance_possible_placements_v2 =
        write_sym<decltype(w_.device_get_gpu_instance_possible_placements_v2)>(
            "nvmlDeviceGetGpuInstancePossiblePlacements_v2");
    w_.device_create_gpu_instance_with_placement =
        write_sym<decltype(w_.device_create_gpu_instance_with_placement)>("nvmlDeviceCreateGpuInstanceWithPlacement");
    w_.gpu_instance_get_compute_instance_profile_info =
        write_sym<decltype(w_.gpu_instance_get_compute_instance_profile_info)>(
            "nvmlGpuInstanceGetComputeInstanceProfileInfo");
    w_.gpu_instance_create_compute_instance =
        write_sym<decltype(w_.gpu_instance_create_compute_instance)>("nvmlGpuInstanceCreateComputeInstance");
    w_.gpu_instance_get_compute_instances =
        write_sym<decltype(w_.gpu_instance_get_compute_instances)>("nvmlGpuInstanceGetComputeInstances");
    w_.compute_instance_destroy = write_sym<decltype(w_.compute_instance_destroy)>("nvmlComputeInstanceDestroy");
    w_.gpu_instance_destroy = write_sym<decltype(w_.gpu_instance_destroy)>("nvmlGpuInstanceDestroy");
  }
  Result<NodeInventory> read() override { return nvml::read_inventory(api_); }
  Status create_instance(const InstanceRef& ref) override {
    if (writes_ != MigWrites::kDynamic) return read_only();
    return nvml::create_instance(api_, w_, ref);
  }
  Status destroy_instance(const InstanceRef& ref) override {
    if (writes_ != MigWrites::kDynamic) return read_only();
    return nvml::destroy_instance(api_, w_, ref);
  }
  std::vector<std::string> looked_up() const override { return looked_up_; }
  std::string boot_id() override { return system_boot_id(); }
  std::string describe() const override { return "nvml (" + path_ + ")"; }

 private:
  // A whitelisted symbol, or nullptr (missing: that feature is off).
  template <typename F>
  F sym(std::string_view name) {
    if (std::find(kWhitelist.begin(), kWhitelist.end(), name) == kWhitelist.end()) return nullptr;
    looked_up_.emplace_back(name);
    return reinterpret_cast<F>(dlsym(handle_, std::string(name).c_str()));
  }
  // A write symbol: only from the write whitelist, only in dynamic mode.
  template <typename F>
  F write_sym(std::string_view name) {
    if (writes_ != MigWrites::kDynamic ||
        std::find(kWriteWhitelist.begin(), kWriteWhitelist.end(), name) == kWriteWhitelist.end()) {
      return nullptr;
    }
    looked_up_.emplace_back(name);
    return reinterpret_cast<F>(dlsym(handle_, std::string(name).c_str()));
  }
  static Status read_only() {
    return Error{ErrorCode::kForbidden, "the node's MIG policy is not dynamic: the agent changes no MIG instance",
                 "mig_policy"};
  }
  void* handle_;
  std::string path_;
  MigWrites writes_;
  nvml::Api api_{};
  nvml::WriteApi w_{};
  std::vector<std::string> looked_up_;
};

}  // namespace

std::span<const std::string_view> nvml_whitelist() { return kWhitelist; }
std::span<const std::string_view> nvml_write_whitelist() { return kWriteWhitelist; }

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::open(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Error{ErrorCode::kUnavailable, "cannot open " + path + (why ? std::string(": ") + why : std::string()),
                 "nvml"};
  }
  return std::unique_ptr<NvmlLibrary>(new NvmlLibrary(handle));
}

NvmlLibrary::~NvmlLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void* NvmlLibrary::symbol(std::string_view name) const {
  if (std::find(kWhitelist.begin(), kWhitelist.end(), name) == kWhitelist.end()) return nullptr;
  return dlsym(handle_, std::string(name).c_str());
}

std::string system_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.size() <= 64 ? id : std::string();
}

namespace nvml {

std::string profile_name(unsigned profile_id, const GpuInstanceProfileInfo& info) {
  constexpr unsigned long long kMibPerGib = 1024;
  constexpr unsigned kProfile1SliceRev1 = 7;  // NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1: 1g.Xgb+me
  constexpr unsigned kProfile2SliceRev1 = 8;  // NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1: 2g.Xgb+me
  const unsigned long long gb = (info.memory_size_mb + kMibPerGib - 1) / kMibPerGib;
  std::string name = std::to_string(info.slice_count) + "g." + std::to_string(gb) + "gb";
  if (profile_id == kProfile1SliceRev1 || profile_id == kProfile2SliceRev1) name += "+me";
  return name;
}

Result<NodeInventory> read_inventory(const Api& api) {
  auto fail = [&](const std::string& call, Return r) -> Error {
    std::string what = api.error_string != nullptr ? std::string(api.error_string(r)) : std::string();
    return Error{ErrorCode::kUnavailable,
                 "NVML " + call + " failed (" + std::to_string(r) + (what.empty() ? "" : ": " + what) +
                     "); is the NVIDIA driver loaded?",
                 "nvml"};
  };
  for (auto* core :
       {reinterpret_cast<const void*>(api.init_v2), reinterpret_cast<const void*>(api.device_get_count_v2),
        reinterpret_cast<const void*>(api.device_get_handle_by_index_v2),
        reinterpret_cast<const void*>(api.device_get_uuid), reinterpret_cast<const void*>(api.device_get_name)}) {
    if (core == nullptr) {
      return Error{ErrorCode::kUnavailable,
                   "this libnvidia-ml lacks a call the inventory needs (nvmlInit_v2, nvmlDeviceGetCount_v2, "
                   "nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetUUID, nvmlDeviceGetName)",
                   "nvml"};
    }
  }
  if (Return r = api.init_v2(); r != kSuccess) return fail("nvmlInit_v2", r);
  NodeInventory inv;
  std::set<std::string> off;
  // A call is missing (nullptr) or answered NOT_SUPPORTED / FUNCTION_NOT_FOUND: its feature is off.
  auto turned_off = [&](std::string_view feature, Return r) {
    if (r == kErrorNotSupported || r == kErrorFunctionNotFound) off.insert(std::string(feature));
  };
  Status status = Status::Ok();
  [&] {
    if (api.system_get_driver_version == nullptr) {
      off.insert(std::string(kFeatureDriverVersion));
    } else {
      char buf[kDriverVersionSize] = {};
      Return r = api.system_get_driver_version(buf, kDriverVersionSize);
      if (r == kSuccess) inv.driver_version = from_buffer(buf, kDriverVersionSize);
      turned_off(kFeatureDriverVersion, r);
    }
    unsigned int count = 0;
    if (Return r = api.device_get_count_v2(&count); r != kSuccess) {
      status = fail("nvmlDeviceGetCount_v2", r);
      return;
    }
    count = std::min(count, kMaxDevices);
    for (unsigned int i = 0; i < count; ++i) {
      Device dev = nullptr;
      Return r = api.device_get_handle_by_index_v2(i, &dev);
      if (r == kErrorGpuIsLost) {
        inv.lost_gpus.push_back(std::to_string(i));
        continue;
      }
      if (r != kSuccess) {
        status = fail("nvmlDeviceGetHandleByIndex_v2(" + std::to_string(i) + ")", r);
        return;
      }
      GpuInfo g;
      char uuid[kUuidSize] = {};
      char name[kNameSize] = {};
      r = api.device_get_uuid(dev, uuid, kUuidSize);
      if (r == kErrorGpuIsLost) {
        inv.lost_gpus.push_back(std::to_string(i));
        continue;
      }
      if (r != kSuccess) {
        status = fail("nvmlDeviceGetUUID(" + std::to_string(i) + ")", r);
        return;
      }
      if (Return rn = api.device_get_name(dev, name, kNameSize); rn != kSuccess) {
        status = fail("nvmlDeviceGetName(" + std::to_string(i) + ")", rn);
        return;
      }
      g.uuid = from_buffer(uuid, kUuidSize);
      g.name = from_buffer(name, kNameSize);
      if (api.device_get_pci_info_v3 == nullptr) {
        off.insert(std::string(kFeaturePci));
      } else {
        PciInfo pci{};
        Return rp = api.device_get_pci_info_v3(dev, &pci);
        if (rp == kSuccess) g.pci_bus_id = from_buffer(pci.bus_id, kPciBusIdSize);
        turned_off(kFeaturePci, rp);
      }
      if (api.device_get_memory_info == nullptr) {
        off.insert(std::string(kFeatureMemory));
      } else {
        Memory mem{};
        Return rm = api.device_get_memory_info(dev, &mem);
        if (rm == kSuccess) g.memory_bytes = static_cast<int64_t>(std::min<unsigned long long>(mem.total, 1ULL << 50));
        turned_off(kFeatureMemory, rm);
      }
      bool mig_on = false;
      if (api.device_get_mig_mode == nullptr) {
        off.insert(std::string(kFeatureMig));
      } else {
        unsigned int current = 0, pending = 0;
        Return rg = api.device_get_mig_mode(dev, &current, &pending);
        if (rg == kSuccess) {
          mig_on = current == kMigEnabled;
          g.mig_mode = mig_on ? "enabled" : "disabled";
        }
        turned_off(kFeatureMig, rg);
      }
      if (mig_on) {
        if (api.device_get_gpu_instance_profile_info == nullptr || api.device_get_gpu_instances == nullptr ||
            api.gpu_instance_get_info == nullptr) {
          off.insert(std::string(kFeatureMigInstances));
        } else {
          for (unsigned int pid = 0; pid < kGpuInstanceProfileCount; ++pid) {
            GpuInstanceProfileInfo info{};
            Return ri = api.device_get_gpu_instance_profile_info(dev, pid, &info);
            if (ri != kSuccess) continue;  // a profile this GPU does not have (NOT_SUPPORTED, INVALID_ARGUMENT)
            GpuInstanceHandle handles[kMaxInstancesPerProfile] = {};
            unsigned int n = 0;
            Return rl = api.device_get_gpu_instances(dev, info.id, handles, &n);
            if (rl != kSuccess) {
              // NOT_SUPPORTED, or INSUFFICIENT_RESOURCES & co (unreadable now): the instances are unknown
              // this time, which the server reads as "not reported" (no rental is lost for it).
              off.insert(std::string(kFeatureMigInstances));
              break;
            }
            n = std::min(n, kMaxInstancesPerProfile);
            for (unsigned int k = 0; k < n; ++k) {
              GpuInstanceInfo gi{};
              if (api.gpu_instance_get_info(handles[k], &gi) != kSuccess) continue;
              g.instances.push_back(GpuInstance{profile_name(pid, info), static_cast<int>(gi.placement.start)});
            }
          }
          std::sort(g.instances.begin(), g.instances.end(),
                    [](const GpuInstance& a, const GpuInstance& b) { return a.start < b.start; });
        }
      }
      inv.gpus.push_back(std::move(g));
    }
  }();
  if (api.shutdown != nullptr) (void)api.shutdown();
  if (!status) return status.error();
  inv.features_off.assign(off.begin(), off.end());
  return inv;
}

}  // namespace nvml

// Defined in nvml_fake.cc.
Result<std::unique_ptr<NvmlBackend>> open_fake_nvml(const std::string& file, MigWrites writes);

Result<std::unique_ptr<NvmlBackend>> open_nvml(const std::string& spec, MigWrites writes) {
  if (spec.rfind("fake:", 0) == 0) return open_fake_nvml(spec.substr(5), writes);
  std::string path = "libnvidia-ml.so.1";  // the driver's, never the -dev package's unversioned link
  if (spec.rfind("nvml:", 0) == 0) {
    path = spec.substr(5);
  } else if (!spec.empty() && spec != "nvml") {
    return usage_error("--nvml is nvml, nvml:PATH or fake:FILE, not '" + spec + "'", "nvml");
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Error{ErrorCode::kUnavailable,
                 "cannot load " + path + " (" + (why ? why : "unknown") + "): is the NVIDIA driver installed?", "nvml"};
  }
  auto backend = std::make_unique<DlopenNvml>(handle, path, writes);
  backend->load();
  return std::unique_ptr<NvmlBackend>(std::move(backend));
}

Json inventory_json(const NodeInventory& inv, const std::string& boot_id) {
  Json gpus = Json::array();
  for (const GpuInfo& g : inv.gpus) {
    Json instances = Json::array();
    for (const GpuInstance& i : g.instances) instances.push_back(Json{{"profile", i.profile}, {"start", i.start}});
    Json j{{"uuid", g.uuid}, {"name", g.name}, {"memory_bytes", g.memory_bytes}, {"instances", std::move(instances)}};
    if (!g.pci_bus_id.empty()) j["pci_bus_id"] = g.pci_bus_id;
    if (!g.mig_mode.empty()) j["mig_mode"] = g.mig_mode;
    gpus.push_back(std::move(j));
  }
  Json out{{"boot_id", boot_id}, {"features_off", inv.features_off}, {"gpus", std::move(gpus)}};
  if (!inv.driver_version.empty()) out["driver_version"] = inv.driver_version;
  if (!inv.lost_gpus.empty()) out["lost_gpus"] = inv.lost_gpus;
  return out;
}

}  // namespace gpuplan::agent
