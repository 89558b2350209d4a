// `gpuplan plan`: the workload options of `gpuplan perf` plus a goal and the offers.
#include <cstdio>
#include <sstream>

#include "cli/cli.h"
#include "gpuplan/units.h"

namespace gpuplan::cli {

namespace {

std::string num(const Json& v, const char* fmt, double scale = 1) {
  if (!v.is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v.get<double>() * scale);
  return buf;
}

// Hours with three significant digits: a job of minutes reads "0.0317", not "0.0".
std::string hours(const Json& seconds) { return num(seconds, "%.3g", 1.0 / kSecondsPerHour); }

// A plan's offer as the tables name it: a proxy (a stand-in priced from another product, issue #18) says so.
std::string offer_cell(const Json& p) {
  return p["offer"].get<std::string>() + (p.value("proxy", false) ? " [proxy]" : "");
}

}  // namespace

std::string render_plan(const Json& r, const Json&, const OutputFormat& fmt) {
  const bool serve = r["goal"]["kind"] == "serve";
  std::vector<std::string> header =
      serve
          ? std::vector<std::string>{"#",     "offer", "target",       "gpus",    "tp",      "pp",          "replicas",
                                     "batch", "usd_h", "usd_per_mtok", "ttft_ms", "tpot_ms", "startup_min", "meets"}
          : std::vector<std::string>{"#",     "offer",       "target", "gpus",     "dp",    "tp",        "pp",
                                     "batch", "startup_min", "hours",  "billed_h", "usd_h", "usd_total", "meets"};
  std::vector<std::vector<std::string>> rows;
  int i = 0;
  for (const auto& p : r["plans"]) {
    ++i;
    if (serve) {
      rows.push_back({std::to_string(i), offer_cell(p), p["target"].get<std::string>(),
                      std::to_string(p["gpus"].get<int>()), std::to_string(p["tp"].get<int>()),
                      std::to_string(p["pp"].get<int>()), std::to_string(p["replicas"].get<int>()),
                      std::to_string(p["batch"].get<int>()), num(p["cost_per_hour"], "%.2f"),
                      num(p["cost_per_million_tokens"], "%.3f"), num(p["ttft_seconds"], "%.0f", 1e3),
                      num(p["tpot_seconds"], "%.1f", 1e3), num(p["startup_seconds"], "%.1f", 1.0 / kSecondsPerMinute),
                      p["meets_goal"].get<bool>() ? "yes" : "no"});
    } else {
      rows.push_back({std::to_string(i), offer_cell(p), p["target"].get<std::string>(),
                      std::to_string(p["gpus"].get<int>()), std::to_string(p["replicas"].get<int>()),
                      std::to_string(p["tp"].get<int>()), std::to_string(p["pp"].get<int>()),
                      std::to_string(p["batch"].get<int>()), num(p["startup_seconds"], "%.1f", 1.0 / kSecondsPerMinute),
                      hours(p["seconds_total"]), hours(p["billed_seconds"]), num(p["cost_per_hour"], "%.2f"),
                      num(p["cost_total"], "%.2f"), p["meets_goal"].get<bool>() ? "yes" : "no"});
    }
  }
  if (fmt.csv) return render_csv(header, rows);
  std::ostringstream os;
  const Json& g = r["goal"];
  os << r["model"].get<std::string>() << ", " << r["task"].get<std::string>();
  if (r.contains("engine")) os << ", engine " << r["engine"].get<std::string>();
  os << ": ";
  if (serve) {
    os << num(g["rate_requests_per_second"], "%g") << " req/s of " << g["input_tokens"].get<int>() << " + "
       << g["output_tokens"].get<int>() << " tokens";
    if (g["ttft_slo_seconds"].is_number()) os << ", TTFT <= " << num(g["ttft_slo_seconds"], "%g") << " s";
    if (g["tpot_slo_seconds"].is_number()) os << ", TPOT <= " << num(g["tpot_slo_seconds"], "%g") << " s";
  } else {
    os << num(g["train_tokens"], "%.4g") << " tokens";
    if (g["deadline_seconds"].is_number())
      os << " within " << num(g["deadline_seconds"], "%.4g", 1.0 / kSecondsPerHour) << " h";
    if (g["budget"].is_number()) os << " for at most " << num(g["budget"], "%.0f");
  }
  os << "; objective " << r["objective"].get<std::string>() << "\n";
  os << r["offers_considered"].get<size_t>() << " offers, " << r["configurations"].get<long long>()
     << " configurations evaluated\n\n";
  if (r["best"].is_object()) {
    const Json& b = r["best"];
    os << "Recommended: " << offer_cell(b) << " (" << b["target"].get<std::string>() << ") x"
       << b["instances"].get<int>() << ": " << b["reason"].get<std::string>() << "\n  "
       << num(b["cost_per_hour"], "%.2f") << " " << b["currency"].get<std::string>() << "/h";
    if (serve)
      os << ", " << num(b["cost_per_million_tokens"], "%.3f") << " per million tokens";
    else
      os << ", " << num(b["cost_total"], "%.2f") << " in total, " << hours(b["seconds_total"]) << " h";
    // Start-up and billing (issue #18).
    os << "\n  start-up " << num(b["startup_seconds"], "%.1f", 1.0 / kSecondsPerMinute) << " min (provisioning "
       << num(b["provisioning_seconds"], "%.0f") << " s, weights load " << num(b["load_seconds"], "%.0f")
       << " s); billed " << b["billing"].get<std::string>() << ", minimum "
       << b["min_billable_seconds"].get<long long>() << " s";
    if (!serve) os << ": " << hours(b["billed_seconds"]) << " h per instance";
    if (b.contains("available"))  // a market offer: its live price and count, no capture date
      os << "; live price, " << num(b["available"], "%.0f") << " available now (" << b["source"].get<std::string>()
         << ")\n\n";
    else
      os << "; price captured " << b["captured_at"].get<std::string>() << " (" << b["source"].get<std::string>() << ")"
         << (b.contains("price_warning") ? "\n  Warning: " + b["price_warning"].get<std::string>() : "")
         << (b.value("proxy", false)
                 ? "\n  Proxy (no real offer meets the goal): " + b["proxy_reason"].get<std::string>()
                 : "")
         << "\n\n";
  } else {
    os << "No offer meets the goal; the reasons are below.\n\n";
  }
  if (!rows.empty()) os << render_table(header, rows) << "\n";
  // Old list prices are planned on, each named with its age (issue #18; --max-age drops them).
  bool warned = false;
  for (const auto& p : r["plans"]) {
    if (!p.contains("price_warning")) continue;
    if (!warned) os << "Prices that may be stale (--max-age DAYS drops them)\n";
    warned = true;
    os << "  " << p["offer"].get<std::string>() << ": " << p["price_warning"].get<std::string>() << "\n";
  }
  if (warned) os << "\n";
  // Proxies: a stand-in's price, not the target's own; ranked after every real offer that meets the goal.
  bool proxies = false;
  for (const auto& p : r["plans"]) {
    if (!p.value("proxy", false)) continue;
    if (!proxies) os << "Proxies (priced from another product; ranked after every real offer that meets the goal)\n";
    proxies = true;
    os << "  " << p["offer"].get<std::string>() << ": " << p["proxy_reason"].get<std::string>() << "\n";
  }
  if (proxies) os << "\n";
  if (!serve && !r["pareto"].empty()) {
    os << "Cost against time (Pareto front: no other plan is both cheaper and faster)\n";
    std::vector<std::vector<std::string>> pr;
    for (const auto& p : r["pareto"]) {
      pr.push_back({offer_cell(p), std::to_string(p["gpus"].get<int>()), hours(p["seconds_total"]),
                    num(p["cost_total"], "%.2f")});
    }
    os << render_table({"offer", "gpus", "hours", "usd_total"}, pr, {false, true, true, true}) << "\n";
  }
  if (!r["rejected"].empty()) {
    os << "Rejected offers\n";
    size_t shown = 0;
    for (const auto& x : r["rejected"]) {
      if (++shown > 25) {
        os << "  ... and " << r["rejected"].size() - 25 << " more (--json lists them all)\n";
        break;
      }
      os << "  " << x["offer"].get<std::string>() << ": " << x["reason"].get<std::string>() << "\n";
    }
  }
  return os.str();
}

}  // namespace gpuplan::cli
