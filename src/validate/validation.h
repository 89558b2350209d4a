// `gpuplan validate`: every published measurement under validation/ predicted by the models, compared
// with what was measured, and summarised. The one loop and the one summary (issue #12: they were
// written twice, with two medians) that the `validate` command and the perf accuracy test share.
// Kinds plug in through validation_kinds(): each names its file and a function that predicts one row.
#pragma once

#include <string>
#include <vector>

#include "gpuplan/api.h"

namespace gpuplan::validate {

// One row predicted: `value` in the model's base unit (bytes, tokens, seconds, rates, a fraction, 0/1
// for a verdict; include/gpuplan/units.h base_unit_factor), or !ok with why in `note`.
struct RowPrediction {
  bool ok = false;
  double value = 0;
  std::string note;  // why not predicted, or what was compared
};

struct ValidationKind {
  const char* name;  // "memory", "perf"
  const char* file;  // the embedded file of its rows
  RowPrediction (*predict)(const Catalog& catalog, const Json& row);
};

// The kinds, in the order they run: memory (validation/memory.yaml), perf (validation/perf.yaml).
const std::vector<ValidationKind>& validation_kinds();

// The median of `values`, 0 when empty: the middle value of an odd count, the mean of the two middle
// values of an even one (the textbook definition; the command took the upper middle one until issue #12).
double median(std::vector<double> values);

// The summary over the comparable rows of `rows` (of one kind, or all when `kind` is empty): numeric
// rows by their absolute error (within 10% and 25%, median, max), verdict rows by being right.
Json summarize(const Json& rows, const std::string& kind);

// Predicts every row of `kind` (every kind when empty) and answers {"kinds", "rows", "summary",
// "summary_by_kind"}. An unknown kind is a usage error on `kind`; checks the thread's cancel token
// once per row.
Result<Json> run_validation(const Catalog& catalog, const std::string& kind);

}  // namespace gpuplan::validate
