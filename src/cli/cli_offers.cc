// `gpuplan offers list`.
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/cli.h"
#include "gpuplan/offers.h"

namespace gpuplan::cli {

std::string render_offers_list(const Json& r, const Json&, const OutputFormat& fmt) {
  const bool spot = r["spot"].get<bool>();
  std::vector<std::string> header = {
      "offer",    "target",   "gpus", "link", spot ? "spot_usd_h" : "usd_h", spot ? "spot_usd_gpu_h" : "usd_gpu_h",
      "captured", "price_age"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& o : r["offers"]) {
    rows.push_back({o["offer"].get<std::string>() + (o.value("proxy", false) ? " [proxy]" : ""),
                    o["target"].get<std::string>(), fmt_value(o["gpus"]), o["interconnect"].get<std::string>(),
                    fmt_value(o[spot ? "spot_price_hour" : "price_hour"]),
                    fmt_value(o[spot ? "spot_price_per_gpu_hour" : "price_per_gpu_hour"]),
                    o["captured_at"].get<std::string>(),
                    o.contains("price_warning") ? o["price_warning"].get<std::string>()
                    : o["stale"].get<bool>()    ? "STALE"
                                                : ""});
  }
  if (fmt.csv) return render_csv(header, rows);
  std::string out = render_table(header, rows, {false, false, true, false, true, true, false, false});
  out += "\n" + std::to_string(r["offers"].size()) + " offers, cheapest per GPU-hour first; " +
         std::to_string(r["rejected"].size()) + " not usable (--all lists them), " +
         std::to_string(r["skipped"].size()) +
         " lines skipped. Prices are list prices per instance-hour, captured on the date shown; a list price older "
         "than --max-age (default 180 days) is kept with its age, --max-age DAYS drops it; a marketplace's ask "
         "older than 7 days is dropped.\n";
  for (const auto& o : r["offers"]) {
    if (o.value("proxy", false))
      out += "  proxy " + o["offer"].get<std::string>() + ": " + o["proxy_reason"].get<std::string>() + "\n";
  }
  for (const auto& s : r["skipped"]) {
    out += "  skipped " + s["file"].get<std::string>() + ":" + std::to_string(s["line"].get<int>()) + ": " +
           s["reason"].get<std::string>() + "\n";
  }
  return out;
}

namespace {

struct ImportCommand {
  CLI::App* app = nullptr;
  std::string file;
  std::string out;
  std::vector<std::string> maps;  // --map NAME=ID
  ImportOptions options;
};

ImportCommand& import_command() {
  static ImportCommand command;
  return command;
}

}  // namespace

void add_offers_import_command(CLI::App& app) {
  ImportCommand& c = import_command();
  CLI::App* offers = app.get_subcommand("offers");  // made by the `offers list` row before this one
  c.app = offers->add_subcommand("import",
                                 "Turn a downloaded price list (SkyPilot's vms.csv, or gpuplan's CSV) "
                                 "into gpuplan's offers CSV, each row with its source and date");
  c.app->add_option("file", c.file, "The price list")->required()->check(CLI::ExistingFile);
  c.app->add_option("--format", c.options.format, "skypilot (catalogs/v*/<cloud>/vms.csv) or csv (gpuplan's)")
      ->required()
      ->check(CLI::IsMember({"skypilot", "csv"}));
  c.app->add_option("--provider", c.options.provider,
                    "Provider of every row (skypilot: required; aws, gcp, lambda, ...)");
  c.options.captured_at = today_iso();
  c.app->add_option("--captured-at", c.options.captured_at, "ISO date the prices were read (default: today)")
      ->capture_default_str();
  c.app->add_option("--source", c.options.source, "Where the prices come from (default: the file's path)");
  c.app
      ->add_option("--price-kind", c.options.price_kind,
                   "list (a cloud's price list) or marketplace (asks that move hourly)")
      ->check(CLI::IsMember({"list", "marketplace"}));
  c.app->add_option("--map", c.maps,
                    "NAME=ID: the file's GPU name NAME is the catalog's ID (SkyPilot's A100 on lambda: "
                    "--map A100=a100-40gb-sxm4); repeatable");
  c.app->add_option("--out", c.out, "Write the offers here instead of stdout (then use it with --offers FILE)");
}

bool offers_import_requested() { return import_command().app && import_command().app->parsed(); }

int run_offers_import(const Context& ctx, const std::function<int(Error)>& report) {
  ImportCommand& c = import_command();
  std::ifstream in(c.file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return report(not_found_error("cannot read " + c.file, "file"));
  ImportOptions options = c.options;
  if (options.source.empty()) options.source = c.file;
  for (const auto& m : c.maps) {
    const size_t eq = m.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == m.size())
      return report(usage_error("--map '" + m + "' is not NAME=ID (A100=a100-40gb-sxm4)", "map"));
    options.gpu_map[m.substr(0, eq)] = m.substr(eq + 1);
  }
  auto r = import_offers(*ctx.catalog, c.file, text.str(), options);
  if (!r) return report(r.error());
  if (c.out.empty()) {
    std::cout << r->csv;
  } else {
    std::ofstream out(c.out, std::ios::binary);
    out << r->csv;
    if (!out) return report(not_found_error("cannot write " + c.out, "out"));
  }
  std::cerr << r->offers << " offers imported from " << c.file << " (captured " << options.captured_at << ", source "
            << options.source << "); " << r->skipped.size() << " lines skipped\n";
  for (const auto& s : r->skipped) std::cerr << "  skipped " << s.file << ":" << s.line << ": " << s.reason << "\n";
  return 0;
}

}  // namespace gpuplan::cli
