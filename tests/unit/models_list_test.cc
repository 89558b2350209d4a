// models.list: the zoo through the command table (CLI `gpuplan models list`, GET /api/v1/models).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "gpuplan/api.h"
#include "gpuplan/catalog.h"
#include "gpuplan/model.h"

namespace gpuplan {
namespace {

Result<Json> models_list(const Json& request = Json::object()) {
  return run_command(Context{Catalog::embedded()}, "models.list", request);
}

const Json* find(const Json& doc, const std::string& id) {
  for (const auto& m : doc["models"]) {
    if (m["id"] == id) return &m;
  }
  return nullptr;
}

TEST(ModelsList, IsACommand) {
  const auto names = command_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "models.list"), names.end());
}

TEST(ModelsList, ListsEveryZooEntryOnceWithComputedAndPublishedCounts) {
  auto r = models_list();
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto entries = zoo_entries();
  ASSERT_EQ((*r)["models"].size(), entries.size());
  std::set<std::string> ids;
  for (const auto& m : (*r)["models"]) {
    EXPECT_TRUE(ids.insert(m["id"].get<std::string>()).second) << m["id"];
    EXPECT_GT(m["parameters"].get<int64_t>(), 0) << m["id"];
    EXPECT_FALSE(m["family"].get<std::string>().empty()) << m["id"];
    const auto model = zoo_model(m["id"].get<std::string>());
    ASSERT_TRUE(model.ok());
    EXPECT_EQ(m["parameters"].get<int64_t>(), (*model)->parameters) << m["id"];
  }
  const Json* llama = find(*r, "llama-2-7b");
  ASSERT_NE(llama, nullptr);
  EXPECT_EQ((*llama)["family"], "llama");
  EXPECT_EQ((*llama)["kind"], "decoder");
  EXPECT_EQ((*llama)["parameters"].get<int64_t>(), 6738415616);  // zoo.yaml architecture_count
  EXPECT_EQ((*llama)["published_parameters"].get<int64_t>(), 6738417664);
  EXPECT_EQ((*llama)["hf_repo"], "meta-llama/Llama-2-7b-hf");
  EXPECT_TRUE((*llama)["published_source"].is_string());
  EXPECT_TRUE((*llama)["active_parameters"].is_null());  // dense
  EXPECT_EQ((*llama)["format"], "config.json");

  const Json* mixtral = find(*r, "mixtral-8x7b");
  ASSERT_NE(mixtral, nullptr);
  EXPECT_LT((*mixtral)["active_parameters"].get<int64_t>(), (*mixtral)["parameters"].get<int64_t>());

  const Json* resnet = find(*r, "resnet-50");
  ASSERT_NE(resnet, nullptr);
  EXPECT_EQ((*resnet)["kind"], "cnn");
  EXPECT_EQ((*resnet)["format"], "layers");
  EXPECT_EQ((*resnet)["file"], "data/models/resnet-50.yaml");
}

TEST(ModelsList, TakesNoOptions) {
  auto r = models_list(Json{{"family", "llama"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUsage);
  EXPECT_EQ(r.error().field, "family");
  EXPECT_NE(r.error().message.find("takes no options"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace gpuplan
