// A lower bound on the busy instances any plan disturbs when it places at least the given units on at
// most a given number of GPUs: the LP relaxation of "keep the most busy instances in place", where
// every fleet GPU takes at most one maximal layout (a busy GPU keeps those of its busy instances the
// layout holds at their starts), the layouts' slots cover the units, and at most `gpus` GPUs are used.
//
// The LP is solved through its Lagrangian dual: with prices pi >= 0 on the slots of each (target,
// profile), nu >= 0 on each GPU class and lambda >= 0 on the GPU count, every GPU picks its best
// layout independently (or none), which gives an upper bound on the instances kept for ANY prices. The
// prices come from a Dantzig-Wolfe master whose columns are the classes' configurations, the units'
// options and, per class and bucket of busy GPUs, the busy GPUs' combined best responses found so far;
// the bound is the best Lagrangian value seen, so it is valid whether or not the master converged.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "gpuplan/cancel.h"
#include "mig/lp.h"
#include "mig/pack_model.h"

namespace gpuplan::mig {

namespace {

// Pricing rounds of the master: each adds at most two columns per bucket; the bound stops improving
// long before (the master is a few hundred rows).
constexpr int kMaxRounds = 60;
// Busy GPUs of a class are split into buckets by how many busy instances they run (1..7 on NVIDIA's
// tables): a bucket's responses are combined into one master column, so more buckets converge faster.
constexpr int kMaxBuckets = 8;
// Weight of the best prices so far when smoothing the master's prices (Wentges): damps the
// oscillation of plain column generation.
constexpr double kSmoothing = 0.5;
// Reduced costs below this are taken as negative (simplex noise is far smaller).
constexpr double kPriceEps = 1e-9;
// Slack before rounding the bound up to whole instances (floating-point sums of at most ~10^5 terms).
constexpr double kRoundSlack = 1e-6;

struct Group {
  int cls = 0;
  int bucket = 0;
  int count = 0;          // identical busy GPUs (same class and busy set)
  int busy = 0;           // busy instances on each
  std::vector<int> kept;  // per maximal layout of the target: busy instances it keeps in place
};

struct Prices {
  std::vector<std::vector<double>> slot;  // per target, per profile
  std::vector<double> cls;                // per GPU class
  double gpu = 0;
};

struct Block {  // one master column: a bucket's busy GPUs with their chosen keep layouts
  int cls = 0;
  int bucket = 0;
  double kept = 0;
  int gpus = 0;
  std::vector<double> slots;  // per profile of the class's target
};

class Bound {
 public:
  Bound(const PackModel& M, const std::vector<int>& placed, int gpus) : M_(M), placed_(placed), gpus_(gpus) {
    maximal_.resize(M.targets.size());
    for (size_t t = 0; t < M.targets.size(); ++t) maximal_[t] = M.targets[t].model->maximal;
    free_.assign(M.classes.size(), 0);
    std::map<std::pair<int, std::vector<std::pair<int, int>>>, int> index;
    for (size_t g = 0; g < M.classes.size(); ++g) {
      const TableModel& tm = *M.targets[M.classes[g].target].model;
      for (size_t gi : M.classes[g].members) {
        const auto& own = M.busy_on_gpu[gi];
        if (own.empty()) {
          ++free_[g];
          continue;
        }
        total_busy_ += static_cast<int>(own.size());
        std::vector<std::pair<int, int>> key;
        for (const auto& b : own) key.emplace_back(b.profile, b.start);
        auto [it, fresh] = index.try_emplace({static_cast<int>(g), key}, static_cast<int>(groups_.size()));
        if (fresh) {
          Group grp;
          grp.cls = static_cast<int>(g);
          grp.busy = static_cast<int>(own.size());
          grp.bucket = std::min(grp.busy, kMaxBuckets) - 1;
          for (int li : maximal_[M.classes[g].target]) {
            int k = 0;
            for (const auto& b : own) k += (tm.bits[li] & tm.bit(b)) ? 1 : 0;
            grp.kept.push_back(k);
          }
          groups_.push_back(std::move(grp));
        }
        ++groups_[it->second].count;
      }
    }
  }

  int run() {
    if (total_busy_ == 0) return 0;
    Prices zero = zero_prices();
    best_ = lagrangian(zero, nullptr);
    center_ = zero;
    for (int round = 0; round < kMaxRounds; ++round) {
      if (cancel_requested()) break;
      Prices duals;
      double rmp = 0;
      if (!master(&duals, &rmp)) break;
      std::vector<Block> blocks;
      const double at_duals = lagrangian(duals, &blocks);
      take(at_duals, duals);
      Prices smooth = mix(center_, duals);
      std::vector<Block> more;
      take(lagrangian(smooth, &more), smooth);
      // Responses at the duals enter when they price out there; those at the smoothed prices always
      // (they price out at those prices and pull the master toward the best prices seen).
      bool added = false;
      for (auto* bs : {&blocks, &more}) {
        for (auto& b : *bs) {
          if (block_rc(b, duals) < -kPriceEps || bs == &more) {
            blocks_.push_back(std::move(b));
            added = true;
          }
        }
      }
      // The integer bound can no longer improve: the LP optimum lies between best_ and rmp.
      if (!added || rounded(best_) >= rounded(rmp)) break;
    }
    return std::max(0, rounded(best_));
  }

 private:
  // Disturbed instances implied by a value of the (minimized) negative kept count.
  int rounded(double neg_kept) const { return static_cast<int>(std::ceil(total_busy_ + neg_kept - kRoundSlack)); }

  Prices zero_prices() const {
    Prices p;
    for (const auto& t : M_.targets) p.slot.emplace_back(t.table->profiles.size(), 0.0);
    p.cls.assign(M_.classes.size(), 0.0);
    return p;
  }

  Prices mix(const Prices& a, const Prices& b) const {
    Prices p = a;
    for (size_t t = 0; t < p.slot.size(); ++t) {
      for (size_t q = 0; q < p.slot[t].size(); ++q)
        p.slot[t][q] = kSmoothing * a.slot[t][q] + (1 - kSmoothing) * b.slot[t][q];
    }
    for (size_t g = 0; g < p.cls.size(); ++g) p.cls[g] = kSmoothing * a.cls[g] + (1 - kSmoothing) * b.cls[g];
    p.gpu = kSmoothing * a.gpu + (1 - kSmoothing) * b.gpu;
    return p;
  }

  void take(double value, const Prices& p) {
    if (value > best_) {
      best_ = value;
      center_ = p;
    }
  }

  double layout_value(const Prices& p, int target, int li) const {
    const auto& counts = M_.targets[target].model->counts[li];
    double v = 0;
    for (size_t q = 0; q < counts.size(); ++q) v += p.slot[target][q] * counts[q];
    return v;
  }

  // The Lagrangian at `p` (a lower bound on -kept for any plan); with `blocks`, the busy GPUs' best
  // keep layouts combined per (class, bucket).
  double lagrangian(const Prices& p, std::vector<Block>* blocks) const {
    double value = -p.gpu * gpus_;
    for (size_t k = 0; k < M_.demands.size(); ++k) {
      if (placed_[k] <= 0) continue;
      double cheapest = std::numeric_limits<double>::infinity();
      for (const auto& o : M_.demands[k].options) cheapest = std::min(cheapest, p.slot[o.target][o.profile]);
      value += placed_[k] * cheapest;
    }
    std::map<std::pair<int, int>, Block> by_bucket;
    std::vector<std::vector<double>> worth(M_.targets.size());
    for (size_t t = 0; t < M_.targets.size(); ++t) {
      for (int li : maximal_[t]) worth[t].push_back(layout_value(p, static_cast<int>(t), li));
    }
    for (size_t g = 0; g < M_.classes.size(); ++g) {
      value -= p.cls[g] * static_cast<double>(M_.classes[g].members.size());
      const int t = M_.classes[g].target;
      const double fixed = p.cls[g] + p.gpu;
      const double best_free = *std::max_element(worth[t].begin(), worth[t].end());
      value += free_[g] * std::min(0.0, fixed - best_free);
    }
    for (const auto& grp : groups_) {
      const int t = M_.classes[grp.cls].target;
      const double fixed = p.cls[grp.cls] + p.gpu;
      double best = 0;
      int arg = -1;
      for (size_t i = 0; i < grp.kept.size(); ++i) {
        const double rc = fixed - grp.kept[i] - worth[t][i];
        if (rc < best) {
          best = rc;
          arg = static_cast<int>(i);
        }
      }
      value += grp.count * best;
      if (!blocks || arg < 0 || grp.kept[arg] == 0) continue;
      auto [it, fresh] = by_bucket.try_emplace({grp.cls, grp.bucket});
      Block& b = it->second;
      if (fresh) {
        b.cls = grp.cls;
        b.bucket = grp.bucket;
        b.slots.assign(M_.targets[t].table->profiles.size(), 0.0);
      }
      b.kept += static_cast<double>(grp.count) * grp.kept[arg];
      b.gpus += grp.count;
      const auto& counts = M_.targets[t].model->counts[maximal_[t][arg]];
      for (size_t q = 0; q < counts.size(); ++q) b.slots[q] += static_cast<double>(grp.count) * counts[q];
    }
    if (blocks) {
      for (auto& [key, b] : by_bucket) blocks->push_back(std::move(b));
    }
    return value;
  }

  // The block's reduced cost at `p` without its bucket's convexity price (which only makes it larger).
  double block_rc(const Block& b, const Prices& p) const {
    const int t = M_.classes[b.cls].target;
    double rc = -b.kept + b.gpus * (p.cls[b.cls] + p.gpu);
    for (size_t q = 0; q < b.slots.size(); ++q) rc -= p.slot[t][q] * b.slots[q];
    auto it = bucket_price_.find(bucket_key(b));
    return rc + (it == bucket_price_.end() ? 0.0 : it->second);
  }

  int bucket_key(const Block& b) const { return b.cls * kMaxBuckets + b.bucket; }

  // Solves the master with the blocks so far: minimize -kept over configurations, the units' options
  // and blocks; false when it is infeasible (the placed units do not fit the GPU count: cannot happen
  // for a plan's own numbers, but then only the prices so far count).
  bool master(Prices* duals, double* objective) {
    lp::Problem p;
    std::vector<int> arow(M_.classes.size(), -1);
    for (size_t g = 0; g < M_.classes.size(); ++g) {
      arow[g] = static_cast<int>(p.rows.size());
      p.rows.push_back(lp::Row{{}, lp::Sense::kLe, static_cast<double>(M_.classes[g].members.size())});
    }
    const int grow = static_cast<int>(p.rows.size());
    p.rows.push_back(lp::Row{{}, lp::Sense::kLe, static_cast<double>(gpus_)});
    std::map<std::pair<int, int>, int> brow;
    for (size_t k = 0; k < M_.demands.size(); ++k) {
      if (placed_[k] <= 0) continue;
      lp::Row c{{}, lp::Sense::kGe, static_cast<double>(placed_[k])};
      for (const auto& o : M_.demands[k].options) {
        auto [it, fresh] = brow.try_emplace({o.target, o.profile}, 0);
        if (fresh) {
          it->second = static_cast<int>(p.rows.size());
          p.rows.push_back(lp::Row{{}, lp::Sense::kLe, 0.0});
        }
        p.rows[it->second].terms.emplace_back(p.columns, 1.0);
        c.terms.emplace_back(p.columns, 1.0);
        p.cost.push_back(0.0);
        ++p.columns;
      }
      p.rows.push_back(std::move(c));
    }
    auto add_slots = [&](int target, const auto& slots) {
      for (size_t q = 0; q < slots.size(); ++q) {
        if (slots[q] == 0) continue;
        auto it = brow.find({target, static_cast<int>(q)});
        if (it != brow.end()) p.rows[it->second].terms.emplace_back(p.columns, -static_cast<double>(slots[q]));
      }
    };
    for (size_t g = 0; g < M_.classes.size(); ++g) {
      for (const auto& cfg : M_.classes[g].configs) {
        p.rows[arow[g]].terms.emplace_back(p.columns, 1.0);
        p.rows[grow].terms.emplace_back(p.columns, 1.0);
        add_slots(M_.classes[g].target, cfg.counts);
        p.cost.push_back(0.0);
        ++p.columns;
      }
    }
    std::map<int, int> vrow;
    for (const auto& b : blocks_) {
      auto [it, fresh] = vrow.try_emplace(bucket_key(b), 0);
      if (fresh) {
        it->second = static_cast<int>(p.rows.size());
        p.rows.push_back(lp::Row{{}, lp::Sense::kLe, 1.0});
      }
      p.rows[it->second].terms.emplace_back(p.columns, 1.0);
      p.rows[arow[b.cls]].terms.emplace_back(p.columns, static_cast<double>(b.gpus));
      p.rows[grow].terms.emplace_back(p.columns, static_cast<double>(b.gpus));
      add_slots(M_.classes[b.cls].target, b.slots);
      p.cost.push_back(-b.kept);
      ++p.columns;
    }
    const lp::Solution s = lp::solve(p);
    if (!s.feasible) return false;
    *objective = s.objective;
    // Prices are the negated duals of the <= rows (d objective / d rhs <= 0 there), clamped to >= 0.
    *duals = zero_prices();
    for (size_t g = 0; g < M_.classes.size(); ++g) duals->cls[g] = std::max(0.0, -s.duals[arow[g]]);
    duals->gpu = std::max(0.0, -s.duals[grow]);
    for (const auto& [tp, row] : brow) duals->slot[tp.first][tp.second] = std::max(0.0, -s.duals[row]);
    bucket_price_.clear();
    for (const auto& [key, row] : vrow) bucket_price_[key] = std::max(0.0, -s.duals[row]);
    return true;
  }

  const PackModel& M_;
  const std::vector<int>& placed_;
  int gpus_;
  std::vector<std::vector<int>> maximal_;  // per target
  std::vector<int> free_;                  // per class: members without busy instances
  std::vector<Group> groups_;
  int total_busy_ = 0;
  std::vector<Block> blocks_;
  std::map<int, double> bucket_price_;  // per bucket: the master's convexity price
  double best_ = -std::numeric_limits<double>::infinity();
  Prices center_;
};

}  // namespace

int disturbance_lower_bound(const PackModel& M, const std::vector<int>& placed, int gpus) {
  for (const auto& c : M.classes) {
    // Pinned GPUs (--keep-existing) disturb nothing and hold no busy instances that may move.
    if (c.pinned || !c.fixed.empty()) return 0;
  }
  return Bound(M, placed, gpus).run();
}

}  // namespace gpuplan::mig
