// `gpuplan mig profiles|check|layouts|pack`.
#include <sstream>

#include "cli/cli.h"

namespace gpuplan::cli {

namespace {

std::string layout_text(const Json& placements) {
  std::string out;
  for (const auto& p : placements) {
    out += (out.empty() ? "" : ", ") + p["profile"].get<std::string>() + "@" + std::to_string(p["start"].get<int>());
  }
  return out.empty() ? "(empty)" : out;
}

}  // namespace

std::string render_mig_profiles(const Json& r, const Json&, const OutputFormat& fmt) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : r["profiles"]) {
    std::string starts;
    for (const auto& s : p["placements"]) {
      if (!starts.empty()) starts += ',';
      starts += std::to_string(s["start"].get<int>());
    }
    rows.push_back({p["name"].get<std::string>(), std::to_string(p["profile_id"].get<int>()),
                    std::to_string(p["memory_slices"].get<int>()), std::to_string(p["compute_slices"].get<int>()),
                    fmt_value(p["memory_mib"]), std::to_string(p["sm_count"].get<int>()),
                    std::to_string(p["max_count"].get<int>()),
                    "{" + starts + "}:" + std::to_string(p["memory_slices"].get<int>()),
                    p["media_extensions"].get<bool>() ? "yes" : "no"});
  }
  const std::vector<std::string> header = {"profile", "id",         "mem_slices", "compute_slices", "memory_mib", "sms",
                                           "max",     "placements", "+me"};
  if (fmt.csv) return render_csv(header, rows);
  std::ostringstream os;
  os << r["target"].get<std::string>() << " (MIG table " << r["table"].get<std::string>()
     << "): " << r["memory_slices"].get<int>() << " memory slices, " << r["compute_slices"].get<int>()
     << " compute slices, up to " << r["max_instances"].get<int>()
     << " instances, driver >= " << r["min_driver"].get<std::string>() << "\n\n"
     << render_table(header, rows, {false, true, true, true, true, true, true, false, false});
  return os.str();
}

std::string render_mig_check(const Json& r, const Json&, const OutputFormat&) {
  std::ostringstream os;
  if (!r["valid"].get<bool>()) {
    os << "invalid (" << r["rule"].get<std::string>() << "): " << r["reason"].get<std::string>() << "\n";
    return os.str();
  }
  os << "valid on " << r["target"].get<std::string>() << ": " << layout_text(r["placements"]) << "\n";
  os << "stranded: " << r["stranded"]["memory_slices"].get<int>() << " memory slices, "
     << r["stranded"]["compute_slices"].get<int>() << " compute slices\n";
  os << "create it with (largest first, explicit placements):\n";
  for (const auto& c : r["commands"]) os << "  " << c.get<std::string>() << "\n";
  return os.str();
}

std::string render_mig_layouts(const Json& r, const Json& request, const OutputFormat& fmt) {
  std::vector<std::string> dead_end(r["layouts"].size());
  if (r.contains("dead_ends")) {
    for (const auto& d : r["dead_ends"]) {
      dead_end[d["layout"].get<size_t>()] =
          layout_text(d["placement"]) + " (leaves " + std::to_string(d["stranded"]["memory_slices"].get<int>()) +
          " memory and " + std::to_string(d["stranded"]["compute_slices"].get<int>()) + " compute slices unusable)";
    }
  }
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < r["layouts"].size(); ++i) rows.push_back({layout_text(r["layouts"][i]), dead_end[i]});
  const bool maximal = request.contains("maximal") && request["maximal"].get<bool>();
  if (fmt.csv && maximal) {
    for (auto& row : rows) row.pop_back();
    return render_csv({"layout"}, rows);
  }
  if (fmt.csv) return render_csv({"layout", "dead_end_placement"}, rows);
  std::ostringstream os;
  os << r["count"].get<size_t>() << (maximal ? " maximal" : "") << " combinations on " << r["target"].get<std::string>()
     << " (each with the placement that strands the least):\n";
  for (const auto& row : rows) {
    os << "  " << row[0] << "\n";
    if (!row[1].empty()) os << "    dead-end placement, admits no further instance: " << row[1] << "\n";
  }
  return os.str();
}

std::string render_mig_pack(const Json& r, const Json&, const OutputFormat& fmt) {
  if (r.contains("export")) return r["export"]["text"].get<std::string>();
  std::vector<std::vector<std::string>> rows;
  for (const auto& g : r["gpus"]) {
    std::string layout;
    for (const auto& u : g["layout"]) {
      layout += (layout.empty() ? "" : ", ") + u["profile"].get<std::string>() + "@" +
                std::to_string(u["start"].get<int>()) + " " +
                (u["request"].is_null() ? std::string("(busy)") : u["request"].get<std::string>());
    }
    rows.push_back({g["node"].get<std::string>(), std::to_string(g["index"].get<int>()), g["target"].get<std::string>(),
                    layout,
                    std::to_string(g["stranded"]["memory_slices"].get<int>()) + "/" +
                        std::to_string(g["stranded"]["compute_slices"].get<int>())});
  }
  const std::vector<std::string> header = {"node", "gpu", "target", "layout", "stranded mem/compute"};
  if (fmt.csv) return render_csv(header, rows);
  std::ostringstream os;
  os << "GPUs used: " << r["gpus_used"].get<int>() << " of " << r["fleet_gpus"].get<size_t>() << " (lower bound "
     << r["lower_bound"].get<int>() << ", gap " << r["gap"].get<int>() << ")";
  if (r["optimal"].get<bool>()) os << ", optimal";
  os << "\nbusy instances disturbed: " << r["disturbed"].get<int>()
     << "; stranded: " << r["stranded"]["memory_slices"].get<int>() << " memory slices, "
     << r["stranded"]["compute_slices"].get<int>() << " compute slices\n";
  os << "busy instances disturbed, lower bound at this GPU count: " << r["disturbed_lower_bound"].get<int>() << "\n\n";
  os << render_table(header, rows);
  if (!r["unplaced"].empty()) {
    os << "\nNot placed:\n";
    for (const auto& u : r["unplaced"]) {
      os << "  " << u["request"].get<std::string>() << " x" << u["count"].get<int>() << ": "
         << u["reason"].get<std::string>() << "\n";
    }
  }
  if (!r["reconfigurations"].empty()) {
    os << "\nReconfigurations:\n";
    for (const auto& c : r["reconfigurations"]) {
      os << "  " << c["node"].get<std::string>() << " gpu " << c["index"].get<int>() << ": destroy "
         << layout_text(c["destroy"]) << "; create " << layout_text(c["create"]) << "\n";
    }
  }
  for (const auto& n : r["notes"]) os << "note: " << n.get<std::string>() << "\n";
  for (const auto& w : r["warnings"]) os << "warning: " << w.get<std::string>() << "\n";
  return os.str();
}

int mig_check_status(const Json& r) { return r["valid"].get<bool>() ? 0 : exit_code(ErrorCode::kInvalidLayout); }

}  // namespace gpuplan::cli
