// mig.profiles, mig.check, mig.layouts and mig.pack.
#include <algorithm>
#include <cmath>
#include <map>

#include "api/catalog_json.h"
#include "api/commands.h"
#include "core/request.h"
#include "gpuplan/mig.h"
#include "gpuplan/mig_pack.h"
#include "mig/table_model.h"

namespace gpuplan::api {

namespace {

Result<TargetRef> mig_target(const Context& ctx, const Request& req) {
  GPUPLAN_TRY(name, req.text("gpu"));
  if (name.empty()) return usage_error("give a MIG-capable GPU, e.g. a100-40gb-sxm4", "gpu");
  GPUPLAN_TRY(ref, ctx.catalog->resolve(name));
  if (!ref.mig_table) return not_found_error(ref.gpu->id + " does not support MIG", "gpu");
  return ref;
}

Json placements_json(const MigTable& t, const std::vector<mig::Placed>& layout) {
  Json out = Json::array();
  for (const auto& p : layout) out.push_back(Json{{"profile", t.profiles[p.profile].name}, {"start", p.start}});
  return out;
}

Result<Json> mig_profiles(const Context& ctx, const Json& body) {
  Request req(body, "mig.profiles");
  GPUPLAN_CHECK(req.check_keys());
  GPUPLAN_TRY(ref, mig_target(ctx, req));
  Json out{{"target", ref.gpu->id}};
  out.update(mig_table_json(*ctx.catalog, *ref.mig_table));
  return out;
}

// Compute instances as the layout grammar writes them: ["1c", "2c"].
Json compute_instances_json(const std::vector<int>& slices) {
  Json cis = Json::array();
  for (int c : slices) cis.push_back(std::to_string(c) + "c");
  return cis;
}

// The layout as parsed, one entry per instance in the order given (start null where gpuplan chooses),
// valid or not: what the page redraws from, so that it needs no layout grammar of its own.
Json entries_json(const std::vector<mig::LayoutEntry>& entries) {
  Json out = Json::array();
  for (const auto& e : entries) {
    Json ej{{"profile", e.profile}, {"start", e.start ? Json(*e.start) : Json(nullptr)}};
    if (!e.compute_slices.empty()) ej["compute_instances"] = compute_instances_json(e.compute_slices);
    out.push_back(std::move(ej));
  }
  return out;
}

Result<Json> mig_check(const Context& ctx, const Json& body) {
  const Request req(body, "mig.check");
  GPUPLAN_CHECK(req.check_keys());
  GPUPLAN_TRY(ref, mig_target(ctx, req));
  GPUPLAN_TRY(text, req.text("layout"));
  if (text.empty()) return usage_error("give a layout, e.g. 3g.20gb@4,2g.10gb@0,1g.5gb", "layout");
  GPUPLAN_TRY(entries, mig::parse_layout(text));
  GPUPLAN_TRY(result, mig::check_layout(*ref.mig_table, entries));
  const MigTable& t = *ref.mig_table;
  Json placements = Json::array();
  for (size_t i = 0; i < result.placements.size(); ++i) {
    Json pj{{"profile", t.profiles[result.placements[i].profile].name}, {"start", result.placements[i].start}};
    if (!result.compute_instances[i].empty())
      pj["compute_instances"] = compute_instances_json(result.compute_instances[i]);
    placements.push_back(std::move(pj));
  }
  Json out{{"valid", result.valid},
           {"reason", result.valid ? Json(nullptr) : Json(result.reason)},
           {"rule", result.valid ? Json(nullptr) : Json(std::string(mig::rule_name(result.rule)))},
           {"target", ref.gpu->id},
           {"placements", std::move(placements)},
           {"entries", entries_json(entries)},
           {"commands", result.commands}};
  if (result.valid) {
    const auto st = mig::stranded(t, result.placements);
    out["stranded"] = Json{{"memory_slices", st.memory_slices}, {"compute_slices", st.compute_slices}};
  }
  return out;
}

Result<Json> mig_layouts(const Context& ctx, const Json& body) {
  Request req(body, "mig.layouts");
  GPUPLAN_CHECK(req.check_keys());
  GPUPLAN_TRY(ref, mig_target(ctx, req));
  GPUPLAN_TRY(maximal, req.boolean("maximal"));
  const MigTable& t = *ref.mig_table;
  auto model = mig::table_model(t);
  if (!model) return Error{ErrorCode::kInternal, "MIG table " + t.id + " is too large", ""};
  // One entry per combination (profile counts), placed with the least stranded capacity. With
  // --maximal, only combinations that no valid combination strictly contains (what the packer uses:
  // a second 1g.5gb still joins 3g.20gb + 2g.10gb + 1g.5gb on an A100, so that one is not maximal).
  // A combination that is not maximal but has a placement admitting no further instance gets that
  // placement as a dead end: capacity stranded by placement, not by the combination.
  Json layouts = Json::array();
  Json stranded = Json::array();
  Json dead_ends = Json::array();
  for (const auto& [counts, indices] : model->by_counts) {
    if (std::all_of(counts.begin(), counts.end(), [](int c) { return c == 0; })) continue;
    const bool combination_maximal = mig::is_maximal(t, model->layouts[indices.front()]);
    if (maximal && !combination_maximal) continue;
    int best = indices.front();
    int dead_end = -1;
    for (int i : indices) {
      if (model->stranded_total(i) < model->stranded_total(best)) best = i;
      if (!combination_maximal && dead_end < 0 && mig::is_dead_end(t, model->layouts[i])) dead_end = i;
    }
    if (dead_end >= 0) {
      const auto& st = model->stranded[dead_end];
      dead_ends.push_back(
          Json{{"layout", layouts.size()},
               {"placement", placements_json(t, model->layouts[dead_end])},
               {"stranded", Json{{"memory_slices", st.memory_slices}, {"compute_slices", st.compute_slices}}}});
    }
    const auto& st = model->stranded[best];
    stranded.push_back(Json{{"memory_slices", st.memory_slices}, {"compute_slices", st.compute_slices}});
    layouts.push_back(placements_json(t, model->layouts[best]));
  }
  return Json{{"target", ref.gpu->id},           {"table", t.id},
              {"count", layouts.size()},         {"layouts", std::move(layouts)},
              {"stranded", std::move(stranded)}, {"dead_ends", std::move(dead_ends)}};
}

// A fleet or requests input: an inline object, YAML text, or one file as [{name, text}] (what the
// CLI's --fleet FILE sends: the library never reads files). The name goes into error messages.
struct Input {
  std::string name;
  std::string text;
};
Result<Input> input_text(const Request& req, const char* key) {
  if (!req.has(key)) return usage_error(std::string("give --") + key + " FILE (or '" + key + "' inline)", key);
  const Json& v = req.raw(key);
  if (v.is_string()) return Input{key, v.get<std::string>()};
  if (v.is_object()) return Input{key, v.dump()};
  if (v.is_array() && v.size() == 1 && v[0].is_object() && v[0].contains("text") && v[0]["text"].is_string() &&
      (!v[0].contains("name") || v[0]["name"].is_string())) {  // value("name", ...) throws on a non-string
    return Input{v[0].contains("name") ? v[0]["name"].get<std::string>() : std::string(key),
                 v[0]["text"].get<std::string>()};
  }
  return usage_error(std::string("'") + key + "' must be YAML text, an object, or one file [{name, text}]", key);
}

Json unit_json(const mig::Fleet& fleet, const std::vector<mig::PackRequest>& requests, const mig::GpuPlan& plan,
               const mig::PlacedUnit& u) {
  const mig::FleetGpu& g = fleet.gpus[plan.gpu];
  Json j{{"profile", g.table->profiles[u.placed.profile].name}, {"start", u.placed.start}};
  if (u.request >= 0) {
    j["request"] = requests[u.request].name;
    if (!requests[u.request].tenant.empty()) j["tenant"] = requests[u.request].tenant;
  } else {
    const mig::ExistingInstance* src = nullptr;
    if (u.existing >= 0) src = &g.instances[u.existing];
    if (u.moved_from_gpu >= 0) src = &fleet.gpus[u.moved_from_gpu].instances[u.moved_from_instance];
    j["request"] = src && !src->name.empty() ? Json(src->name) : Json(nullptr);
    j["busy"] = true;
  }
  j["existing"] = u.existing >= 0;
  if (u.moved_from_gpu >= 0) {
    const auto& from = fleet.gpus[u.moved_from_gpu];
    j["moved_from"] =
        Json{{"node", from.node}, {"index", from.index}, {"start", from.instances[u.moved_from_instance].placed.start}};
  }
  return j;
}

Json pack_json(const mig::Fleet& fleet, const std::vector<mig::PackRequest>& requests, const mig::PackResult& r) {
  Json gpus = Json::array();
  Json reconfig = Json::array();
  for (const auto& plan : r.gpus) {
    const mig::FleetGpu& g = fleet.gpus[plan.gpu];
    Json destroy = Json::array();
    for (int d : plan.destroy)
      destroy.push_back(Json{{"profile", g.table->profiles[g.instances[d].placed.profile].name},
                             {"start", g.instances[d].placed.start},
                             {"busy", g.instances[d].busy}});
    if (!plan.destroy.empty() || !plan.create.empty()) {
      reconfig.push_back(Json{{"node", g.node},
                              {"index", g.index},
                              {"destroy", destroy},
                              {"create", placements_json(*g.table, plan.create)}});
    }
    if (plan.layout.empty()) continue;
    Json layout = Json::array();
    for (const auto& u : plan.layout) layout.push_back(unit_json(fleet, requests, plan, u));
    gpus.push_back(Json{{"node", g.node},
                        {"index", g.index},
                        {"target", g.gpu->id},
                        {"layout", std::move(layout)},
                        {"stranded", Json{{"memory_slices", plan.stranded.memory_slices},
                                          {"compute_slices", plan.stranded.compute_slices}}},
                        {"commands", mig::create_commands(*g.table, plan.create, g.index)}});
  }
  Json unplaced = Json::array();
  for (const auto& u : r.unplaced) {
    unplaced.push_back(Json{{"request", requests[u.request].name}, {"count", u.count}, {"reason", u.reason}});
  }
  const int gap = r.gpus_used - r.lower_bound;
  return Json{
      {"gpus_used", r.gpus_used},
      {"lower_bound", r.lower_bound},
      {"lp_bound", std::round(r.lp_bound * 1000) / 1000},
      {"gap", gap},
      {"gap_percent", r.lower_bound > 0 ? std::round(1000.0 * gap / r.lower_bound) / 10 : 0.0},
      {"optimal", r.exact || gap == 0},
      {"fleet_gpus", fleet.gpus.size()},
      {"disturbed", r.disturbed},
      {"disturbed_lower_bound", r.disturbed_lower_bound},
      {"stranded", Json{{"memory_slices", r.stranded_memory_slices}, {"compute_slices", r.stranded_compute_slices}}},
      {"gpus", std::move(gpus)},
      {"unplaced", std::move(unplaced)},
      {"reconfigurations", std::move(reconfig)},
      {"notes", r.notes},
      {"warnings", fleet.warnings}};
}

Result<Json> mig_pack(const Context& ctx, const Json& body) {
  Request req(body, "mig.pack");
  GPUPLAN_CHECK(req.check_keys());
  GPUPLAN_TRY(fleet_text, input_text(req, "fleet"));
  GPUPLAN_TRY(requests_text, input_text(req, "requests"));
  GPUPLAN_TRY(keep, req.boolean("keep_existing"));
  GPUPLAN_TRY(format, req.text("export"));
  GPUPLAN_TRY(fleet, mig::parse_fleet(*ctx.catalog, fleet_text.name, fleet_text.text));
  GPUPLAN_TRY(requests, mig::parse_requests(*ctx.catalog, requests_text.name, requests_text.text));
  mig::PackOptions options;
  options.keep_existing = keep;
  GPUPLAN_TRY(result, mig::pack(*ctx.catalog, fleet, requests, options));
  Json out = pack_json(fleet, requests, result);
  if (!format.empty()) {
    std::string text = format == "mig-parted" ? mig::export_mig_parted(fleet, result)
                       : format == "k8s"      ? mig::export_kubernetes(fleet, requests, result)
                                              : mig::export_slurm(fleet, result);
    out["export"] = Json{{"format", format}, {"text", std::move(text)}};
  }
  return out;
}

}  // namespace

void register_mig_commands(CommandTable& table) {
  table.push_back({"mig.profiles", "The MIG profile table of a GPU", mig_profiles, true});
  table.push_back({"mig.check", "Check a layout (3g.20gb@4,2g.10gb@0,1g.5gb); exit 5 when invalid", mig_check});
  table.push_back({"mig.layouts", "Every valid combination of instances, with placements", mig_layouts, true});
  table.push_back({"mig.pack", "Place MIG requests on the fewest GPUs of a fleet", mig_pack});
}

}  // namespace gpuplan::api
