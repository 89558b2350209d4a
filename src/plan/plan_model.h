// The PlanModel the planner runs on: the memory model (fits, largest serving batch) and the
// performance model (latency, throughput, training speed) for one workload, at any parallel layout.
#pragma once

#include <map>
#include <memory>
#include <utility>

#include "gpuplan/plan.h"
#include "perf/perf_request.h"

namespace gpuplan {

class WorkloadPlanModel : public PlanModel {
 public:
  explicit WorkloadPlanModel(perf::PerfSetup setup) : base_(std::move(setup)) {}

  int max_serving_batch(const Target& t, int tp, int pp, std::string* why_not) const override;
  ServePoint serve(const Target& t, int tp, int pp, int batch) const override;
  TrainPoint train(const Target& t, int dp, int tp, int pp) const override;
  bool layout_allowed(int tp, int pp) const override;

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

  perf::PerfSetup base_;
  mutable std::map<std::pair<int, int>, Layout> layouts_;
};

}  // namespace gpuplan
