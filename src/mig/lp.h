// A small dense two-phase simplex for the packing LPs (a few hundred rows, a few thousand columns).
// Not a general LP library: it exists so that the production path needs no solver dependency. The
// tests check it against GLPK (glpsol).
#pragma once

#include <utility>
#include <vector>

namespace gpuplan::mig::lp {

enum class Sense { kLe, kEq, kGe };

struct Row {
  std::vector<std::pair<int, double>> terms;  // (column, coefficient)
  Sense sense = Sense::kLe;
  double rhs = 0;
};

// minimize cost . x  subject to rows, x >= 0.
struct Problem {
  int columns = 0;
  std::vector<double> cost;
  std::vector<Row> rows;
};

struct Solution {
  bool feasible = false;
  bool optimal = false;  // false when the iteration limit was hit (the x is still feasible)
  double objective = 0;
  std::vector<double> x;
  // Per row: the dual price (d objective / d rhs) at the optimum; >= 0 on a kGe row of a minimization.
  std::vector<double> duals;
};

Solution solve(const Problem& problem);

}  // namespace gpuplan::mig::lp
