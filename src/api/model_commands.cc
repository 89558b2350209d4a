// models.list: the built-in model zoo, with each model's family, computed and published parameter
// counts and where the model comes from (data/models/zoo.yaml, include/gpuplan/model.h `zoo_model`).
#include "api/commands.h"
#include "core/request.h"
#include "gpuplan/cancel.h"
#include "gpuplan/model.h"

namespace gpuplan::api {

namespace {

const char* kind_name(ModelKind k) {
  switch (k) {
    case ModelKind::kDecoder:
      return "decoder";
    case ModelKind::kEncoder:
      return "encoder";
    case ModelKind::kCnn:
      return "cnn";
  }
  return "decoder";
}

Json text_or_null(const std::string& s) { return s.empty() ? Json(nullptr) : Json(s); }

Result<Json> models_list(const Context&, const Json& request) {
  GPUPLAN_CHECK(Request(request, "models.list").check_keys());
  Json models = Json::array();
  for (const ZooEntry& e : zoo_entries()) {
    if (cancel_requested()) break;
    GPUPLAN_TRY(m, zoo_model(e.id));
    const bool layers = e.file.ends_with(".yaml");
    Json j{{"id", e.id}, {"family", m->architecture}, {"kind", kind_name(m->kind)}, {"parameters", m->parameters}};
    j["active_parameters"] = m->experts > 0 ? Json(m->active_parameters) : Json(nullptr);
    j["published_parameters"] = e.published_parameters > 0 ? Json(e.published_parameters) : Json(nullptr);
    j["published_source"] = text_or_null(e.published_source);
    j["hf_repo"] = text_or_null(e.hf_repo);
    j["file"] = e.file;
    j["format"] = layers ? "layers" : "config.json";
    models.push_back(std::move(j));
  }
  return Json{{"models", std::move(models)}};
}

}  // namespace

void register_model_commands(CommandTable& table) {
  table.push_back({"models.list", "List the zoo's models: family, parameters and source", models_list});
}

}  // namespace gpuplan::api
