#include "validate/validation.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>

#include "catalog/yaml_util.h"
#include "core/format.h"
#include "gpuplan/cancel.h"
#include "gpuplan/embedded.h"
#include "gpuplan/units.h"
#include "validate/memory_rows.h"
#include "validate/perf_rows.h"

namespace gpuplan::validate {

namespace {

// The error bands the summary counts rows in, percent.
constexpr double kCloseErrorPercent = 10;
constexpr double kFairErrorPercent = 25;
// Decimals shown: predictions 4 (the row's unit), errors and the median 2 (percent), shares 4.
constexpr int kPredictedDecimals = 4;
constexpr int kPercentDecimals = 2;
constexpr int kShareDecimals = 4;
// A verdict (bool) row is predicted true above this (the predictors answer 0 or 1).
constexpr double kVerdictThreshold = 0.5;

// The performance model predicts in base units and says what bounds the row.
RowPrediction predict_perf_kind(const Catalog& catalog, const Json& row) {
  const PerfRowPrediction p = predict_perf_row(catalog, row);
  RowPrediction out;
  out.ok = p.ok;
  out.value = p.value;
  out.note =
      p.ok ? std::string("bound: ") + std::string(perf_bound_name(p.bound)) + (p.note.empty() ? "" : "; " + p.note)
           : p.note;
  return out;
}

std::string_view embedded_text(std::string_view path) {
  for (const auto& f : embedded_files()) {
    if (f.path == path) return f.contents;
  }
  return {};
}

// The measured value of a row as a number (a verdict as 0/1; absent: 0).
double measured_of(const Json& row) {
  if (!row.contains("measured")) return 0;
  if (row["measured"].is_boolean()) return row["measured"].get<bool>() ? 1 : 0;
  return row["measured"].is_number() ? row["measured"].get<double>() : 0;
}

// One row predicted and compared: its id, unit and measured value, the prediction in the row's unit
// and the error in percent (or the verdict and whether it is right), or "skipped" with why.
Json compare_row(const Catalog& catalog, const ValidationKind& k, const Json& row) {
  const std::string unit = row.value("unit", "");
  Json out{{"id", row.value("id", "")},
           {"kind", k.name},
           {"metric", row.value("metric", "")},
           {"unit", unit},
           {"comparable", row.value("comparable", true)}};
  if (row.contains("not_comparable_because")) out["not_comparable_because"] = row["not_comparable_because"];
  out["measured"] = row.contains("measured") ? row["measured"] : Json(nullptr);
  const RowPrediction pr = k.predict(catalog, row);
  const std::optional<double> factor = base_unit_factor(unit);
  if (!pr.ok || !factor) {
    out["status"] = "skipped";
    out["note"] = pr.ok ? "unit '" + unit + "' is not a known unit" : pr.note;
    out["predicted"] = nullptr;
    out["error_percent"] = nullptr;
    return out;
  }
  const double base = measured_of(row) * *factor;
  out["status"] = "predicted";
  if (unit == "bool") {
    out["predicted"] = pr.value > kVerdictThreshold;
    out["verdict_right"] = (pr.value > kVerdictThreshold) == (base > kVerdictThreshold);
    out["error_percent"] = nullptr;
  } else {
    out["predicted"] = round_to(pr.value / *factor, kPredictedDecimals);
    out["error_percent"] =
        base != 0 ? Json(round_to((pr.value - base) / base * 100.0, kPercentDecimals)) : Json(nullptr);
  }
  if (!pr.note.empty()) out["note"] = pr.note;
  out["source"] = row.value("source", "");
  return out;
}

// Every row of one kind's file compared, appended to `rows`.
Status run_kind(const Catalog& catalog, const ValidationKind& k, Json& rows) {
  const std::string_view text = embedded_text(k.file);
  if (text.empty()) return Status::Ok();
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return invalid_data_error(std::string(k.file) + ": " + e.what(), k.file);
  }
  for (const auto& rn : root["rows"]) {
    if (cancel_requested()) return cancelled_error();
    GPUPLAN_TRY(row, yaml::to_json(rn, k.file));
    rows.push_back(compare_row(catalog, k, row));
  }
  return Status::Ok();
}

double share(int part, int whole) { return whole ? round_to(static_cast<double>(part) / whole, kShareDecimals) : 0.0; }

}  // namespace

const std::vector<ValidationKind>& validation_kinds() {
  static const std::vector<ValidationKind> kKinds = {{"memory", "validation/memory.yaml", predict_memory_row},
                                                     {"perf", "validation/perf.yaml", predict_perf_kind}};
  return kKinds;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

Json summarize(const Json& rows, const std::string& kind) {
  int selected = 0, numeric = 0, within10 = 0, within25 = 0, verdicts = 0, right = 0, skipped = 0, comparable = 0;
  double max_err = 0;
  std::string max_id;
  std::vector<double> errs;
  for (const auto& r : rows) {
    if (!kind.empty() && r["kind"] != kind) continue;
    ++selected;
    if (!r["comparable"].get<bool>()) continue;
    ++comparable;
    if (r["status"] == "skipped") {
      ++skipped;
      continue;
    }
    if (r.contains("verdict_right")) {
      ++verdicts;
      right += r["verdict_right"].get<bool>() ? 1 : 0;
      continue;
    }
    if (r["error_percent"].is_null()) continue;
    const double e = std::fabs(r["error_percent"].get<double>());
    ++numeric;
    within10 += e <= kCloseErrorPercent ? 1 : 0;
    within25 += e <= kFairErrorPercent ? 1 : 0;
    errs.push_back(e);
    if (e > max_err) max_err = e, max_id = r["id"].get<std::string>();
  }
  return Json{{"rows", selected},
              {"comparable_rows", comparable},
              {"skipped_rows", skipped},
              {"numeric_rows", numeric},
              {"within_10_percent", within10},
              {"within_10_percent_share", share(within10, numeric)},
              {"within_25_percent", within25},
              {"within_25_percent_share", share(within25, numeric)},
              {"median_error_percent", round_to(median(std::move(errs)), kPercentDecimals)},
              {"max_error_percent", round_to(max_err, kPercentDecimals)},
              {"max_error_row", max_id},
              {"verdict_rows", verdicts},
              {"verdicts_right", right},
              {"verdict_accuracy", verdicts ? share(right, verdicts) : 1.0}};
}

Result<Json> run_validation(const Catalog& catalog, const std::string& kind) {
  Json rows = Json::array();
  Json kinds = Json::array();
  std::string names;
  for (const auto& k : validation_kinds()) {
    names += (names.empty() ? "" : ", ") + std::string(k.name);
    if (!kind.empty() && kind != k.name) continue;
    kinds.push_back(k.name);
    GPUPLAN_CHECK(run_kind(catalog, k, rows));
  }
  if (kinds.empty()) return usage_error("unknown kind '" + kind + "'; kinds: " + names, "kind");
  Json summary = summarize(rows, "");
  Json by_kind = Json::object();
  for (const auto& k : kinds) by_kind[k.get<std::string>()] = summarize(rows, k.get<std::string>());
  return Json{{"kinds", kinds}, {"rows", rows}, {"summary", summary}, {"summary_by_kind", by_kind}};
}

}  // namespace gpuplan::validate
