// Fuzzes a `gpuplan mig pack --requests FILE`: bytes -> parse_requests -> a pack on a fixed small
// fleet under a deadline -> the exports.
#include <cstddef>
#include <cstdint>

#include "pack_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fz = gpuplan::fuzz;
  auto requests = gpuplan::mig::parse_requests(fz::catalog(), "fuzz/requests.yaml", fz::as_text(data, size));
  if (!requests) return 0;
  fz::pack_and_export(fz::fixed_fleet(), *requests, size % 2 == 0);
  return 0;
}
