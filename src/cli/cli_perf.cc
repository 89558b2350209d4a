// `gpuplan perf`: the workload options of `gpuplan fit` plus lengths, a request rate and tokens to train.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "cli/cli.h"
#include "gpuplan/units.h"

namespace gpuplan::cli {

namespace {

std::string num(const Json& v, const char* fmt) {
  if (!v.is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v.get<double>());
  return buf;
}

std::string str(const Json& v) { return v.is_string() ? v.get<std::string>() : "-"; }
std::string fits(const Json& t) { return t.contains("refusal") ? "refused" : t["fits"].get<bool>() ? "yes" : "no"; }

std::string ms(const Json& v) { return v.is_number() ? num(Json(v.get<double>() * 1e3), "%.4g") : "-"; }

// "12.3 (10.1-14.2)": a figure with its band.
std::string banded(const Json& t, const char* key, const char* fmt, double scale = 1) {
  if (!t.contains(key) || !t[key].is_number()) return "-";
  auto f = [&](const Json& v) { return v.is_number() ? num(Json(v.get<double>() * scale), fmt) : std::string("?"); };
  std::string s = f(t[key]);
  if (t.contains("low") && t["low"].contains(key)) s += " (" + f(t["low"][key]) + "-" + f(t["high"][key]) + ")";
  return s;
}

// Which targets a calibration file set, with what, and the warnings about the files.
void render_calibrations(const Json& r, std::ostringstream& os) {
  for (const auto& t : r["targets"]) {
    if (!t.contains("calibration")) continue;
    const Json& c = t["calibration"];
    os << "\nCalibrated " << t["target"].get<std::string>() << " from " << str(c["file"]) << " (" << str(c["device"])
       << ", " << str(c["created_at"]) << ", driver " << str(c["driver"]) << "):";
    for (const auto& cv : c["curves"]) {
      os << " " << str(cv["precision"]) << " " << num(Json(cv["peak_fraction"].get<double>() * 100), "%.3g")
         << "% of peak, I_half " << num(cv["half_intensity"], "%.3g") << ";";
    }
    if (c["bandwidth_gbps"].is_number()) os << " " << num(c["bandwidth_gbps"], "%.4g") << " GB/s;";
    os << " sets";
    for (const auto& k : c["keys"]) os << " " << k.get<std::string>();
    os << "\n";
  }
  if (r.contains("warnings")) {
    for (const auto& w : r["warnings"]) os << "warning: " << w.get<std::string>() << "\n";
  }
}

}  // namespace

std::string render_perf(const Json& r, const Json&, const OutputFormat& fmt) {
  const Json& w = r["workload"];
  const std::string task = w["task"].get<std::string>();
  const bool infer = task == "infer";
  // CNN and encoder inference: one forward pass of the batch (step time and samples/s).
  const bool cnn = r["targets"].empty() ? false : r["targets"][0].contains("samples_per_second") && infer;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> right;
  if (infer && !cnn) {
    header = {"target",       "count",         "fits",        "bound",           "ttft_ms",        "tpot_ms",
              "decode_tok/s", "prefill_tok/s", "batch_tok/s", "serve_max_batch", "serve_max_tok/s"};
    right = {false, true, false, false, true, true, true, true, true, true, true};
    for (const auto& t : r["targets"]) {
      const Json& s = t["serving"];
      rows.push_back({t["target"].get<std::string>(), std::to_string(t["count"].get<int>()), fits(t), str(t["bound"]),
                      banded(t, "ttft_seconds", "%.4g", 1e3), banded(t, "tpot_seconds", "%.4g", 1e3),
                      banded(t, "decode_tokens_per_second", "%.4g"), num(t["prefill_tokens_per_second"], "%.4g"),
                      num(t["tokens_per_second"], "%.4g"),
                      s.is_object() ? std::to_string(s["max_batch"].get<long long>()) : "-",
                      s.is_object() ? num(s["max_tokens_per_second"], "%.4g") : "-"});
    }
  } else if (cnn) {
    header = {"target", "count", "fits", "bound", "step_ms", "samples/s"};
    right = {false, true, false, false, true, true};
    for (const auto& t : r["targets"]) {
      rows.push_back({t["target"].get<std::string>(), std::to_string(t["count"].get<int>()), fits(t), str(t["bound"]),
                      banded(t, "step_seconds", "%.4g", 1e3), banded(t, "samples_per_second", "%.4g")});
    }
  } else {
    header = {"target", "count", "fits", "bound", "step_s", "tokens/s", "samples/s", "mfu_%", "train_hours"};
    right = {false, true, false, false, true, true, true, true, true};
    for (const auto& t : r["targets"]) {
      rows.push_back({t["target"].get<std::string>(), std::to_string(t["count"].get<int>()), fits(t), str(t["bound"]),
                      banded(t, "step_seconds", "%.4g"), banded(t, "tokens_per_second", "%.4g"),
                      num(t["samples_per_second"], "%.4g"),
                      t["mfu"].is_number() ? num(Json(t["mfu"].get<double>() * 100), "%.1f") : "-",
                      t.contains("train_seconds") ? banded(t, "train_seconds", "%.4g", 1.0 / kSecondsPerHour) : "-"});
    }
  }
  if (fmt.csv) return render_csv(header, rows);
  std::ostringstream os;
  const Json& m = r["model"];
  os << m["id"].get<std::string>() << ": " << fmt_value(m["parameters"]) << " parameters";
  if (m["active_parameters"] != m["parameters"]) os << ", " << fmt_value(m["active_parameters"]) << " active per token";
  os << "\n"
     << task << ", weights " << w["weights"].get<std::string>()
     << (w.contains("amp") ? ", amp " + w["amp"].get<std::string>() : std::string()) << ", KV "
     << w["kv_cache"].get<std::string>() << ", batch " << w["batch"];
  if (infer && !cnn) os << ", input " << w["input_tokens"] << " + output " << w["output_tokens"] << " tokens";
  if (!infer) os << ", sequence " << w["context"];
  os << ", tp " << w["tp"] << ", pp " << w["pp"] << ", engine " << w["engine"].get<std::string>() << "\n\n";
  os << render_table(header, rows, right);
  if (infer && !cnn) {
    os << "\nttft = prefill of the whole batch; tpot = one decode step; decode_tok/s per sequence; batch_tok/s = "
          "generated "
          "tokens of the batch / (prefill + decode).\nserve_* = continuous batching at the largest batch memory "
          "allows.";
    bool any_rate = false;
    for (const auto& t : r["targets"])
      any_rate = any_rate || (t["serving"].is_object() && t["serving"].contains("rate_requests_per_second"));
    if (any_rate) {
      os << "\n\nAt " << num(w["rate"], "%.4g") << " requests/s:\n";
      std::vector<std::vector<std::string>> rr;
      for (const auto& t : r["targets"]) {
        const Json& s = t["serving"];
        if (!s.is_object() || !s.contains("saturated")) continue;
        rr.push_back({t["target"].get<std::string>(), s["saturated"].get<bool>() ? "SATURATED" : "ok",
                      num(s["mean_batch"], "%.3g"), ms(s["ttft_seconds"]), ms(s["tpot_seconds"]),
                      num(s["latency_seconds"], "%.4g"), num(s["tokens_per_second"], "%.4g"),
                      num(s["max_requests_per_second"], "%.4g")});
      }
      os << render_table({"target", "load", "mean_batch", "ttft_ms", "tpot_ms", "latency_s", "tok/s", "max_req/s"}, rr,
                         {false, false, true, true, true, true, true, true});
    }
  }
  const std::string reasons = reason_lines(r["targets"], false);
  if (!reasons.empty()) os << "\nNo figures (\"-\") where it does not run:\n" << reasons;
  render_calibrations(r, os);
  os << "\nIn parentheses: the 80% band, where 80% of the published rows of that kind fell, held-out rows included\n"
        "(data/error_bands.yaml; gpuplan validate prints each band's coverage on used and held-out rows).\n";
  return os.str();
}

}  // namespace gpuplan::cli
