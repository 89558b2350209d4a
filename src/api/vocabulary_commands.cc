// `vocabulary` (GET /api/v1/vocabulary): every declared option (data/options.yaml) with its type,
// range, default and help, and the names of every vocabulary the library owns (tasks, formats,
// engines, ...), MIG profiles per GPU and the zoo's model ids. The page fills its lists from it; the
// CLI's typed options and web/openapi.json's request schemas are made from the same declaration.
#include <algorithm>

#include "api/commands.h"
#include "api/vocabulary.h"
#include "core/request.h"
#include "gpuplan/catalog.h"
#include "gpuplan/formats.h"
#include "gpuplan/market_vocabulary.h"
#include "gpuplan/model.h"
#include "gpuplan/vocabulary.h"
#include "gpuplan/workload.h"

namespace gpuplan::api {

const std::vector<std::string_view>& vocabulary_ids() {
  static const std::vector<std::string_view> ids = [] {
    std::vector<std::string_view> out;
    for (const auto& v : vocabularies()) out.push_back(v.key);
    return out;
  }();
  return ids;
}

Result<std::vector<std::string>> vocabulary_names(std::string_view id) {
  const Vocabulary* v = vocabulary(id);
  if (!v) v = market::market_vocabulary(id);  // the market's bodies (tenant_kind, role, mig_policy, ...)
  if (!v) {
    return Error{ErrorCode::kInternal, "unknown vocabulary '" + std::string(id) + "' in data/options.yaml", ""};
  }
  std::vector<std::string> out;
  for (const auto& e : v->entries) out.emplace_back(e.name);
  return out;
}

Result<std::vector<std::string>> option_words(const OptionSpec& o) {
  if (!o.vocabulary.empty()) return vocabulary_names(o.vocabulary);
  return o.values;
}

Json option_json(const OptionSpec& o) {
  Json j{{"name", o.name}, {"type", std::string(option_type_name(o.type))}};
  if (!o.unit.empty()) j["unit"] = o.unit;
  j["default"] = o.default_value;
  if (o.range.min || o.range.max) {
    Json r{{"text", o.range.text()}};
    r["min"] = o.range.min ? Json(*o.range.min) : Json(nullptr);
    r["max"] = o.range.max ? Json(*o.range.max) : Json(nullptr);
    r["min_open"] = o.range.min_open;
    r["max_open"] = o.range.max_open;
    j["range"] = std::move(r);
  }
  if (!o.vocabulary.empty()) j["vocabulary"] = o.vocabulary;
  if (auto words = option_words(o); words && !words->empty()) j["values"] = *words;
  if (o.max_length > 0) j["max_length"] = o.max_length;
  if (o.max_items > 0) j["max_items"] = o.max_items;
  if (!o.items.empty()) j["items"] = o.items;
  if (!o.group.empty()) j["group"] = o.group;
  j["commands"] = o.commands;
  if (!o.required.empty()) j["required"] = o.required;
  j["cli"] = o.cli ? Json("--" + o.cli_name()) : Json(nullptr);
  j["help"] = o.help;
  return j;
}

namespace {

// The schema of one option; `strict`: its command reads JSON types only (no "a,b" text for a list).
Json property_schema(const OptionSpec& o, bool strict) {
  Json s;
  switch (o.type) {
    case OptionType::kInt:
    case OptionType::kNumber: {
      s["type"] = o.type == OptionType::kInt ? "integer" : "number";
      if (o.range.min) s[o.range.min_open ? "exclusiveMinimum" : "minimum"] = *o.range.min;
      if (o.range.max) s[o.range.max_open ? "exclusiveMaximum" : "maximum"] = *o.range.max;
      break;
    }
    case OptionType::kBool:
    case OptionType::kFlag:
      s["type"] = "boolean";
      break;
    case OptionType::kString:
      s["type"] = "string";
      if (o.max_length > 0) s["maxLength"] = o.max_length;
      break;
    case OptionType::kEnum: {
      s["type"] = "string";
      auto words = option_words(o);
      if (words && !words->empty() && o.vocabulary == "engine") {
        // NAME@VERSION (src/fit/workload.cc, parse_engine_version): a word of the vocabulary, or one with a
        // release or build date of one to three numbers separated by '.' or '-'.
        std::string names;
        for (const auto& word : *words) {
          for (const char ch : word) {
            if (ch == '.' || ch == '-' || ch == '+') names += '\\';
            names += ch;
          }
          names += '|';
        }
        names.pop_back();
        s["pattern"] = "^(" + names + ")(@[0-9]{1,5}([.-][0-9]{1,5}){0,2})?$";
      } else if (words && !words->empty()) {
        s["enum"] = *words;
      }
      if (o.max_length > 0) s["maxLength"] = o.max_length;
      break;
    }
    case OptionType::kList: {
      if (!o.items.empty()) {  // a list of objects, each a request of the items' command
        s["type"] = "array";
        auto item = request_schema(o.items);
        s["items"] = item ? *item : Json{{"type", "object"}};
        if (o.max_items > 0) s["maxItems"] = o.max_items;
        break;
      }
      Json item{{"type", "string"}};
      if (auto words = option_words(o); words && !words->empty()) item["enum"] = *words;
      if (o.max_length > 0) item["maxLength"] = o.max_length;
      Json list{{"type", "array"}, {"items", item}};
      if (o.max_items > 0) list["maxItems"] = o.max_items;
      if (strict) {  // a JSON list only: no "a,b" text
        s = std::move(list);
      } else {
        s["oneOf"] = Json::array({std::move(list), Json{{"type", "string"}}});
      }
      break;
    }
    case OptionType::kFiles: {
      Json file = Json::object();
      file["type"] = "object";
      file["required"] = Json::array({"text"});
      file["properties"] = Json{{"name", Json{{"type", "string"}}}, {"text", Json{{"type", "string"}}}};
      Json files = Json::object();
      files["type"] = "array";
      files["items"] = std::move(file);
      s["oneOf"] = Json::array({std::move(files), Json{{"type", "string"}}});
      break;
    }
    case OptionType::kObject:
      s["type"] = "object";
      break;
  }
  std::string description = o.help;
  if (!o.unit.empty()) description += " (" + o.unit + ")";
  s["description"] = description;
  if (!o.default_value.is_null()) s["default"] = o.default_value;
  return s;
}

}  // namespace

Result<Json> request_schema(std::string_view command) {
  GPUPLAN_TRY(table, option_table());
  Json props = Json::object();
  Json required = Json::array();
  for (const OptionSpec* o : table->of_command(command)) {
    props[o->name] = property_schema(*o, table->strict(command));
    if (o->required_by(command)) required.push_back(o->name);
  }
  Json s{{"type", "object"}, {"additionalProperties", table->open(command)}};
  if (!required.empty()) s["required"] = std::move(required);
  s["properties"] = std::move(props);
  return s;
}

Result<Json> openapi_with_declared_requests(Json doc) {
  GPUPLAN_TRY(table, option_table());
  if (!doc.contains("paths") || !doc["paths"].is_object()) {
    return Error{ErrorCode::kInvalidData, "the OpenAPI document has no paths", "paths"};
  }
  for (auto& [path, item] : doc["paths"].items()) {
    for (auto& [method, op] : item.items()) {
      if (!op.is_object() || !op.contains("operationId")) continue;
      std::string command = op["operationId"].get<std::string>();
      std::replace(command.begin(), command.end(), '_', '.');
      if (table->of_command(command).empty()) continue;
      if (op.contains("requestBody")) {
        GPUPLAN_TRY(schema, request_schema(command));
        op["requestBody"]["content"]["application/json"]["schema"] = schema;
      }
      if (op.contains("parameters")) {
        for (auto& p : op["parameters"]) {
          if (!p.contains("name") || !p["name"].is_string()) continue;
          const std::string name = p["name"].get<std::string>();
          const OptionSpec* o = table->find(name, command);
          // Path parameters named differently ({id} of catalog.show is its gpu) keep their text.
          if (!o) continue;
          Json s = property_schema(*o, table->strict(command));
          p["description"] = s["description"];
          s.erase("description");
          p["schema"] = s;
          if (o->required_by(command)) p["required"] = true;
        }
      }
    }
  }
  return doc;
}

namespace {

Result<Json> vocabulary_command(const Context& ctx, const Json& body) {
  GPUPLAN_CHECK(Request(body, "vocabulary").check_keys());
  GPUPLAN_TRY(table, option_table());
  Json options = Json::array();
  for (const auto& o : table->all()) options.push_back(option_json(o));
  Json vocabularies = Json::object();
  for (auto id : vocabulary_ids()) {
    GPUPLAN_TRY(names, vocabulary_names(id));
    vocabularies[std::string(id)] = names;
  }
  // The market's (tenant_kind, role, scope, interconnect, mig_policy, ...), by their ids.
  for (const auto& v : market::kMarketVocabularies) {
    GPUPLAN_TRY(names, vocabulary_names(v.key));
    vocabularies[std::string(v.key)] = names;
  }
  // Word lists declared in data/options.yaml itself (objective, export, kind), by option name. A vocabulary
  // of that name comes first: the node's `mig_policy` (static, dynamic) is a subset of the GPU's
  // vocabulary `mig_policy` (none, static, dynamic), which the page's selects read.
  for (const auto& o : table->all()) {
    if (!o.values.empty() && !vocabularies.contains(o.name)) vocabularies[o.name] = o.values;
  }
  Json mig = Json::object();
  Json gpus = Json::array();
  for (const auto& g : ctx.catalog->gpus()) {
    gpus.push_back(g.id);
    if (g.mig_table.empty()) continue;
    const MigTable* t = ctx.catalog->find_mig_table(g.mig_table);
    if (!t) continue;
    Json names = Json::array();
    for (const auto& p : t->profiles) names.push_back(p.name);
    mig[g.id] = std::move(names);
  }
  Json models = Json::array();
  for (const auto& e : zoo_entries()) models.push_back(e.id);
  // Each task with what the library picks by default for it (QLoRA: a quantized base, checkpointing),
  // read through parse_workload itself so that the page never restates a default.
  Json tasks = Json::array();
  GPUPLAN_TRY(task_names, vocabulary_names("task"));
  for (const auto& t : task_names) {
    if (models.empty()) break;
    auto w = parse_workload(Json{{"model", models.front()}, {"task", t}});
    if (!w) continue;
    tasks.push_back(Json{{"name", t},
                         {"training", w->task != Task::kInfer},
                         {"adapter", w->task == Task::kLora || w->task == Task::kQlora},
                         {"weights", weight_format_info(w->weights).name},
                         {"kv_cache", kv_format_name(w->kv_cache)},
                         {"checkpointing", checkpointing_name(w->checkpointing)}});
  }
  return Json{{"options", std::move(options)}, {"vocabularies", std::move(vocabularies)},
              {"gpus", std::move(gpus)},       {"mig_profiles", std::move(mig)},
              {"models", std::move(models)},   {"tasks", std::move(tasks)}};
}

}  // namespace

void register_vocabulary_commands(CommandTable& table) {
  table.push_back({"vocabulary",
                   "Every option (type, range, default, help) and the names of tasks, formats, engines, MIG profiles",
                   vocabulary_command});
}

}  // namespace gpuplan::api
