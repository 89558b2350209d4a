#include "bench/stopping.h"

#include <algorithm>
#include <cmath>

namespace gpuplan::bench {

namespace {
// The q-quantile (0..1) of sorted `v`, linear between neighbours.
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}
std::vector<double> sorted_copy(const std::vector<double>& v) {
  std::vector<double> s = v;
  std::sort(s.begin(), s.end());
  return s;
}
}  // namespace

std::string_view stop_name(Stop s) {
  switch (s) {
    case Stop::kConverged:
      return "converged";
    case Stop::kNoiseStable:
      return "noise_stable";
    case Stop::kTimeBudget:
      return "time_budget";
    case Stop::kSampleCap:
      return "sample_cap";
    case Stop::kNone:
      break;
  }
  return "none";
}

void PointSamples::add(double rate) {
  rates_.push_back(rate);
  spreads_.push_back(spread());
}

double PointSamples::median() const { return quantile(sorted_copy(rates_), 0.5); }
double PointSamples::best() const { return rates_.empty() ? 0 : *std::max_element(rates_.begin(), rates_.end()); }
double PointSamples::lowest() const { return rates_.empty() ? 0 : *std::min_element(rates_.begin(), rates_.end()); }

double PointSamples::spread() const {
  if (rates_.size() < 2) return 0;
  const std::vector<double> s = sorted_copy(rates_);
  const double med = quantile(s, 0.5);
  constexpr double kP25 = 0.25, kP75 = 0.75;
  return med > 0 ? (quantile(s, kP75) - quantile(s, kP25)) / med : 0;
}

Stop PointSamples::verdict(const StopRule& rule) const {
  const int n = count();
  if (n >= rule.min_samples && spread() < rule.spread_target) return Stop::kConverged;
  if (n >= std::max(rule.min_stable_samples, rule.stable_window)) {
    const double latest = spreads_.back();
    bool stable = latest > 0;
    for (int i = 1; i <= rule.stable_window && stable; ++i) {
      const double s = spreads_[spreads_.size() - static_cast<size_t>(i)];
      if (std::abs(s - latest) >= rule.stable_change * latest) stable = false;
    }
    if (stable) return Stop::kNoiseStable;
  }
  if (n >= rule.sample_cap) return Stop::kSampleCap;
  return Stop::kNone;
}

}  // namespace gpuplan::bench
