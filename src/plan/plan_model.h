// The PlanModel the planner runs on: the memory model (fits, largest serving batch) and the
// performance model (latency, throughput, training speed) for one workload, at any parallel layout.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "gpuplan/plan.h"
#include "perf/perf_request.h"

namespace gpuplan {

class WorkloadPlanModel : public PlanModel {
 public:
  // `use_measured`: an offer with measured figures (Offer::measured_efficiency) is predicted with them.
  explicit WorkloadPlanModel(perf::PerfSetup setup, bool use_measured = false)
      : base_(std::move(setup)), use_measured_(use_measured) {}

  int max_serving_batch(const Target& t, int tp, int pp, std::string* why_not) const override;
  ServePoint serve(const Target& t, int tp, int pp, int batch) const override;
  TrainPoint train(const Target& t, int dp, int tp, int pp) const override;
  bool layout_allowed(int tp, int pp) const override;
  void begin_offer(const Offer& offer) const override;
  double weights_bytes() const override;
  // Whether the offer being planned is predicted with its measured figures.
  bool offer_measured() const { return offer_efficiency_ != nullptr; }

 private:
  // The setup with a parallel layout, and its memory cache, made once per layout.
  struct Layout {
    perf::PerfSetup setup;
    std::unique_ptr<perf::MemoryCache> memory;
    // The setup's workload at the batch being predicted: a copy made once per layout, so that a
    // prediction at another batch copies no model pointer (the memory cache reads setup.workload).
    Workload at_batch;
  };
  Layout& layout(int tp, int pp) const;

  // The efficiency of the offer being planned: the request's, or its measured curves on top of them.
  const PerfEfficiency& efficiency(const Layout& l) const {
    return offer_efficiency_ ? *offer_efficiency_ : l.setup.efficiency;
  }

  perf::PerfSetup base_;
  bool use_measured_ = false;
  mutable std::map<std::pair<int, int>, Layout> layouts_;
  mutable std::map<std::string, PerfEfficiency> measured_;  // by the offers' efficiency text
  mutable const PerfEfficiency* offer_efficiency_ = nullptr;
  // The offer being planned: GPUs per instance (one node) and its fabric; 0 before any offer.
  mutable int offer_gpus_ = 0;
  mutable Fabric offer_fabric_ = Fabric::kNone;
};

}  // namespace gpuplan
