// What the node agent reads from the GPUs: NVML, opened with dlopen("libnvidia-ml.so.1") and called
// through LOCALLY declared signatures (no CUDA toolkit or driver at build time), or a fake backend that
// reads a JSON fixture and scripts faults (tests/data/nvml/*.json). Read calls only: every symbol the agent
// looks up is in nvml_whitelist(), and a unit test checks that none of them sets, creates or destroys.
// A missing symbol or NVML_ERROR_NOT_SUPPORTED turns that one feature off (listed in features_off);
// only the core calls (init, count, handle, UUID, name) are needed for an inventory at all.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/status.h"

namespace gpuplan::agent {

struct GpuInstance {
  std::string profile;  // "3g.40gb"
  int start = 0;        // placement start (memory slice)
};
struct GpuInfo {
  std::string uuid;
  std::string name;
  std::string pci_bus_id;
  int64_t memory_bytes = 0;
  std::string mig_mode;  // "enabled", "disabled", or "" when the feature is off
  std::vector<GpuInstance> instances;
};
struct NodeInventory {
  std::string driver_version;
  std::vector<std::string> features_off;  // sorted, unique: "driver_version", "pci", "memory", "mig", ...
  std::vector<GpuInfo> gpus;
  std::vector<std::string> lost_gpus;  // indices NVML answered GPU_IS_LOST for ("3"): left out of gpus
};

// The features a missing symbol or NOT_SUPPORTED can turn off.
inline constexpr std::string_view kFeatureDriverVersion = "driver_version";
inline constexpr std::string_view kFeaturePci = "pci";
inline constexpr std::string_view kFeatureMemory = "memory";
inline constexpr std::string_view kFeatureMig = "mig";
inline constexpr std::string_view kFeatureMigInstances = "mig_instances";

// The NVML functions the agent may look up: read calls only.
std::span<const std::string_view> nvml_whitelist();
// The calls of dynamic MIG (creating and destroying GPU and compute instances), a separate list looked up
// ONLY when the node's MIG policy is dynamic (MigWrites::kDynamic); never in the default read-only mode.
std::span<const std::string_view> nvml_write_whitelist();

// Whether the agent may change the node's MIG layout: kOff (the default, read calls only) or kDynamic (the
// node's MIG policy is dynamic: the agent creates the instances the server placed and destroys the rest).
// The agent never changes MIG mode itself.
enum class MigWrites { kOff, kDynamic };

// One GPU instance: the GPU, the profile and the placement start.
struct InstanceRef {
  std::string gpu_uuid;
  std::string profile;
  int start = 0;
};

class NvmlBackend {
 public:
  virtual ~NvmlBackend() = default;
  // A fresh read of every GPU. An error only when NVML cannot be used at all (init or the GPU count
  // failed): the agent reports that and tries again later.
  virtual Result<NodeInventory> read() = 0;
  // The boot id to report: /proc/sys/kernel/random/boot_id, or the fixture's (a fault may change it).
  virtual std::string boot_id() = 0;
  virtual std::string describe() const = 0;  // "nvml (libnvidia-ml.so.1)", "fake (FILE)"
  // Dynamic MIG (MigWrites::kDynamic only; otherwise kForbidden and nothing is called): see
  // nvml::create_instance / destroy_instance (nvml_api.h).
  virtual Status create_instance(const InstanceRef& ref) = 0;
  virtual Status destroy_instance(const InstanceRef& ref) = 0;
  // Every NVML symbol this backend looked up (the dlopen loader) or would have (the fake), in order.
  virtual std::vector<std::string> looked_up() const = 0;
};

// NVML opened for another read-only reader (gpuplan bench's sensors, src/bench/): symbol() answers the
// names of nvml_whitelist() only (nullptr for any other name, or a missing one).
class NvmlLibrary {
 public:
  static Result<std::unique_ptr<NvmlLibrary>> open(const std::string& path = "libnvidia-ml.so.1");
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;
  void* symbol(std::string_view name) const;

 private:
  explicit NvmlLibrary(void* handle) : handle_(handle) {}
  void* handle_;
};

// `spec`: "" or "nvml" -> dlopen("libnvidia-ml.so.1"); "nvml:PATH" -> dlopen(PATH) (the stub library of
// the tests); "fake:FILE" -> the fake backend over the JSON fixture FILE.
// `writes`: kDynamic also looks up nvml_write_whitelist() (a missing one makes create/destroy kUnavailable).
Result<std::unique_ptr<NvmlBackend>> open_nvml(const std::string& spec, MigWrites writes = MigWrites::kOff);

// Dynamic MIG against what the server wants: `desired` are the heartbeat's desired rentals (a profile and
// placement on a GPU each). Instances on MIG-enabled GPUs of `inv` that no desired rental names are
// destroyed first (their slices free), then each desired instance `inv` lacks is created. A failure is
// reported per rental and never stops the others.
struct DesiredInstance {
  std::string rental_id;
  int64_t generation = 0;
  InstanceRef ref;  // ref.profile empty: a whole GPU, nothing to create
};
struct MigFailure {
  std::string rental_id;
  int64_t generation = 0;
  std::string code;     // "insufficient_resources", "invalid_placement", ...
  std::string message;  // NVML's words
};
struct MigReconcile {
  int created = 0;
  int destroyed = 0;
  std::vector<MigFailure> failures;
  std::vector<std::string> errors;  // destroy failures (no rental to report them on)
};
MigReconcile reconcile_mig(NvmlBackend& backend, const NodeInventory& inv, const std::vector<DesiredInstance>& desired);

// The inventory as the agent prints it (--once --json) and PUTs it (the body gains seq and boot_id).
Json inventory_json(const NodeInventory& inv, const std::string& boot_id);

// The node's boot id from /proc/sys/kernel/random/boot_id ("" when unreadable).
std::string system_boot_id();

}  // namespace gpuplan::agent
