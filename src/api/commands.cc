#include "api/commands.h"
#include "api/catalog_json.h"

#include "gpuplan/cancel.h"
#include "gpuplan/catalog.h"
#include "gpuplan/model.h"

namespace gpuplan {

namespace api {
// bench_commands.cc (issue #16); declared here, not in commands.h, which every command family includes.
void register_bench_commands(CommandTable& table);
}  // namespace api

namespace {
const api::CommandTable& table() {
  static const api::CommandTable commands = [] {
    api::CommandTable t;
    api::register_catalog_commands(t);
    api::register_mig_commands(t);
    api::register_offer_commands(t);
    api::register_plan_commands(t);
    api::register_fit_commands(t);
    api::register_validate_commands(t);
    api::register_perf_commands(t);
    api::register_model_commands(t);
    api::register_vocabulary_commands(t);
    api::register_bench_commands(t);
    return t;
  }();
  return commands;
}
}  // namespace

Result<Json> run_command(const Context& ctx, std::string_view command, const Json& request) {
  if (!ctx.catalog) return Error{ErrorCode::kInternal, "no catalog loaded", ""};
  // Copying or printing JSON recurses: a request nested 10^5 deep would overflow the stack below.
  // 96 levels: an inline config.json (kMaxConfigDepth, 64) under the deepest request (mig.pack, 5).
  constexpr int kMaxRequestDepth = 96;
  if (json_depth(request, kMaxRequestDepth) > kMaxRequestDepth) {
    return limit_error(
        "the request nests arrays and objects deeper than " + std::to_string(kMaxRequestDepth) + " levels, the limit",
        "request");
  }
  for (const auto& c : table()) {
    if (c.name == command) {
      try {
        if (cancel_requested()) return cancelled_error();
        Result<Json> out = c.fn(ctx, request.is_null() ? Json::object() : request);
        // Loops stop early when cancelled: what they return then is partial, never an answer.
        if (cancel_requested()) return cancelled_error();
        return out;
      } catch (const std::exception& e) {
        // A library function must return errors as values; this is the last line of defence.
        return Error{ErrorCode::kInternal, std::string("internal error in ") + c.name + ": " + e.what(), ""};
      }
    }
  }
  std::string list;
  for (const auto& c : table()) list += (list.empty() ? "" : ", ") + c.name;
  return usage_error("unknown command '" + std::string(command) + "'; commands are " + list, "command");
}

std::vector<std::string> command_names() {
  std::vector<std::string> out;
  for (const auto& c : table()) out.push_back(c.name);
  return out;
}

std::string command_description(std::string_view command) {
  for (const auto& c : table()) {
    if (c.name == command) return c.description;
  }
  return "";
}

bool command_is_light(std::string_view command) {
  for (const auto& c : table()) {
    if (c.name == command) return c.light;
  }
  return false;
}

Json error_json(const Error& error) {
  Json e{{"code", error_code_name(error.code)}, {"message", error.message}};
  e["field"] = error.field.empty() ? Json(nullptr) : Json(error.field);
  return Json{{"error", std::move(e)}};
}

Json figure_json(const Catalog& catalog, const Figure& f, bool explain) {
  Json j;
  j["value"] = api::value_json(f);
  j["unit"] = f.unit;
  const Source* s = catalog.find_source(f.source_id);
  j["source"] = api::source_json(catalog, f.source_id);
  j["checked"] = f.checked;
  j["verified"] = s && s->authoritative();
  j["derived"] = f.is_derived();
  j["derivation"] = f.is_derived() ? Json(f.derived) : Json(nullptr);
  Json conflicts = Json::array();
  for (const auto& c : f.conflicts) {
    const Source* cs = catalog.find_source(c.source_id);
    Json cj{{"value", c.value}, {"source", Json{{"id", c.source_id}}}, {"note", c.note}};
    if (cs) {
      cj["source"]["title"] = cs->title;
      cj["source"]["url"] = cs->url;
    }
    conflicts.push_back(std::move(cj));
  }
  j["conflicts"] = std::move(conflicts);
  if (explain) {
    const SpecKey* k = catalog.find_spec_key(f.key);
    j["explain"] = k ? k->explain : "";
  }
  return j;
}

}  // namespace gpuplan
