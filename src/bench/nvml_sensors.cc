#include "bench/nvml_sensors.h"

#include <unistd.h>

#include <array>
#include <cstring>

namespace gpuplan::bench {

namespace {
using Return = int;    // nvmlReturn_t
using Device = void*;  // nvmlDevice_t
constexpr Return kSuccess = 0;
constexpr unsigned kClockSm = 1;             // NVML_CLOCK_SM
constexpr unsigned kTemperatureGpu = 0;      // NVML_TEMPERATURE_GPU
constexpr unsigned kDriverVersionSize = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
constexpr unsigned kMaxProcesses = 64;       // processes read per call (more: counted as 64)
constexpr double kMilli = 1e-3;
// nvmlProcessInfo_t (v2/v3 layout)
struct ProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
// nvmlClocksEventReasons bits (nvml.h, NVML API 12) and the names the file uses.
struct ReasonBit {
  unsigned long long bit;
  const char* name;
};
constexpr ReasonBit kReasons[] = {{0x4, "sw_power_cap"},
                                  {0x8, "hw_slowdown"},
                                  {0x10, "sync_boost"},
                                  {0x20, "sw_thermal_slowdown"},
                                  {0x40, "hw_thermal_slowdown"},
                                  {0x80, "hw_power_brake_slowdown"},
                                  {0x2, "applications_clocks_setting"}};
}  // namespace

struct NvmlSensors::Impl {
  std::unique_ptr<agent::NvmlLibrary> lib;
  Device dev = nullptr;
  Return (*energy)(Device, unsigned long long*) = nullptr;
  Return (*power)(Device, unsigned int*) = nullptr;
  Return (*limit)(Device, unsigned int*) = nullptr;
  Return (*clock)(Device, unsigned, unsigned int*) = nullptr;
  Return (*temperature)(Device, unsigned, unsigned int*) = nullptr;
  Return (*reasons)(Device, unsigned long long*) = nullptr;
  Return (*processes)(Device, unsigned int*, ProcessInfo*) = nullptr;
  Return (*driver)(char*, unsigned int) = nullptr;
  Return (*pcie_gen)(Device, unsigned int*) = nullptr;
  Return (*pcie_width)(Device, unsigned int*) = nullptr;
  template <typename F>
  void bind(F& f, const char* name) {
    f = reinterpret_cast<F>(lib->symbol(name));
  }
};

std::unique_ptr<NvmlSensors> NvmlSensors::open(const std::string& pci_bus_id) {
  auto lib = agent::NvmlLibrary::open();
  if (!lib) return nullptr;
  auto impl = std::make_shared<Impl>();
  impl->lib = std::move(*lib);
  Return (*init)() = nullptr;
  Return (*by_pci)(const char*, Device*) = nullptr;
  impl->bind(init, "nvmlInit_v2");
  impl->bind(by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
  if (!init || !by_pci || init() != kSuccess || by_pci(pci_bus_id.c_str(), &impl->dev) != kSuccess) return nullptr;
  impl->bind(impl->energy, "nvmlDeviceGetTotalEnergyConsumption");
  impl->bind(impl->power, "nvmlDeviceGetPowerUsage");
  impl->bind(impl->limit, "nvmlDeviceGetPowerManagementLimit");
  impl->bind(impl->clock, "nvmlDeviceGetClockInfo");
  impl->bind(impl->temperature, "nvmlDeviceGetTemperature");
  impl->bind(impl->reasons, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!impl->reasons) impl->bind(impl->reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  impl->bind(impl->processes, "nvmlDeviceGetComputeRunningProcesses_v3");
  impl->bind(impl->driver, "nvmlSystemGetDriverVersion");
  impl->bind(impl->pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
  impl->bind(impl->pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
  return std::unique_ptr<NvmlSensors>(new NvmlSensors(std::move(impl)));
}

Sensors NvmlSensors::read() const {
  const Impl& i = *impl_;
  Sensors s;
  s.available = true;
  if (unsigned long long mj = 0; i.energy && i.energy(i.dev, &mj) == kSuccess)
    s.energy_joules = static_cast<double>(mj) * kMilli;
  if (unsigned mw = 0; i.power && i.power(i.dev, &mw) == kSuccess) s.power_watts = mw * kMilli;
  if (unsigned mw = 0; i.limit && i.limit(i.dev, &mw) == kSuccess) s.power_limit_watts = mw * kMilli;
  if (unsigned mhz = 0; i.clock && i.clock(i.dev, kClockSm, &mhz) == kSuccess) s.sm_clock_mhz = mhz;
  if (unsigned c = 0; i.temperature && i.temperature(i.dev, kTemperatureGpu, &c) == kSuccess) s.temperature_c = c;
  if (unsigned long long bits = 0; i.reasons && i.reasons(i.dev, &bits) == kSuccess) {
    for (const ReasonBit& r : kReasons) {
      if (bits & r.bit) s.throttle_reasons.emplace_back(r.name);
    }
  }
  if (i.processes) {
    std::array<ProcessInfo, kMaxProcesses> infos{};
    unsigned count = kMaxProcesses;
    if (i.processes(i.dev, &count, infos.data()) == kSuccess) {
      const unsigned self = static_cast<unsigned>(getpid());
      int others = 0;
      for (unsigned k = 0; k < count && k < kMaxProcesses; ++k) others += infos[k].pid != self ? 1 : 0;
      s.other_processes = others;
    }
  }
  return s;
}

std::string NvmlSensors::driver_version() const {
  char buf[kDriverVersionSize] = {};
  if (!impl_->driver || impl_->driver(buf, kDriverVersionSize) != kSuccess) return "";
  return std::string(buf, strnlen(buf, kDriverVersionSize));
}
int NvmlSensors::pcie_gen() const {
  unsigned v = 0;
  return impl_->pcie_gen && impl_->pcie_gen(impl_->dev, &v) == kSuccess ? static_cast<int>(v) : 0;
}
int NvmlSensors::pcie_width() const {
  unsigned v = 0;
  return impl_->pcie_width && impl_->pcie_width(impl_->dev, &v) == kSuccess ? static_cast<int>(v) : 0;
}

}  // namespace gpuplan::bench
