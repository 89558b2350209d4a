// `gpuplan models list`: the built-in model zoo (the models.list command), and `gpuplan vocabulary`.
#include "cli/cli.h"

namespace gpuplan::cli {

namespace {

// Parameter counts print in billions in the table (the zoo spans 25.6 M to 405 B parameters).
constexpr double kParametersPerBillion = 1e9;

std::string billions(const Json& count) {
  if (!count.is_number()) return "-";
  return fmt_value(Json(count.get<double>() / kParametersPerBillion));
}

}  // namespace

std::string render_models_list(const Json& r, const Json&, const OutputFormat& fmt) {
  std::vector<std::vector<std::string>> rows;
  if (fmt.csv) {
    // CSV keeps the exact counts and the whole source text.
    const std::vector<std::string> header = {
        "id",      "family", "kind", "parameters", "active_parameters", "published_parameters", "published_source",
        "hf_repo", "file"};
    for (const auto& m : r["models"]) {
      rows.push_back({m["id"].get<std::string>(), m["family"].get<std::string>(), m["kind"].get<std::string>(),
                      fmt_value(m["parameters"]), fmt_value(m["active_parameters"]),
                      fmt_value(m["published_parameters"]), fmt_value(m["published_source"]), fmt_value(m["hf_repo"]),
                      m["file"].get<std::string>()});
    }
    return render_csv(header, rows);
  }
  const std::vector<std::string> header = {"id", "family", "kind", "params_b", "active_b", "published_b", "source"};
  for (const auto& m : r["models"]) {
    rows.push_back({m["id"].get<std::string>(), m["family"].get<std::string>(), m["kind"].get<std::string>(),
                    billions(m["parameters"]), billions(m["active_parameters"]), billions(m["published_parameters"]),
                    m["hf_repo"].is_string() ? m["hf_repo"].get<std::string>() : m["file"].get<std::string>()});
  }
  std::string out = render_table(header, rows, {false, false, false, true, true, true, false});
  out += "\n" + std::to_string(r["models"].size()) +
         " models. params_b is computed from each config (every tensor); published_b is the count its authors "
         "or the Hub publish (--json or --csv give the source). Any Hugging Face config.json path works as "
         "--model too.\n";
  return out;
}

std::string render_vocabulary(const Json& r, const Json&, const OutputFormat& fmt) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, words] : r["vocabularies"].items()) {
    std::string names;
    for (const auto& w : words) names += (names.empty() ? "" : ", ") + w.get<std::string>();
    rows.push_back({name, names});
  }
  if (fmt.csv) return render_csv({"vocabulary", "names"}, rows);
  return render_table({"vocabulary", "names"}, rows) + "\n" + std::to_string(r["options"].size()) +
         " options (--json lists each with its type, range, default, commands and help).\n";
}

}  // namespace gpuplan::cli
