// The fixed halves of the MIG packing targets: a small fleet (when requests are fuzzed) and a few
// requests (when the fleet is fuzzed), and one bounded pack with its exports.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "gpuplan/mig_pack.h"

namespace gpuplan::fuzz {

// Two GPU types, one with a busy instance, so moves and keeps are reachable.
inline constexpr std::string_view kFleetYaml = R"(nodes:
  - name: n1
    gpus:
      - {target: a100-40gb-sxm4, count: 2}
      - target: h100-80gb-sxm5
        instances: [{profile: 3g.40gb, start: 4, busy: true, name: job}]
)";

// One request of each kind (profile, resources, workload).
inline constexpr std::string_view kRequestsYaml = R"(requests:
  - {name: a, tenant: t1, count: 2, profile: 1g.10gb}
  - {name: b, tenant: t2, count: 1, memory_gb: 8, compute_slices: 1}
  - {name: c, tenant: t1, count: 1, workload: {model: llama-2-7b, weights: int4-awq, context: 2048}}
)";

// Exact search budget for fuzzing: small, so one input costs milliseconds (the LP-guided construction
// takes over beyond it, which is the path large real inputs take too).
inline constexpr int kFuzzExactStates = 2000;

inline const mig::Fleet& fixed_fleet() {
  static const mig::Fleet fleet = [] {
    auto f = mig::parse_fleet(catalog(), "fuzz/fleet.yaml", kFleetYaml);
    if (!f) std::abort();
    return *f;
  }();
  return fleet;
}

inline const std::vector<mig::PackRequest>& fixed_requests() {
  static const std::vector<mig::PackRequest> requests = [] {
    auto r = mig::parse_requests(catalog(), "fuzz/requests.yaml", kRequestsYaml);
    if (!r) std::abort();
    return *r;
  }();
  return requests;
}

// Packs under a deadline (both with and without keeping busy instances) and exports the result.
inline void pack_and_export(const mig::Fleet& fleet, const std::vector<mig::PackRequest>& requests, bool keep) {
  Deadline deadline;
  mig::PackOptions options;
  options.keep_existing = keep;
  options.exact_state_limit = kFuzzExactStates;
  auto result = mig::pack(catalog(), fleet, requests, options);
  if (!result) return;
  require_finite(result->lp_bound, "pack", "lp_bound");
  (void)mig::export_mig_parted(fleet, *result);
  (void)mig::export_kubernetes(fleet, requests, *result);
  (void)mig::export_slurm(fleet, *result);
}

}  // namespace gpuplan::fuzz
