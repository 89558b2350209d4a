// Fewest disturbed busy instances for a given GPU count: per GPU class, the units the solver put on
// that class are re-packed on at most as many GPUs, first into "keep" bins (a busy GPU with a layout
// that holds some of its busy instances where they are) while the class's configuration LP says the
// rest still fits, then the rest by the ordinary solver. The GPU count and the units placed never
// get worse: when the rest does not fit, fewer keep bins are tried, and at worst the class keeps the
// solver's bins.
#include <algorithm>
#include <map>
#include <numeric>
#include <unordered_set>

#include "mig/lp.h"
#include "mig/pack_model.h"

namespace gpuplan::mig {

namespace {

// A keep layout whose units are worth at least this much less than one GPU at the LP's prices takes
// as much as an LP-optimal GPU: committing it leaves the LP's GPU count unchanged (simplex noise is
// far below it).
constexpr double kValueTolerance = 1e-6;
// LP noise allowed when comparing the LP's GPU count with the class's budget.
constexpr double kFitSlack = 1e-6;
// Keep layouts (one per count of kept instances, most kept first) a busy GPU may try in the second
// pass, where keeping costs LP slack; each try is one small LP.
constexpr int kKeepTries = 3;

int option_for(const DemandClass& d, int target) {
  for (const auto& o : d.options) {
    if (o.target == target) return o.profile;
  }
  return -1;
}

// The class's covering LP: the fewest GPUs (fractional) whose configurations hold d[p] units of
// every profile p, and the price of one unit of each profile in GPUs (its dual).
struct ClassLp {
  bool feasible = false;
  double gpus = 0;
  std::vector<double> price;
};

ClassLp class_lp(const GpuClass& gc, const std::vector<int>& d) {
  ClassLp out;
  out.price.assign(d.size(), 0.0);
  lp::Problem p;
  p.columns = static_cast<int>(gc.configs.size());
  p.cost.assign(gc.configs.size(), 1.0);
  std::vector<int> row_of(d.size(), -1);
  for (size_t prof = 0; prof < d.size(); ++prof) {
    if (d[prof] <= 0) continue;
    lp::Row row{{}, lp::Sense::kGe, static_cast<double>(d[prof])};
    for (size_t c = 0; c < gc.configs.size(); ++c) {
      if (gc.configs[c].counts[prof] > 0) row.terms.push_back({static_cast<int>(c), 1.0 * gc.configs[c].counts[prof]});
    }
    if (row.terms.empty()) return out;
    row_of[prof] = static_cast<int>(p.rows.size());
    p.rows.push_back(std::move(row));
  }
  if (p.rows.empty()) {
    out.feasible = true;
    return out;
  }
  const lp::Solution s = lp::solve(p);
  if (!s.feasible) return out;
  out.feasible = true;
  out.gpus = s.objective;
  for (size_t prof = 0; prof < d.size(); ++prof) {
    if (row_of[prof] >= 0) out.price[prof] = s.duals[row_of[prof]];
  }
  return out;
}

// Layouts of the table to which no instance can be added (a keep bin never needs fewer slots).
std::vector<int> maximal_layouts(const TableModel& tm) {
  std::unordered_set<uint64_t> all(tm.bits.begin(), tm.bits.end());
  std::vector<uint64_t> placements;
  for (size_t p = 0; p < tm.table->profiles.size(); ++p) {
    for (int start : tm.table->profiles[p].placement_starts) {
      placements.push_back(tm.bit(Placed{static_cast<int>(p), start}));
    }
  }
  std::vector<int> out;
  for (size_t li = 0; li < tm.bits.size(); ++li) {
    const uint64_t b = tm.bits[li];
    const bool maximal = std::none_of(placements.begin(), placements.end(),
                                      [&](uint64_t q) { return !(b & q) && all.count(b | q) > 0; });
    if (maximal) out.push_back(static_cast<int>(li));
  }
  return out;
}

// The re-packing of the GPU classes of one target without fixed instances (they have the same
// configurations; today there is one such class per target).
class ClassRepack {
 public:
  ClassRepack(const PackModel& M, const std::vector<int>& group, const std::vector<Bin>& bins, int exact_state_limit)
      : M_(M),
        group_(group),
        gc_(M.classes[group.front()]),
        tm_(*M.targets[gc_.target].model),
        limit_(exact_state_limit) {
    class_of_gpu_.assign(M.busy_on_gpu.size(), -1);
    for (int g : group) {
      for (size_t gi : M.classes[g].members) class_of_gpu_[gi] = g;
    }
    const size_t profiles = tm_.table->profiles.size();
    profile_of_.assign(M.demands.size(), -1);
    busy_class_.assign(profiles, -1);
    for (size_t k = 0; k < M.demands.size(); ++k) {
      profile_of_[k] = option_for(M.demands[k], gc_.target);
      if (M.demands[k].busy && profile_of_[k] >= 0) busy_class_[profile_of_[k]] = static_cast<int>(k);
    }
    units_.assign(M.demands.size(), 0);
    for (const auto& b : bins) {
      if (std::find(group.begin(), group.end(), b.gpu_class) == group.end()) continue;
      ++budget_;
      for (const auto& per : b.units) {
        for (const auto& [k, a] : per) units_[k] += a;
      }
    }
    for (int g : group) {
      for (size_t gi : M.classes[g].members) {
        if (!M.busy_on_gpu[gi].empty()) busy_gpus_.push_back(gi);
      }
    }
    // GPUs with the most busy instances first: they have the most to keep.
    std::stable_sort(busy_gpus_.begin(), busy_gpus_.end(),
                     [&](size_t a, size_t b) { return M.busy_on_gpu[a].size() > M.busy_on_gpu[b].size(); });
  }

  // The class's new bins, or false when its old ones stay.
  bool run(std::vector<Bin>* out) {
    if (busy_gpus_.empty() || budget_ == 0) return false;
    greedy();
    // The rest must fit on the GPUs left; else fewer keep bins (the largest prefix that fits).
    std::vector<Bin> rest;
    if (residual(keeps_.size(), &rest)) return finish(keeps_.size(), std::move(rest), out);
    size_t lo = 0, hi = keeps_.size();
    bool lo_ok = false;
    std::vector<Bin> lo_rest;
    while (hi - lo > 1) {
      const size_t mid = (lo + hi) / 2;
      std::vector<Bin> r;
      if (residual(mid, &r)) {
        lo = mid;
        lo_ok = true;
        lo_rest = std::move(r);
      } else {
        hi = mid;
      }
    }
    if (!lo_ok && !residual(0, &lo_rest)) return false;
    return finish(lo, std::move(lo_rest), out);
  }

 private:
  struct Candidate {
    int layout = -1;
    int kept = 0;
    double value = 0;
    std::vector<int> take;  // units per profile the bin takes, its own kept busy ones included
  };

  bool finish(size_t keeps, std::vector<Bin> rest, std::vector<Bin>* out) {
    out->assign(keeps_.begin(), keeps_.begin() + static_cast<long>(keeps));
    for (auto& b : rest) out->push_back(std::move(b));
    return true;
  }

  // Units of each demand class left after the first `keeps` keep bins.
  std::vector<int> left_after(size_t keeps) const {
    std::vector<int> r = units_;
    for (size_t i = 0; i < keeps; ++i) {
      for (const auto& per : keeps_[i].units) {
        for (const auto& [k, a] : per) r[k] -= a;
      }
    }
    return r;
  }

  bool residual(size_t keeps, std::vector<Bin>* rest) {
    const std::vector<int> r = left_after(keeps);
    std::vector<int> n(M_.classes.size(), 0);
    for (int g : group_) n[g] = static_cast<int>(M_.classes[g].members.size());
    for (size_t i = 0; i < keeps; ++i) --n[keeps_[i].gpu_class];
    if (std::accumulate(r.begin(), r.end(), 0) == 0) return true;
    SolveOutcome s = solve_packing_for(M_, r, n, limit_);
    if (std::any_of(s.unplaced.begin(), s.unplaced.end(), [](int u) { return u > 0; })) return false;
    if (s.bins.size() + keeps > static_cast<size_t>(budget_)) return false;
    *rest = std::move(s.bins);
    return true;
  }

  std::vector<int> per_profile(const std::vector<int>& r, bool busy_only, bool plain_only) const {
    std::vector<int> d(tm_.table->profiles.size(), 0);
    for (size_t k = 0; k < r.size(); ++k) {
      if (profile_of_[k] < 0 || (busy_only && !M_.demands[k].busy) || (plain_only && M_.demands[k].busy)) continue;
      d[profile_of_[k]] += r[k];
    }
    return d;
  }

  // Every maximal layout that keeps some of `gi`'s busy instances, with what it would take.
  std::vector<Candidate> candidates(size_t gi, const std::vector<int>& r, const std::vector<int>& reserved,
                                    const std::vector<double>& price) const {
    const std::vector<int> plain = per_profile(r, false, true), busy = per_profile(r, true, false);
    const std::vector<Placed>& own = M_.busy_on_gpu[gi];
    std::vector<Candidate> out;
    for (int li : maximal_) {
      Candidate c;
      c.layout = li;
      c.take.assign(plain.size(), 0);
      for (const auto& b : own) {
        if ((tm_.bits[li] & tm_.bit(b)) && c.take[b.profile] < busy[b.profile]) {
          ++c.take[b.profile];
          ++c.kept;
        }
      }
      if (c.kept == 0) continue;
      for (size_t p = 0; p < plain.size(); ++p) {
        // Other busy units fill slots only beyond the reserved ones (busy GPUs still waiting may keep them).
        const int spare_busy = std::max(0, busy[p] - reserved[p]);
        c.take[p] += std::min(tm_.counts[li][p] - c.take[p], plain[p] + spare_busy);
        c.value += price[p] * c.take[p];
      }
      out.push_back(std::move(c));
    }
    return out;
  }

  // A keep bin for `gi` with the candidate's layout: its own busy units, then plain units, then spare
  // busy ones. Updates `r`.
  Bin keep_bin(size_t gi, const Candidate& c, std::vector<int>& r) const {
    Bin b;
    b.gpu_class = class_of_gpu_[gi];
    b.gpu = static_cast<int>(gi);
    b.capacity = tm_.counts[c.layout];
    b.units.assign(b.capacity.size(), {});
    std::vector<int> want = c.take;
    std::vector<int> own(want.size(), 0);
    for (const auto& p : M_.busy_on_gpu[gi]) {
      if (tm_.bits[c.layout] & tm_.bit(p)) ++own[p.profile];
    }
    auto give = [&](int k, int p, int amount) {
      if (amount <= 0) return;
      b.units[p].push_back({k, amount});
      r[k] -= amount;
      want[p] -= amount;
    };
    for (size_t p = 0; p < want.size(); ++p) {
      const int k = busy_class_[p];
      if (k >= 0) give(k, static_cast<int>(p), std::min({own[p], want[p], r[k]}));
    }
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t k = 0; k < r.size(); ++k) {
        const int p = profile_of_[k];
        if (p < 0 || M_.demands[k].busy != (pass == 1)) continue;
        give(static_cast<int>(k), p, std::min(want[p], r[k]));
      }
    }
    return b;
  }

  // Commits the best keep bin for `gi` that the class LP accepts: free ones only when `free_only`.
  bool try_keep(size_t gi, bool free_only, const std::vector<int>& reserved, std::vector<int>& r, ClassLp& now) {
    std::vector<Candidate> cands = candidates(gi, r, reserved, now.price);
    std::stable_sort(cands.begin(), cands.end(), [&](const Candidate& a, const Candidate& b) {
      if (a.kept != b.kept) return a.kept > b.kept;
      if (a.value != b.value) return a.value > b.value;
      return tm_.stranded_total(a.layout) < tm_.stranded_total(b.layout);
    });
    int tries = 0;
    int last_kept = -1;
    for (const Candidate& c : cands) {
      if (free_only && c.value < 1.0 - kValueTolerance) continue;
      if (c.kept == last_kept) continue;  // the best of each kept count only
      last_kept = c.kept;
      if (tries++ >= (free_only ? 1 : kKeepTries)) break;
      std::vector<int> d = per_profile(r, false, false);
      for (size_t p = 0; p < d.size(); ++p) d[p] -= c.take[p];
      const ClassLp next = class_lp(gc_, d);
      if (!next.feasible || static_cast<double>(keeps_.size()) + 1.0 + next.gpus > budget_ + kFitSlack) continue;
      keeps_.push_back(keep_bin(gi, c, r));
      now = next;
      return true;
    }
    return false;
  }

  void greedy() {
    maximal_ = maximal_layouts(tm_);
    std::vector<int> r = units_;
    std::vector<int> pending(tm_.table->profiles.size(), 0);  // busy instances on busy GPUs not yet decided
    for (size_t gi : busy_gpus_) {
      for (const auto& b : M_.busy_on_gpu[gi]) ++pending[b.profile];
    }
    ClassLp now = class_lp(gc_, per_profile(r, false, false));
    if (!now.feasible) return;
    std::vector<bool> done(M_.busy_on_gpu.size(), false);
    // Pass 0: keep layouts that cost the LP nothing. Pass 1: the rest, while the LP's slack lasts.
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t gi : busy_gpus_) {
        if (done[gi]) continue;
        if (static_cast<int>(keeps_.size()) >= budget_) return;
        // In the second pass a GPU may also take busy units that GPUs still waiting would keep (they
        // had their turn in the first pass), when respecting them keeps nothing.
        std::vector<int> own(pending.size(), 0);
        for (const auto& b : M_.busy_on_gpu[gi]) ++own[b.profile];
        done[gi] = try_keep(gi, pass == 0, pending, r, now) || (pass == 1 && try_keep(gi, false, own, r, now));
        if (done[gi] || pass == 1) {
          done[gi] = true;
          for (const auto& b : M_.busy_on_gpu[gi]) --pending[b.profile];
        }
      }
    }
  }

  const PackModel& M_;
  std::vector<int> group_;
  const GpuClass& gc_;
  std::vector<int> class_of_gpu_;  // per fleet GPU: its class when in the group, else -1
  const TableModel& tm_;
  int limit_;
  int budget_ = 0;                 // GPUs of the group the solver used
  std::vector<int> units_;         // per demand class: units the solver put on the class
  std::vector<int> profile_of_;    // per demand class: its profile on the class's target, or -1
  std::vector<int> busy_class_;    // per profile: the busy demand class of the target, or -1
  std::vector<size_t> busy_gpus_;  // members with busy instances, in the order they are tried
  std::vector<int> maximal_;
  std::vector<Bin> keeps_;  // committed keep bins, in order
};

}  // namespace

void reduce_disturbance(const PackModel& M, std::vector<Bin>& bins, int exact_state_limit) {
  std::map<int, std::vector<int>> by_target;
  for (size_t g = 0; g < M.classes.size(); ++g) {
    if (!M.classes[g].pinned && M.classes[g].fixed.empty())
      by_target[M.classes[g].target].push_back(static_cast<int>(g));
  }
  for (const auto& [target, group] : by_target) {
    ClassRepack repack(M, group, bins, exact_state_limit);
    std::vector<Bin> mine;
    if (!repack.run(&mine)) continue;
    std::vector<Bin> next;
    for (auto& b : bins) {
      if (std::find(group.begin(), group.end(), b.gpu_class) == group.end()) next.push_back(std::move(b));
    }
    for (auto& b : mine) next.push_back(std::move(b));
    bins = std::move(next);
  }
}

}  // namespace gpuplan::mig
