// `gpuplan validate`: every published measurement under validation/ predicted by the models, compared
// with what was measured, and summarised. The one loop and the one summary (issue #12: they were
// written twice, with two medians) that the `validate` command and the perf accuracy test share.
// Kinds plug in through validation_kinds(): each names its file and a function that predicts one row.
#pragma once

#include <functional>
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

// The same summary over the rows `select` picks (one metric kind, one source group, one design). It
// also counts the numeric rows inside their kind's error band (band_coverage; null without a band).
Json summarize_if(const Json& rows, const std::function<bool(const Json&)>& select);

// The source group of a row's source URL: a GitHub repository as "owner/name" (lower case), a paper
// or a Hugging Face page as "arxiv.org/abs/<id>" / "huggingface.co/<two segments>", else the host.
// A row may name its group instead (`source_group:`).
std::string source_group(const std::string& url);

// The summaries of compared rows (run_validation's "rows": each with design, metric_kind and
// source_group) by design {"summary_by_design": {used, held_out}}, by metric kind and design
// {"by_metric_kind": [...]} (with the kind's band when it has one) and by metric kind, source group
// and design {"by_source_group": [...]}, in the order the kinds and groups first appear.
Json group_summaries(const Json& rows);

// Each metric kind's band from the USED comparable rows of `rows` (run_validation's rows): q, the
// smallest value at least 80 % of their |ln(measured / predicted)| lie within, and e^-q / e^q
// rounded outwards; [{kind, rows, log_half_width, low, high}] in kind order.
Json calibrate_bands(const Json& rows);

// `calibrated` as the text of data/error_bands.yaml, stamped with `date` (YYYY-MM-DD).
std::string error_bands_yaml(const Json& calibrated, const std::string& date);

// Predicts every row of `kind` (every kind when empty) and answers {"kinds", "rows", "summary",
// "summary_by_kind", "summary_by_design" (used, held_out), "by_metric_kind" and "by_source_group"
// (used and held-out rows apart, each with the summary's fields), "calibrated_bands"}. Every row says
// its design, metric_kind, source_group and (numeric rows) log_error and in_band. An unknown kind is a usage error on
// `kind`; checks the thread's cancel token once per row.
Result<Json> run_validation(const Catalog& catalog, const std::string& kind);

}  // namespace gpuplan::validate
