// The error band of every printed estimate, per metric kind: data/error_bands.yaml, calibrated by
// `gpuplan validate` on the validation rows that shaped the model (design: used). A band is the 80th
// percentile q of |ln(measured / predicted)| over those rows, printed as [estimate x e^-q, estimate x
// e^q] (a time: the same interval of times), so that ~80 % of the rows of that kind fall inside their
// band and the band always holds its own estimate (low <= 1 <= high; a table that breaks this is
// refused). docs/model.md, "Bands and bounds", and docs/data-format.md, "Error bands".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/perf.h"
#include "gpuplan/status.h"

namespace gpuplan::perf {

// The path of the embedded table.
inline constexpr const char* kErrorBandsFile = "data/error_bands.yaml";

struct ErrorBand {
  std::string kind;           // "decode", "prefill", ... (validate's metric kinds)
  int rows = 0;               // used rows it was calibrated on
  double log_half_width = 0;  // q: the 80th percentile of |ln(measured / predicted)|
  double low = 1, high = 1;   // e^-q (rounded down) and e^q (rounded up): measured / predicted
};

// The table in `text` (the format of data/error_bands.yaml); `file` names it in errors. Fails
// (invalid_data, naming the kind and field) on an unknown key, a missing kind of the performance
// model, a duplicate, or a band that excludes its own estimate (low > 1 or high < 1) or is not a
// ratio (low <= 0, high over kMaxBandRatio).
Result<std::vector<ErrorBand>> parse_error_bands(std::string_view text, const std::string& file);

// The embedded table, parsed once (empty when it does not parse: ErrorBands tests hold it).
const std::vector<ErrorBand>& error_bands();

// One kind's band, or none.
std::optional<ErrorBand> error_band(std::string_view kind);

// The kind name of a performance band ("decode", ...).
std::string_view perf_metric_kind_name(PerfMetricKind kind);

}  // namespace gpuplan::perf
