#include "perf/error_bands.h"

#include <cmath>

#include "catalog/yaml_util.h"
#include "gpuplan/embedded.h"

namespace gpuplan {

namespace perf {

namespace {

// The widest band a table may state: a factor of 10 either way is no longer an estimate.
constexpr double kMaxBandRatio = 10;
// The kinds of the performance model, each of which needs a band (perf_band).
constexpr PerfMetricKind kPerfKinds[] = {PerfMetricKind::kDecode, PerfMetricKind::kPrefill, PerfMetricKind::kThroughput,
                                         PerfMetricKind::kTraining, PerfMetricKind::kMicrobench};

std::string_view embedded_text(std::string_view path) {
  for (const auto& f : embedded_files()) {
    if (f.path == path) return f.contents;
  }
  return {};
}

}  // namespace

std::string_view perf_metric_kind_name(PerfMetricKind kind) {
  switch (kind) {
    case PerfMetricKind::kDecode:
      return "decode";
    case PerfMetricKind::kPrefill:
      return "prefill";
    case PerfMetricKind::kThroughput:
      return "throughput";
    case PerfMetricKind::kTraining:
      return "training";
    case PerfMetricKind::kMicrobench:
      return "microbench";
  }
  return "";
}

Result<std::vector<ErrorBand>> parse_error_bands(std::string_view text, const std::string& file) {
  GPUPLAN_TRY(root, yaml::parse(file, text));
  if (!root.IsMap() || !root["bands"] || !root["bands"].IsSequence())
    return invalid_data_error(file + ": needs a list 'bands'", "bands");
  GPUPLAN_CHECK(yaml::check_keys(file, root, "error bands", {"source", "date", "regenerate", "coverage", "bands"}));
  std::vector<ErrorBand> out;
  for (const auto& n : root["bands"]) {
    GPUPLAN_TRY(kind, yaml::get_string(file, n, "band", "kind", true));
    GPUPLAN_CHECK(yaml::check_keys(file, n, kind, {"kind", "rows", "log_half_width", "low", "high"}));
    ErrorBand b;
    b.kind = kind;
    GPUPLAN_TRY(rows, yaml::bounded_int(file, n, kind, "rows", true, 0, 0, 1000000));
    b.rows = static_cast<int>(rows);
    GPUPLAN_TRY(q, yaml::get_number(file, n, kind, "log_half_width", true));
    GPUPLAN_TRY(low, yaml::get_number(file, n, kind, "low", true));
    GPUPLAN_TRY(high, yaml::get_number(file, n, kind, "high", true));
    b.log_half_width = q;
    b.low = low;
    b.high = high;
    if (!(low > 0) || !(high <= kMaxBandRatio) || !(low >= 1 / kMaxBandRatio))
      return yaml::data_error(file, n, kind, "low", "a band is a ratio between 0.1 and 10");
    if (low > 1 || high < 1)
      return yaml::data_error(file, n, kind, low > 1 ? "low" : "high",
                              "the band excludes its own estimate (needs low <= 1 <= high)");
    if (!(q >= 0)) return yaml::data_error(file, n, kind, "log_half_width", "must be at least 0");
    for (const auto& seen : out) {
      if (seen.kind == kind) return yaml::data_error(file, n, kind, "kind", "listed twice");
    }
    out.push_back(b);
  }
  for (PerfMetricKind k : kPerfKinds) {
    bool found = false;
    for (const auto& b : out) found = found || b.kind == perf_metric_kind_name(k);
    if (!found)
      return invalid_data_error(file + ": no band for '" + std::string(perf_metric_kind_name(k)) + "'", "bands");
  }
  return out;
}

const std::vector<ErrorBand>& error_bands() {
  static const std::vector<ErrorBand> kBands = [] {
    auto parsed = parse_error_bands(embedded_text(kErrorBandsFile), kErrorBandsFile);
    return parsed ? *parsed : std::vector<ErrorBand>{};
  }();
  return kBands;
}

std::optional<ErrorBand> error_band(std::string_view kind) {
  for (const auto& b : error_bands()) {
    if (b.kind == kind) return b;
  }
  return std::nullopt;
}

}  // namespace perf

PerfBand perf_band(PerfMetricKind kind) {
  const auto b = perf::error_band(perf::perf_metric_kind_name(kind));
  if (!b) return {};
  return {b->low, b->high};
}

}  // namespace gpuplan
