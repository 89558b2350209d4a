// The MIG benchmark's random fleets and demand (bench/mig_bench.cc), shared with the plan-quality test
// (tests/unit/mig_pack_quality_test.cc) so that both pack the same fleets: a fleet of a fixed GPU mix,
// request lines drawn until a number of units, and random valid layouts on 30% of the GPUs.
#pragma once

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpuplan/catalog.h"
#include "gpuplan/mig_pack.h"
#include "mig/table_model.h"

namespace gpuplan::mig::bench {

// The benchmark's fleet and demand, fixed for comparability across runs.
constexpr int kFleetGpus = 10000;
constexpr int kRequestUnits = 50000;
constexpr unsigned kSeed = 20261130;
// Largest count of one request line (lines are drawn until kRequestUnits units).
constexpr int kMaxLineCount = 20;

struct Scenario {
  Fleet fleet;
  std::vector<PackRequest> requests;
};

// A fleet of `gpus` GPUs of the mix below and request lines drawn until `units` units, from `seed`.
inline Scenario make_scenario(int gpus, int units_wanted, unsigned seed) {
  Scenario sc;
  auto catalog = Catalog::embedded();
  // GPU mix: mostly A100/H100 generations, some H200 and A30.
  const std::vector<std::pair<std::string, double>> mix = {{"a100-40gb-sxm4", 0.20},
                                                           {"a100-80gb-sxm4", 0.25},
                                                           {"h100-80gb-sxm5", 0.35},
                                                           {"h200-141gb-sxm", 0.15},
                                                           {"a30", 0.05}};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < gpus; ++i) {
    double x = u(rng);
    size_t k = 0;
    while (k + 1 < mix.size() && x > mix[k].second) x -= mix[k++].second;
    auto ref = catalog->resolve(mix[k].first);
    FleetGpu g;
    g.node = "node-" + std::to_string(i / 8);
    g.index = i % 8;
    g.gpu = ref->gpu;
    g.table = ref->mig_table;
    sc.fleet.gpus.push_back(g);
  }
  // Requests: memory/compute minimums (portable across GPU types) and profile names.
  struct Kind {
    double weight;
    const char* profile;
    double memory_gb;
    int compute;
  };
  const std::vector<Kind> kinds = {{0.60, nullptr, 4, 1},   {0.10, nullptr, 9, 1},   {0.06, nullptr, 9, 2},
                                   {0.03, nullptr, 18, 3},  {0.01, nullptr, 30, 4},  {0.12, "1g.10gb", 0, 0},
                                   {0.02, "3g.40gb", 0, 0}, {0.03, "2g.20gb", 0, 0}, {0.02, "1g.5gb", 0, 0},
                                   {0.01, "7g.80gb", 0, 0}};
  int units = 0, line = 0;
  std::uniform_int_distribution<int> count(1, kMaxLineCount);
  while (units < units_wanted) {
    double x = u(rng);
    size_t k = 0;
    while (k + 1 < kinds.size() && x > kinds[k].weight) x -= kinds[k++].weight;
    PackRequest r;
    r.name = "r" + std::to_string(line++);
    r.count = std::min(count(rng), units_wanted - units);
    r.priority = static_cast<int>(rng() % 3);
    if (kinds[k].profile) {
      r.kind = PackRequest::Kind::kProfile;
      r.profile = kinds[k].profile;
    } else {
      r.kind = PackRequest::Kind::kResources;
      r.memory_gb = kinds[k].memory_gb;
      r.compute_slices = kinds[k].compute;
    }
    units += r.count;
    sc.requests.push_back(r);
  }
  return sc;
}

// `fleet` with a random valid layout on 30% of its GPUs, each instance busy with probability 1/2.
inline Fleet with_instances(Fleet fleet, unsigned seed) {
  std::mt19937 rng(seed);
  for (auto& g : fleet.gpus) {
    if (rng() % 10 >= 3) continue;
    auto model = table_model(*g.table);
    const auto& layout = model->layouts[rng() % model->layouts.size()];
    for (const auto& p : layout) g.instances.push_back(ExistingInstance{p, rng() % 2 == 0, ""});
  }
  return fleet;
}

// The first request lines up to this many units: with existing instances the full demand would not fit.
constexpr int kBusyRequestUnits = 40000;
// The small fleets' demand per GPU: the 10,000-GPU benchmark's (5 units; 4 with existing instances).
constexpr int kUnitsPerGpu = kRequestUnits / kFleetGpus;
constexpr int kBusyUnitsPerGpu = kBusyRequestUnits / kFleetGpus;

// BM_MigPack_Fleet/N's fleet: N GPUs of the mix with N x kUnitsPerGpu units.
inline Scenario fleet_scenario(int gpus) {
  return make_scenario(gpus, gpus * kUnitsPerGpu, kSeed + static_cast<unsigned>(gpus));
}

// BM_MigPack_BusyFleet/N's: N GPUs, N x kBusyUnitsPerGpu units, random layouts on 30% of the GPUs.
inline Scenario busy_fleet_scenario(int gpus) {
  Scenario sc = make_scenario(gpus, gpus * kBusyUnitsPerGpu, kSeed + static_cast<unsigned>(gpus));
  sc.fleet = with_instances(std::move(sc.fleet), kSeed + 1 + static_cast<unsigned>(gpus));
  return sc;
}

}  // namespace gpuplan::mig::bench
