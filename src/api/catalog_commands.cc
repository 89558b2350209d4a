// catalog.list, catalog.show and compare.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>

#include "api/catalog_json.h"
#include "api/commands.h"
#include "api/compare_value.h"
#include "core/format.h"
#include "core/request.h"
#include "gpuplan/target.h"

namespace gpuplan::api {

namespace {

// --- what the market has available now (issue #14) ---------------------------------------------------------
// The request's `market` (a server with a store fills it in, as it fills plan's): {"offers": [...] as GET
// /offers?source=market lists them, "last_available": [{target, region, at_ms}] from the store}. The
// command stays pure: it reads only these rows.

// Rows of one snapshot: the market lists at most 10,000 per call (market.h kMaxListRows); a hand-written
// request gets the same bound (kLimit naming `market`).
constexpr size_t kMaxAvailabilityRows = 10'000;
// Micro-units of the currency in one unit (prices are dollars per hour in JSON, micro-dollars in the store).
constexpr double kMicrosPerUnit = 1e6;
constexpr int64_t kMillisPerSecond = 1000;

// Units free now of one target in one region, and the cheapest of them per GPU-hour (per slice-hour for a
// MIG profile). Offers of one provider share its inventory (a 1-GPU and an 8-GPU offer sell the same
// GPUs), so a provider counts the most any of its offers has free, and providers add up.
struct RegionAvailability {
  std::map<std::string, int64_t> free_by_provider;
  int64_t lowest_micros = 0;  // 0: none free
};
struct Availability {
  bool present = false;                                                        // the request carried a market
  std::map<std::string, std::map<std::string, RegionAvailability>> by_target;  // target -> region -> ...
  std::map<std::string, int64_t> last_at_ms;                                   // target -> latest over regions
};

int64_t json_int(const Json& row, const char* key, int64_t fallback) {
  if (!row.contains(key) || !row[key].is_number_integer()) return fallback;
  return row[key].get<int64_t>();
}
std::string json_text(const Json& row, const char* key) {
  return row.contains(key) && row[key].is_string() ? row[key].get<std::string>() : std::string();
}

// Reads the request's `market`; a row that is not a live offer with a known target is left out (plan
// and offers.list report such rows; here they only cannot count as available).
Result<Availability> read_availability(const Context& ctx, const Request& req) {
  Availability a;
  if (!req.has("market")) return a;
  const Json& m = req.raw("market");
  if (!m.is_object() || !m.contains("offers") || !m["offers"].is_array()) {
    return usage_error("'market' must be the market's availability: {\"offers\": [...], \"last_available\": [...]}",
                       "market");
  }
  const Json empty = Json::array();
  const Json& seen = m.contains("last_available") && m["last_available"].is_array() ? m["last_available"] : empty;
  if (m["offers"].size() > kMaxAvailabilityRows || seen.size() > kMaxAvailabilityRows) {
    return limit_error("'market' holds more than " + std::to_string(kMaxAvailabilityRows) +
                           " rows (the market lists at most that many per call)",
                       "market");
  }
  a.present = true;
  for (const auto& row : m["offers"]) {
    if (!row.is_object()) continue;
    auto ref = ctx.catalog->resolve(json_text(row, "target"));
    const int64_t gpus = json_int(row, "gpus", 1);
    const int64_t available = json_int(row, "available", 0);
    const int64_t price = json_int(row, "price_micros_per_hour", 0);
    if (!ref || gpus < 1 || available < 0 || price < 1 || (row.contains("active") && row["active"] == false)) continue;
    RegionAvailability& r = a.by_target[ref->id()][json_text(row, "region")];
    if (available == 0) continue;
    int64_t& free = r.free_by_provider[json_text(row, "provider")];
    free = std::max(free, available * gpus);
    const int64_t per_gpu = (price + gpus / 2) / gpus;  // nearest micro-unit
    if (r.lowest_micros == 0 || per_gpu < r.lowest_micros) r.lowest_micros = per_gpu;
  }
  for (const auto& row : seen) {
    if (!row.is_object()) continue;
    auto ref = ctx.catalog->resolve(json_text(row, "target"));
    const int64_t at = json_int(row, "at_ms", -1);
    if (!ref || at < 0) continue;
    int64_t& last = a.last_at_ms[ref->id()];
    last = std::max(last, at);
  }
  return a;
}

// Unix milliseconds as ISO 8601 UTC ("2026-12-01T19:20:00Z").
std::string iso_time(int64_t ms) {
  const auto t = static_cast<std::time_t>(ms / kMillisPerSecond);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// [{region, count, lowest_price_per_hour, lowest_price_micros_per_hour}] of one target, regions in order.
Json available_now_json(const Availability& a, const std::string& target) {
  Json out = Json::array();
  auto it = a.by_target.find(target);
  if (it == a.by_target.end()) return out;
  for (const auto& [region, r] : it->second) {
    int64_t count = 0;
    for (const auto& [provider, n] : r.free_by_provider) count += n;
    if (count == 0) continue;
    out.push_back(Json{{"region", region},
                       {"count", count},
                       {"lowest_price_per_hour", static_cast<double>(r.lowest_micros) / kMicrosPerUnit},
                       {"lowest_price_micros_per_hour", r.lowest_micros}});
  }
  return out;
}

// Adds `available_now` (and, when it is empty, `last_available_at`: ISO time or null when the market
// never saw the target free) to `row` for `target`; nothing without a market.
void add_availability(const Availability& a, const std::string& target, Json& row) {
  if (!a.present) return;
  row["available_now"] = available_now_json(a, target);
  if (row["available_now"].empty()) {
    auto it = a.last_at_ms.find(target);
    row["last_available_at"] = it == a.last_at_ms.end() ? Json(nullptr) : Json(iso_time(it->second));
  }
}

// A GPU's MIG profiles: {"3g.40gb": [...available_now...], ...} beside its own available_now.
void add_mig_availability(const Availability& a, const TargetRef& ref, Json& row) {
  if (!a.present || ref.profile || !ref.mig_table) return;
  Json by_profile = Json::object();
  for (const auto& p : ref.mig_table->profiles) by_profile[p.name] = available_now_json(a, ref.gpu->id + "/" + p.name);
  row["available_now_mig"] = std::move(by_profile);
}

Result<Json> catalog_list(const Context& ctx, const Json& body) {
  Request req(body, "catalog.list");
  GPUPLAN_CHECK(req.check_keys());
  GPUPLAN_TRY(availability, read_availability(ctx, req));
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
    add_availability(availability, ref.id(), row);
    add_mig_availability(availability, ref, row);
    rows.push_back(std::move(row));
  }
  return Json{{"gpus", std::move(rows)}};
}

Result<Json> catalog_show(const Context& ctx, const Json& body) {
  Request req(body, "catalog.show");
  GPUPLAN_CHECK(req.check_keys());
  GPUPLAN_TRY(name, req.text("gpu"));
  GPUPLAN_TRY(explain, req.boolean("explain"));
  GPUPLAN_TRY(availability, read_availability(ctx, req));
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
  add_availability(availability, ref.id(), out);
  add_mig_availability(availability, ref, out);
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
