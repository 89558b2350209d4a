// Parameter counts computed from config.json shapes against published counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "gpuplan/model.h"

namespace gpuplan {
namespace {

// Counts published by the model owners (safetensors metadata on the Hugging Face model pages); used
// until data/models/zoo.yaml lists them, and as a cross-check afterwards.
struct Known {
  const char* id;
  int64_t parameters;
};
constexpr Known kKnown[] = {
    {"llama-2-7b", 6738415616},   {"llama-2-13b", 13015864320},   {"llama-2-70b", 68976648192},
    {"llama-3.1-8b", 8030261248}, {"llama-3.1-70b", 70553706496}, {"llama-3.1-405b", 405853388800},
    {"mistral-7b", 7241732096},   {"mixtral-8x7b", 46702792704},  {"qwen2.5-7b", 7615616512},
    {"gemma-2-9b", 9241705984},   {"gemma-2-27b", 27227128320},   {"phi-3-mini", 3821079552},
    {"falcon-7b", 6921720704},    {"gpt-j-6b", 6053381344},       {"bloom-176b", 176247271424},
    {"resnet-50", 25557032},
};

TEST(ModelParams, KnownCountsWithinHalfPercent) {
  for (const auto& k : kKnown) {
    auto m = zoo_model(k.id);
    ASSERT_TRUE(m.ok()) << k.id << ": " << m.error().message;
    const double err = static_cast<double>((*m)->parameters - k.parameters) / static_cast<double>(k.parameters);
    EXPECT_LT(std::fabs(err), 0.005) << k.id << " computed " << (*m)->parameters << " published " << k.parameters;
  }
}

TEST(ModelParams, EveryZooEntryMatchesItsPublishedCount) {
  const auto entries = zoo_entries();
  ASSERT_FALSE(entries.empty());
  for (const auto& e : entries) {
    auto m = zoo_model(e.id);
    ASSERT_TRUE(m.ok()) << e.id << ": " << m.error().message;
    std::printf("%-18s computed %15lld published %15lld active %15lld\n", e.id.c_str(),
                static_cast<long long>((*m)->parameters), static_cast<long long>(e.published_parameters),
                static_cast<long long>((*m)->active_parameters));
    if (e.published_parameters <= 0) continue;
    const double err =
        static_cast<double>((*m)->parameters - e.published_parameters) / static_cast<double>(e.published_parameters);
    EXPECT_LT(std::fabs(err), 0.005) << e.id << " computed " << (*m)->parameters << " published "
                                     << e.published_parameters;
  }
}

}  // namespace
}  // namespace gpuplan

namespace gpuplan {
namespace {

// MPT-7B (mosaicml/mpt-7b config.json): 6,649,286,656 parameters (safetensors metadata 6.65B).
TEST(ModelParams, MptFromItsConfig) {
  const nlohmann::json config = {{"model_type", "mpt"},
                                 {"d_model", 4096},
                                 {"n_heads", 32},
                                 {"n_layers", 32},
                                 {"expansion_ratio", 4},
                                 {"max_seq_len", 2048},
                                 {"vocab_size", 50432},
                                 {"no_bias", true},
                                 {"attn_config", {{"alibi", true}, {"attn_type", "multihead_attention"}}}};
  auto m = parse_hf_config(config, "mpt-7b");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->parameters, 6649286656);
  EXPECT_EQ(m->kv_heads, 32);
}

}  // namespace
}  // namespace gpuplan
