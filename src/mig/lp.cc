#include "mig/lp.h"
#include "gpuplan/cancel.h"

#include <cmath>
#include <limits>

namespace gpuplan::mig::lp {

namespace {

// Pivot and feasibility tolerance: the coefficients are small integers and the right-hand sides
// counts below 10^6, so 1e-9 separates zero from rounding noise with room to spare.
constexpr double kEps = 1e-9;
// Iterations before the pivot rule switches from Dantzig (fast) to Bland (cannot cycle).
constexpr int kDantzigIterations = 5000;
// Hard stop against a bug or a degenerate stall: far above what the packing LPs need (a few hundred).
constexpr int kMaxIterations = 50000;

class Tableau {
 public:
  Tableau(int rows, int cols)
      : m_(rows), n_(cols), a_(static_cast<size_t>(rows + 1) * (cols + 1), 0.0), basis_(rows, -1) {}
  double& at(int r, int c) { return a_[static_cast<size_t>(r) * (n_ + 1) + c]; }
  double& rhs(int r) { return at(r, n_); }
  int rows() const { return m_; }
  int cols() const { return n_; }
  std::vector<int>& basis() { return basis_; }

  void pivot(int pr, int pc) {
    const double inv = 1.0 / at(pr, pc);
    double* prow = &at(pr, 0);
    for (int c = 0; c <= n_; ++c) prow[c] *= inv;
    for (int r = 0; r <= m_; ++r) {
      if (r == pr) continue;
      double* row = &at(r, 0);
      const double f = row[pc];
      if (std::fabs(f) < kEps) continue;
      for (int c = 0; c <= n_; ++c) row[c] -= f * prow[c];
      row[pc] = 0.0;
    }
    basis_[pr] = pc;
  }

  // Runs simplex on the objective row m_ (reduced costs); columns >= `allowed` may not enter.
  bool optimize(int allowed) {
    for (int it = 0; it < kMaxIterations; ++it) {
      if (cancel_requested()) return false;  // the caller sees an infeasible LP; run_command drops the result
      const bool bland = it >= kDantzigIterations;
      int pc = -1;
      double best = -kEps;
      for (int c = 0; c < allowed; ++c) {
        const double d = at(m_, c);
        if (d < best) {
          pc = c;
          best = d;
          if (bland) break;
        }
      }
      if (pc < 0) return true;
      int pr = -1;
      double ratio = std::numeric_limits<double>::infinity();
      for (int r = 0; r < m_; ++r) {
        const double v = at(r, pc);
        if (v > kEps) {
          const double q = rhs(r) / v;
          if (q < ratio - kEps || (q < ratio + kEps && pr >= 0 && basis_[r] < basis_[pr])) {
            ratio = q;
            pr = r;
          }
        }
      }
      if (pr < 0) return true;  // unbounded: cannot happen for the packing LPs (costs >= 0 or bounded)
      pivot(pr, pc);
    }
    return false;
  }

 private:
  int m_, n_;
  std::vector<double> a_;
  std::vector<int> basis_;
};

}  // namespace

Solution solve(const Problem& p) {
  const int m = static_cast<int>(p.rows.size());
  // Columns: structural, then one slack/surplus per inequality, then one artificial per row that needs it.
  int slacks = 0, artificials = 0;
  std::vector<double> sign(m, 1.0);
  std::vector<Sense> sense(m);
  for (int r = 0; r < m; ++r) {
    sense[r] = p.rows[r].sense;
    if (p.rows[r].rhs < 0) {
      sign[r] = -1.0;
      if (sense[r] == Sense::kLe)
        sense[r] = Sense::kGe;
      else if (sense[r] == Sense::kGe)
        sense[r] = Sense::kLe;
    }
    if (sense[r] != Sense::kEq) ++slacks;
    if (sense[r] != Sense::kLe) ++artificials;
  }
  const int n = p.columns, first_art = n + slacks, total = n + slacks + artificials;
  Tableau t(m, total);
  int s = n, a = first_art;
  std::vector<int> unit_col(m, -1);  // per row: the column that starts as its unit vector (slack or artificial)
  for (int r = 0; r < m; ++r) {
    for (const auto& [c, v] : p.rows[r].terms) t.at(r, c) += sign[r] * v;
    t.rhs(r) = sign[r] * p.rows[r].rhs;
    if (sense[r] == Sense::kLe) {
      t.at(r, s) = 1.0;
      unit_col[r] = s;
      t.basis()[r] = s++;
    } else {
      if (sense[r] == Sense::kGe) t.at(r, s++) = -1.0;
      t.at(r, a) = 1.0;
      unit_col[r] = a;
      t.basis()[r] = a++;
    }
  }
  Solution out;
  // Phase 1: minimize the sum of artificials (objective row = -sum of their rows).
  if (artificials > 0) {
    for (int r = 0; r < m; ++r) {
      if (t.basis()[r] < first_art) continue;
      for (int c = 0; c <= total; ++c) {
        if (c < first_art || c == total) t.at(m, c) -= t.at(r, c);
      }
    }
    t.optimize(first_art);
    if (-t.rhs(m) > 1e-7) return out;  // infeasible
    // Drive artificials still basic (at zero) out of the basis where possible.
    for (int r = 0; r < m; ++r) {
      if (t.basis()[r] < first_art) continue;
      for (int c = 0; c < first_art; ++c) {
        if (std::fabs(t.at(r, c)) > kEps) {
          t.pivot(r, c);
          break;
        }
      }
    }
  }
  out.feasible = true;
  // Phase 2: objective row = cost minus its basic part.
  for (int c = 0; c <= total; ++c) t.at(m, c) = c < n ? p.cost[c] : 0.0;
  for (int r = 0; r < m; ++r) {
    const int b = t.basis()[r];
    if (b < n && std::fabs(p.cost[b]) > 0) {
      const double f = p.cost[b];
      for (int c = 0; c <= total; ++c) t.at(m, c) -= f * t.at(r, c);
    }
  }
  out.optimal = t.optimize(first_art);
  out.x.assign(n, 0.0);
  for (int r = 0; r < m; ++r) {
    if (t.basis()[r] < n) out.x[t.basis()[r]] = std::max(0.0, t.rhs(r));
  }
  for (int c = 0; c < n; ++c) out.objective += p.cost[c] * out.x[c];
  // The reduced cost of a unit column (cost 0) is minus the row's dual; undo the sign flip of the row.
  out.duals.assign(m, 0.0);
  for (int r = 0; r < m; ++r) out.duals[r] = -sign[r] * t.at(m, unit_col[r]);
  return out;
}

}  // namespace gpuplan::mig::lp
