// NVML's read calls for the bench (power, energy, clocks, temperature, throttle reasons, other compute
// processes), through the agent's loader: NvmlLibrary answers whitelisted names only.
#pragma once

#include <memory>
#include <string>

#include "agent/nvml.h"
#include "bench/backend.h"

namespace gpuplan::bench {

class NvmlSensors {
 public:
  // NVML's device at `pci_bus_id` ("0000:1B:00.0"); nullptr when NVML or the device is not there.
  static std::unique_ptr<NvmlSensors> open(const std::string& pci_bus_id);
  Sensors read() const;
  std::string driver_version() const;
  int pcie_gen() const;
  int pcie_width() const;

 private:
  struct Impl;
  explicit NvmlSensors(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace gpuplan::bench
