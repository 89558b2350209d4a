// `gpuplan offers list`.
#include "cli/cli.h"

namespace gpuplan::cli {

std::string render_offers_list(const Json& r, const Json&, const OutputFormat& fmt) {
  const bool spot = r["spot"].get<bool>();
  std::vector<std::string> header = {
      "offer",    "target", "gpus", "link", spot ? "spot_usd_h" : "usd_h", spot ? "spot_usd_gpu_h" : "usd_gpu_h",
      "captured", "stale"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& o : r["offers"]) {
    rows.push_back({o["offer"].get<std::string>(), o["target"].get<std::string>(), fmt_value(o["gpus"]),
                    o["interconnect"].get<std::string>(), fmt_value(o[spot ? "spot_price_hour" : "price_hour"]),
                    fmt_value(o[spot ? "spot_price_per_gpu_hour" : "price_per_gpu_hour"]),
                    o["captured_at"].get<std::string>(), o["stale"].get<bool>() ? "STALE" : ""});
  }
  if (fmt.csv) return render_csv(header, rows);
  std::string out = render_table(header, rows, {false, false, true, false, true, true, false, false});
  out += "\n" + std::to_string(r["offers"].size()) + " offers, cheapest per GPU-hour first; " +
         std::to_string(r["rejected"].size()) + " not usable (--all lists them), " +
         std::to_string(r["skipped"].size()) +
         " lines skipped. Prices are list prices per instance-hour, captured on the date shown.\n";
  for (const auto& s : r["skipped"]) {
    out += "  skipped " + s["file"].get<std::string>() + ":" + std::to_string(s["line"].get<int>()) + ": " +
           s["reason"].get<std::string>() + "\n";
  }
  return out;
}

}  // namespace gpuplan::cli
