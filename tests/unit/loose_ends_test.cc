// Issue #11 loose ends: conversions on user input that threw (an internal error, HTTP 500 / exit 1)
// are read through checked helpers, refusals are reported as refusals (plan) and with their reason
// (compare). Each test fails on the code before the fix: there the call threw, or run_command caught
// the exception and answered kInternal, or the text said "does not fit".
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "gpuplan/api.h"
#include "gpuplan/catalog.h"
#include "gpuplan/model.h"
#include "gpuplan/plan.h"

namespace gpuplan {
namespace {

Context context() { return Context{Catalog::embedded()}; }

// A layer file with one conv layer whose fields are `conv` (a YAML flow mapping's inside).
std::string layer_file(const std::string& conv, const std::string& top = "") {
  return top + "layers:\n  - {" + conv + "}\n";
}
const std::string kConv = "name: c1, type: conv, in_channels: 3, out_channels: 64, kernel: 7, out_h: 112, out_w: 112";

void expect_invalid(const Result<Model>& m, const std::string& text) {
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kInvalidData) << m.error().message;
  EXPECT_NE(m.error().message.find(text), std::string::npos) << m.error().message;
}

// ---- layer-shape YAML: every field through the checked helpers --------------------------------

TEST(LayerYaml, AGoodFileParses) {
  auto m = parse_layer_yaml(layer_file(kConv + ", bias: true", "input: {channels: 3, height: 224, width: 224}\n"), "t");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->parameters, 64 * 3 * 7 * 7 + 64);
  EXPECT_DOUBLE_EQ(m->cnn_flops_per_sample, 2.0 * 64 * 3 * 7 * 7 * 112 * 112);
}

TEST(LayerYaml, NumbersThatAreNotNumbersAreInvalidDataNotExceptions) {
  // Each threw YAML::TypedBadConversion out of .as<int64_t>() / .as<bool>() / .as<std::string>().
  expect_invalid(parse_layer_yaml(layer_file(kConv + ", stride: 2, bias: maybe"), "t"), "bias");
  expect_invalid(parse_layer_yaml(layer_file("name: c1, type: conv, in_channels: abc, out_channels: 64, kernel: 7, "
                                             "out_h: 112, out_w: 112"),
                                  "t"),
                 "in_channels");
  expect_invalid(parse_layer_yaml(layer_file("name: c1, type: conv, in_channels: [3], out_channels: 64, kernel: 7, "
                                             "out_h: 112, out_w: 112"),
                                  "t"),
                 "in_channels");
  expect_invalid(parse_layer_yaml(layer_file("name: c1, type: conv, in_channels: 3, out_channels: 1e30, kernel: 7, "
                                             "out_h: 112, out_w: 112"),
                                  "t"),
                 "out_channels");
  expect_invalid(parse_layer_yaml(layer_file("name: [c1], type: conv"), "t"), "name");
  expect_invalid(parse_layer_yaml(layer_file("name: c1, type: {a: 1}"), "t"), "type");
  expect_invalid(parse_layer_yaml(layer_file(kConv, "kind: [cnn]\n"), "t"), "kind");
  expect_invalid(parse_layer_yaml(layer_file(kConv, "input: {channels: x, height: 224, width: 224}\n"), "t"),
                 "channels");
  expect_invalid(parse_layer_yaml("layers:\n  - just a string\n", "t"), "mapping");
}

TEST(LayerYaml, SizesAreBoundedLikeConfigJson) {
  // 2^20 channels and a 1024 kernel: 2^60 weights; the products were int64 and the flops overflowed.
  auto huge = parse_layer_yaml(layer_file("name: c1, type: conv, in_channels: 1048576, out_channels: 1048576, "
                                          "kernel: 1024, out_h: 65536, out_w: 65536"),
                               "t");
  expect_invalid(huge, "parameters");
  expect_invalid(parse_layer_yaml(layer_file("name: c1, type: conv, in_channels: 2000000, out_channels: 64, "
                                             "kernel: 7, out_h: 112, out_w: 112"),
                                  "t"),
                 "between 1 and 1048576");
  expect_invalid(parse_layer_yaml(layer_file("name: c1, type: conv, in_channels: 3, out_channels: 64, kernel: 7, "
                                             "out_h: -5, out_w: 112"),
                                  "t"),
                 "out_h");
  expect_invalid(parse_layer_yaml(layer_file("name: l, type: linear, in_features: 0, out_features: 10"), "t"),
                 "in_features");
  // A missing size was read as 0 and made an empty tensor; it is now named.
  expect_invalid(parse_layer_yaml(layer_file("name: bn, type: batchnorm"), "t"), "channels");
  expect_invalid(parse_layer_yaml(layer_file(kConv + ", kernal: 3"), "t"), "kernal");
}

TEST(LayerYaml, TheZooResNetStillParses) {
  auto m = zoo_model("resnet-50");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ((*m)->parameters, 25557032);
}

// ---- JSON requests: nlohmann value()/get<>() on a wrong type threw type_error ---------------

TEST(LooseRequest, AnOffersFileNameThatIsNotAStringIsAUsageError) {
  auto r = run_command(context(), "offers.list", Json{{"offers", Json::array({{{"name", 5}, {"text", "x"}}})}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUsage) << r.error().message;
  EXPECT_EQ(r.error().field, "offers");
}

TEST(LooseRequest, AFleetFileNameThatIsNotAStringIsAUsageError) {
  Json pack{{"fleet", Json::array({{{"name", Json::array({1})}, {"text", "nodes: []"}}})},
            {"requests", "requests: []"}};
  auto r = run_command(context(), "mig.pack", pack);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUsage) << r.error().message;
  EXPECT_EQ(r.error().field, "fleet");
}

TEST(LooseRequest, MptAttnTypeThatIsNotAStringIsIgnored) {
  std::ifstream in(std::string(GPUPLAN_SOURCE_DIR) + "/data/models/mpt-7b.json");
  std::stringstream text;
  text << in.rdbuf();
  Json config = Json::parse(text.str());
  config["attn_config"]["attn_type"] = 5;  // value("attn_type", "") threw type_error 302
  auto m = parse_hf_config(config, "mpt");
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto fit = run_command(context(), "fit", Json{{"model", "mpt"}, {"config", config}, {"gpu", "a40"}});
  EXPECT_TRUE(fit.ok()) << fit.error().message;
}

TEST(LooseRequest, AConfigWithAStringThatIsNotUtf8IsRead) {
  // parse_hf_config re-reads the config through dump(), which threw type_error 316 on invalid UTF-8.
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(R"({"model_type": "llama", "hidden_size": 4096,
      "num_hidden_layers": 32, "vocab_size": 32000, "intermediate_size": 11008, "num_attention_heads": 32})");
  config["_name_or_path"] = std::string("caf\xe9");
  auto m = parse_hf_config(config, "latin1");
  EXPECT_TRUE(m.ok()) << m.error().message;
}

// ---- refusals are refusals --------------------------------------------------------------------

// A model that every configuration refuses (as WorkloadPlanModel reports a refusal.h verdict).
class RefusingModel : public PlanModel {
 public:
  int max_serving_batch(const Target&, int, int, std::string* why) const override {
    *why = std::string(kRefusedPrefix) + "vLLM refuses bfloat16 here";
    return 0;
  }
  ServePoint serve(const Target&, int, int, int) const override { return ServePoint{0.1, 0.01}; }
  TrainPoint train(const Target&, int, int, int) const override {
    TrainPoint p;
    p.why_not = std::string(kRefusedPrefix) + "vLLM does not train";
    return p;
  }
  bool layout_allowed(int tp, int pp) const override { return tp == 1 && pp == 1; }
};

Offer one_gpu_offer() {
  Offer o;
  o.provider = "p";
  o.region = "r";
  o.name = "v100";
  o.target = *Catalog::embedded()->resolve("v100-16gb-sxm2");
  o.gpus = 1;
  o.price_hour = 1;
  o.currency = "USD";
  return o;
}

TEST(RefusedPlan, ServingSaysRefusedAndWhyNotDoesNotFit) {
  RefusingModel m;
  Offer o = one_gpu_offer();
  auto r = plan_serving(m, {&o}, ServeGoal{1, 512, 256, std::nullopt, std::nullopt}, PlanOptions{});
  ASSERT_EQ(r.rejected.size(), 1U);
  EXPECT_EQ(r.rejected[0].reason, "refused on 1 GPU(s): vLLM refuses bfloat16 here");
}

TEST(RefusedPlan, TrainingSaysRefusedAndWhy) {
  RefusingModel m;
  Offer o = one_gpu_offer();
  TrainGoal g;
  g.train_tokens = 1e9;
  PlanOptions options;
  options.max_instances = 2;
  auto r = plan_training(m, {&o}, g, options);
  ASSERT_FALSE(r.rejected.empty());
  EXPECT_EQ(r.rejected[0].reason, "refused on up to 2 instances: vLLM does not train");
}

TEST(RefusedPlan, RealPlanReportsTheBf16RefusalAsARefusal) {
  auto r = run_command(context(), "plan",
                       Json{{"model", "llama-2-13b"},
                            {"weights", "bf16"},
                            {"engine", "vllm"},
                            {"rate", 5},
                            {"input_tokens", 512},
                            {"output_tokens", 256},
                            {"now", "2026-11-30"}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string text = r->dump();
  EXPECT_NE(text.find("refused on 1 GPU(s): vLLM refuses bfloat16"), std::string::npos);
  EXPECT_EQ(text.find("does not fit on 1 GPU(s): vLLM refuses"), std::string::npos);
}

// ---- compare carries the reason a target does not fit ----------------------------------------

TEST(CompareValue, ARefusedTargetCarriesItsRefusalAndReason) {
  auto r = run_command(context(), "compare",
                       Json{{"gpu", Json::array({"a100-40gb-sxm4", "v100-16gb-sxm2", "l4"})},
                            {"model", "llama-2-13b"},
                            {"weights", "bf16"},
                            {"engine", "vllm"},
                            {"now", "2026-11-30"}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Json& targets = (*r)["targets"];
  ASSERT_EQ(targets.size(), 3U);
  EXPECT_TRUE(targets[0]["value"]["fits"].get<bool>());
  EXPECT_FALSE(targets[0]["value"].contains("reason"));
  const Json& v100 = targets[1]["value"];
  EXPECT_FALSE(v100["fits"].get<bool>());
  EXPECT_EQ(v100["refusal"], "bf16_hardware") << v100.dump();
  EXPECT_NE(v100["reason"].get<std::string>().find("bfloat16"), std::string::npos) << v100.dump();
  EXPECT_TRUE(v100["serving_tokens_per_second_per_gpu"].is_null()) << v100.dump();
}

TEST(CompareValue, ATargetTooSmallSaysHowMuchMemory) {
  auto r = run_command(context(), "compare",
                       Json{{"gpu", Json::array({"a40", "l4"})},
                            {"model", "llama-2-70b"},
                            {"weights", "fp16"},
                            {"engine", "vllm"},
                            {"now", "2026-11-30"}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Json& l4 = (*r)["targets"][1]["value"];
  EXPECT_FALSE(l4["fits"].get<bool>());
  EXPECT_FALSE(l4.contains("refusal"));
  ASSERT_TRUE(l4.contains("reason")) << l4.dump();
  EXPECT_NE(l4["reason"].get<std::string>().find("GiB"), std::string::npos) << l4.dump();
}

}  // namespace
}  // namespace gpuplan
