// mig pack: from a fleet and requests to a packing model, and from the solver's bins back to a plan
// per fleet GPU (placements, kept and moved instances, reconfigurations).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "gpuplan/mig_pack.h"

#include "core/format.h"
#include "gpuplan/cancel.h"
#include "gpuplan/memory.h"
#include "gpuplan/target.h"
#include "gpuplan/workload.h"
#include "mig/pack_model.h"

namespace gpuplan::mig {

namespace {

std::vector<int> sub(std::vector<int> a, const std::vector<int>& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] -= b[i];
  return a;
}

bool dominated(const std::vector<int>& a, const std::vector<int>& b) {  // a <= b, a != b
  bool strict = false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] > b[i]) return false;
    strict = strict || a[i] < b[i];
  }
  return strict;
}

// Configurations of a GPU of `model`'s table that keeps `fixed` in place.
void build_configs(const TableModel& model, GpuClass& gc) {
  const uint64_t fixed_bits = model.bits_of(gc.fixed);
  const std::vector<int> fixed_counts = profile_counts(*model.table, gc.fixed);
  for (size_t i = 0; i < model.layouts.size(); ++i) {
    if ((model.bits[i] & fixed_bits) != fixed_bits) continue;
    const std::vector<int> counts = sub(model.counts[i], fixed_counts);
    const int s = model.stranded_total(static_cast<int>(i));
    auto it = gc.all.find(counts);
    if (it == gc.all.end() || s < it->second.stranded) gc.all[counts] = Config{counts, static_cast<int>(i), s};
  }
  for (const auto& [counts, cfg] : gc.all) {
    if (std::all_of(counts.begin(), counts.end(), [](int c) { return c == 0; })) continue;
    bool maximal = true;
    for (const auto& [other, unused] : gc.all) {
      if (dominated(counts, other)) {
        maximal = false;
        break;
      }
    }
    if (maximal) gc.configs.push_back(cfg);
  }
}

struct Built {
  PackModel model;
  std::vector<int> target_of_gpu;                                  // per fleet GPU
  std::vector<int> class_of_gpu;                                   // per fleet GPU
  std::vector<std::string> reasons;                                // per request: why it has no option ("" if it has)
  std::vector<std::vector<std::pair<size_t, int>>> busy_of_class;  // busy classes: (gpu, instance)
};

std::string target_list(const Fleet& fleet, const std::vector<int>& target_of_gpu) {
  std::set<std::string> names;
  for (size_t i = 0; i < fleet.gpus.size(); ++i) {
    if (target_of_gpu[i] >= 0) names.insert(fleet.gpus[i].gpu->id);
  }
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Per target: the profile a request uses there, or -1 with the reason.
int profile_on(const PackRequest& rq, const FleetGpu& g, std::string* why) {
  if (!rq.target.empty() && rq.target != g.gpu->id) {
    *why = "asks for target " + rq.target;
    return -1;
  }
  switch (rq.kind) {
    case PackRequest::Kind::kProfile: {
      for (size_t i = 0; i < g.table->profiles.size(); ++i) {
        if (g.table->profiles[i].name == rq.profile) return static_cast<int>(i);
      }
      *why = "no fleet GPU has profile " + rq.profile;
      return -1;
    }
    case PackRequest::Kind::kResources: {
      auto p = smallest_profile_for(*g.table, rq.memory_gb, rq.compute_slices);
      if (!p) {
        *why = "no profile has " + format_g(rq.memory_gb) + " GB and " + std::to_string(rq.compute_slices) +
               " compute slices";
        return -1;
      }
      return *p;
    }
    case PackRequest::Kind::kWorkload: {
      auto p = smallest_profile_for_workload(*g.gpu, *g.table, rq.workload, why);
      return p ? *p : -1;
    }
  }
  return -1;
}

Built build(const Fleet& fleet, const std::vector<PackRequest>& requests, bool keep) {
  Built b;
  PackModel& m = b.model;
  std::map<std::string, int> target_index;
  b.target_of_gpu.assign(fleet.gpus.size(), -1);
  b.class_of_gpu.assign(fleet.gpus.size(), -1);
  for (size_t i = 0; i < fleet.gpus.size(); ++i) {
    const FleetGpu& g = fleet.gpus[i];
    if (!g.table) continue;
    auto [it, fresh] = target_index.try_emplace(g.gpu->id, static_cast<int>(m.targets.size()));
    if (fresh) m.targets.push_back(PackTarget{g.gpu->id, g.table, table_model(*g.table)});
    b.target_of_gpu[i] = it->second;
  }
  // GPU classes: by target, and with --keep-existing by the busy instances that stay.
  std::map<std::pair<int, std::vector<std::pair<int, int>>>, int> class_index;
  for (size_t i = 0; i < fleet.gpus.size(); ++i) {
    if (b.target_of_gpu[i] < 0) continue;
    std::vector<Placed> fixed;
    if (keep) {
      for (const auto& inst : fleet.gpus[i].instances) {
        if (inst.busy) fixed.push_back(inst.placed);
      }
      std::sort(fixed.begin(), fixed.end(), [](const Placed& x, const Placed& y) { return x.start < y.start; });
    }
    std::vector<std::pair<int, int>> key;
    key.reserve(fixed.size());
    for (const auto& f : fixed) key.emplace_back(f.profile, f.start);
    auto [it, fresh] = class_index.try_emplace({b.target_of_gpu[i], key}, static_cast<int>(m.classes.size()));
    if (fresh) {
      GpuClass gc;
      gc.target = b.target_of_gpu[i];
      gc.pinned = !fixed.empty();
      gc.fixed = fixed;
      build_configs(*m.targets[gc.target].model, gc);
      m.classes.push_back(std::move(gc));
    }
    m.classes[it->second].members.push_back(i);
    b.class_of_gpu[i] = it->second;
  }
  // Tiers: busy instances that may move first, then request priorities, largest first.
  std::set<int, std::greater<int>> priorities;
  for (const auto& rq : requests) priorities.insert(rq.priority);
  std::map<int, int> tier_of;
  const int busy_tiers = keep ? 0 : 1;
  for (int p : priorities) tier_of[p] = busy_tiers + static_cast<int>(tier_of.size());
  m.tiers = std::max(1, busy_tiers + static_cast<int>(priorities.size()));
  std::map<std::pair<int, std::vector<std::pair<int, int>>>, int> demand_index;
  m.busy_on_gpu.assign(fleet.gpus.size(), {});
  if (!keep) {
    for (size_t i = 0; i < fleet.gpus.size(); ++i) {
      if (b.target_of_gpu[i] < 0) continue;
      for (size_t j = 0; j < fleet.gpus[i].instances.size(); ++j) {
        const auto& inst = fleet.gpus[i].instances[j];
        if (!inst.busy) continue;
        const std::vector<std::pair<int, int>> opts{{b.target_of_gpu[i], inst.placed.profile}};
        auto [it, fresh] = demand_index.try_emplace({-1, opts}, static_cast<int>(m.demands.size()));
        if (fresh) {
          DemandClass d;
          d.tier = 0;
          d.busy = true;
          d.options.push_back(Option{b.target_of_gpu[i], inst.placed.profile});
          m.demands.push_back(d);
          b.busy_of_class.emplace_back();
        }
        m.demands[it->second].count++;
        b.busy_of_class[it->second].push_back({i, static_cast<int>(j)});
        m.busy_on_gpu[i].push_back(inst.placed);
      }
      std::sort(m.busy_on_gpu[i].begin(), m.busy_on_gpu[i].end(),
                [](const Placed& x, const Placed& y) { return x.start < y.start; });
    }
  }
  b.reasons.assign(requests.size(), "");
  // The first fleet GPU of each target, in fleet order: a request's options are per target, so each
  // line costs targets (not fleet GPUs) steps; 10,000 lines on 100,000 GPUs stay cheap.
  std::vector<size_t> first_of_target;
  {
    std::vector<bool> seen(m.targets.size(), false);
    for (size_t i = 0; i < fleet.gpus.size(); ++i) {
      const int t = b.target_of_gpu[i];
      if (t < 0 || seen[t]) continue;
      seen[t] = true;
      first_of_target.push_back(i);
    }
  }
  std::string fleet_targets;  // for messages, built once
  for (size_t r = 0; r < requests.size(); ++r) {
    if (cancel_requested()) break;  // the command's result is dropped; stop building
    const PackRequest& rq = requests[r];
    std::vector<std::pair<int, int>> opts;
    std::string why;
    for (size_t i : first_of_target) {
      const int t = b.target_of_gpu[i];
      std::string w;
      const int p = profile_on(rq, fleet.gpus[i], &w);
      if (p >= 0)
        opts.emplace_back(t, p);
      else if (why.empty())
        why = w;
    }
    if (opts.empty()) {
      b.reasons[r] = why.empty() ? "the fleet has no MIG-capable GPU" : why;
      if (rq.kind == PackRequest::Kind::kProfile && rq.target.empty()) {
        if (fleet_targets.empty()) fleet_targets = target_list(fleet, b.target_of_gpu);
        b.reasons[r] = "no GPU in the fleet has profile " + rq.profile + " (fleet targets: " + fleet_targets + ")";
      }
      continue;
    }
    auto [it, fresh] = demand_index.try_emplace({tier_of[rq.priority], opts}, static_cast<int>(m.demands.size()));
    if (fresh) {
      DemandClass d;
      d.tier = tier_of[rq.priority];
      for (const auto& [t, p] : opts) d.options.push_back(Option{t, p});
      m.demands.push_back(d);
      b.busy_of_class.emplace_back();
    }
    m.demands[it->second].count += rq.count;
    m.demands[it->second].lines.emplace_back(static_cast<int>(r), rq.count);
  }
  return b;
}

// ---------------------------------------------------------------------------------------------
// Assembly: bins -> fleet GPUs with placements.

struct Slot {
  int profile;
  int demand;  // demand class, or -1 for a fixed (pinned) instance
};

// Slack under the LP bound before its ceiling: the simplex tolerance is 1e-9 (lp.cc), so a bound of
// 3.0000001 is 3 GPUs, not 4.
constexpr double kBoundRoundingSlack = 1e-6;

// Layout scores: one kept busy instance outranks any number of kept idle ones (at most 7 per GPU),
// and one kept idle instance outranks any stranding (at most 15 slices per GPU).
constexpr int kKeptBusyWeight = 10000;
constexpr int kKeptIdleWeight = 100;

// Picks the layout for `counts` (+ fixed) on GPU `g`, preferring to keep existing instances where
// they are: busy ones first, then idle ones, then the least stranded.
int choose_layout(const TableModel& tm, const GpuClass& gc, const std::vector<int>& counts, const FleetGpu& g,
                  const std::vector<int>& busy_units, int* score_out) {
  std::vector<int> full = counts;
  for (const auto& f : gc.fixed) ++full[f.profile];
  auto it = tm.by_counts.find(full);
  if (it == tm.by_counts.end()) return -1;
  const uint64_t fixed_bits = tm.bits_of(gc.fixed);
  int best = -1, best_score = std::numeric_limits<int>::min();
  for (int li : it->second) {
    if ((tm.bits[li] & fixed_bits) != fixed_bits) continue;
    std::vector<int> busy_hits(counts.size(), 0);
    int idle_hits = 0;
    for (const auto& inst : g.instances) {
      if (!(tm.bits[li] & tm.bit(inst.placed))) continue;
      if (inst.busy)
        ++busy_hits[inst.placed.profile];
      else
        ++idle_hits;
    }
    int kept_busy = 0;
    for (size_t p = 0; p < counts.size(); ++p) kept_busy += std::min(busy_hits[p], busy_units[p]);
    const int score = kept_busy * kKeptBusyWeight + idle_hits * kKeptIdleWeight - tm.stranded_total(li);
    if (score > best_score) {
      best_score = score;
      best = li;
    }
  }
  if (score_out) *score_out = best_score;
  return best;
}

std::vector<int> busy_units_of(const PackModel& M, const Bin& bin) {
  std::vector<int> out(bin.units.size(), 0);
  for (size_t p = 0; p < bin.units.size(); ++p) {
    for (const auto& [k, a] : bin.units[p]) out[p] += M.demands[k].busy ? a : 0;
  }
  return out;
}

std::vector<int> filled_counts(const Bin& bin) {
  std::vector<int> c(bin.units.size(), 0);
  for (size_t p = 0; p < c.size(); ++p) c[p] = bin.filled(static_cast<int>(p));
  return c;
}

// Matches the bins of each GPU class to its member GPUs (bins that name their GPU go there; then
// GPUs with instances first, each taking the bin that keeps the most of them), and returns per fleet
// GPU the bin index or -1.
std::vector<int> match_bins(const PackModel& M, const Fleet& fleet, const std::vector<Bin>& bins) {
  std::vector<int> bin_of(fleet.gpus.size(), -1);
  std::vector<std::vector<int>> by_class(M.classes.size());
  for (size_t b = 0; b < bins.size(); ++b) {
    if (bins[b].gpu >= 0)
      bin_of[bins[b].gpu] = static_cast<int>(b);
    else
      by_class[bins[b].gpu_class].push_back(static_cast<int>(b));
  }
  for (size_t g = 0; g < M.classes.size(); ++g) {
    const GpuClass& gc = M.classes[g];
    const TableModel& tm = *M.targets[gc.target].model;
    std::vector<size_t> members = gc.members;
    std::stable_sort(members.begin(), members.end(), [&](size_t a, size_t b) {
      return fleet.gpus[a].instances.size() > fleet.gpus[b].instances.size();
    });
    std::vector<int>& free = by_class[g];
    for (size_t gi : members) {
      if (free.empty()) break;
      if (bin_of[gi] >= 0) continue;
      size_t pick = 0;
      if (!fleet.gpus[gi].instances.empty()) {
        int best = std::numeric_limits<int>::min();
        std::set<std::pair<std::vector<int>, std::vector<int>>> tried;
        for (size_t i = 0; i < free.size(); ++i) {
          const Bin& bin = bins[free[i]];
          auto sig = std::make_pair(filled_counts(bin), busy_units_of(M, bin));
          if (!tried.insert(sig).second) continue;
          int score = 0;
          choose_layout(tm, gc, sig.first, fleet.gpus[gi], sig.second, &score);
          if (score > best) {
            best = score;
            pick = i;
          }
        }
      }
      bin_of[gi] = free[pick];
      free.erase(free.begin() + static_cast<long>(pick));
    }
  }
  return bin_of;
}

struct LineCursor {
  std::vector<std::pair<int, int>> lines;  // (request, remaining)
  size_t at = 0;
  int next() {
    while (at < lines.size() && lines[at].second == 0) ++at;
    if (at == lines.size()) return -1;
    --lines[at].second;
    return lines[at].first;
  }
};

}  // namespace

std::optional<int> smallest_profile_for(const MigTable& table, double memory_gb, int compute_slices) {
  std::optional<int> best;
  for (int pass = 0; pass < 2 && !best; ++pass) {
    for (size_t i = 0; i < table.profiles.size(); ++i) {
      const MigProfile& p = table.profiles[i];
      if (p.media_extensions != (pass == 1)) continue;
      if (p.memory_mib * kBytesPerMib < memory_gb * kBytesPerGb || p.compute_slices < compute_slices) continue;
      if (!best) {
        best = static_cast<int>(i);
        continue;
      }
      const MigProfile& b = table.profiles[*best];
      if (std::tie(p.memory_slices, p.compute_slices, p.memory_mib) <
          std::tie(b.memory_slices, b.compute_slices, b.memory_mib)) {
        best = static_cast<int>(i);
      }
    }
  }
  return best;
}

std::optional<int> smallest_profile_for_workload(const Gpu& gpu, const MigTable& table,
                                                 const nlohmann::ordered_json& workload, std::string* why) {
  auto w = parse_workload(workload);
  if (!w) {
    if (why) *why = "workload: " + w.error().message;
    return std::nullopt;
  }
  auto prepared = prepare(*w);
  if (!prepared) {
    if (why) *why = "workload: " + prepared.error().message;
    return std::nullopt;
  }
  std::vector<int> order(table.profiles.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const MigProfile& x = table.profiles[a];
    const MigProfile& y = table.profiles[b];
    return std::tie(x.media_extensions, x.memory_slices, x.compute_slices) <
           std::tie(y.media_extensions, y.memory_slices, y.compute_slices);
  });
  double needed = 0, largest = 0;
  std::string refused;
  for (int i : order) {
    const Target t{TargetRef{&gpu, &table, &table.profiles[i]}, 1, Link::kPcie};
    const TargetFit f = fit_target(*prepared, t);
    if (f.refusal && refused.empty()) refused = explain_refusal(*f.refusal, *prepared, &t).message;
    needed = f.total_bytes;
    largest = std::max(largest, f.limit_bytes);
    if (f.fits) {
      if (why) {
        *why = table.profiles[i].name + " on " + gpu.id + " (needs " + format_gib(f.total_bytes) + " of " +
               format_gib(f.limit_bytes) + ")";
      }
      return i;
    }
  }
  if (why && !refused.empty()) {
    *why = "refused: " + refused;
  } else if (why) {
    *why = "the workload needs " + format_gib(needed) + " per GPU; the largest MIG instance of " + gpu.id + " offers " +
           format_gib(largest);
  }
  return std::nullopt;
}

namespace {

// The request lines and busy instances still to bind while the GPUs are assembled one by one.
struct Binding {
  std::vector<std::vector<std::pair<size_t, int>>> busy_left;  // per demand class: (gpu, instance) not yet bound
  std::vector<LineCursor> cursors;                             // per demand class: the next request line
  std::vector<std::pair<size_t, int>> pending_busy;            // (gpu plan, layout entry) of busy units moved there
};

Binding start_binding(const PackModel& M, const Built& built) {
  Binding bind;
  bind.busy_left = built.busy_of_class;
  bind.cursors.resize(M.demands.size());
  for (size_t k = 0; k < M.demands.size(); ++k) bind.cursors[k].lines = M.demands[k].lines;
  return bind;
}

// Demand classes of a bin's units per profile, busy units first so they land on the busy instances' slots.
std::vector<std::vector<int>> unit_queues(const PackModel& M, const Bin* bin, size_t profiles) {
  std::vector<std::vector<int>> queue(profiles);
  if (!bin) return queue;
  for (size_t p = 0; p < bin->units.size(); ++p) {
    for (const auto& [k, a] : bin->units[p]) {
      for (int u = 0; u < a; ++u) queue[p].push_back(static_cast<int>(k));
    }
    std::stable_sort(queue[p].begin(), queue[p].end(),
                     [&](int x, int y) { return M.demands[x].busy && !M.demands[y].busy; });
  }
  return queue;
}

// The layout's entries, those that keep an existing instance (same profile and start) first, busy before idle.
std::vector<Placed> kept_first(std::vector<Placed> layout, const FleetGpu& g) {
  auto kept = [&](const Placed& p) {
    for (const auto& inst : g.instances) {
      if (inst.placed == p) return inst.busy ? 2 : 1;
    }
    return 0;
  };
  std::stable_sort(layout.begin(), layout.end(), [&](const Placed& a, const Placed& b) { return kept(a) > kept(b); });
  return layout;
}

// Fills `plan.layout` from the chosen layout `li`: fixed instances stay, a busy unit keeps the GPU's own
// busy instance where it sits (else it waits in `bind.pending_busy`), a request unit takes the next line.
// Marks in `inst_used` the existing instances the plan keeps.
void place_entries(const PackModel& M, const GpuClass& gc, const TableModel& tm, int li, const FleetGpu& g,
                   const Bin* bin, Binding& bind, GpuPlan& plan, std::vector<bool>& inst_used) {
  const size_t gi = plan.gpu;
  std::vector<std::vector<int>> queue = unit_queues(M, bin, g.table->profiles.size());
  std::vector<bool> fixed_used(gc.fixed.size(), false);
  for (const Placed& pl : kept_first(tm.layouts[li], g)) {
    PlacedUnit unit;
    unit.placed = pl;
    int existing = -1;
    for (size_t j = 0; j < g.instances.size(); ++j) {
      if (!inst_used[j] && g.instances[j].placed == pl) existing = static_cast<int>(j);
    }
    size_t f = 0;
    while (f < gc.fixed.size() && (fixed_used[f] || !(gc.fixed[f] == pl))) ++f;
    if (f < gc.fixed.size()) {
      fixed_used[f] = true;
      unit.existing = existing;
      if (existing >= 0) inst_used[existing] = true;
      plan.layout.push_back(unit);
      continue;
    }
    if (queue[pl.profile].empty()) continue;
    const int k = queue[pl.profile].front();
    queue[pl.profile].erase(queue[pl.profile].begin());
    if (M.demands[k].busy) {
      // Keep this GPU's own busy instance when it sits here; otherwise a moved one is bound later.
      auto& left = bind.busy_left[k];
      auto own = std::find_if(left.begin(), left.end(),
                              [&](const auto& e) { return e.first == gi && g.instances[e.second].placed == pl; });
      if (own != left.end()) {
        unit.existing = own->second;
        inst_used[own->second] = true;
        left.erase(own);
      } else {
        bind.pending_busy.emplace_back(gi, static_cast<int>(plan.layout.size()));
      }
      plan.layout.push_back(unit);
      continue;
    }
    unit.request = bind.cursors[k].next();
    if (existing >= 0 && !g.instances[existing].busy) {
      unit.existing = existing;
      inst_used[existing] = true;
    }
    plan.layout.push_back(unit);
  }
}

// One fleet GPU's plan from its bin (nullptr: none): the layout that keeps the most, its entries, and
// the instances to destroy (all of them on an unused GPU that pins nothing).
Status assemble_gpu(const PackModel& M, const Built& built, const FleetGpu& g, const Bin* bin, bool keep_existing,
                    Binding& bind, GpuPlan& plan) {
  const GpuClass& gc = M.classes[built.class_of_gpu[plan.gpu]];
  const TableModel& tm = *M.targets[gc.target].model;
  if (!bin && !gc.pinned) {
    for (size_t j = 0; j < g.instances.size(); ++j) plan.destroy.push_back(static_cast<int>(j));
    return {};
  }
  std::vector<int> counts(g.table->profiles.size(), 0), busy(counts.size(), 0);
  if (bin) {
    counts = filled_counts(*bin);
    busy = busy_units_of(M, *bin);
  }
  const int li = choose_layout(tm, gc, counts, g, busy, nullptr);
  if (li < 0) return Error{ErrorCode::kInternal, "no layout for a chosen configuration", ""};
  std::vector<bool> inst_used(g.instances.size(), false);
  place_entries(M, gc, tm, li, g, bin, bind, plan, inst_used);
  for (size_t j = 0; j < g.instances.size(); ++j) {
    if (!inst_used[j] && !(keep_existing && g.instances[j].busy)) plan.destroy.push_back(static_cast<int>(j));
  }
  return {};
}

// Binds each busy unit that moved to a busy instance of its class, and counts the disturbed instances
// (moved, or destroyed and not re-placed).
void bind_moved_busy(const PackModel& M, const Built& built, Binding& bind, PackResult& out) {
  for (const auto& [gi, idx] : bind.pending_busy) {
    PlacedUnit& unit = out.gpus[gi].layout[idx];
    for (size_t k = 0; k < M.demands.size(); ++k) {
      if (!M.demands[k].busy || bind.busy_left[k].empty()) continue;
      const auto& opt = M.demands[k].options.front();
      if (opt.profile != unit.placed.profile || opt.target != built.target_of_gpu[gi]) continue;
      unit.moved_from_gpu = static_cast<int>(bind.busy_left[k].back().first);
      unit.moved_from_instance = bind.busy_left[k].back().second;
      bind.busy_left[k].pop_back();
      ++out.disturbed;
      break;
    }
  }
  for (const auto& left : bind.busy_left) out.disturbed += static_cast<int>(left.size());
}

// Units placed per demand class over all bins.
std::vector<int> placed_per_class(const PackModel& M, const std::vector<Bin>& bins) {
  std::vector<int> placed(M.demands.size(), 0);
  for (const auto& b : bins) {
    for (const auto& per : b.units) {
      for (const auto& [k, a] : per) placed[k] += a;
    }
  }
  return placed;
}

// Per used GPU: layout in slice order, what to create and what is stranded; then the totals and the
// lower bounds on GPUs and on disturbed instances.
void add_totals(const PackModel& M, const Built& built, const Fleet& fleet, const std::vector<Bin>& bins,
                PackResult& out) {
  for (auto& plan : out.gpus) {
    std::stable_sort(plan.layout.begin(), plan.layout.end(),
                     [](const PlacedUnit& a, const PlacedUnit& b) { return a.placed.start < b.placed.start; });
    const FleetGpu& g = fleet.gpus[plan.gpu];
    if (plan.layout.empty() || !g.table) continue;
    ++out.gpus_used;
    std::vector<Placed> final_layout;
    for (const auto& u : plan.layout) {
      final_layout.push_back(u.placed);
      if (u.existing < 0) plan.create.push_back(u.placed);
    }
    const TableModel& tm = *M.targets[built.target_of_gpu[plan.gpu]].model;
    const uint64_t bits = tm.bits_of(final_layout);
    for (int li : tm.by_counts.at(profile_counts(*g.table, final_layout))) {
      if (tm.bits[li] == bits) plan.stranded = tm.stranded[li];
    }
    out.stranded_memory_slices += plan.stranded.memory_slices;
    out.stranded_compute_slices += plan.stranded.compute_slices;
  }
  const std::vector<int> placed = placed_per_class(M, bins);
  int pinned = 0;
  for (const auto& c : M.classes) pinned += c.pinned ? static_cast<int>(c.members.size()) : 0;
  out.lp_bound = lp_lower_bound(M, placed) + pinned;
  out.lower_bound = static_cast<int>(std::ceil(out.lp_bound - kBoundRoundingSlack));
  if (out.exact) out.lower_bound = std::max(out.lower_bound, out.gpus_used);
  if (out.disturbed > 0) out.disturbed_lower_bound = disturbance_lower_bound(M, placed, out.gpus_used);
}

// "3g.20gb on a100-40gb-sxm4, ...": the options of a demand class, for messages.
std::string option_names(const PackModel& M, const DemandClass& d) {
  std::string names;
  for (const auto& o : d.options) {
    names += (names.empty() ? "" : ", ") + M.targets[o.target].table->profiles[o.profile].name + " on " +
             M.targets[o.target].id;
  }
  return names;
}

// The unplaced units per request line, in request order: lines the fleet had no room left for, and
// lines no fleet GPU can take (with the reason `build` found).
void add_unplaced(const PackModel& M, const Built& built, const Binding& bind, const std::vector<PackRequest>& requests,
                  PackResult& out) {
  for (size_t k = 0; k < M.demands.size(); ++k) {
    if (M.demands[k].busy) continue;
    const LineCursor& cursor = bind.cursors[k];
    for (size_t i = cursor.at; i < cursor.lines.size(); ++i) {
      const auto [r, left] = cursor.lines[i];
      if (left <= 0) continue;
      bool others_first = false;
      for (const auto& d : M.demands) others_first = others_first || (!d.busy && d.tier < M.demands[k].tier);
      out.unplaced.push_back(Unplaced{r, left,
                                      "no room left on the fleet for " + option_names(M, M.demands[k]) +
                                          (others_first ? " after higher-priority requests" : "")});
    }
  }
  for (size_t r = 0; r < requests.size(); ++r) {
    if (!built.reasons[r].empty())
      out.unplaced.push_back(Unplaced{static_cast<int>(r), requests[r].count, built.reasons[r]});
  }
  std::sort(out.unplaced.begin(), out.unplaced.end(),
            [](const Unplaced& a, const Unplaced& b) { return a.request < b.request; });
}

// Notes on why each workload or resources request line got the profile it did.
void add_notes(const Catalog& catalog, const PackModel& M, const std::vector<PackRequest>& requests, PackResult& out) {
  for (const DemandClass& d : M.demands) {
    if (d.busy || d.options.empty()) continue;
    for (const auto& line : d.lines) {
      const PackRequest& rq = requests[line.first];
      if (rq.kind == PackRequest::Kind::kWorkload) {
        // Why each GPU type got the profile it did: the fit model's numbers.
        std::string map;
        for (const auto& o : d.options) {
          std::string w;
          smallest_profile_for_workload(*catalog.find_gpu(M.targets[o.target].id), *M.targets[o.target].table,
                                        rq.workload, &w);
          map += (map.empty() ? "" : ", ") + w;
        }
        out.notes.push_back(rq.name + ": smallest profile the workload fits (fit model): " + map);
        continue;
      }
      if (rq.kind != PackRequest::Kind::kResources) continue;
      std::string need = ">= " + format_g(rq.memory_gb) + " GB";
      if (rq.compute_slices > 0) need += " and >= " + std::to_string(rq.compute_slices) + " compute slices";
      out.notes.push_back(rq.name + ": smallest profile with " + need + ": " + option_names(M, d));
    }
  }
}

// One packing with the given options: build the model, solve it, then assemble the plan per fleet GPU,
// bind moved busy instances, and add totals, bounds, unplaced lines and notes.
Result<PackResult> pack_once(const Catalog& catalog, const Fleet& fleet, const std::vector<PackRequest>& requests,
                             const PackOptions& options) {
  Built built = build(fleet, requests, options.keep_existing);
  if (cancel_requested()) return cancelled_error();  // build may have stopped part-way
  PackResult out;
  built.model.stats = &out.stats;
  const PackModel& M = built.model;
  const SolveOutcome sol = solve_packing(M, options.exact_state_limit);
  if (cancel_requested()) return cancelled_error();
  out.exact = sol.exact;
  const std::vector<int> bin_of = match_bins(M, fleet, sol.bins);
  Binding bind = start_binding(M, built);
  out.gpus.resize(fleet.gpus.size());
  for (size_t gi = 0; gi < fleet.gpus.size(); ++gi) {
    out.gpus[gi].gpu = gi;
    if (built.class_of_gpu[gi] < 0) continue;
    const Bin* bin = bin_of[gi] >= 0 ? &sol.bins[bin_of[gi]] : nullptr;
    GPUPLAN_CHECK(assemble_gpu(M, built, fleet.gpus[gi], bin, options.keep_existing, bind, out.gpus[gi]));
  }
  bind_moved_busy(M, built, bind, out);
  add_totals(M, built, fleet, sol.bins, out);
  add_unplaced(M, built, bind, requests, out);
  add_notes(catalog, M, requests, out);
  built.model.stats = nullptr;  // `out` moves on
  return out;
}

// The exact-search counts of both plans of pack() (the plan returned and the one compared with it).
void add_stats(PackStats& to, const PackStats& from) {
  to.exact_runs += from.exact_runs;
  to.exact_aborted += from.exact_aborted;
  to.exact_skipped += from.exact_skipped;
  to.exact_states += from.exact_states;
  to.exact_work += from.exact_work;
  to.largest_skipped_bound = std::max(to.largest_skipped_bound, from.largest_skipped_bound);
  to.largest_run_bound = std::max(to.largest_run_bound, from.largest_run_bound);
}

// Units placed per priority, most important first: the first objective.
std::vector<long long> placed_by_priority(const std::vector<PackRequest>& requests, const PackResult& r) {
  std::map<int, long long, std::greater<int>> placed;
  for (const auto& rq : requests) placed[rq.priority] += rq.count;
  for (const auto& u : r.unplaced) placed[requests[u.request].priority] -= u.count;
  std::vector<long long> out;
  out.reserve(placed.size());
  for (const auto& [p, n] : placed) out.push_back(n);
  return out;
}

}  // namespace

Result<PackResult> pack(const Catalog& catalog, const Fleet& fleet, const std::vector<PackRequest>& requests,
                        const PackOptions& options) {
  for (const auto& g : fleet.gpus) {
    if (g.table && !table_model(*g.table)) {
      return Error{ErrorCode::kInternal, "MIG table " + g.table->id + " is too large for the packer", ""};
    }
  }
  auto moved = pack_once(catalog, fleet, requests, options);
  if (cancel_requested()) return cancelled_error();
  if (!moved || options.keep_existing || moved->disturbed == 0) return moved;
  // Busy instances may move, but only when that places more or saves GPUs: a plan that keeps them
  // all and is as good on those objectives wins (fewest disturbed instances is the next objective).
  PackOptions keep = options;
  keep.keep_existing = true;
  auto kept = pack_once(catalog, fleet, requests, keep);
  if (!kept) return moved;
  const auto pm = placed_by_priority(requests, *moved), pk = placed_by_priority(requests, *kept);
  if (pk > pm || (pk == pm && kept->gpus_used <= moved->gpus_used)) {
    add_stats(kept->stats, moved->stats);
    return kept;
  }
  add_stats(moved->stats, kept->stats);
  return moved;
}

}  // namespace gpuplan::mig
