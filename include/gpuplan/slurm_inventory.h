// A provider's inventory read from Slurm instead of an agent (issue #15: for clusters where installing
// an agent is not allowed): `scontrol show node -o` (one line per node, KEY=VALUE words; Slurm 22.05's
// format) parsed into the inventory the agent PUTs to /agent/inventory (src/agent/nvml.h's
// inventory_json: gpus with uuid, name, memory_bytes, mig_mode and instances {profile, start}).
//
// What Slurm does not say and how it is filled in:
//   - GPU UUIDs: Slurm's GRES counts have none; each GPU gets a stable made-up one,
//     "SLURM-<node>-<n>" (n counts the node's GPUs in GRES order), so a re-import names the same GPUs.
//   - Which physical GPU holds which MIG instance, and at which placement: Slurm counts instances per
//     type only. The instances of one GPU model are laid onto as few GPUs as the catalog's MIG rules
//     allow (largest profile first, first valid placement start), which is the layout a Slurm job cannot
//     tell from the real one: the hand-off asks Slurm for `--gres=gpu:<type>:1`, and slurmd picks the
//     device.
// GRES types resolve to catalog ids and MIG profiles: "<gpu>_<profile>" ("a100_3g.40gb", slurmd's
// AutoDetect=nvml names such as "nvidia_a100-sxm4-80gb_3g.40gb"), a bare profile ("3g.40gb", what
// `mig pack --export slurm` writes) when one catalog GPU has it, or a GPU name ("h100", "a100-80gb-sxm4")
// through Catalog::resolve. A type that does not resolve is listed in `unresolved`, never guessed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/catalog.h"
#include "gpuplan/status.h"

namespace gpuplan::handoff {

// One `gpu:<type>:<count>(...)` item of a node's Gres= or GresUsed=.
struct GresItem {
  std::string name;  // "gpu" (other GRES names are skipped by the inventory)
  std::string type;  // "a100_3g.40gb"; empty for an untyped "gpu:2"
  int64_t count = 0;
  std::string detail;  // what the parentheses held ("S:0", "IDX:0-1"), as given
};

// One line of `scontrol show node -o`.
struct SlurmNode {
  std::string name;                 // NodeName=
  std::string state;                // State=, "IDLE", "MIXED+DRAIN", "DOWN*"
  std::vector<GresItem> gres;       // Gres=
  std::vector<GresItem> gres_used;  // GresUsed=
  bool available() const;           // not DOWN, DRAIN(ED/ING), FAIL, NOT_RESPONDING ('*'), FUTURE, POWERED_DOWN
};

// Bounds of the input.
inline constexpr size_t kMaxScontrolBytes = 8 << 20;  // 8 MiB: a few thousand nodes of ~1 KiB
inline constexpr size_t kMaxSlurmNodes = 4096;        // nodes one import takes
inline constexpr size_t kMaxGresItems = 64;           // GRES items of one node
inline constexpr int64_t kMaxGresCountPerItem = 64;   // GPUs or MIG instances of one type on a node
inline constexpr size_t kMaxSlurmGpusPerNode = 16;    // market::kMaxGpusPerNode
inline constexpr size_t kMaxSlurmValueBytes = 4096;   // one KEY=VALUE

// Parses the whole output (blank lines skipped). A malformed GRES item or a line without NodeName= is a
// usage error naming the line; over a bound, kLimit naming it.
Result<std::vector<SlurmNode>> parse_scontrol_nodes(std::string_view text);

// The GRES type resolved against the catalog.
struct GresTarget {
  std::string gpu_id;   // catalog id; empty when unresolved
  std::string profile;  // MIG profile ("3g.40gb"), empty for a whole GPU
  std::string why;      // when unresolved: what was tried
};
// `bare_profile_gpu`: the GPU model (any catalog name) that bare profile types ("3g.40gb", what
// `mig pack --export slurm` writes) belong to on this cluster; empty: such a type resolves only when one
// catalog GPU has the profile.
GresTarget resolve_gres_type(const Catalog& catalog, std::string_view type, std::string_view bare_profile_gpu = {});

// The node's inventory as the agent reports it (inventory_json's shape, without seq and boot_id,
// which the caller adds), plus "unresolved": [{type, count, why}] for GRES types it could not place.
// A node with more GPUs than kMaxSlurmGpusPerNode, or MIG instances that no layout holds, is an error.
Result<Json> slurm_node_inventory(const Catalog& catalog, const SlurmNode& node,
                                  std::string_view bare_profile_gpu = {});

// Every node: {"nodes": [{"node", "state", "available", "gres": [{type, count, used, gpu, profile}],
// "inventory": {...}}]}; a node whose inventory is impossible has "inventory": null and "error": {code,
// message} (the other nodes are still imported).
Result<Json> slurm_inventory_json(const Catalog& catalog, const std::vector<SlurmNode>& nodes,
                                  std::string_view bare_profile_gpu = {});

}  // namespace gpuplan::handoff
