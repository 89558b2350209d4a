// Dynamic MIG (issue #15): the agent creates the GPU instances the server placed and destroys those no
// rental wants, over the write calls of nvml_write_whitelist(), which only a node whose MIG policy is
// dynamic looks up (nvml.h). The same functions run over the dlopen'ed library and the fake backend.
#include <algorithm>
#include <cstring>
#include <set>
#include <tuple>

#include "agent/nvml_api.h"

namespace gpuplan::agent {

namespace nvml {

namespace {

Error nvml_error(const Api& api, const std::string& call, Return r, const InstanceRef& ref) {
  const std::string what = api.error_string != nullptr ? std::string(api.error_string(r)) : std::string();
  const ErrorCode code = r == kErrorInsufficientResources ? ErrorCode::kConflict
                         : r == kErrorInvalidArgument     ? ErrorCode::kInvalidLayout
                                                          : ErrorCode::kUnavailable;
  return Error{code,
               "NVML " + call + " (" + ref.profile + " at " + std::to_string(ref.start) + " on " + ref.gpu_uuid +
                   ") failed: " + return_word(r) + (what.empty() ? "" : " (" + what + ")"),
               "mig"};
}

// The device of `uuid`, or nullptr.
Result<Device> device_of(const Api& api, const std::string& uuid) {
  unsigned count = 0;
  if (Return r = api.device_get_count_v2(&count); r != kSuccess) {
    return Error{ErrorCode::kUnavailable, "NVML nvmlDeviceGetCount_v2 failed: " + return_word(r), "mig"};
  }
  count = std::min(count, kMaxDevices);
  for (unsigned i = 0; i < count; ++i) {
    Device d = nullptr;
    if (api.device_get_handle_by_index_v2(i, &d) != kSuccess) continue;
    char buf[kUuidSize] = {};
    if (api.device_get_uuid(d, buf, kUuidSize) != kSuccess) continue;
    if (std::string(buf, strnlen(buf, kUuidSize)) == uuid) return d;
  }
  return Error{ErrorCode::kNotFound, "no GPU " + uuid + " on this node", "mig"};
}

// The GPU instance profile named `profile` on `d`.
Result<GpuInstanceProfileInfo> profile_of(const Api& api, Device d, const std::string& profile) {
  for (unsigned pid = 0; pid < kGpuInstanceProfileCount; ++pid) {
    GpuInstanceProfileInfo info{};
    if (api.device_get_gpu_instance_profile_info(d, pid, &info) != kSuccess) continue;
    if (profile_name(pid, info) == profile) return info;
  }
  return Error{ErrorCode::kNotFound, "this GPU has no MIG profile " + profile, "mig"};
}

bool has_core(const Api& api) {
  return api.init_v2 != nullptr && api.device_get_count_v2 != nullptr && api.device_get_handle_by_index_v2 != nullptr &&
         api.device_get_uuid != nullptr && api.device_get_gpu_instance_profile_info != nullptr &&
         api.device_get_gpu_instances != nullptr && api.gpu_instance_get_info != nullptr;
}

bool has_writes(const WriteApi& w) {
  return w.device_get_gpu_instance_possible_placements_v2 != nullptr &&
         w.device_create_gpu_instance_with_placement != nullptr &&
         w.gpu_instance_get_compute_instance_profile_info != nullptr &&
         w.gpu_instance_create_compute_instance != nullptr && w.gpu_instance_get_compute_instances != nullptr &&
         w.compute_instance_destroy != nullptr && w.gpu_instance_destroy != nullptr;
}

Error missing() {
  return Error{ErrorCode::kUnavailable,
               "this libnvidia-ml lacks a call dynamic MIG needs (nvmlDeviceCreateGpuInstanceWithPlacement, "
               "nvmlGpuInstanceCreateComputeInstance, ...): the driver is older than R470?",
               "mig"};
}

// init ... shutdown around `body`.
template <typename F>
Status with_nvml(const Api& api, F body) {
  if (Return r = api.init_v2(); r != kSuccess) {
    return Error{ErrorCode::kUnavailable, "NVML nvmlInit_v2 failed: " + return_word(r), "mig"};
  }
  Status s = body();
  if (api.shutdown != nullptr) (void)api.shutdown();
  return s;
}

}  // namespace

std::string return_word(Return r) {
  switch (r) {
    case kSuccess:
      return "success";
    case kErrorUninitialized:
      return "uninitialized";
    case kErrorInvalidArgument:
      return "invalid_argument";
    case kErrorNotSupported:
      return "not_supported";
    case kErrorNoPermission:
      return "no_permission";
    case kErrorNotFound:
      return "not_found";
    case kErrorInsufficientSize:
      return "insufficient_size";
    case kErrorDriverNotLoaded:
      return "driver_not_loaded";
    case kErrorTimeout:
      return "timeout";
    case kErrorFunctionNotFound:
      return "function_not_found";
    case kErrorGpuIsLost:
      return "gpu_is_lost";
    case kErrorInUse:
      return "in_use";
    case kErrorInsufficientResources:
      return "insufficient_resources";
    default:
      return "nvml_error_" + std::to_string(r);
  }
}

Status create_instance(const Api& api, const WriteApi& w, const InstanceRef& ref) {
  if (!has_core(api) || !has_writes(w)) return missing();
  return with_nvml(api, [&]() -> Status {
    GPUPLAN_TRY(dev, device_of(api, ref.gpu_uuid));
    GPUPLAN_TRY(info, profile_of(api, dev, ref.profile));
    GpuInstancePlacement placements[kMaxPlacements] = {};
    unsigned n = kMaxPlacements;
    if (Return r = w.device_get_gpu_instance_possible_placements_v2(dev, info.id, placements, &n); r != kSuccess) {
      return nvml_error(api, "nvmlDeviceGetGpuInstancePossiblePlacements_v2", r, ref);
    }
    n = std::min(n, kMaxPlacements);
    const GpuInstancePlacement* at = std::find_if(placements, placements + n, [&](const GpuInstancePlacement& p) {
      return static_cast<int>(p.start) == ref.start;
    });
    if (at == placements + n) {
      return Error{ErrorCode::kInvalidLayout,
                   ref.profile + " cannot start at memory slice " + std::to_string(ref.start) + " on " + ref.gpu_uuid,
                   "mig"};
    }
    GpuInstanceHandle gi = nullptr;
    if (Return r = w.device_create_gpu_instance_with_placement(dev, info.id, at, &gi); r != kSuccess) {
      return nvml_error(api, "nvmlDeviceCreateGpuInstanceWithPlacement", r, ref);
    }
    // One compute instance over every slice of the GPU instance (the CI profile of the same slice count).
    for (unsigned cp = 0; cp < kComputeInstanceProfileCount; ++cp) {
      ComputeInstanceProfileInfo ci{};
      if (w.gpu_instance_get_compute_instance_profile_info(gi, cp, kComputeInstanceEngineProfileShared, &ci) !=
              kSuccess ||
          ci.slice_count != info.slice_count) {
        continue;
      }
      ComputeInstanceHandle handle = nullptr;
      const Return r = w.gpu_instance_create_compute_instance(gi, ci.id, &handle);
      if (r == kSuccess) return Status::Ok();
      (void)w.gpu_instance_destroy(gi);  // leave no GPU instance without a compute instance behind
      return nvml_error(api, "nvmlGpuInstanceCreateComputeInstance", r, ref);
    }
    (void)w.gpu_instance_destroy(gi);
    return Error{ErrorCode::kUnavailable, "no compute instance profile spans " + ref.profile, "mig"};
  });
}

Status destroy_instance(const Api& api, const WriteApi& w, const InstanceRef& ref) {
  if (!has_core(api) || !has_writes(w)) return missing();
  return with_nvml(api, [&]() -> Status {
    GPUPLAN_TRY(dev, device_of(api, ref.gpu_uuid));
    GPUPLAN_TRY(info, profile_of(api, dev, ref.profile));
    GpuInstanceHandle handles[kMaxInstancesPerProfile] = {};
    unsigned n = 0;
    if (Return r = api.device_get_gpu_instances(dev, info.id, handles, &n); r != kSuccess) {
      return nvml_error(api, "nvmlDeviceGetGpuInstances", r, ref);
    }
    n = std::min(n, kMaxInstancesPerProfile);
    for (unsigned k = 0; k < n; ++k) {
      GpuInstanceInfo gi{};
      if (api.gpu_instance_get_info(handles[k], &gi) != kSuccess || static_cast<int>(gi.placement.start) != ref.start) {
        continue;
      }
      for (unsigned cp = 0; cp < kComputeInstanceProfileCount; ++cp) {
        ComputeInstanceProfileInfo ci{};
        if (w.gpu_instance_get_compute_instance_profile_info(handles[k], cp, kComputeInstanceEngineProfileShared,
                                                             &ci) != kSuccess) {
          continue;
        }
        ComputeInstanceHandle cis[kMaxInstancesPerProfile] = {};
        unsigned m = 0;
        if (w.gpu_instance_get_compute_instances(handles[k], ci.id, cis, &m) != kSuccess) continue;
        m = std::min(m, kMaxInstancesPerProfile);
        for (unsigned c = 0; c < m; ++c) {
          if (Return r = w.compute_instance_destroy(cis[c]); r != kSuccess) {
            return nvml_error(api, "nvmlComputeInstanceDestroy", r, ref);
          }
        }
      }
      if (Return r = w.gpu_instance_destroy(handles[k]); r != kSuccess) {
        return nvml_error(api, "nvmlGpuInstanceDestroy", r, ref);
      }
      return Status::Ok();
    }
    return Status::Ok();  // already gone
  });
}

}  // namespace nvml

MigReconcile reconcile_mig(NvmlBackend& backend, const NodeInventory& inv,
                           const std::vector<DesiredInstance>& desired) {
  using Key = std::tuple<std::string, std::string, int>;
  std::set<Key> wanted;
  for (const DesiredInstance& d : desired) {
    if (!d.ref.profile.empty()) wanted.insert(Key{d.ref.gpu_uuid, d.ref.profile, d.ref.start});
  }
  MigReconcile out;
  std::set<Key> present;
  for (const GpuInfo& g : inv.gpus) {
    for (const GpuInstance& i : g.instances) {
      const Key k{g.uuid, i.profile, i.start};
      if (g.mig_mode != "enabled" || wanted.count(k)) {
        present.insert(k);
        continue;
      }
      if (Status s = backend.destroy_instance(InstanceRef{g.uuid, i.profile, i.start}); s) {
        ++out.destroyed;
      } else {
        out.errors.push_back(s.error().message);
        present.insert(k);  // still there
      }
    }
  }
  std::set<Key> done;
  for (const DesiredInstance& d : desired) {
    if (d.ref.profile.empty()) continue;
    const Key k{d.ref.gpu_uuid, d.ref.profile, d.ref.start};
    if (present.count(k) || done.count(k)) continue;
    Status s = backend.create_instance(d.ref);
    if (s) {
      ++out.created;
      done.insert(k);
      continue;
    }
    std::string code = s.error().code == ErrorCode::kConflict        ? "insufficient_resources"
                       : s.error().code == ErrorCode::kInvalidLayout ? "invalid_placement"
                       : s.error().code == ErrorCode::kNotFound      ? "not_found"
                                                                     : "unavailable";
    out.failures.push_back(MigFailure{d.rental_id, d.generation, std::move(code), s.error().message});
  }
  return out;
}

}  // namespace gpuplan::agent
