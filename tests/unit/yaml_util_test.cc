// YAML helpers of src/catalog/yaml_util.h that readers share (bounded_int moved here from the model's
// layer-file reader, issue #12).
#include <gtest/gtest.h>

#include "catalog/yaml_util.h"

namespace gpuplan {
namespace {

TEST(YamlUtil, BoundedIntReadsRangesAndFallbacks) {
  const YAML::Node n = YAML::Load("{kernel: 3, big: 5000, text: abc}");
  auto k = yaml::bounded_int("f.yaml", n, "layer 'c1'", "kernel", true, 0, 1, 1024);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(*k, 3);
  auto absent = yaml::bounded_int("f.yaml", n, "layer 'c1'", "stride", false, 1, 1, 64);
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(*absent, 1);
  EXPECT_FALSE(yaml::bounded_int("f.yaml", n, "layer 'c1'", "stride", true, 1, 1, 64).ok());
  auto big = yaml::bounded_int("f.yaml", n, "layer 'c1'", "big", true, 0, 1, 1024);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("must be between 1 and 1024, got 5000"), std::string::npos) << big.error().message;
  EXPECT_NE(big.error().field.find("big"), std::string::npos) << big.error().field;
  EXPECT_FALSE(yaml::bounded_int("f.yaml", n, "layer 'c1'", "text", true, 0, 1, 1024).ok());
}

}  // namespace
}  // namespace gpuplan
