// The "perf" kind of `gpuplan validate`: predicts one row of validation/perf.yaml (a published speed
// measurement) with the performance model, in the row's own unit, so the error is
// predicted / measured - 1.
#pragma once

#include <string>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/perf.h"

namespace gpuplan::validate {

struct PerfRowPrediction {
  bool ok = false;
  double value = 0;  // in the row's unit
  std::string note;  // why skipped, or what was compared
  PerfBound bound = PerfBound::kCompute;
};

PerfRowPrediction predict_perf_row(const Catalog& catalog, const Json& row);

// The rows of validation/perf.yaml (embedded), as JSON objects.
Result<std::vector<Json>> perf_rows();

// Every row predicted, and the summary the accuracy bound is held on: comparable rows within 25% and
// the median absolute error, in percent.
struct PerfValidation {
  Json rows = Json::array();
  int comparable = 0, predicted = 0, skipped = 0, within_25 = 0, within_10 = 0;
  double median_abs_error_percent = 0;
  double share_within_25 = 0;
};
Result<PerfValidation> validate_perf(const Catalog& catalog);

}  // namespace gpuplan::validate
