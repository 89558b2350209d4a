// `gpuplan catalog list|show` and `gpuplan compare`.
#include <algorithm>
#include <map>
#include <sstream>

#include "cli/cli.h"

namespace gpuplan::cli {

namespace {

// A target's `available_now` (a server with a market: `--server`) in words: "eu-west 8 from 1.9/h;
// us-east 2 from 2.1/h", or "not available now" with the time it last was (the seed page's words).
std::string available_text(const Json& row) {
  std::string out;
  for (const auto& a : row["available_now"]) {
    out += (out.empty() ? "" : "; ") + a["region"].get<std::string>() + " " + fmt_value(a["count"]) + " from " +
           fmt_value(a["lowest_price_per_hour"]) + "/h";
  }
  if (!out.empty()) return out;
  out = "not available now";
  if (row.contains("last_available_at") && row["last_available_at"].is_string())
    out += " (last " + row["last_available_at"].get<std::string>() + ")";
  return out;
}

}  // namespace

std::string render_catalog_list(const Json& result, const Json&, const OutputFormat& fmt) {
  std::vector<std::string> header = {"id",          "name",       "arch",  "form", "memory_gb", "bandwidth_gbps",
                                     "bf16_tflops", "fp8_tflops", "tdp_w", "mig"};
  // With a market (catalog list --server): what is available now, per region, cheapest per GPU-hour.
  const bool market = !result["gpus"].empty() && result["gpus"][0].contains("available_now");
  if (market) header.emplace_back("available_now");
  std::vector<std::vector<std::string>> rows;
  for (const auto& g : result["gpus"]) {
    rows.push_back({g["id"].get<std::string>(), g["name"].get<std::string>(), g["architecture"].get<std::string>(),
                    g["form_factor"].get<std::string>(), fmt_value(g["memory_gb"]),
                    fmt_value(g["memory_bandwidth_gbps"]), fmt_value(g["bf16_tensor_tflops"]),
                    fmt_value(g["fp8_tensor_tflops"]), fmt_value(g["tdp_w"]),
                    g["mig_profile"].get<bool>() ? "slice" : (g["mig"].get<bool>() ? "yes" : "no")});
    if (market) rows.back().push_back(available_text(g));
  }
  if (fmt.csv) return render_csv(header, rows);
  std::string out = render_table(header, rows, {false, false, false, false, true, true, true, true, true, false});
  out +=
      "\nThroughput is dense (no sparsity), per device. `gpuplan catalog show <id>` gives every figure with its "
      "source.\n";
  return out;
}

std::string render_catalog_show(const Json& r, const Json& request, const OutputFormat& fmt) {
  const bool explain = request.contains("explain") && request["explain"].get<bool>();
  std::ostringstream os;
  std::vector<std::string> header = {"figure", "value", "unit", "source", "checked", "how"};
  std::vector<std::vector<std::string>> rows;
  std::map<std::string, Json> sources;
  for (auto it = r["specs"].begin(); it != r["specs"].end(); ++it) {
    const Json& f = it.value();
    sources[f["source"]["id"].get<std::string>()] = f["source"];
    rows.push_back({it.key(), fmt_value(f["value"]), f["unit"].get<std::string>(), f["source"]["id"].get<std::string>(),
                    f["checked"].get<std::string>(),
                    f["derived"].get<bool>() ? "derived" : (f["verified"].get<bool>() ? "datasheet" : "reported")});
  }
  if (fmt.csv) return render_csv(header, rows);
  os << r["name"].get<std::string>() << "  (" << r["id"].get<std::string>() << ")\n";
  std::string arch = r["architecture"].get<std::string>();
  if (!r["chip"].get<std::string>().empty()) arch += " " + r["chip"].get<std::string>();
  std::vector<std::string> parts = {arch, r["form_factor"].get<std::string>()};
  if (!r["interface"].get<std::string>().empty()) parts.push_back("host " + r["interface"].get<std::string>());
  if (!r["lifecycle"].get<std::string>().empty()) parts.push_back("lifecycle " + r["lifecycle"].get<std::string>());
  os << " ";
  for (size_t i = 0; i < parts.size(); ++i) os << (i ? ", " : " ") << parts[i];
  os << "\n";
  if (!r["aliases"].empty()) {
    os << "  also known as:";
    for (const auto& a : r["aliases"]) os << " \"" << a.get<std::string>() << "\"";
    os << "\n";
  }
  os << "\n" << render_table(header, rows);
  // Derivations, conflicts and explanations, figure by figure.
  std::ostringstream notes;
  for (auto it = r["specs"].begin(); it != r["specs"].end(); ++it) {
    const Json& f = it.value();
    const bool has_conflicts = !f["conflicts"].empty();
    if (!f["derived"].get<bool>() && !has_conflicts && !explain) continue;
    notes << "  " << it.key() << " = " << fmt_value(f["value"]);
    if (!f["unit"].get<std::string>().empty()) notes << " " << f["unit"].get<std::string>();
    notes << "\n";
    if (explain && f.contains("explain")) notes << "      what it means: " << f["explain"].get<std::string>() << "\n";
    if (f["derived"].get<bool>()) notes << "      derived: " << f["derivation"].get<std::string>() << "\n";
    for (const auto& c : f["conflicts"]) {
      notes << "      conflicting claim (not used): " << c["value"].get<std::string>() << " in "
            << c["source"]["id"].get<std::string>();
      if (!c["note"].get<std::string>().empty()) notes << " (" << c["note"].get<std::string>() << ")";
      notes << "\n";
      sources[c["source"]["id"].get<std::string>()] = c["source"];
    }
  }
  if (!notes.str().empty()) os << "\nNotes\n" << notes.str();
  os << "\nSources\n";
  for (const auto& [id, s] : sources) {
    os << "  [" << id << "] " << (s.contains("title") ? s["title"].get<std::string>() : "");
    if (s.contains("revision")) os << " (" << s["revision"].get<std::string>() << ")";
    if (s.contains("url")) os << "\n      " << s["url"].get<std::string>();
    os << "\n";
  }
  if (r.contains("mig") && r["mig"].is_object()) {
    const Json& m = r["mig"];
    os << "\nMIG: up to " << m["max_instances"].get<int>() << " instances on " << m["memory_slices"].get<int>()
       << " memory slices and " << m["compute_slices"].get<int>()
       << " compute slices (driver >= " << m["min_driver"].get<std::string>() << "; source "
       << m["source"]["id"].get<std::string>() << ")\n";
    std::vector<std::vector<std::string>> prow;
    for (const auto& p : m["profiles"]) {
      std::string starts;
      for (const auto& pl : p["placements"])
        starts += (starts.empty() ? "" : ",") + std::to_string(pl["start"].get<int>());
      prow.push_back(
          {p["name"].get<std::string>(), std::to_string(p["profile_id"].get<int>()), fmt_value(p["memory_mib"]),
           std::to_string(p["sm_count"].get<int>()),
           std::to_string(p["memory_slices"].get<int>()) + "/" + std::to_string(p["compute_slices"].get<int>()),
           std::to_string(p["max_count"].get<int>()),
           "{" + starts + "}:" + std::to_string(p["memory_slices"].get<int>())});
    }
    os << render_table({"profile", "id", "memory_mib", "sms", "mem/compute slices", "max", "placements"}, prow,
                       {false, true, true, true, true, true, false});
  }
  if (r.contains("available_now")) {
    os << "\nAvailable now (the market's live offers, per region, cheapest per GPU-hour): " << available_text(r)
       << "\n";
    if (r.contains("available_now_mig")) {
      for (auto it = r["available_now_mig"].begin(); it != r["available_now_mig"].end(); ++it) {
        os << "  " << it.key() << ": " << available_text(Json{{"available_now", it.value()}}) << "\n";
      }
    }
  }
  if (r.contains("mig_profile")) {
    os << "\nA MIG instance of " << r["parent"].get<std::string>()
       << ": memory and SMs are the instance's own; bandwidth, throughput and power are the parent's, scaled by its "
          "share.\n";
  }
  return os.str();
}

std::string render_compare(const Json& r, const Json&, const OutputFormat& fmt) {
  std::vector<std::string> header = {"figure"};
  for (const auto& t : r["targets"]) header.push_back(t["id"].get<std::string>());
  std::vector<std::vector<std::string>> rows;
  auto add_row = [&](const std::string& label, auto getter) {
    std::vector<std::string> row = {label};
    bool any = false;
    for (size_t i = 0; i < r["targets"].size(); ++i) {
      const Json& t = r["targets"][i];
      Json v = getter(t);
      any = any || !v.is_null();
      std::string cell = fmt_value(v);
      if (i > 0 && !v.is_null() && t.contains("diff_percent_vs_first")) {
        const Json& d = t["diff_percent_vs_first"];
        if (d.contains(label)) {
          const double pct = d[label].get<double>();
          char buf[32];
          std::snprintf(buf, sizeof buf, " (%+.0f%%)", pct);
          cell += buf;
        }
      }
      row.push_back(cell);
    }
    if (any) rows.push_back(row);
  };
  for (const auto& k : r["keys"]) {
    const std::string key = k.get<std::string>();
    add_row(key, [&](const Json& t) { return t["specs"].contains(key) ? t["specs"][key] : Json(nullptr); });
  }
  std::vector<std::string> dkeys;
  for (const auto& t : r["targets"]) {
    for (auto it = t["derived"].begin(); it != t["derived"].end(); ++it) {
      if (std::find(dkeys.begin(), dkeys.end(), it.key()) == dkeys.end()) dkeys.push_back(it.key());
    }
  }
  for (const auto& dk : dkeys) {
    add_row("derived." + dk,
            [&](const Json& t) { return t["derived"].contains(dk) ? t["derived"][dk] : Json(nullptr); });
  }
  std::vector<std::string> vkeys;
  for (const auto& t : r["targets"]) {
    if (!t.contains("value")) continue;
    for (auto it = t["value"].begin(); it != t["value"].end(); ++it) {
      if (it.key() == "refusal" || it.key() == "reason") continue;  // listed under the table
      if (std::find(vkeys.begin(), vkeys.end(), it.key()) == vkeys.end()) vkeys.push_back(it.key());
    }
  }
  for (const auto& vk : vkeys) {
    add_row("value." + vk, [&](const Json& t) {
      if (!t.contains("value") || !t["value"].contains(vk)) return Json(nullptr);
      if (vk == "fits" && t["value"].contains("refusal")) return Json("refused");
      return t["value"][vk];
    });
  }
  // Why a target does not fit: its refusal (no engine runs the configuration there) or the memory.
  std::string why_not;
  for (const auto& t : r["targets"]) {
    if (!t.contains("value") || !t["value"].contains("reason") || !t["value"]["reason"].is_string()) continue;
    const Json& v = t["value"];
    why_not += "  " + t["id"].get<std::string>() + ": " +
               (v.contains("refusal") ? "refused (" + v["refusal"].get<std::string>() + "): " : std::string()) +
               v["reason"].get<std::string>() + "\n";
  }
  if (fmt.csv) return render_csv(header, rows);
  std::vector<bool> right(header.size(), true);
  right[0] = false;
  std::string out = render_table(header, rows, right) +
                    "\nPercentages compare each column with the first. Throughput is dense. ridge = FLOP per byte of "
                    "memory traffic at which a kernel stops being bandwidth-bound.\n";
  if (r.contains("value_basis")) {
    const Json& b = r["value_basis"];
    out += "value.*: prices " + b["prices"].get<std::string>() + " (" + b["now"].get<std::string>() + ")";
    if (b.contains("metric")) {
      out += "; workload metric " + b["metric"].get<std::string>() +
             " per GPU, units_per_dollar = " + b["units_per_dollar"].get<std::string>();
    }
    out += ".\n";
  }
  if (!why_not.empty()) out += "\nvalue.fits, why not:\n" + why_not;
  return out;
}

}  // namespace gpuplan::cli
