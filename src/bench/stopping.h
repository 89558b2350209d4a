// The stopping rule of one bench point (docs/bench.md, "Stopping rules"): sample until the relative spread
// (p75 - p25) / median is under 1 % (converged), or the spread estimate itself has settled (it moved less
// than 10 % over the last 5 samples: noise_stable, the noise is real and more samples will not shrink it),
// or the point's share of the budget is spent (time_budget), or a cap on samples (sample_cap).
#pragma once

#include <string_view>
#include <vector>

namespace gpuplan::bench {

enum class Stop { kNone, kConverged, kNoiseStable, kTimeBudget, kSampleCap };
std::string_view stop_name(Stop s);

struct StopRule {
  int min_samples = 8;          // quartiles of fewer say little: at 5 % noise, 5 samples' IQR is under 1 % by chance
  double spread_target = 0.01;  // 1 %: issue #16's "relative spread under 1 %"
  int stable_window = 5;        // the spread estimate over the last 5 samples...
  double stable_change = 0.10;  // ...moved less than 10 % of its latest value
  int min_stable_samples = 12;  // and at least this many samples (a spread of 4 points is itself noise)
  int sample_cap = 100;         // enough for quartiles to 1 % at any noise this rule accepts
};

class PointSamples {
 public:
  void add(double rate);  // one sample's rate (TFLOPS, GB/s, or 1/micros)
  // The verdict after the latest sample: kNone means take another.
  Stop verdict(const StopRule& rule) const;
  int count() const { return static_cast<int>(rates_.size()); }
  double median() const;
  double best() const;    // the highest rate
  double lowest() const;  // the lowest rate (launch floors: the best time is the highest 1/time)
  double spread() const;  // (p75 - p25) / median; 0 for fewer than 2 samples

 private:
  std::vector<double> rates_;
  std::vector<double> spreads_;  // spread() after each sample
};

}  // namespace gpuplan::bench
