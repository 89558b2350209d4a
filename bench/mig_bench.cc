// mig pack at fleet scale: gpuplan's packer against two things operators do today, on a random fleet
// of 10,000 GPUs and 50,000 instance requests:
//   - first fit in the driver's order: each instance goes to the first GPU (fleet order) where the
//     driver can still create it, at the lowest free valid start;
//   - static mig-parted all-balanced: every GPU partitioned 2x1g + 1x2g + 1x3g (2x1g + 1x2g on
//     4-slice GPUs, NVIDIA/mig-parted pkg/mig/builder/balanced.go), each request in the smallest slot
//     that holds it.
// Counters: gpus (used), lower_bound, gap_pct (vs the lower bound), unplaced (instances).
// Two more gpuplan runs start from a fleet where 30% of the GPUs already hold a random valid layout
// (each instance busy with probability 1/2) and take the first 40,000 requested instances: once free
// to move busy instances, once with --keep-existing.
#include <benchmark/benchmark.h>

#include <optional>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "gpuplan/catalog.h"
#include "gpuplan/mig_pack.h"
#include "mig/table_model.h"
#include "mig_scenario.h"

namespace {

using namespace gpuplan;
using namespace gpuplan::mig;
using namespace gpuplan::mig::bench;

const Scenario& scenario() {
  static const Scenario s = make_scenario(kFleetGpus, kRequestUnits, kSeed);
  return s;
}

// The profile a request uses on a GPU, or -1.
int profile_for(const PackRequest& r, const MigTable& t) {
  if (r.kind == PackRequest::Kind::kProfile) {
    for (size_t i = 0; i < t.profiles.size(); ++i) {
      if (t.profiles[i].name == r.profile) return static_cast<int>(i);
    }
    return -1;
  }
  return smallest_profile_for(t, r.memory_gb, r.compute_slices).value_or(-1);
}

struct Outcome {
  int gpus = 0;
  int unplaced = 0;
};

Outcome first_fit() {
  const Scenario& s = scenario();
  std::vector<std::vector<Placed>> layouts(s.fleet.gpus.size());
  // GPUs per table in fleet order, and per (table, profile) a cursor to the first GPU that may still
  // take the profile: a GPU that cannot take it now never can again (instances are only added).
  std::map<const MigTable*, std::vector<size_t>> gpus_of;
  for (size_t g = 0; g < s.fleet.gpus.size(); ++g) gpus_of[s.fleet.gpus[g].table].push_back(g);
  std::map<std::pair<const MigTable*, int>, size_t> cursor;
  auto fits = [&](size_t g, int p) {
    const MigTable& t = *s.fleet.gpus[g].table;
    for (int st : t.profiles[p].placement_starts) {
      layouts[g].push_back(Placed{p, st});
      const bool ok = first_broken_rule(t, layouts[g], nullptr) == Rule::kNone;
      layouts[g].pop_back();
      if (ok) return st;
    }
    return -1;
  };
  Outcome o;
  for (const auto& r : s.requests) {
    std::vector<std::pair<const MigTable*, int>> options;
    for (const auto& [t, list] : gpus_of) {
      const int p = profile_for(r, *t);
      if (p >= 0) options.push_back({t, p});
    }
    for (int u = 0; u < r.count; ++u) {
      size_t best = s.fleet.gpus.size();
      int best_p = -1;
      for (const auto& [t, p] : options) {
        const auto& list = gpus_of[t];
        size_t& c = cursor[{t, p}];
        while (c < list.size() && fits(list[c], p) < 0) ++c;
        if (c < list.size() && list[c] < best) {
          best = list[c];
          best_p = p;
        }
      }
      if (best_p < 0) {
        ++o.unplaced;
        continue;
      }
      layouts[best].push_back(Placed{best_p, fits(best, best_p)});
    }
  }
  for (const auto& l : layouts) o.gpus += l.empty() ? 0 : 1;
  return o;
}

Outcome static_balanced() {
  const Scenario& s = scenario();
  // Slots per GPU: (memory_mib, compute) of each balanced instance, smallest first.
  struct Slot {
    double memory_mib;
    int compute;
    bool used;
  };
  std::vector<std::vector<Slot>> slots;
  for (const auto& g : s.fleet.gpus) {
    const MigTable& t = *g.table;
    std::vector<Slot> v;
    auto add = [&](int g_slices, int n) {
      for (const auto& p : t.profiles) {
        if (p.compute_slices == g_slices && !p.media_extensions && p.memory_slices == (g_slices == 3 ? 4 : g_slices)) {
          for (int i = 0; i < n; ++i) v.push_back(Slot{p.memory_mib, p.compute_slices, false});
          return;
        }
      }
    };
    add(1, 2);
    add(2, 1);
    if (t.compute_slices >= 7) add(3, 1);
    slots.push_back(v);
  }
  Outcome o;
  std::vector<size_t> next(slots.size(), 0);
  size_t first_open = 0;
  for (const auto& r : s.requests) {
    for (int u = 0; u < r.count; ++u) {
      bool placed = false;
      for (size_t g = first_open; g < slots.size() && !placed; ++g) {
        const MigTable& t = *s.fleet.gpus[g].table;
        const int p = profile_for(r, t);
        if (p < 0) continue;
        for (auto& sl : slots[g]) {
          if (!sl.used && sl.memory_mib >= t.profiles[p].memory_mib && sl.compute >= t.profiles[p].compute_slices) {
            sl.used = placed = true;
            break;
          }
        }
      }
      while (first_open < slots.size() &&
             std::all_of(slots[first_open].begin(), slots[first_open].end(), [](const Slot& x) { return x.used; })) {
        ++first_open;
      }
      o.unplaced += placed ? 0 : 1;
    }
  }
  for (const auto& v : slots) o.gpus += std::any_of(v.begin(), v.end(), [](const Slot& x) { return x.used; }) ? 1 : 0;
  (void)next;
  return o;
}

void report(benchmark::State& state, const Outcome& o, int lower_bound) {
  state.counters["gpus"] = o.gpus;
  state.counters["unplaced"] = o.unplaced;
  state.counters["lower_bound"] = lower_bound;
  state.counters["gap_pct"] = lower_bound > 0 ? 100.0 * (o.gpus - lower_bound) / lower_bound : 0.0;
  state.SetLabel("gpus=" + std::to_string(o.gpus) + " lower_bound=" + std::to_string(lower_bound) +
                 " unplaced=" + std::to_string(o.unplaced));
}

// The scenario with existing instances on 30% of the GPUs (fixed seed).
const Fleet& busy_fleet() {
  static const Fleet f = with_instances(scenario().fleet, kSeed + 1);
  return f;
}

int gpuplan_lower_bound() {
  static const int lb = [] {
    const Scenario& s = scenario();
    auto r = pack(*Catalog::embedded(), s.fleet, s.requests, PackOptions{});
    return r ? r->lower_bound : 0;
  }();
  return lb;
}

// Packs `fleet` once per iteration; the last result, or nullopt after reporting the error.
std::optional<PackResult> run_pack(benchmark::State& state, const Fleet& fleet,
                                   const std::vector<PackRequest>& requests, const PackOptions& options) {
  auto catalog = Catalog::embedded();
  std::optional<PackResult> last;
  for (auto _ : state) {
    auto r = pack(*catalog, fleet, requests, options);
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return std::nullopt;
    }
    last = std::move(r).value();
  }
  return last;
}

Outcome outcome_of(const PackResult& r) {
  Outcome o;
  o.gpus = r.gpus_used;
  o.unplaced = 0;
  for (const auto& u : r.unplaced) o.unplaced += u.count;
  return o;
}

void BM_MigPack_Gpuplan(benchmark::State& state) {
  const Scenario& s = scenario();
  auto r = run_pack(state, s.fleet, s.requests, PackOptions{});
  if (r) report(state, outcome_of(*r), r->lower_bound);
}

const std::vector<PackRequest>& busy_requests() {
  static const std::vector<PackRequest> v = [] {
    std::vector<PackRequest> out;
    int units = 0;
    for (const auto& r : scenario().requests) {
      if (units + r.count > kBusyRequestUnits) break;
      units += r.count;
      out.push_back(r);
    }
    return out;
  }();
  return v;
}

void run_busy(benchmark::State& state, bool keep) {
  PackOptions options;
  options.keep_existing = keep;
  auto r = run_pack(state, busy_fleet(), busy_requests(), options);
  if (!r) return;
  const int disturbed = r->disturbed;
  report(state, outcome_of(*r), r->lower_bound);
  int busy = 0;
  for (const auto& g : busy_fleet().gpus) {
    for (const auto& i : g.instances) busy += i.busy ? 1 : 0;
  }
  state.counters["disturbed"] = disturbed;
  state.counters["disturbed_lower_bound"] = r->disturbed_lower_bound;
  state.counters["busy"] = busy;
}

void BM_MigPack_GpuplanWithBusyInstances(benchmark::State& state) { run_busy(state, false); }
void BM_MigPack_GpuplanKeepExisting(benchmark::State& state) { run_busy(state, true); }

void BM_MigPack_FirstFitDriverOrder(benchmark::State& state) {
  Outcome o;
  for (auto _ : state) o = first_fit();
  report(state, o, gpuplan_lower_bound());
}

void BM_MigPack_StaticAllBalanced(benchmark::State& state) {
  Outcome o;
  for (auto _ : state) o = static_balanced();
  report(state, o, gpuplan_lower_bound());
}

}  // namespace

// The exact search's counters of the last plan (pack_stats: what ran, what the cost model skipped).
void report_stats(benchmark::State& state, const PackResult& r) {
  state.counters["exact_runs"] = r.stats.exact_runs;
  state.counters["exact_aborted"] = r.stats.exact_aborted;
  state.counters["exact_skipped"] = r.stats.exact_skipped;
  state.counters["exact_states"] = static_cast<double>(r.stats.exact_states);
  state.counters["exact_work"] = static_cast<double>(r.stats.exact_work);
  state.counters["stranded"] = r.stranded_memory_slices + r.stranded_compute_slices;
  state.counters["disturbed"] = r.disturbed;
}

#ifndef GPUPLAN_SOURCE_DIR
#define GPUPLAN_SOURCE_DIR "."  // bench/CMakeLists.txt defines it
#endif

std::string read_example(const std::string& name) {
  for (const std::string& dir : {std::string("examples/mig/"), std::string(GPUPLAN_SOURCE_DIR "/examples/mig/")}) {
    std::ifstream in(dir + name);
    if (!in) continue;
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  return "";
}

// The shipped example (examples/mig: 20 GPUs of three types, two busy instances, five request lines
// of 23 units, one of them a workload), packed as `gpuplan mig pack` packs it (parsing excluded).
void BM_MigPack_Example(benchmark::State& state) {
  auto catalog = Catalog::embedded();
  auto fleet = parse_fleet(*catalog, "fleet.yaml", read_example("fleet.yaml"));
  auto requests = parse_requests(*catalog, "requests.yaml", read_example("requests.yaml"));
  if (!fleet || !requests) {
    state.SkipWithError("examples/mig not found (run from the repository root)");
    return;
  }
  auto r = run_pack(state, *fleet, *requests, PackOptions{});
  if (!r) return;
  report(state, outcome_of(*r), r->lower_bound);
  state.counters["disturbed"] = r->disturbed;
  report_stats(state, *r);
}

// Fleets of the benchmark's mix at 5, 20, 100 and 1,000 GPUs with the 10,000-GPU benchmark's demand
// per GPU (5 units), and with instances on 30% of the GPUs and 4 units per GPU (the busy benchmark's):
// pack() time should grow with the fleet.
void BM_MigPack_Fleet(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const Scenario sc = fleet_scenario(gpus);
  auto r = run_pack(state, sc.fleet, sc.requests, PackOptions{});
  if (!r) return;
  report(state, outcome_of(*r), r->lower_bound);
  report_stats(state, *r);
}

void BM_MigPack_BusyFleet(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const Scenario sc = busy_fleet_scenario(gpus);
  auto r = run_pack(state, sc.fleet, sc.requests, PackOptions{});
  if (!r) return;
  report(state, outcome_of(*r), r->lower_bound);
  state.counters["disturbed"] = r->disturbed;
  report_stats(state, *r);
}

BENCHMARK(BM_MigPack_Example)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MigPack_Fleet)->Arg(5)->Arg(20)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MigPack_BusyFleet)->Arg(5)->Arg(20)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MigPack_Gpuplan)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_MigPack_GpuplanWithBusyInstances)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_MigPack_GpuplanKeepExisting)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_MigPack_FirstFitDriverOrder)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_MigPack_StaticAllBalanced)->Unit(benchmark::kMillisecond)->Iterations(1);
