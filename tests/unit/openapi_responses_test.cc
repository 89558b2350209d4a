// web/openapi.json's response schemas against what the commands really answer: every key a
// command's result carries is a property its operation's 200 schema declares (issue #18: the offers
// list gained `proxy` and `proxy_reason`, and the document did not say so). Request schemas are
// generated from data/options.yaml (options_test.cc); response schemas are written by hand, so this
// is what keeps them honest.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/catalog.h"

namespace gpuplan {
namespace {

Json openapi_document() {
  std::ifstream in(std::string(GPUPLAN_SOURCE_DIR) + "/web/openapi.json", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str(), nullptr, false);
}

// The schema a `$ref` names, or the schema itself.
const Json& resolve(const Json& doc, const Json& schema) {
  if (!schema.is_object() || !schema.contains("$ref")) return schema;
  const std::string ref = schema["$ref"].get<std::string>();  // #/components/schemas/Name
  return doc["components"]["schemas"][ref.substr(ref.rfind('/') + 1)];
}

// The JSON paths of `value` whose key no schema on the way declares. An object schema without
// `properties`, or with additionalProperties, declares any key; `oneOf` holds when one branch does.
void undeclared(const Json& doc, const Json& value, const Json& schema_in, const std::string& path,
                std::vector<std::string>& out) {
  const Json& schema = resolve(doc, schema_in);
  if (!schema.is_object()) return;
  if (schema.contains("oneOf")) {
    std::vector<std::string> best;
    bool first = true;
    for (const auto& branch : schema["oneOf"]) {
      std::vector<std::string> miss;
      undeclared(doc, value, branch, path, miss);
      if (first || miss.size() < best.size()) best = std::move(miss);
      first = false;
    }
    out.insert(out.end(), best.begin(), best.end());
    return;
  }
  if (value.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < value.size(); ++i)
      undeclared(doc, value[i], schema["items"], path + "/" + std::to_string(i), out);
    return;
  }
  if (!value.is_object() || !schema.contains("properties")) return;
  if (schema.contains("additionalProperties") && schema["additionalProperties"] != false) return;
  const Json& props = schema["properties"];
  for (const auto& [key, child] : value.items()) {
    if (!props.contains(key)) {
      out.push_back(path + "/" + key);
      continue;
    }
    undeclared(doc, child, props[key], path + "/" + key, out);
  }
}

// The 200 schema of the operation with this operationId.
Json response_schema(const Json& doc, const std::string& operation_id) {
  for (const auto& [route, ops] : doc["paths"].items()) {
    for (const auto& [method, op] : ops.items()) {
      if (!op.is_object() || op.value("operationId", "") != operation_id) continue;
      return op["responses"]["200"]["content"]["application/json"]["schema"];
    }
  }
  return Json();
}

struct Probe {
  const char* operation_id;
  const char* command;
  const char* request;  // JSON
};

// One request per operation with a declared response schema; the offers list over the whole shipped
// snapshot (a proxy row, stale list prices with their warning, marketplace rows).
constexpr Probe kProbes[] = {
    {"catalog_list", "catalog.list", R"({})"},
    {"catalog_show", "catalog.show", R"({"gpu": "a100-80gb-sxm4"})"},
    {"compare", "compare", R"({"gpu": ["h100-sxm5-80gb", "l4", "a100-40gb-sxm4/3g.20gb"]})"},
    {"fit", "fit", R"({"model": "llama-3.1-8b", "gpu": ["h100-sxm5-80gb", "rtx-4090", "a100-40gb-sxm4/1g.5gb"]})"},
    {"offers_list", "offers.list", R"({"all": true})"},
    {"offers_list", "offers.list", R"({"gpu": ["a100-80gb-sxm4"], "max_age": 30})"},
};

TEST(OpenApiResponses, EveryKeyACommandAnswersIsDeclared) {
  const Json doc = openapi_document();
  ASSERT_FALSE(doc.is_discarded());
  Context ctx{Catalog::embedded()};
  for (const auto& p : kProbes) {
    SCOPED_TRACE(std::string(p.operation_id) + " " + p.request);
    const Json schema = response_schema(doc, p.operation_id);
    ASSERT_TRUE(schema.is_object()) << "no 200 schema for operation " << p.operation_id;
    auto result = run_command(ctx, p.command, Json::parse(p.request));
    ASSERT_TRUE(result.ok()) << result.error().message;
    std::vector<std::string> missing;
    undeclared(doc, *result, schema, "", missing);
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 12; ++i) list += "\n  " + missing[i];
    EXPECT_TRUE(missing.empty()) << missing.size() << " keys the schema does not declare:" << list;
  }
}

// The checker itself: an undeclared key is found, a declared one is not, through $ref, items and oneOf.
TEST(OpenApiResponses, TheCheckerFindsAnUndeclaredKey) {
  const Json doc = Json::parse(R"({"components": {"schemas": {"Row": {"type": "object",
      "properties": {"a": {"type": "number"}}}}}})");
  const Json schema = Json::parse(R"({"oneOf": [{"type": "object", "properties": {"rows": {"type": "array",
      "items": {"$ref": "#/components/schemas/Row"}}}}, {"type": "object", "properties": {"x": {}}}]})");
  std::vector<std::string> missing;
  undeclared(doc, Json::parse(R"({"rows": [{"a": 1}, {"a": 2, "b": 3}]})"), schema, "", missing);
  EXPECT_EQ(missing, std::vector<std::string>{"/rows/1/b"});
  missing.clear();
  undeclared(doc, Json::parse(R"({"rows": [{"a": 1}]})"), schema, "", missing);
  EXPECT_TRUE(missing.empty());
}

}  // namespace
}  // namespace gpuplan
