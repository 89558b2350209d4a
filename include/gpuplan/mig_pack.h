// Fleet packing: place MIG instance requests on the fewest GPUs of a fleet, then disturb the fewest
// running instances, then strand the least memory and compute; by priority when not everything fits.
// See docs/mig.md for the algorithm, its lower bound and measured quality.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/catalog.h"
#include "gpuplan/mig.h"
#include "gpuplan/status.h"

namespace gpuplan::mig {

// An instance that exists on a fleet GPU now.
struct ExistingInstance {
  Placed placed;
  bool busy = false;
  std::string name;  // optional label of what runs on it
};

struct FleetGpu {
  std::string node;
  int index = 0;  // GPU index on the node (nvidia-smi -i)
  const Gpu* gpu = nullptr;
  const MigTable* table = nullptr;
  std::vector<ExistingInstance> instances;
};

struct Fleet {
  std::vector<FleetGpu> gpus;
  std::vector<std::string> warnings;  // e.g. GPUs without MIG that were left out
};

// bugprone-exception-escape: as OptionSpec's (options.h), its implicit destructor runs nlohmann::json's,
// which may allocate; bad_alloc there is fatal like any allocation's.
struct PackRequest {  // NOLINT(bugprone-exception-escape)
  enum class Kind { kProfile, kResources, kWorkload };
  std::string name;
  std::string tenant;
  int count = 1;
  int priority = 0;  // larger = more important
  Kind kind = Kind::kProfile;
  std::string profile;              // kProfile: a profile name ("3g.20gb")
  double memory_gb = 0;             // kResources: minimum instance memory, GB (10^9 bytes)
  int compute_slices = 0;           // kResources: minimum compute slices
  nlohmann::ordered_json workload;  // kWorkload: options of `gpuplan fit`
  std::string target;               // optional: only GPUs of this catalog target
};

struct PackOptions {
  bool keep_existing = false;  // never move a busy instance
  // Exact search is used while it stays under this many states; beyond, the LP-guided construction.
  int exact_state_limit = 200000;
};

struct PlacedUnit {
  Placed placed;
  int request = -1;              // index into the requests, or -1 for an existing busy instance
  int existing = -1;             // index into the GPU's instances when this instance exists now (kept in place)
  int moved_from_gpu = -1;       // a busy instance moved here: its fleet GPU index ...
  int moved_from_instance = -1;  // ... and instance index there
};

struct GpuPlan {
  size_t gpu = 0;  // index into Fleet::gpus
  std::vector<PlacedUnit> layout;
  Stranded stranded;
  std::vector<int> destroy;    // indices of the GPU's existing instances to destroy
  std::vector<Placed> create;  // instances to create
};

struct Unplaced {
  int request = 0;
  int count = 0;
  std::string reason;
};

// How the solver reached the plan (tests and benchmarks read it; the plan does not depend on it).
struct PackStats {
  int exact_runs = 0;     // exact searches that finished (proved their part optimal)
  int exact_aborted = 0;  // exact searches that hit the state limit or their work limit and gave up
  // Exact searches not started: the cost model (pack_solver.cc) put their states over
  // PackOptions::exact_state_limit or their work over the work limit, so the LP path ran at once.
  int exact_skipped = 0;
  long long exact_states = 0;        // memo entries over all exact searches run
  long long exact_work = 0;          // fills they evaluated (the work limit counts these)
  double largest_skipped_bound = 0;  // the largest state bound of a skipped search
  double largest_run_bound = 0;      // the largest state bound of a search that ran
};

struct PackResult {
  int gpus_used = 0;
  int lower_bound = 0;        // ceil of the LP relaxation for the placed units
  double lp_bound = 0;        // the LP relaxation itself
  bool exact = false;         // true when the exact search proved optimality
  std::vector<GpuPlan> gpus;  // every fleet GPU, in fleet order (unused ones have an empty layout)
  std::vector<Unplaced> unplaced;
  int disturbed = 0;  // busy instances moved or destroyed
  // No plan that places these units on at most gpus_used GPUs disturbs fewer busy instances (the
  // rounded-up LP relaxation of keeping them in place).
  int disturbed_lower_bound = 0;
  int stranded_memory_slices = 0;
  int stranded_compute_slices = 0;
  std::vector<std::string> notes;  // how requests were mapped (e.g. memory_gb -> profile per GPU type)
  PackStats stats;
};

// The smallest profile of `gpu`'s MIG table (fewest memory slices, then compute slices;
// media-extension profiles last) that a `gpuplan fit` workload fits in, by the memory model of
// `gpuplan fit` (capacity of the MIG instance less the driver's reserve). nullopt when none does or the
// workload is invalid, with the reason in *why; on success *why says what it needs and gets.
std::optional<int> smallest_profile_for_workload(const Gpu& gpu, const MigTable& table,
                                                 const nlohmann::ordered_json& workload, std::string* why);

// The smallest profile (fewest memory slices, then compute slices) with at least `memory_gb` and
// `compute_slices`; media-extension profiles only when nothing else fits. nullopt when none.
std::optional<int> smallest_profile_for(const MigTable& table, double memory_gb, int compute_slices);

// Files: YAML text (or JSON, which is YAML) with the shapes documented in docs/mig.md. Errors name
// the file, the entry and the field.
Result<Fleet> parse_fleet(const Catalog& catalog, const std::string& file, std::string_view text);
Result<std::vector<PackRequest>> parse_requests(const Catalog& catalog, const std::string& file, std::string_view text);

Result<PackResult> pack(const Catalog& catalog, const Fleet& fleet, const std::vector<PackRequest>& requests,
                        const PackOptions& options);

// Exports of a pack result.
std::string export_mig_parted(const Fleet& fleet, const PackResult& result);
std::string export_kubernetes(const Fleet& fleet, const std::vector<PackRequest>& requests, const PackResult& result);
std::string export_slurm(const Fleet& fleet, const PackResult& result);
// The mig-parted config label of a node ("gpuplan-<node>").
std::string node_config_label(const std::string& node);
// The Kubernetes extended resource of a profile under the mixed strategy: "nvidia.com/mig-1g.5gb";
// a '+' (media extensions) becomes '.' because resource names are DNS subdomains.
std::string kubernetes_resource(const std::string& profile);

}  // namespace gpuplan::mig
