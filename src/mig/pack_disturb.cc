// Fewest disturbed busy instances for a given GPU count: per GPU class, the units the solver put on
// that class are re-packed on at most as many GPUs, first into "keep" bins (a busy GPU with a layout
// that holds some of its busy instances where they are) while the class's configuration LP says the
// rest still fits, then the rest by the ordinary solver. The GPU count and the units placed never
// get worse: when the rest does not fit, fewer keep bins are tried, and at worst the class keeps the
// solver's bins. Then units move between targets when that lets busy GPUs of the receiving target
// keep more instances on the same GPUs in total (try_move).
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <unordered_set>

#include "gpuplan/cancel.h"
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
// Cross-target moves try the movable units, then half, a quarter, ...: each try re-packs two targets.
constexpr int kMoveHalvings = 3;
// Trims of a move whose rounded-up LPs exceed the two targets' GPUs: each removes about the fraction
// the receiving target rounds up, so one or two usually suffice.
constexpr int kMoveTrims = 3;

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
      if (gc.configs[c].counts[prof] > 0) row.terms.emplace_back(static_cast<int>(c), 1.0 * gc.configs[c].counts[prof]);
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

// The re-packing of the GPU classes of one target without fixed instances (they have the same
// configurations; today there is one such class per target).
class ClassRepack {
 public:
  int kept() const { return kept_; }

  // `units` per demand class on at most `budget` GPUs of the group.
  ClassRepack(const PackModel& M, const std::vector<int>& group, std::vector<int> units, int budget,
              int exact_state_limit)
      : M_(M),
        group_(group),
        gc_(M.classes[group.front()]),
        tm_(*M.targets[gc_.target].model),
        limit_(exact_state_limit),
        budget_(budget),
        units_(std::move(units)) {
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
    for (int g : group) {
      for (size_t gi : M.classes[g].members) {
        if (!M.busy_on_gpu[gi].empty()) busy_gpus_.push_back(gi);
      }
    }
    // GPUs with the most busy instances first: they have the most to keep.
    std::stable_sort(busy_gpus_.begin(), busy_gpus_.end(),
                     [&](size_t a, size_t b) { return M.busy_on_gpu[a].size() > M.busy_on_gpu[b].size(); });
  }

  // The class's new bins, or false when its old ones stay. With `plain`, a group without busy GPUs
  // is solved too (its units changed), and false means its units do not fit in the budget.
  bool run(std::vector<Bin>* out, bool plain = false) {
    if (busy_gpus_.empty() || budget_ == 0) {
      if (!plain) return false;
      std::vector<Bin> rest;
      return residual(0, &rest) && finish(0, std::move(rest), out);
    }
    greedy();
    // The rest must fit on the GPUs left; else fewer keep bins (the largest prefix that fits).
    std::vector<Bin> rest;
    if (residual(keeps_.size(), &rest)) return finish(keeps_.size(), std::move(rest), out);
    size_t lo = 0, hi = keeps_.size();
    bool lo_ok = false;
    std::vector<Bin> lo_rest;
    while (hi - lo > 1) {
      if (cancel_requested()) return false;
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
    kept_ = std::accumulate(kept_of_.begin(), kept_of_.begin() + static_cast<long>(keeps), 0);
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
      kept_of_.push_back(c.kept);
      now = next;
      return true;
    }
    return false;
  }

  void greedy() {
    maximal_ = tm_.maximal;
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
        if (cancel_requested()) return;
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
  std::vector<Bin> keeps_;    // committed keep bins, in order
  std::vector<int> kept_of_;  // busy instances each keeps in place
  int kept_ = 0;              // busy instances the result's keep bins hold in place
};

}  // namespace

namespace {

// One target's share of the plan: its unpinned GPU classes, the units on them, its GPUs and bins.
struct TargetShare {
  int target = 0;
  std::vector<int> group;
  std::vector<int> units;  // per demand class
  int budget = 0;
  std::vector<Bin> bins;
  int kept = 0;          // busy instances its keep bins hold in place
  bool changed = false;  // its bins are new (else they stay where they were)
};

// Re-packs the share's units on at most its budget (step 6); false when they do not fit.
bool repack(const PackModel& M, TargetShare& t, int exact_state_limit, bool plain) {
  ClassRepack r(M, t.group, t.units, t.budget, exact_state_limit);
  std::vector<Bin> bins;
  if (!r.run(&bins, plain)) return false;
  t.bins = std::move(bins);
  t.kept = r.kept();
  t.changed = true;
  return true;
}

// Cross-target step: units of classes with options on both targets move from `from` to `to`, in the
// profiles that the busy GPUs of `to` without a keep bin have room for around their busy instances;
// `from` gives up the GPUs its LP no longer needs and `to` gets them. Tried only when both per-target
// LPs, rounded up, fit in the two targets' GPUs; accepted when both re-packs (step 6) place all their
// units on at most as many GPUs as before and keep more busy instances in place.
bool try_move(const PackModel& M, TargetShare& to, TargetShare& from, const std::vector<int>& room,
              int exact_state_limit) {
  const GpuClass& ca = M.classes[to.group.front()];
  const GpuClass& cb = M.classes[from.group.front()];
  size_t members = 0;
  for (int g : to.group) members += M.classes[g].members.size();
  const size_t pa_n = M.targets[to.target].table->profiles.size();
  const size_t pb_n = M.targets[from.target].table->profiles.size();
  // The units that may move, per demand class.
  std::vector<int> movable(M.demands.size(), 0);
  std::vector<int> left = room;
  for (size_t k = 0; k < M.demands.size(); ++k) {
    const DemandClass& d = M.demands[k];
    if (d.busy || from.units[k] == 0) continue;
    const int pa = option_for(d, to.target), pb = option_for(d, from.target);
    if (pa < 0 || pb < 0 || left[pa] == 0) continue;
    movable[k] = std::min(from.units[k], left[pa]);
    left[pa] -= movable[k];
  }
  if (std::accumulate(movable.begin(), movable.end(), 0) == 0) return false;
  // The largest share of the movable units that pays off, halving on failure.
  const int total = to.budget + from.budget;
  for (int step = 0; step < kMoveHalvings; ++step) {
    if (cancel_requested()) return false;
    std::vector<int> mv(movable.size());
    for (size_t k = 0; k < mv.size(); ++k) mv[k] = movable[k] >> step;
    // Both LPs must fit in the two targets' GPUs after rounding up; when they do not, trim the move by
    // the units (most expensive on `to` first) that make up the fraction `to` rounds up.
    int need_a = 0, need_b = 0;
    bool fits = false;
    for (int trim = 0; trim <= kMoveTrims && !fits; ++trim) {
      if (std::accumulate(mv.begin(), mv.end(), 0) == 0) return false;
      std::vector<int> na_d(pa_n, 0), nb_d(pb_n, 0);
      for (size_t k = 0; k < mv.size(); ++k) {
        const int pa = option_for(M.demands[k], to.target), pb = option_for(M.demands[k], from.target);
        if (pa >= 0) na_d[pa] += to.units[k] + mv[k];
        if (pb >= 0) nb_d[pb] += from.units[k] - mv[k];
      }
      const ClassLp na = class_lp(ca, na_d), nb = class_lp(cb, nb_d);
      if (!na.feasible || !nb.feasible) break;
      need_a = static_cast<int>(std::ceil(na.gpus - kFitSlack));
      need_b = static_cast<int>(std::ceil(nb.gpus - kFitSlack));
      fits = need_a + need_b <= total && need_a <= static_cast<int>(members);
      if (fits) break;
      // When `to`'s LP is whole, the excess is real cost, which trimming by its prices cannot remove.
      double excess = na.gpus - (need_a - 1);
      if (excess > 1.0 - kFitSlack) break;
      std::vector<size_t> order(mv.size());
      std::iota(order.begin(), order.end(), 0);
      auto price_on_a = [&](size_t k) {
        const int pa = option_for(M.demands[k], to.target);
        return pa >= 0 ? na.price[pa] : 0.0;
      };
      std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return price_on_a(x) > price_on_a(y); });
      for (size_t k : order) {
        const double pr = price_on_a(k);
        if (mv[k] == 0 || pr <= kValueTolerance || excess <= 0) continue;
        const int cut = std::min(mv[k], static_cast<int>(std::ceil(excess / pr - kFitSlack)));
        mv[k] -= cut;
        excess -= cut * pr;
      }
    }
    if (!fits) continue;
    TargetShare a = to, b = from;
    for (size_t k = 0; k < mv.size(); ++k) {
      a.units[k] += mv[k];
      b.units[k] -= mv[k];
    }
    // Any spare GPU goes to `to`, where it may keep a busy GPU.
    b.budget = need_b;
    a.budget = total - need_b;
    const bool okb = repack(M, b, exact_state_limit, true);
    const bool oka = okb && repack(M, a, exact_state_limit, true);
    if (!oka) continue;
    if (a.kept + b.kept <= to.kept + from.kept) continue;
    if (a.bins.size() + b.bins.size() > to.bins.size() + from.bins.size()) continue;
    to = std::move(a);
    from = std::move(b);
    return true;
  }
  return false;
}

// Per target, what the busy GPUs without a keep bin could hold around their busy instances: the
// slots of the maximal layout that keeps the most of them in place, less those instances.
std::vector<int> room_on(const PackModel& M, const TargetShare& t) {
  const TableModel& tm = *M.targets[t.target].model;
  std::vector<int> room(tm.table->profiles.size(), 0);
  std::unordered_set<int> kept;
  for (const auto& b : t.bins) {
    if (b.gpu >= 0) kept.insert(b.gpu);
  }
  const std::vector<int>& maximal = tm.maximal;
  for (int g : t.group) {
    for (size_t gi : M.classes[g].members) {
      const auto& own = M.busy_on_gpu[gi];
      if (own.empty() || kept.count(static_cast<int>(gi)) > 0) continue;
      int best = -1, best_kept = 0;
      for (int li : maximal) {
        int n = 0;
        for (const auto& p : own) n += (tm.bits[li] & tm.bit(p)) ? 1 : 0;
        if (n > best_kept || (n == best_kept && best >= 0 && tm.stranded_total(li) < tm.stranded_total(best))) {
          best = li;
          best_kept = n;
        }
      }
      if (best < 0) continue;
      std::vector<int> slots = tm.counts[best];
      for (const auto& p : own) {
        if (tm.bits[best] & tm.bit(p)) --slots[p.profile];
      }
      for (size_t p = 0; p < slots.size(); ++p) room[p] += slots[p];
    }
  }
  return room;
}

}  // namespace

void reduce_disturbance(const PackModel& M, std::vector<Bin>& bins, int exact_state_limit) {
  std::map<int, std::vector<int>> by_target;
  for (size_t g = 0; g < M.classes.size(); ++g) {
    if (!M.classes[g].pinned && M.classes[g].fixed.empty())
      by_target[M.classes[g].target].push_back(static_cast<int>(g));
  }
  std::vector<TargetShare> shares;
  std::vector<int> share_of(M.classes.size(), -1);
  for (const auto& [target, group] : by_target) {
    for (int g : group) share_of[g] = static_cast<int>(shares.size());
    TargetShare t;
    t.target = target;
    t.group = group;
    t.units.assign(M.demands.size(), 0);
    shares.push_back(std::move(t));
  }
  for (const auto& b : bins) {
    const int s = share_of[b.gpu_class];
    if (s < 0) continue;
    TargetShare& t = shares[s];
    ++t.budget;
    for (const auto& per : b.units) {
      for (const auto& [k, a] : per) t.units[k] += a;
    }
    t.bins.push_back(b);
  }
  for (auto& t : shares) repack(M, t, exact_state_limit, false);
  // Cross-target moves, toward the targets with the most busy GPUs left without a keep bin.
  for (size_t a = 0; a < shares.size(); ++a) {
    const std::vector<int> room = room_on(M, shares[a]);
    if (std::accumulate(room.begin(), room.end(), 0) == 0) continue;
    for (size_t b = 0; b < shares.size(); ++b) {
      if (b != a) try_move(M, shares[a], shares[b], room_on(M, shares[a]), exact_state_limit);
    }
  }
  // Unchanged targets' bins stay where they were, the others' come after them.
  std::vector<Bin> next;
  for (auto& b : bins) {
    const int s = share_of[b.gpu_class];
    if (s < 0 || !shares[s].changed) next.push_back(std::move(b));
  }
  for (auto& t : shares) {
    if (!t.changed) continue;
    for (auto& b : t.bins) next.push_back(std::move(b));
  }
  bins = std::move(next);
}

}  // namespace gpuplan::mig
