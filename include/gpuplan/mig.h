// MIG rules: which sets of GPU instances a MIG-capable GPU accepts, where each one goes, and in which
// order the driver creates them. Every rule cites NVIDIA's Multi-Instance GPU user guide (see
// docs/mig.md); the tables themselves come from the catalog (data/mig/*.yaml).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/catalog.h"
#include "gpuplan/status.h"

namespace gpuplan::mig {

// One GPU instance in a layout: a profile (index into MigTable::profiles) at a start memory slice.
struct Placed {
  int profile = 0;
  int start = 0;
  bool operator==(const Placed&) const = default;
};

// One entry of a layout as the user writes it: "3g.20gb@4", "1g.5gb", "3g.20gb@0[1c,2c]".
struct LayoutEntry {
  std::string profile;
  std::optional<int> start;         // absent: gpuplan chooses the placement
  std::vector<int> compute_slices;  // compute instances inside the GPU instance; empty: one full CI
};

// Parses "3g.20gb@4,2g.10gb@0,1g.5gb". Usage error on bad syntax.
Result<std::vector<LayoutEntry>> parse_layout(std::string_view text);

// The rules, in the order check_layout applies them. The id names the rule in results and tests.
enum class Rule {
  kNone,
  kPlacementStart,   // a start slot outside the profile's placements
  kOverlap,          // two instances on the same memory slice
  kMaxCount,         // more instances of a profile than the profile allows
  kMaxInstances,     // more instances than the GPU allows
  kMediaExtensions,  // more than one +me instance
  kComputeSlices,    // more compute slices than the GPU has
  kNoPlacement,      // entries without a start for which no free placement exists
  kComputeInstance,  // a compute-instance split the GPU instance cannot hold
};
std::string_view rule_name(Rule rule);

struct CheckResult {
  bool valid = false;
  Rule rule = Rule::kNone;
  std::string reason;              // empty when valid; else the exact rule broken, with the guide's source
  std::vector<Placed> placements;  // in the order of the entries (valid layouts only)
  std::vector<std::vector<int>> compute_instances;  // per entry, the CI sizes (valid layouts only)
  std::vector<std::string> commands;                // nvidia-smi commands that create the layout (valid layouts only)
};

// Checks a layout against a table. Unknown profile names are a kNotFound error (not an invalid layout).
Result<CheckResult> check_layout(const MigTable& table, const std::vector<LayoutEntry>& entries);

// Occupied memory slices of a layout as a bit mask (bit i = memory slice i).
uint32_t occupancy(const MigTable& table, const std::vector<Placed>& layout);

// Why `layout` (all placed) breaks a rule, or Rule::kNone. `reason` receives the message.
Rule first_broken_rule(const MigTable& table, const std::vector<Placed>& layout, std::string* reason);

// Every valid layout with placements (sorted by start), including the empty one. A few hundred to a
// few thousand per table; computed on demand, cache the result.
std::vector<std::vector<Placed>> all_layouts(const MigTable& table);

// A layout is maximal when no valid layout, as a multiset of profiles, strictly contains its
// combination: no instance of any profile can be added, whatever the placement (the notion the
// packer uses for its configurations). Placements do not matter.
bool is_maximal(const MigTable& table, const std::vector<Placed>& layout);

// This placement admits no further instance where it stands, although (unless the layout is also
// maximal) another placement of the same combination would: capacity stranded by placement.
bool is_dead_end(const MigTable& table, const std::vector<Placed>& layout);

// Free capacity that no additional instance can use: free memory slices minus the most an extension
// could still cover, and the same for compute slices.
struct Stranded {
  int memory_slices = 0;
  int compute_slices = 0;
};
Stranded stranded(const MigTable& table, const std::vector<Placed>& layout);

// nvidia-smi commands that create `layout` on GPU `gpu_index` (-1: no -i option), largest instances
// first with explicit placements (`-cgi <id>:<start>`), one default compute instance each (-C) unless
// `compute_instances` gives a split for that entry.
std::vector<std::string> create_commands(const MigTable& table, const std::vector<Placed>& layout, int gpu_index,
                                         const std::vector<std::vector<int>>& compute_instances = {});

// The order in which instances must be created when placement is left to the driver: larger
// instances first (the guide's A100 example: 3g before 2g and 1g). Indices into `layout`.
std::vector<size_t> creation_order(const MigTable& table, const std::vector<Placed>& layout);

// Counts per profile of a layout (index = profile index).
std::vector<int> profile_counts(const MigTable& table, const std::vector<Placed>& layout);

}  // namespace gpuplan::mig
