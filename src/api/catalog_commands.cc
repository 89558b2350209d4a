// catalog.list, catalog.show and compare.
#include <algorithm>
#include <cmath>

#include "api/catalog_json.h"
#include "api/commands.h"
#include "api/compare_value.h"
#include "core/format.h"
#include "core/request.h"
#include "gpuplan/target.h"

namespace gpuplan::api {

namespace {

Result<Json> catalog_list(const Context& ctx, const Json& body) {
  Request req(body, "catalog.list");
  GPUPLAN_CHECK(req.check_keys());
  GPUPLAN_TRY(vendor, req.text("vendor"));
  GPUPLAN_TRY(arch, req.text("architecture"));
  GPUPLAN_TRY(min_mem, req.real("min_memory_gb", 0));
  GPUPLAN_TRY(mig_only, req.boolean("mig"));
  GPUPLAN_TRY(include_mig, req.boolean("include_mig"));
  Json rows = Json::array();
  for (const auto& ref : ctx.catalog->all_targets(include_mig)) {
    const Gpu& g = *ref.gpu;
    if (!vendor.empty() && g.vendor != vendor) continue;
    if (!arch.empty() && g.architecture != arch) continue;
    if (mig_only && !ref.mig_table) continue;
    Target t{ref, 1, Link::kPcie};
    const double mem_gb = t.memory_total_bytes() / kBytesPerGb;
    const double marketing_gb = ref.profile ? mem_gb : g.number("memory_gb", mem_gb);
    if (marketing_gb < min_mem) continue;
    Json row{{"id", ref.id()},
             {"name", t.name()},
             {"vendor", g.vendor},
             {"architecture", g.architecture},
             {"form_factor", g.form_factor},
             {"memory_gb", round_sig(marketing_gb)},
             {"memory_bandwidth_gbps", round_sig(t.memory_bandwidth_gbps())}};
    auto rate = [&](Precision p) -> Json {
      auto v = t.peak_tflops(p);
      return v ? Json(round_sig(*v)) : Json(nullptr);
    };
    row["bf16_tensor_tflops"] = rate(Precision::kBf16);
    row["fp8_tensor_tflops"] = rate(Precision::kFp8);
    row["tdp_w"] = round_sig(t.tdp_w());
    row["mig"] = ref.mig_table != nullptr;
    row["mig_profile"] = ref.profile != nullptr;
    rows.push_back(std::move(row));
  }
  return Json{{"gpus", std::move(rows)}};
}

Result<Json> catalog_show(const Context& ctx, const Json& body) {
  Request req(body, "catalog.show");
  GPUPLAN_CHECK(req.check_keys());
  GPUPLAN_TRY(name, req.text("gpu"));
  GPUPLAN_TRY(explain, req.boolean("explain"));
  if (name.empty())
    return usage_error("give a GPU or MIG profile, e.g. a100-40gb-sxm4 or a100-40gb-sxm4/3g.20gb", "gpu");
  GPUPLAN_TRY(ref, ctx.catalog->resolve(name));
  const Gpu& g = *ref.gpu;
  Target t{ref, 1, Link::kPcie};
  Json specs = Json::object();
  for (const auto& f : target_figures(*ctx.catalog, ref)) specs[f.key] = figure_json(*ctx.catalog, f, explain);
  Json out{{"id", ref.id()},           {"name", t.name()},
           {"vendor", g.vendor},       {"architecture", g.architecture},
           {"chip", g.chip},           {"form_factor", g.form_factor},
           {"interface", g.interface}, {"lifecycle", g.lifecycle},
           {"aliases", g.aliases},     {"parent", ref.profile ? Json(g.id) : Json(nullptr)},
           {"data_file", g.file},      {"specs", std::move(specs)}};
  if (ref.profile) {
    out["mig"] = nullptr;
    Json p = mig_table_json(*ctx.catalog, *ref.mig_table)["profiles"];
    for (const auto& pj : p) {
      if (pj["name"] == ref.profile->name) out["mig_profile"] = pj;
    }
  } else {
    out["mig"] = ref.mig_table ? mig_table_json(*ctx.catalog, *ref.mig_table) : Json(nullptr);
  }
  return out;
}

// Derived metrics for a comparison. Each has a name with its unit.
struct Derived {
  const char* name;
  const char* unit;
  const char* explain;
};

// Targets one compare takes: every GPU and MIG slice of the catalog is about 60, and a table wider
// than that is unreadable; 50,000 copies of one GPU made a 96 MB answer.
constexpr size_t kMaxCompareTargets = 64;

Result<Json> compare(const Context& ctx, const Json& body) {
  // Only `gpu` is the comparison's own; offers and workload keys add value metrics (compare_value.cc).
  Request req(body, "compare");
  GPUPLAN_CHECK(req.check_keys());
  GPUPLAN_TRY(names, req.words("gpu"));
  if (names.empty()) return usage_error("compare needs at least one GPU or MIG profile", "gpu");
  if (names.size() > kMaxCompareTargets) {
    return limit_error("compare takes at most " + std::to_string(kMaxCompareTargets) + " GPUs or MIG profiles, got " +
                           std::to_string(names.size()) + " (limit kMaxCompareTargets); compare fewer at a time",
                       "gpu");
  }
  std::vector<TargetRef> refs;
  refs.reserve(names.size());
  for (const auto& n : names) {
    GPUPLAN_TRY(r, ctx.catalog->resolve(n));
    refs.push_back(r);
  }
  // Keys shown, in contract order, limited to numeric figures some target has.
  std::vector<std::string> keys;
  std::vector<std::vector<Figure>> figs;
  figs.reserve(refs.size());
  for (const auto& r : refs) figs.push_back(target_figures(*ctx.catalog, r));
  for (const auto& k : ctx.catalog->spec_keys()) {
    bool any = false;
    for (const auto& fv : figs) {
      for (const auto& f : fv) any = any || (f.key == k.key && (f.number || !f.text.empty()));
    }
    if (any) keys.push_back(k.key);
  }
  Json targets = Json::array();
  std::vector<std::map<std::string, double>> numbers(refs.size());
  for (size_t i = 0; i < refs.size(); ++i) {
    Target t{refs[i], 1, Link::kPcie};
    Json specs = Json::object();
    for (const auto& f : figs[i]) {
      specs[f.key] = value_json(f);
      if (f.number) numbers[i][f.key] = *f.number;
    }
    // Derived metrics: ridge point (FLOP per byte at which a kernel turns compute-bound), per watt.
    Json derived = Json::object();
    const double bw = t.memory_bandwidth_gbps();
    const double watts = t.tdp_w();
    for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16, Precision::kFp8, Precision::kInt8}) {
      const auto rate = t.peak_tflops(p);
      if (!rate || *rate <= 0) continue;
      const std::string name(precision_name(p));
      if (bw > 0) derived["ridge_" + name + "_flop_per_byte"] = round_sig(*rate * kFlopPerTflop / (bw * kBytesPerGb));
      if (watts > 0) derived[name + "_tflops_per_w"] = round_sig(*rate / watts);
    }
    if (watts > 0 && bw > 0) derived["bandwidth_gbps_per_w"] = round_sig(bw / watts);
    if (watts > 0) derived["memory_gb_per_w"] = round_sig(t.memory_total_bytes() / kBytesPerGb / watts);
    for (auto it = derived.begin(); it != derived.end(); ++it)
      numbers[i]["derived." + it.key()] = it.value().get<double>();
    targets.push_back(
        Json{{"id", refs[i].id()}, {"name", t.name()}, {"specs", std::move(specs)}, {"derived", std::move(derived)}});
  }
  // Difference in percent against the first target, for every numeric figure both have.
  for (size_t i = 1; i < refs.size(); ++i) {
    Json diff = Json::object();
    for (const auto& [k, v] : numbers[i]) {
      auto it = numbers[0].find(k);
      if (it == numbers[0].end() || it->second == 0 || k == "release_year") continue;
      diff[k] = round_sig((v - it->second) / it->second * 100.0, 3);
    }
    targets[i]["diff_percent_vs_first"] = std::move(diff);
  }
  Json out{{"baseline", refs[0].id()}, {"keys", keys}, {"targets", std::move(targets)}};
  GPUPLAN_CHECK(add_value_metrics(ctx, body, refs, out));
  return out;
}

}  // namespace

void register_catalog_commands(CommandTable& table) {
  table.push_back({"catalog.list", "List GPUs (and with --include-mig, MIG profiles)", catalog_list, true});
  table.push_back(
      {"catalog.show", "Every figure of a GPU or MIG profile, with unit, source and date", catalog_show, true});
  table.push_back({"compare", "Compare GPUs and MIG profiles side by side", compare});
}

}  // namespace gpuplan::api
