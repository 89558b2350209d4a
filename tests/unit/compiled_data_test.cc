// The data compiled at build time (tools/compile_data.cc, src/catalog/compiled.h): the images the binary
// loads at start-up give exactly what parsing the embedded YAML gives. The catalog: every GPU, figure,
// source, MIG profile and the name index (a deep equality: the images with the index), the JSON of
// `catalog show` for every GPU and MIG profile, and the same with a user's --catalog folder on top;
// the option declaration; the zoo's index. A corrupt image is an error, never a crash.
#include <gtest/gtest.h>

#include <string>

#include "catalog/compiled.h"
#include "gpuplan/api.h"
#include "gpuplan/catalog.h"
#include "gpuplan/embedded.h"
#include "gpuplan/options.h"
#include "model/zoo_index.h"

namespace gpuplan {
namespace {

std::shared_ptr<const Catalog> load(EmbeddedForm form, const std::vector<std::string>& dirs = {}) {
  auto c = Catalog::load(dirs, form);
  EXPECT_TRUE(c) << (c ? "" : c.error().message);
  return c ? *c : nullptr;
}

void expect_same_catalog(const Catalog& compiled, const Catalog& yaml) {
  // The images with the name index hold every field of every entry: equal images, equal catalogs.
  EXPECT_TRUE(compiled.to_image(true) == yaml.to_image(true));
  ASSERT_EQ(compiled.gpus().size(), yaml.gpus().size());
  const Context a{std::shared_ptr<const Catalog>(&compiled, [](const Catalog*) {})};
  const Context b{std::shared_ptr<const Catalog>(&yaml, [](const Catalog*) {})};
  const auto targets = yaml.all_targets(true);
  ASSERT_EQ(compiled.all_targets(true).size(), targets.size());
  for (const auto& t : targets) {
    const Json request{{"gpu", t.id()}, {"explain", true}};
    auto x = run_command(a, "catalog.show", request);
    auto y = run_command(b, "catalog.show", request);
    ASSERT_TRUE(x && y) << t.id();
    EXPECT_EQ(x->dump(), y->dump()) << t.id();
  }
  for (const char* name : {"h100", "NVIDIA A100-SXM4-40GB", "a100 sxm4 80gb/3g.40gb", "rtx 4090", "h200 nvl"}) {
    auto x = compiled.resolve(name);
    auto y = yaml.resolve(name);
    ASSERT_EQ(static_cast<bool>(x), static_cast<bool>(y)) << name;
    if (x) {
      EXPECT_EQ(x->id(), y->id()) << name;
    } else {
      EXPECT_EQ(x.error().message, y.error().message) << name;
    }
  }
}

TEST(CompiledData, CatalogIsTheYamlCatalog) {
  ASSERT_FALSE(compiled::catalog_image().empty()) << "the build embeds no compiled catalog";
  const auto compiled = load(EmbeddedForm::kCompiled);
  const auto yaml = load(EmbeddedForm::kYaml);
  ASSERT_TRUE(compiled && yaml);
  EXPECT_GT(yaml->gpus().size(), 10u);
  expect_same_catalog(*compiled, *yaml);
  // The shared embedded catalog is the compiled one.
  EXPECT_TRUE(Catalog::embedded()->to_image(true) == yaml->to_image(true));
}

TEST(CompiledData, UserFolderAddsToTheCompiledCatalogAsToTheYaml) {
  const std::vector<std::string> dirs = {std::string(GPUPLAN_SOURCE_DIR) + "/tests/fixtures/extra_catalog"};
  const auto compiled = load(EmbeddedForm::kCompiled, dirs);
  const auto yaml = load(EmbeddedForm::kYaml, dirs);
  ASSERT_TRUE(compiled && yaml);
  ASSERT_TRUE(compiled->find_gpu("x200"));
  expect_same_catalog(*compiled, *yaml);
  // A broken user file is the same file:line error either way.
  const std::vector<std::string> broken = {std::string(GPUPLAN_SOURCE_DIR) + "/tests/fixtures/broken_catalog"};
  auto x = Catalog::load(broken, EmbeddedForm::kCompiled);
  auto y = Catalog::load(broken, EmbeddedForm::kYaml);
  ASSERT_FALSE(x);
  ASSERT_FALSE(y);
  EXPECT_EQ(x.error().message, y.error().message);
}

TEST(CompiledData, OptionTableIsTheYamlDeclaration) {
  ASSERT_FALSE(compiled::options_image().empty());
  std::string_view text;
  for (const auto& f : embedded_files()) {
    if (f.path == "data/options.yaml") text = f.contents;
  }
  auto parsed = OptionTable::parse("data/options.yaml", text);
  ASSERT_TRUE(parsed) << parsed.error().message;
  auto table = option_table();
  ASSERT_TRUE(table);
  EXPECT_GT((*table)->all().size(), 50u);
  EXPECT_TRUE((*table)->to_image() == parsed->to_image());
  // Spot checks of what the image carries: a default, a range, a vocabulary.
  const OptionSpec* batch = (*table)->find("batch", "fit");
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->default_value, parsed->find("batch", "fit")->default_value);
  EXPECT_EQ(batch->range.text(), parsed->find("batch", "fit")->range.text());
}

TEST(CompiledData, ZooIndexIsTheYamlIndex) {
  ASSERT_FALSE(compiled::zoo_image().empty());
  auto yaml = zoo_index(embedded_files());
  ASSERT_TRUE(yaml) << yaml.error().message;
  const auto entries = zoo_entries();
  ASSERT_EQ(entries.size(), yaml->size());
  EXPECT_TRUE(zoo_index_image(entries) == zoo_index_image(*yaml));
  EXPECT_TRUE(zoo_model("llama-3.1-8b"));
}

// Every truncation and a sample of corrupted bytes of each image: an error value (or, for a flipped
// byte inside a string, a different but well-formed value), never a crash or a huge allocation.
TEST(CompiledData, CorruptImagesAreErrors) {
  const std::string catalog(compiled::catalog_image());
  const std::string options(compiled::options_image());
  const std::string zoo(compiled::zoo_image());
  // Truncations at 200 points of each image (every prefix of a 100 KB image would take minutes).
  constexpr size_t kCuts = 200;
  for (size_t i = 0; i < kCuts; ++i) {
    EXPECT_FALSE(Catalog::from_image(std::string_view(catalog).substr(0, catalog.size() * i / kCuts)));
    EXPECT_FALSE(OptionTable::from_image(std::string_view(options).substr(0, options.size() * i / kCuts)));
    EXPECT_FALSE(zoo_index_from_image(std::string_view(zoo).substr(0, zoo.size() * i / kCuts)));
  }
  EXPECT_FALSE(Catalog::from_image(catalog + "x"));
  EXPECT_FALSE(OptionTable::from_image(options + "x"));
  EXPECT_FALSE(zoo_index_from_image(zoo + "x"));
  // Bytes set to 0xff (a count of 4 billion, a string longer than the image): refused, not allocated.
  for (size_t i = 0; i < kCuts; ++i) {
    std::string c = catalog, o = options, z = zoo;
    c[c.size() * i / kCuts] = '\xff';
    o[o.size() * i / kCuts] = '\xff';
    z[z.size() * i / kCuts] = '\xff';
    (void)Catalog::from_image(c);
    (void)OptionTable::from_image(o);
    (void)zoo_index_from_image(z);
  }
}

}  // namespace
}  // namespace gpuplan
