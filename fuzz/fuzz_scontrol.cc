// Fuzzes the Slurm inventory (gpuplan/slurm_inventory.h): the input as `scontrol show node -o` output ->
// parse_scontrol_nodes -> slurm_inventory_json against the embedded catalog. Oracles (an abort is a
// libFuzzer crash): an accepted parse holds at most kMaxSlurmNodes nodes and kMaxGresItems items a node;
// every inventory has at most kMaxSlurmGpusPerNode GPUs, each instance's start inside its GPU's table,
// and a node's instances never share a memory slice.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gpuplan/catalog.h"
#include "gpuplan/slurm_inventory.h"

namespace {
namespace h = gpuplan::handoff;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto catalog = gpuplan::Catalog::embedded();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto nodes = h::parse_scontrol_nodes(text);
  if (!nodes.ok()) return 0;
  if (nodes->size() > h::kMaxSlurmNodes) std::abort();
  for (const h::SlurmNode& n : *nodes) {
    if (n.gres.size() > h::kMaxGresItems || n.gres_used.size() > h::kMaxGresItems) std::abort();
    auto inv = h::slurm_node_inventory(*catalog, n);
    if (!inv.ok()) continue;
    const auto& gpus = (*inv)["gpus"];
    if (gpus.size() > h::kMaxSlurmGpusPerNode) std::abort();
    for (const auto& g : gpus) {
      const gpuplan::Gpu* gpu = catalog->find_gpu(g["name"].get<std::string>());
      if (gpu == nullptr) std::abort();
      if (g["instances"].empty()) continue;
      const gpuplan::MigTable* t = catalog->find_mig_table(gpu->mig_table);
      if (t == nullptr) std::abort();
      uint64_t used = 0;
      for (const auto& i : g["instances"]) {
        const gpuplan::MigProfile* p = t->find(i["profile"].get<std::string>());
        const int start = i["start"].get<int>();
        if (p == nullptr || start < 0 || start + p->memory_slices > t->memory_slices) std::abort();
        for (int s = start; s < start + p->memory_slices; ++s) {
          if (used & (uint64_t{1} << s)) std::abort();
          used |= uint64_t{1} << s;
        }
      }
    }
  }
  (void)h::slurm_inventory_json(*catalog, *nodes);
  return 0;
}
