// Fuzzes `gpuplan offers import` (issue #18): bytes -> import_offers as SkyPilot's vms.csv and as
// gpuplan's CSV -> the CSV it writes, which parse_offers must read back with no line skipped (the import
// writes only rows that parse_offers accepts) and the same number of offers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "fuzz_util.h"
#include "gpuplan/offers.h"

namespace {

namespace fz = gpuplan::fuzz;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(fz::as_text(data, size));
  // SkyPilot's layout as an unknown provider's and as GCP's (whose G2 machines are joined to their GPU rows,
  // data/offers/host_gpus.yaml), and gpuplan's CSV.
  for (const auto& [format, provider] :
       {std::pair{"skypilot", "fuzzcloud"}, std::pair{"skypilot", "gcp"}, std::pair{"csv", "fuzzcloud"}}) {
    gpuplan::ImportOptions options;
    options.format = format;
    options.provider = provider;
    options.captured_at = "2026-11-30";
    options.source = "https://example.invalid/vms.csv";
    auto imported = gpuplan::import_offers(fz::catalog(), "fuzz/vms.csv", text, options);
    if (!imported) continue;
    auto back = gpuplan::parse_offers(fz::catalog(), "fuzz/imported.csv", imported->csv);
    if (!back || !back->skipped.empty() || back->offers.size() != imported->offers) std::abort();
  }
  return 0;
}
