// Fuzzes a `gpuplan mig pack --fleet FILE`: bytes -> parse_fleet -> a pack of fixed requests under a
// deadline -> the mig-parted, Kubernetes and Slurm exports.
#include <cstddef>
#include <cstdint>

#include "pack_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fz = gpuplan::fuzz;
  auto fleet = gpuplan::mig::parse_fleet(fz::catalog(), "fuzz/fleet.yaml", fz::as_text(data, size));
  if (!fleet) return 0;
  fz::pack_and_export(*fleet, fz::fixed_requests(), size % 2 == 0);
  return 0;
}
