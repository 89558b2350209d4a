// The "perf" kind of `gpuplan validate`: predicts one row of validation/perf.yaml (a published speed
// measurement) with the performance model, in base units (seconds, rates, a fraction); the
// validation loop (validate/validation.h) compares it with the measured value in the same units.
#pragma once

#include <string>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/perf.h"

namespace gpuplan::validate {

struct PerfRowPrediction {
  bool ok = false;
  double value = 0;  // in base units (units.h base_unit_factor)
  std::string note;  // why skipped, or what was compared
  PerfBound bound = PerfBound::kCompute;
};

PerfRowPrediction predict_perf_row(const Catalog& catalog, const Json& row);

// Every row predicted by the one validation loop (run_validation(catalog, "perf")), and the summary
// the accuracy bound is held on, over the rows that shaped the model (design: used): comparable rows
// within 25% and the median absolute error, in percent.
struct PerfValidation {
  Json rows = Json::array();
  int comparable = 0, predicted = 0, skipped = 0, within_25 = 0, within_10 = 0;
  double median_abs_error_percent = 0;
  double share_within_25 = 0;
};
Result<PerfValidation> validate_perf(const Catalog& catalog);

}  // namespace gpuplan::validate
