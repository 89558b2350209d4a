#include "validate/validation.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "catalog/yaml_util.h"
#include "core/format.h"
#include "gpuplan/cancel.h"
#include "gpuplan/embedded.h"
#include "gpuplan/units.h"
#include "perf/error_bands.h"
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
// The share of a kind's used rows its band is calibrated to hold (issue #17: an 80 % band).
constexpr double kBandCoverage = 0.8;
// Decimals of a band in data/error_bands.yaml: q and the ratios to 4 (0.01 %), rounded outwards.
constexpr int kBandDecimals = 4;
constexpr double kBandScale = 1e4;
// A row's `design`: it shaped the model (used) or was set aside before the mechanism it tests was
// written and never read while designing it (held_out). docs/data-format.md, "Validation".
constexpr const char* kDesignUsed = "used";
constexpr const char* kDesignHeldOut = "held_out";

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

bool is_time_unit(const std::string& unit) { return unit == "seconds" || unit == "ms"; }

// The metric kind a row's error is reported (and its band calibrated) under: the memory model's
// weights, peak (allocated / reserved), kv_cache, capacity (max context / batch) and verdict, the
// performance model's decode, prefill, throughput, training and microbench (perf_band's kinds).
std::string metric_kind_of(const ValidationKind& k, const Json& row) {
  const std::string m = row.value("metric", "");
  if (std::string_view(k.name) == "memory") {
    if (m == "weights_bytes") return "weights";
    if (m == "total_bytes" || m == "reserved_bytes") return "peak";
    if (m == "kv_cache_bytes" || m == "kv_cache_tokens") return "kv_cache";
    if (m == "max_context" || m == "max_batch") return "capacity";
    if (m == "fits") return "verdict";
    return "other";
  }
  if (m == "decode_tokens_per_second" || m == "tpot_seconds") return "decode";
  if (m == "ttft_seconds" || m == "prefill_tokens_per_second") return "prefill";
  if (m == "throughput_tokens_per_second") return "throughput";
  if (m == "train_tokens_per_second" || m == "train_samples_per_second" || m == "mfu") return "training";
  if (m == "gemm_tflops" || m == "bandwidth_gbps") return "microbench";
  if (m == "step_seconds") {
    const bool infer =
        row.contains("workload") && row["workload"].is_object() && row["workload"].value("task", "infer") == "infer";
    return infer ? "throughput" : "training";
  }
  return "other";
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
  out["design"] = row.value("design", kDesignUsed);
  for (const char* key : {"held_out_for", "collected"}) {
    if (row.contains(key)) out[key] = row[key];
  }
  out["metric_kind"] = metric_kind_of(k, row);
  out["source_group"] =
      row.contains("source_group") ? row.value("source_group", "") : source_group(row.value("source", ""));
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
    if (base > 0 && pr.value > 0) {
      const double log_error = std::log(base / pr.value);  // ln(measured / predicted)
      out["log_error"] = round_to(log_error, kBandDecimals);
      if (auto b = perf::error_band(out["metric_kind"].get<std::string>())) {
        // A time's band is the same interval of times: measured / predicted in [1/high, 1/low].
        const double ratio = is_time_unit(unit) ? pr.value / base : base / pr.value;
        out["in_band"] = ratio >= b->low && ratio <= b->high;
      }
    }
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
    const std::string design = row.value("design", kDesignUsed);
    if (design != kDesignUsed && design != kDesignHeldOut)
      return yaml::data_error(k.file, rn, row.value("id", "row"), "design",
                              "must be used or held_out, got '" + design + "'");
    if (design == kDesignHeldOut && (!row.contains("held_out_for") || !row.contains("collected")))
      return yaml::data_error(k.file, rn, row.value("id", "row"), "held_out_for",
                              "a held_out row names the mechanism it tests (held_out_for) and when it was collected");
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

// The median of |errors| with every source group weighing the same: a row weighs 1 / (its group's rows),
// so 192 rows of one repository count as much as 3 of another. With equal groups it is the median.
// Ties at exactly half the weight average the two values, as the plain median does.
double source_weighted_median(std::vector<std::pair<double, std::string>> errs) {
  if (errs.empty()) return 0;
  std::map<std::string, int> per_group;
  for (const auto& e : errs) ++per_group[e.second];
  std::sort(errs.begin(), errs.end());
  const double half = static_cast<double>(per_group.size()) / 2;
  constexpr double kTieWeight = 1e-9;  // weights are sums of 1/n: equality within rounding
  double cumulative = 0;
  for (size_t i = 0; i < errs.size(); ++i) {
    cumulative += 1.0 / per_group[errs[i].second];
    if (cumulative >= half - kTieWeight) {
      if (std::fabs(cumulative - half) <= kTieWeight && i + 1 < errs.size())
        return (errs[i].first + errs[i + 1].first) / 2;
      return errs[i].first;
    }
  }
  return errs.back().first;
}

Json summarize_if(const Json& rows, const std::function<bool(const Json&)>& select) {
  int selected = 0, numeric = 0, within10 = 0, within25 = 0, verdicts = 0, right = 0, skipped = 0, comparable = 0;
  int banded = 0, in_band = 0;
  double max_err = 0;
  std::string max_id;
  std::vector<double> errs;
  std::vector<std::pair<double, std::string>> grouped_errs;
  std::set<std::string> groups;
  for (const auto& r : rows) {
    if (!select(r)) continue;
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
    grouped_errs.emplace_back(e, r.value("source_group", std::string("unknown")));
    groups.insert(grouped_errs.back().second);
    if (e > max_err) max_err = e, max_id = r["id"].get<std::string>();
    if (r.contains("in_band")) {
      ++banded;
      in_band += r["in_band"].get<bool>() ? 1 : 0;
    }
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
              {"source_groups", groups.size()},
              {"source_weighted_median_error_percent",
               round_to(source_weighted_median(std::move(grouped_errs)), kPercentDecimals)},
              {"max_error_percent", round_to(max_err, kPercentDecimals)},
              {"max_error_row", max_id},
              {"verdict_rows", verdicts},
              {"verdicts_right", right},
              {"verdicts_wrong", verdicts - right},
              {"verdict_accuracy", verdicts ? share(right, verdicts) : 1.0},
              {"banded_rows", banded},
              {"in_band", in_band},
              {"band_coverage", banded ? Json(share(in_band, banded)) : Json(nullptr)}};
}

Json summarize(const Json& rows, const std::string& kind) {
  return summarize_if(rows, [&](const Json& r) { return kind.empty() || r["kind"] == kind; });
}

std::string source_group(const std::string& url) {
  std::string rest = url;
  const size_t scheme = rest.find("://");
  if (scheme != std::string::npos) rest = rest.substr(scheme + 3);
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= rest.size() && parts.size() < 3) {
    const size_t slash = rest.find('/', start);
    const std::string part = rest.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!part.empty()) parts.push_back(part);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (parts.empty()) return "unknown";
  std::string host = parts[0];
  for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (host.rfind("www.", 0) == 0) host = host.substr(4);
  // A repository is its owner and name, lower-cased; llama.cpp moved from ggerganov to ggml-org.
  if (host == "github.com" && parts.size() >= 3) {
    std::string repo = parts[1] + "/" + parts[2];
    for (char& c : repo) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return repo == "ggerganov/llama.cpp" ? "ggml-org/llama.cpp" : repo;
  }
  // A paper is its own source; a site with many unrelated pages is grouped by its first two segments.
  if ((host == "arxiv.org" || host == "huggingface.co") && parts.size() >= 3)
    return host + "/" + parts[1] + "/" + parts[2];
  return host;
}

// The smallest q that at least kBandCoverage of `errs` (sorted |log errors|) lie within: the
// ceil(0.8 n)-th value, plus half a unit of the rows' rounding (log_error has kBandDecimals), rounded up.
double coverage_quantile(const std::vector<double>& errs) {
  if (errs.empty()) return 0;
  const size_t n = errs.size();
  const size_t index = static_cast<size_t>(std::ceil(kBandCoverage * static_cast<double>(n))) - 1;
  return std::ceil((errs[std::min(index, n - 1)] + 0.5 / kBandScale) * kBandScale) / kBandScale;
}

// A band is the wider of two 80th percentiles of |ln(measured / predicted)|: over the comparable rows
// of its kind that shaped the model (used), and over every comparable row of the kind, held-out rows
// included. Held-out rows are the error a user's workload meets (settings the model was not tuned to);
// a band from the used rows alone held 29-58 % of them (issue #17). They set no constant of the model,
// only the width of the interval printed around its estimate; the used rows' bound keeps the band at
// least as wide as the rows that shaped the model need.
Json calibrate_bands(const Json& rows) {
  std::map<std::string, std::vector<double>> used_by_kind, all_by_kind;
  for (const auto& r : rows) {
    if (!r["comparable"].get<bool>() || !r.contains("log_error")) continue;
    const std::string design = r.value("design", kDesignUsed);
    if (design != kDesignUsed && design != kDesignHeldOut) continue;
    const std::string kind = r["metric_kind"].get<std::string>();
    const double e = std::fabs(r["log_error"].get<double>());
    all_by_kind[kind].push_back(e);
    if (design == kDesignUsed) used_by_kind[kind].push_back(e);
  }
  Json out = Json::array();
  for (auto& [kind, errs] : all_by_kind) {
    if (kind == "other" || kind == "verdict") continue;
    auto& used = used_by_kind[kind];
    if (used.empty()) continue;  // a kind no used row measures has no band yet
    std::sort(errs.begin(), errs.end());
    std::sort(used.begin(), used.end());
    const double q = std::max(coverage_quantile(used), coverage_quantile(errs));
    out.push_back(Json{{"kind", kind},
                       {"rows", errs.size()},
                       {"log_half_width", q},
                       {"low", std::floor(std::exp(-q) * kBandScale) / kBandScale},
                       {"high", std::ceil(std::exp(q) * kBandScale) / kBandScale}});
  }
  return out;
}

std::string error_bands_yaml(const Json& calibrated, const std::string& date) {
  std::string text =
      "# data/error_bands.yaml -- the error band of every estimate gpuplan prints, per metric kind.\n"
      "# GENERATED: do not edit by hand. A band is q = the wider of two 80th percentiles of\n"
      "# |ln(measured / predicted)|: over the comparable rows of its kind that shaped the model (design:\n"
      "# used) and over all its comparable rows, held-out ones included (the error a workload the model\n"
      "# was not tuned to meets; they set no model constant), printed as [estimate x low, estimate x high]\n"
      "# with low = e^-q (rounded down) and high = e^q (rounded up). `gpuplan validate` prints each band's\n"
      "# coverage on used and held-out rows apart.\n"
      "# The perf model's five kinds are required (perf_band); memory kinds are measured by validate.\n"
      "source: \"gpuplan validate over validation/memory.yaml and validation/perf.yaml (comparable rows)\"\n"
      "date: " +
      date +
      "\n"
      "regenerate: \"GPUPLAN_UPDATE_BANDS=1 ./build/tests/gpuplan_tests "
      "--gtest_filter='ErrorBands.TableIsCalibrated'\"\n"
      "coverage: 0.8\n"
      "bands:\n";
  for (const auto& b : calibrated) {
    text += "  - kind: " + b["kind"].get<std::string>() + "\n    rows: " + std::to_string(b["rows"].get<int>()) +
            "\n    log_half_width: " + format_g(b["log_half_width"].get<double>()) +
            "\n    low: " + format_g(b["low"].get<double>()) + "\n    high: " + format_g(b["high"].get<double>()) +
            "\n";
  }
  return text;
}

Json group_summaries(const Json& rows) {
  Json by_design = Json::object();
  for (const char* d : {kDesignUsed, kDesignHeldOut})
    by_design[d] = summarize_if(rows, [&](const Json& r) { return r["design"] == d; });
  // Memory and speed apart (issue #17 sets one target for each), used and held-out rows apart.
  Json by_kind_design = Json::object();
  for (const auto& r : rows) {
    const std::string k = r["kind"].get<std::string>();
    if (by_kind_design.contains(k)) continue;
    for (const char* d : {kDesignUsed, kDesignHeldOut})
      by_kind_design[k][d] = summarize_if(rows, [&](const Json& x) { return x["kind"] == k && x["design"] == d; });
  }
  // Per metric kind and per source group, used and held-out rows apart, in the order of the files.
  std::vector<std::string> metric_kinds, groups;
  for (const auto& r : rows) {
    const std::string mk = r["metric_kind"].get<std::string>(), g = r["source_group"].get<std::string>();
    if (std::find(metric_kinds.begin(), metric_kinds.end(), mk) == metric_kinds.end()) metric_kinds.push_back(mk);
    if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
  }
  Json by_metric_kind = Json::array(), by_group = Json::array();
  for (const auto& mk : metric_kinds) {
    for (const char* d : {kDesignUsed, kDesignHeldOut}) {
      Json s = summarize_if(rows, [&](const Json& r) { return r["metric_kind"] == mk && r["design"] == d; });
      if (s["rows"].get<int>() == 0) continue;
      Json entry{{"metric_kind", mk}, {"design", d}};
      if (auto b = perf::error_band(mk)) entry["band"] = Json{{"low", b->low}, {"high", b->high}};
      entry.update(s);
      by_metric_kind.push_back(entry);
    }
    for (const auto& g : groups) {
      for (const char* d : {kDesignUsed, kDesignHeldOut}) {
        Json s = summarize_if(
            rows, [&](const Json& r) { return r["metric_kind"] == mk && r["source_group"] == g && r["design"] == d; });
        if (s["rows"].get<int>() == 0) continue;
        Json entry{{"metric_kind", mk}, {"source_group", g}, {"design", d}};
        entry.update(s);
        by_group.push_back(entry);
      }
    }
  }
  return Json{{"summary_by_design", by_design},
              {"summary_by_kind_and_design", by_kind_design},
              {"by_metric_kind", by_metric_kind},
              {"by_source_group", by_group}};
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
  Json groups = group_summaries(rows);
  return Json{{"kinds", kinds},
              {"rows", rows},
              {"summary", summary},
              {"summary_by_kind", by_kind},
              {"summary_by_design", groups["summary_by_design"]},
              {"summary_by_kind_and_design", groups["summary_by_kind_and_design"]},
              {"by_metric_kind", groups["by_metric_kind"]},
              {"by_source_group", groups["by_source_group"]},
              {"calibrated_bands", calibrate_bands(rows)}};
}

}  // namespace gpuplan::validate
