// The packer's abstract problem: GPU classes (identical GPUs), their configurations (profile count
// vectors a GPU can hold), demand classes (identical units with the same options and priority tier),
// and bins (one GPU's chosen configuration with the units it holds).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpuplan/mig_pack.h"
#include "mig/table_model.h"

namespace gpuplan::mig {

struct Option {
  int target = 0;   // index into PackModel::targets
  int profile = 0;  // index into that target's table profiles
};

struct DemandClass {
  int count = 0;
  int tier = 0;  // 0 = most important
  std::vector<Option> options;
  bool busy = false;                       // existing busy instances that may move (not --keep-existing)
  std::vector<std::pair<int, int>> lines;  // (request index, units) in request order
};

struct Config {
  std::vector<int> counts;  // new instances per profile (besides the GPU class's fixed ones)
  int layout = 0;           // best layout (least stranded) holding fixed + counts
  int stranded = 0;         // its stranded memory + compute slices
};

struct GpuClass {
  int target = 0;
  bool pinned = false;                     // holds busy instances that stay (--keep-existing): always used
  std::vector<Placed> fixed;               // those instances
  std::vector<size_t> members;             // fleet GPU indices
  std::vector<Placed> busy;                // exact search only: busy instances (that may move) on every member
  std::vector<Config> configs;             // maximal configurations (the LP and exact search use these)
  std::map<std::vector<int>, Config> all;  // every configuration by counts (for the filled layouts)
};

struct PackTarget {
  std::string id;  // catalog GPU id
  const MigTable* table = nullptr;
  std::shared_ptr<const TableModel> model;
};

struct PackModel {
  std::vector<PackTarget> targets;
  std::vector<GpuClass> classes;
  std::vector<DemandClass> demands;
  int tiers = 1;
  // Per fleet GPU: its busy instances that may move (empty with --keep-existing), sorted by start.
  // A plan that does not keep one in place disturbs it.
  std::vector<std::vector<Placed>> busy_on_gpu;
  // Where the solver counts what its exact searches did (nullptr: nowhere). Not part of the problem.
  PackStats* stats = nullptr;
};

// One GPU's configuration with the units it holds: units[p] = (demand class, amount) for profile p.
struct Bin {
  int gpu_class = 0;
  int gpu = -1;  // the fleet GPU this bin must go to (it keeps that GPU's busy instances), or -1: any member
  std::vector<int> capacity;
  std::vector<std::vector<std::pair<int, int>>> units;
  int filled(int profile) const {
    int n = 0;
    for (const auto& u : units[profile]) n += u.second;
    return n;
  }
  int total() const {
    int n = 0;
    for (size_t p = 0; p < units.size(); ++p) n += filled(static_cast<int>(p));
    return n;
  }
};

struct SolveOutcome {
  std::vector<Bin> bins;
  std::vector<int> unplaced;  // per demand class
  bool exact = false;
};

// The layout with exactly `counts` instances that keeps the most of `busy` in place, given
// `busy_units[p]` busy units of profile p to put there, then strands the least.
struct KeepEval {
  int layout = -1;
  int kept = 0;
  int stranded = 0;
};
KeepEval best_keeping_layout(const TableModel& tm, const std::vector<Placed>& busy, const std::vector<int>& counts,
                             const std::vector<int>& busy_units);

// Places the demand on the classes: exact search when small, else LP-guided construction followed by
// reduce_disturbance().
SolveOutcome solve_packing(const PackModel& model, int exact_state_limit);
// The same for `demand` units per demand class on at most `gpus` GPUs per class, without the
// disturbance step (bins carry no fleet GPU).
SolveOutcome solve_packing_for(const PackModel& model, const std::vector<int>& demand, const std::vector<int>& gpus,
                               int exact_state_limit);
// An upper bound on the states (memo entries) the exact search creates from `demand` units per demand
// class on `gpus` GPUs per class (with `per_class`, the states whose next GPU is of each class): the
// state half of its cost model, checked against the state limit before it starts.
double exact_state_bound(const PackModel& model, const std::vector<int>& demand, const std::vector<int>& gpus,
                         std::vector<double>* per_class = nullptr);
// Rearranges the bins of each GPU class with busy members so that more busy instances stay where they
// are, without using more GPUs of the class or placing fewer units: keep bins are priced with the
// duals of the class's configuration LP, committed while that LP says the rest still fits, and the
// rest is re-solved (pack_disturb.cc); then units move between targets where that keeps more at the
// same total GPU count. Bins that keep instances carry their fleet GPU.
void reduce_disturbance(const PackModel& model, std::vector<Bin>& bins, int exact_state_limit);
// The LP relaxation's optimum GPU count for placing `placed` units per demand class (pinned GPUs
// excluded: they are always used).
double lp_lower_bound(const PackModel& model, const std::vector<int>& placed);
// A lower bound on the busy instances disturbed by any plan that places at least `placed` units per
// demand class on at most `gpus` GPUs: the rounded-up LP relaxation of keeping busy instances in place
// (pack_bound.cc). 0 with --keep-existing.
int disturbance_lower_bound(const PackModel& model, const std::vector<int>& placed, int gpus);

}  // namespace gpuplan::mig
