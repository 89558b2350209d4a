#include "api/catalog_json.h"

#include <cmath>

#include "gpuplan/mig_pack.h"

namespace gpuplan::api {

Json source_json(const Catalog& catalog, const std::string& id) {
  const Source* s = catalog.find_source(id);
  if (!s) return Json{{"id", id}};
  Json j{{"id", s->id}, {"title", s->title}, {"url", s->url}};
  if (!s->revision.empty()) j["revision"] = s->revision;
  j["kind"] = s->kind;
  return j;
}

Json value_json(const Figure& f) {
  if (f.number) {
    const double v = *f.number;
    if (v == std::floor(v) && std::fabs(v) < 1e15) return static_cast<long long>(v);
    return v;
  }
  if (f.flag) return *f.flag;
  return f.text;
}

Json mig_table_json(const Catalog& catalog, const MigTable& t) {
  Json profiles = Json::array();
  for (const auto& p : t.profiles) {
    Json starts = Json::array();
    for (int s : p.placement_starts) starts.push_back(Json{{"start", s}, {"size", p.memory_slices}});
    Json pj{{"name", p.name},
            {"profile_id", p.profile_id},
            {"memory_slices", p.memory_slices},
            {"compute_slices", p.compute_slices},
            {"memory_mib", p.memory_mib},
            {"sm_count", p.sm_count},
            {"copy_engines", p.copy_engines},
            {"decoders", p.decoders},
            {"jpeg", p.jpeg},
            {"ofa", p.ofa},
            {"max_count", p.max_count},
            {"placements", std::move(starts)},
            {"media_extensions", p.media_extensions},
            {"kubernetes_resource", mig::kubernetes_resource(p.name)},
            {"source", source_json(catalog, p.source_id.empty() ? t.source_id : p.source_id)}};
    if (!p.note.empty()) pj["note"] = p.note;
    profiles.push_back(std::move(pj));
  }
  return Json{{"table", t.id},
              {"max_instances", t.max_instances},
              {"memory_slices", t.memory_slices},
              {"compute_slices", t.compute_slices},
              {"min_driver", t.min_driver},
              {"source", source_json(catalog, t.source_id)},
              {"profiles", std::move(profiles)}};
}

}  // namespace gpuplan::api
