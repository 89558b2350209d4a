// NVML's C interface as the agent uses it, declared HERE (from NVIDIA's nvml.h, NVML API version 12;
// only the types and constants the read calls need), so nothing of CUDA or the driver is needed to
// build. One table of function pointers, filled by dlsym (nvml.cc) or by the fake backend
// (nvml_fake.cc); a null entry is a missing symbol. read_inventory() is the one reader over it.
#pragma once

#include <string>

#include "agent/nvml.h"

namespace gpuplan::agent::nvml {

using Return = int;  // nvmlReturn_t
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorTimeout = 10;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorInUse = 19;
inline constexpr Return kErrorInsufficientResources = 23;
inline constexpr Return kErrorUnknown = 999;

struct DeviceSt;
using Device = DeviceSt*;  // nvmlDevice_t
struct GpuInstanceSt;
using GpuInstanceHandle = GpuInstanceSt*;  // nvmlGpuInstance_t

// nvmlPciInfo_t (v3 call): busIdLegacy[16], domain, bus, device, pciDeviceId, pciSubSystemId, busId[32].
inline constexpr unsigned kPciBusIdLegacySize = 16;  // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
inline constexpr unsigned kPciBusIdSize = 32;        // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
struct PciInfo {
  char bus_id_legacy[kPciBusIdLegacySize];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[kPciBusIdSize];
};
// nvmlMemory_t
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
// nvmlGpuInstanceProfileInfo_t
struct GpuInstanceProfileInfo {
  unsigned int id;
  unsigned int is_p2p_supported;
  unsigned int slice_count;
  unsigned int instance_count;
  unsigned int multiprocessor_count;
  unsigned int copy_engine_count;
  unsigned int decoder_count;
  unsigned int encoder_count;
  unsigned int jpeg_count;
  unsigned int ofa_count;
  unsigned long long memory_size_mb;
};
// nvmlGpuInstancePlacement_t, nvmlGpuInstanceInfo_t
struct GpuInstancePlacement {
  unsigned int start;
  unsigned int size;
};
struct GpuInstanceInfo {
  Device device;
  unsigned int id;
  unsigned int profile_id;
  GpuInstancePlacement placement;
};

inline constexpr unsigned kDriverVersionSize = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
inline constexpr unsigned kUuidSize = 96;           // NVML_DEVICE_UUID_V2_BUFFER_SIZE
inline constexpr unsigned kNameSize = 96;           // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned kMigEnabled = 1;          // NVML_DEVICE_MIG_ENABLE
// NVML_GPU_INSTANCE_PROFILE_1_SLICE (0) .. NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 (9): the profile ids the
// agent asks about (NVML_GPU_INSTANCE_PROFILE_COUNT is 10 in API 12).
inline constexpr unsigned kGpuInstanceProfileCount = 10;
inline constexpr unsigned kMaxInstancesPerProfile = 8;  // 7 1g instances is the most MIG makes
inline constexpr unsigned kMaxDevices = 64;             // far above any node; the count is checked against it

struct Api {
  Return (*init_v2)();
  Return (*shutdown)();
  const char* (*error_string)(Return);
  Return (*system_get_driver_version)(char*, unsigned int);
  Return (*device_get_count_v2)(unsigned int*);
  Return (*device_get_handle_by_index_v2)(unsigned int, Device*);
  Return (*device_get_uuid)(Device, char*, unsigned int);
  Return (*device_get_name)(Device, char*, unsigned int);
  Return (*device_get_pci_info_v3)(Device, PciInfo*);
  Return (*device_get_memory_info)(Device, Memory*);
  Return (*device_get_mig_mode)(Device, unsigned int*, unsigned int*);
  Return (*device_get_gpu_instance_profile_info)(Device, unsigned int, GpuInstanceProfileInfo*);
  Return (*device_get_gpu_instances)(Device, unsigned int, GpuInstanceHandle*, unsigned int*);
  Return (*gpu_instance_get_info)(GpuInstanceHandle, GpuInstanceInfo*);
};

// The write calls of dynamic MIG (nvml.h, nvml_write_whitelist()): looked up only when the node's MIG
// policy is dynamic; every entry null otherwise.
struct ComputeInstanceSt;
using ComputeInstanceHandle = ComputeInstanceSt*;  // nvmlComputeInstance_t
// nvmlComputeInstanceProfileInfo_t (v1)
struct ComputeInstanceProfileInfo {
  unsigned int id;
  unsigned int slice_count;
  unsigned int instance_count;
  unsigned int multiprocessor_count;
  unsigned int shared_copy_engine_count;
  unsigned int shared_decoder_count;
  unsigned int shared_encoder_count;
  unsigned int shared_jpeg_count;
  unsigned int shared_ofa_count;
};
inline constexpr unsigned kComputeInstanceEngineProfileShared = 0;  // NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
// NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE (0) .. _1_SLICE_REV2 (9) in API 12; unknown ids answer NOT_SUPPORTED.
inline constexpr unsigned kComputeInstanceProfileCount = 10;
inline constexpr unsigned kMaxPlacements = 8;  // possible placements of one profile: at most the 8 memory slices

struct WriteApi {
  Return (*device_get_gpu_instance_possible_placements_v2)(Device, unsigned int, GpuInstancePlacement*, unsigned int*);
  Return (*device_create_gpu_instance_with_placement)(Device, unsigned int, const GpuInstancePlacement*,
                                                      GpuInstanceHandle*);
  Return (*gpu_instance_get_compute_instance_profile_info)(GpuInstanceHandle, unsigned int, unsigned int,
                                                           ComputeInstanceProfileInfo*);
  Return (*gpu_instance_create_compute_instance)(GpuInstanceHandle, unsigned int, ComputeInstanceHandle*);
  Return (*gpu_instance_get_compute_instances)(GpuInstanceHandle, unsigned int, ComputeInstanceHandle*, unsigned int*);
  Return (*compute_instance_destroy)(ComputeInstanceHandle);
  Return (*gpu_instance_destroy)(GpuInstanceHandle);
};

// Creates the GPU instance `ref.profile` at placement `ref.start` on GPU `ref.gpu_uuid`, then one compute
// instance over all its slices (what `nvidia-smi mig -cgi P -C` does); a failed compute instance destroys
// the GPU instance again. NVML's INSUFFICIENT_RESOURCES (the slices are taken) is kConflict, a placement
// the profile does not have kInvalidLayout, a missing write symbol kUnavailable.
Status create_instance(const Api& api, const WriteApi& w, const InstanceRef& ref);
// Destroys the compute instances of that GPU instance, then the GPU instance; absent is success.
Status destroy_instance(const Api& api, const WriteApi& w, const InstanceRef& ref);
// "insufficient_resources", "in_use", "not_supported", ... for a failure report.
std::string return_word(Return r);

// The whole inventory through `api`: core calls (init, count, handle, UUID, name) missing or failing
// are an error; every other call missing or NOT_SUPPORTED turns its feature off; a GPU whose handle
// is GPU_IS_LOST is left out (listed in lost_gpus).
Result<NodeInventory> read_inventory(const Api& api);

// "3g.40gb" from a GPU instance profile: compute slices and memory rounded up to whole GB (NVML names
// them so: 9728 MiB is 1g.10gb, 40192 MiB 3g.40gb), "+me" for the media-extension profiles (REV1).
std::string profile_name(unsigned profile_id, const GpuInstanceProfileInfo& info);

}  // namespace gpuplan::agent::nvml
