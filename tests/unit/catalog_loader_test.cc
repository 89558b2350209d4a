// The loader's contract: a broken file gives an error naming the file, the entry and the field.
#include <gtest/gtest.h>

#include <string>

#include "gpuplan/catalog.h"
#include "gpuplan/embedded.h"

namespace gpuplan {
namespace {

std::string embedded(std::string_view path) {
  for (const auto& f : embedded_files()) {
    if (f.path == path) return std::string(f.contents);
  }
  return {};
}

constexpr const char* kSources = R"(
sources:
  ds:
    title: A datasheet
    url: https://example.invalid/ds.pdf
    checked: 2026-11-30
    kind: vendor
  blog:
    title: A blog
    url: https://example.invalid/blog
    checked: 2026-11-30
    kind: third_party
)";

// A catalog with the real spec keys and sources, plus `gpus_yaml`.
Status load(Catalog& c, const std::string& gpus_yaml, const std::string& file = "test/gpus.yaml") {
  if (auto s = c.add_file("data/spec_keys.yaml", embedded("data/spec_keys.yaml")); !s) return s;
  if (auto s = c.add_file("test/sources.yaml", kSources); !s) return s;
  if (auto s = c.add_file(file, gpus_yaml); !s) return s;
  return c.finalize();
}

std::string gpu(const std::string& specs, const std::string& extra = "") {
  return "gpus:\n  - id: x100\n    vendor: nvidia\n    name: NVIDIA X100\n    architecture: ampere\n"
         "    form_factor: pcie\n" +
         extra + "    specs:\n" + specs;
}

TEST(CatalogLoader, AcceptsAWellFormedGpu) {
  Catalog c;
  auto s = load(c, gpu("      memory_gb: {value: 40, source: ds}\n"
                       "      bf16_tensor_tflops: {value: 312, source: ds}\n"
                       "      bf16_tensor_tflops_sparse: {value: 624, source: ds}\n"
                       "      memory_bandwidth_gbps:\n        value: 1555\n        source: ds\n"
                       "        conflicts: [{value: '2039', source: blog, note: wrong variant}]\n"));
  ASSERT_TRUE(s.ok()) << s.error().message;
  const Gpu* g = c.find_gpu("x100");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->number("bf16_tensor_tflops"), 312);
  ASSERT_NE(g->spec("memory_bandwidth_gbps"), nullptr);
  EXPECT_EQ(g->spec("memory_bandwidth_gbps")->conflicts.size(), 1u);
  EXPECT_EQ(g->spec("memory_gb")->checked, "2026-11-30");  // defaults to the source's date
  // Figures keep the contract's order whatever the file's order.
  EXPECT_EQ(g->specs.front().key, "memory_gb");
}

struct BadCase {
  const char* name;
  std::string yaml;
  const char* expect_in_message;
};

class CatalogLoaderErrors : public testing::TestWithParam<BadCase> {};

TEST_P(CatalogLoaderErrors, NamesFileEntryAndField) {
  Catalog c;
  auto s = load(c, GetParam().yaml);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidData);
  EXPECT_NE(s.error().message.find("test/gpus.yaml"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find(GetParam().expect_in_message), std::string::npos) << s.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    All, CatalogLoaderErrors,
    testing::Values(
        BadCase{"unknown_spec_key", gpu("      memory_gbytes: {value: 40, source: ds}\n"), "memory_gbytes"},
        BadCase{"unknown_gpu_key", gpu("      memory_gb: {value: 40, source: ds}\n", "    colour: green\n"), "colour"},
        BadCase{"out_of_range", gpu("      memory_gb: {value: 40000, source: ds}\n"), "outside the plausible range"},
        BadCase{"not_a_number", gpu("      memory_gb: {value: forty, source: ds}\n"), "expected a number"},
        BadCase{"missing_source", gpu("      memory_gb: {value: 40}\n"), "source"},
        BadCase{"bare_number", gpu("      memory_gb: 40\n"), "every figure needs a source"},
        BadCase{"undefined_source", gpu("      memory_gb: {value: 40, source: nowhere}\n"), "'nowhere' is not defined"},
        BadCase{"dense_above_sparse",
                gpu("      bf16_tensor_tflops: {value: 624, source: ds}\n"
                    "      bf16_tensor_tflops_sparse: {value: 312, source: ds}\n"),
                "sparse figure is below the dense"},
        BadCase{"fp64_has_no_sparse_twin", gpu("      fp64_tflops_sparse: {value: 1, source: ds}\n"),
                "fp64_tflops_sparse"},
        BadCase{"unknown_mig_table", gpu("      memory_gb: {value: 40, source: ds}\n", "    mig: nope\n"), "nope"},
        BadCase{"not_yaml", "gpus: [ {id: x100", "not valid YAML"},
        BadCase{"bad_id",
                "gpus:\n  - id: X 100\n    vendor: v\n    name: n\n    architecture: a\n    form_factor: pcie\n    "
                "specs: {}\n",
                "lowercase"},
        BadCase{"missing_name",
                "gpus:\n  - id: x100\n    vendor: v\n    architecture: a\n    form_factor: pcie\n    specs: {}\n",
                "'name'"}),
    [](const testing::TestParamInfo<BadCase>& info) { return info.param.name; });

TEST(CatalogLoader, UserFilesOverrideEmbeddedEntries) {
  Catalog c;
  ASSERT_TRUE(load(c, gpu("      memory_gb: {value: 40, source: ds}\n")).ok());
  ASSERT_TRUE(c.add_file("user/override.yaml", gpu("      memory_gb: {value: 48, source: ds}\n")).ok());
  ASSERT_TRUE(c.finalize().ok());
  EXPECT_EQ(c.find_gpu("x100")->number("memory_gb"), 48);
  EXPECT_EQ(c.gpus().size(), 1u);
}

TEST(CatalogLoader, EmbeddedCatalogLoads) {
  auto c = Catalog::load();
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FALSE((*c)->spec_keys().empty());
}

}  // namespace
}  // namespace gpuplan
