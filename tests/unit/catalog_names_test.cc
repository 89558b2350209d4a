// Name resolution over the real catalog: every id, name and alias resolves to its own GPU; the
// names users and tools produce resolve; ambiguity and typos give precise errors.
#include <gtest/gtest.h>

#include "gpuplan/catalog.h"

namespace gpuplan {
namespace {

TEST(CatalogNames, EveryIdNameAndAliasResolvesToItsOwnGpu) {
  auto c = Catalog::embedded();
  ASSERT_GE(c->gpus().size(), 18u);
  for (const auto& g : c->gpus()) {
    std::vector<std::string> names = {g.id, g.name};
    names.insert(names.end(), g.aliases.begin(), g.aliases.end());
    for (const auto& n : names) {
      auto r = c->resolve(n);
      ASSERT_TRUE(r.ok()) << n << ": " << r.error().message;
      EXPECT_EQ(r->gpu->id, g.id) << n;
    }
  }
}

TEST(CatalogNames, EveryMigProfileIsATarget) {
  auto c = Catalog::embedded();
  size_t profiles = 0;
  for (const auto& ref : c->all_targets()) {
    if (!ref.is_mig()) continue;
    ++profiles;
    auto r = c->resolve(ref.id());
    ASSERT_TRUE(r.ok()) << ref.id();
    EXPECT_EQ(r->profile, ref.profile);
  }
  EXPECT_GE(profiles, 40u);
}

TEST(CatalogNames, NamesThatToolsProduce) {
  auto c = Catalog::embedded();
  const std::pair<const char*, const char*> cases[] = {
      {"NVIDIA A100-SXM4-40GB", "a100-40gb-sxm4"},
      {"NVIDIA A100-SXM4-80GB", "a100-80gb-sxm4"},
      {"NVIDIA A100 80GB PCIe", "a100-80gb-pcie"},
      {"NVIDIA H100 80GB HBM3", "h100-80gb-sxm5"},
      {"NVIDIA GeForce RTX 4090", "rtx-4090"},
      {"rtx4090", "rtx-4090"},
      {"NVIDIA A40", "a40"},
      {"  a40  ", "a40"},
      {"Tesla V100-SXM2-32GB", "v100-32gb-sxm2"},
      {"H200", "h200-141gb-sxm"},
      {"l40s", "l40s"},
  };
  for (const auto& [name, id] : cases) {
    auto r = c->resolve(name);
    ASSERT_TRUE(r.ok()) << name << ": " << r.error().message;
    EXPECT_EQ(r->gpu->id, id) << name;
  }
}

TEST(CatalogNames, AmbiguousAndUnknown) {
  auto c = Catalog::embedded();
  auto a = c->resolve("a100 80gb");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().code, ErrorCode::kAmbiguous);
  EXPECT_NE(a.error().message.find("a100-80gb-pcie"), std::string::npos);
  EXPECT_NE(a.error().message.find("a100-80gb-sxm4"), std::string::npos);
  auto u = c->resolve("A10G");
  ASSERT_FALSE(u.ok()) << "the AWS A10G is not an A10";
  EXPECT_EQ(u.error().code, ErrorCode::kNotFound);
  auto e = c->resolve("");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, ErrorCode::kUsage);
}

TEST(CatalogNames, NormalizeAndDistance) {
  EXPECT_EQ(normalize_name("NVIDIA A100-SXM4-40GB"), "a100sxm440gb");
  EXPECT_EQ(normalize_name("Tesla V100"), "v100");
  EXPECT_EQ(edit_distance("l40", "l40s"), 1u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
}

}  // namespace
}  // namespace gpuplan
