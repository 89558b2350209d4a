// Refusals (refusal.h): each rule on a configuration that no engine runs, and its neighbour that runs.
// Every refused case here got a "fits" (and perf a speed) before the rules existed.
#include <gtest/gtest.h>

#include "gpuplan/api.h"
#include "gpuplan/catalog.h"
#include "gpuplan/memory.h"
#include "gpuplan/mig_pack.h"
#include "gpuplan/perf.h"
#include "gpuplan/refusal.h"

namespace gpuplan {
namespace {

using Json = nlohmann::ordered_json;

Workload workload(const char* model, Json extra = Json::object()) {
  extra["model"] = model;
  auto w = parse_workload(extra);
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message);
  return *w;
}

Target target(const char* name, int count = 1) {
  auto ref = Catalog::embedded()->resolve(name);
  EXPECT_TRUE(ref.ok()) << name;
  return Target::linked(*ref, count);
}

// The refusal code name on `gpu` (xcount), or "" when it runs; through fit_target, as every command sees it.
std::string refused(const char* model, Json extra, const char* gpu, int count = 0) {
  Workload w = workload(model, std::move(extra));
  const Target t = target(gpu, count > 0 ? count : w.gpus());
  w.count = t.count;
  auto p = prepare(w);
  EXPECT_TRUE(p.ok());
  const TargetFit f = fit_target(*p, t);
  if (!f.refusal) return "";
  EXPECT_FALSE(f.fits);
  EXPECT_EQ(f.max_batch, 0);
  const Refusal r = explain_refusal(*f.refusal, w, &t);
  EXPECT_FALSE(r.message.empty());
  EXPECT_FALSE(r.field.empty());
  return std::string(refusal_code_name(*f.refusal));
}

TEST(Refusal, TensorParallelAcrossMigSlices) {
  // MIG instances have no peer-to-peer path: tp or pp over slices cannot run.
  EXPECT_EQ(refused("llama-2-7b", {{"tp", 2}}, "a100-80gb-sxm4/3g.40gb"), "mig_parallel");
  EXPECT_EQ(refused("llama-2-7b", {{"pp", 2}}, "a100-80gb-sxm4/3g.40gb"), "mig_parallel");
  EXPECT_EQ(refused("llama-2-7b", {{"tp", 2}}, "a100-80gb-sxm4", 2), "");
  // Data-parallel training needs NCCL between the slices; inference replicas do not talk.
  EXPECT_EQ(refused("llama-2-7b", {{"task", "qlora"}}, "a100-80gb-sxm4/3g.40gb", 2), "mig_parallel");
  EXPECT_EQ(refused("llama-2-7b", {{"task", "qlora"}}, "a100-80gb-sxm4/3g.40gb", 1), "");
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "int4-awq"}}, "a100-80gb-sxm4/1g.10gb", 7), "");
}

TEST(Refusal, MoreMigSlicesThanOneGpuHolds) {
  // The A100-40GB holds at most 2 3g.20gb instances (MIG table max_count).
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "int4-awq"}}, "a100-40gb-sxm4/3g.20gb", 3), "mig_count");
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "int4-awq"}}, "a100-40gb-sxm4/3g.20gb", 2), "");
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "int4-awq"}}, "a100-40gb-sxm4/1g.5gb", 7), "");
}

TEST(Refusal, TensorParallelMustDivideHeads) {
  // Qwen2.5-7B: 28 attention heads, 4 KV heads.
  EXPECT_EQ(refused("qwen2.5-7b", {{"tp", 8}}, "h100-80gb-sxm5"), "tp_heads");
  EXPECT_EQ(refused("qwen2.5-7b", {{"tp", 3}}, "h100-80gb-sxm5"), "tp_heads");
  EXPECT_EQ(refused("qwen2.5-7b", {{"tp", 4}}, "h100-80gb-sxm5"), "");
  // 28 % 14 == 0, but 4 KV heads and tp 14 divide neither way.
  EXPECT_EQ(refused("qwen2.5-7b", {{"tp", 14}}, "h100-80gb-sxm5"), "tp_kv_heads");
  // Falcon-7B: 71 heads.
  EXPECT_EQ(refused("falcon-7b", {{"tp", 2}}, "a100-80gb-sxm4"), "tp_heads");
  // A CNN has no heads to split.
  EXPECT_EQ(refused("resnet-50", {{"tp", 2}}, "a100-80gb-sxm4"), "tp_heads");
}

TEST(Refusal, KvHeadsReplicateInVllmButNotInMegatron) {
  // Llama-3.1-8B: 32 heads, 8 KV heads; tp 16 replicates each KV head twice in vLLM.
  EXPECT_EQ(refused("llama-3.1-8b", {{"tp", 16}, {"engine", "vllm"}}, "h100-80gb-sxm5"), "");
  EXPECT_EQ(refused("llama-3.1-8b", {{"tp", 16}, {"task", "train"}, {"engine", "megatron"}}, "h100-80gb-sxm5"),
            "tp_kv_heads");
  EXPECT_EQ(refused("llama-3.1-8b", {{"tp", 8}, {"task", "train"}, {"engine", "megatron"}}, "h100-80gb-sxm5"), "");
}

TEST(Refusal, MorePipelineStagesThanLayers) {
  EXPECT_EQ(refused("llama-2-7b", {{"pp", 33}}, "h100-80gb-sxm5"), "pp_layers");
  EXPECT_EQ(refused("llama-2-7b", {{"pp", 32}}, "h100-80gb-sxm5"), "");
}

TEST(Refusal, ContextBeyondThePositions) {
  const Json vllm{{"engine", "vllm"}};
  auto with = [](Json j, const char* k, int64_t v) {
    j[k] = v;
    return j;
  };
  EXPECT_EQ(refused("llama-2-7b", with(vllm, "context", 8192), "h100-80gb-sxm5"), "context");
  EXPECT_EQ(refused("llama-2-7b", with(vllm, "context", 4096), "h100-80gb-sxm5"), "");
  EXPECT_EQ(refused("llama-3.1-8b", with(vllm, "context", 131072), "h100-80gb-sxm5"), "");
  EXPECT_EQ(refused("llama-3.1-8b", with(vllm, "context", 131073), "h100-80gb-sxm5"), "context");
  // A learned position table (StarCoder: 8192 rows) has no row beyond it in any engine ...
  EXPECT_EQ(refused("starcoder-15.5b", {{"context", 9000}}, "h100-80gb-sxm5"), "context");
  // ... RoPE and ALiBi run longer outside vLLM (TensorRT-LLM ran GPT-J at 4096, llm-foundry MPT-7B at 8192).
  EXPECT_EQ(refused("gpt-j-6b", {{"context", 4096}, {"engine", "tensorrt-llm"}}, "h100-80gb-sxm5"), "");
  EXPECT_EQ(refused("mpt-7b", {{"context", 8192}, {"task", "train"}}, "h100-80gb-sxm5"), "");
}

TEST(Refusal, RopeScalingExtendsTheContext) {
  Json config = Json::parse(R"({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000,
    "max_position_embeddings": 4096})");
  auto positions = [&](Json rope) {
    Json c = config;
    c["rope_scaling"] = std::move(rope);
    auto m = parse_hf_config(c, "test");
    EXPECT_TRUE(m.ok());
    return supported_context(*m);
  };
  EXPECT_EQ(positions(nullptr), 4096);
  EXPECT_EQ(positions(Json{{"type", "linear"}, {"factor", 2.0}}), 8192);
  EXPECT_EQ(positions(Json{{"rope_type", "dynamic"}, {"factor", 4.0}}), 16384);
  // YaRN: original_max_position_embeddings x factor (vLLM _get_and_verify_max_len).
  EXPECT_EQ(positions(Json{{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 2048}}), 8192);
  // llama3 scaling: max_position_embeddings already states the extended length.
  EXPECT_EQ(positions(Json{{"rope_type", "llama3"}, {"factor", 8.0}, {"original_max_position_embeddings", 512}}), 4096);
}

TEST(Refusal, Bf16OnVoltaInVllm) {
  EXPECT_EQ(refused("llama-2-7b", {{"engine", "vllm"}}, "v100-32gb-sxm2"), "bf16_hardware");
  EXPECT_EQ(refused("llama-2-7b", {{"engine", "vllm"}, {"weights", "fp16"}}, "v100-32gb-sxm2"), "");
  EXPECT_EQ(refused("llama-2-7b", {{"engine", "vllm"}}, "a100-80gb-sxm4"), "");
  // transformers runs bf16 on Volta without tensor cores (priced so: perf_model_test).
  EXPECT_EQ(refused("llama-2-7b", {{"engine", "transformers"}}, "v100-32gb-sxm2"), "");
}

TEST(Refusal, Fp8WeightsNeedAdaOrHopperExceptMarlin) {
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "fp8"}, {"engine", "tensorrt-llm"}}, "a100-80gb-sxm4"),
            "weights_hardware");
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "fp8"}, {"engine", "transformers"}}, "a100-80gb-sxm4"),
            "weights_hardware");
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "fp8"}, {"engine", "tensorrt-llm"}}, "h100-80gb-sxm5"), "");
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "fp8"}, {"engine", "tensorrt-llm"}}, "l40s"), "");
  // vLLM runs fp8 checkpoints weight-only through FP8 Marlin on Ampere, not on Volta.
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "fp8"}, {"engine", "vllm"}}, "a100-80gb-sxm4"), "");
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "fp8"}, {"engine", "vllm"}}, "v100-32gb-sxm2"), "weights_hardware");
  // fp8 training (Transformer Engine) needs fp8 tensor cores.
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "fp8"}, {"task", "train"}, {"engine", "megatron"}}, "a100-80gb-sxm4"),
            "weights_hardware");
}

TEST(Refusal, AwqNeedsTuring) {
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "int4-awq"}, {"engine", "vllm"}}, "v100-32gb-sxm2"), "weights_hardware");
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "int4-awq"}, {"engine", "vllm"}}, "a10"), "");
}

TEST(Refusal, FormatsTheEngineDoesNotHave) {
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "q4_k_m"}}, "rtx-4090"), "weights_engine");  // transformers
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "q4_k_m"}, {"engine", "llama.cpp"}}, "rtx-4090"), "");
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "int4-gptq"}, {"engine", "llama.cpp"}}, "rtx-4090"), "weights_engine");
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "int4-awq"}, {"engine", "deepspeed"}}, "a100-80gb-sxm4"),
            "weights_engine");
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "nf4"}, {"engine", "tensorrt-llm"}}, "a100-80gb-sxm4"),
            "weights_engine");
  EXPECT_EQ(refused("llama-2-7b", {{"weights", "fp8"}, {"engine", "llama.cpp"}}, "h100-80gb-sxm5"), "weights_engine");
  EXPECT_EQ(refused("llama-2-7b", {{"task", "qlora"}, {"weights", "q4_k_m"}}, "rtx-4090"), "weights_engine");
}

TEST(Refusal, KvCacheDtypes) {
  EXPECT_EQ(refused("llama-2-7b", {{"engine", "vllm"}, {"kv_cache", "int8"}}, "a100-80gb-sxm4"), "kv_engine");
  EXPECT_EQ(refused("llama-2-7b", {{"engine", "vllm"}, {"kv_cache", "fp8"}}, "a100-80gb-sxm4"), "");
  EXPECT_EQ(
      refused("llama-2-7b", {{"engine", "tensorrt-llm"}, {"weights", "fp16"}, {"kv_cache", "fp8"}}, "a100-80gb-sxm4"),
      "kv_hardware");
  EXPECT_EQ(
      refused("llama-2-7b", {{"engine", "tensorrt-llm"}, {"weights", "fp16"}, {"kv_cache", "int8"}}, "a100-80gb-sxm4"),
      "");
}

TEST(Refusal, InferenceEnginesDoNotTrain) {
  EXPECT_EQ(refused("llama-2-7b", {{"task", "lora"}, {"engine", "vllm"}}, "a100-80gb-sxm4"), "task_engine");
  EXPECT_EQ(refused("llama-2-7b", {{"task", "lora"}, {"engine", "transformers"}}, "a100-80gb-sxm4"), "");
}

TEST(Refusal, MessagesNameTheLimitAndTheWayOut) {
  Workload w = workload("qwen2.5-7b", {{"tp", 8}});
  auto r = refusal(w);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->field, "tp");
  EXPECT_NE(r->message.find("28 attention heads"), std::string::npos) << r->message;
  EXPECT_NE(r->message.find("1, 2, 4, 7, 14, 28"), std::string::npos) << r->message;
  const Target t = target("a100-40gb-sxm4/3g.20gb", 3);
  auto m = refusal(workload("llama-2-7b", {{"weights", "int4-awq"}}), t);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->field, "gpu");
  EXPECT_NE(m->message.find("at most 2"), std::string::npos) << m->message;
}

TEST(Refusal, MigPackWorkloadsSkipRefusedProfiles) {
  const Target a100 = target("a100-80gb-sxm4");
  std::string why;
  // tp 2 on one slice: every profile is refused, and the reason says so (not "needs more memory").
  auto none = mig::smallest_profile_for_workload(*a100.ref.gpu, *a100.ref.mig_table,
                                                 Json{{"model", "llama-2-7b"}, {"tp", 2}}, &why);
  EXPECT_FALSE(none.has_value());
  EXPECT_NE(why.find("refused"), std::string::npos) << why;
  auto some = mig::smallest_profile_for_workload(*a100.ref.gpu, *a100.ref.mig_table,
                                                 Json{{"model", "llama-2-7b"}, {"weights", "int4-awq"}}, &why);
  EXPECT_TRUE(some.has_value()) << why;
}

TEST(Refusal, PerfGivesNoSpeedWhereItDoesNotRun) {
  Context ctx{Catalog::embedded()};
  auto r = run_command(
      ctx, "perf",
      Json{{"model", "llama-2-7b"}, {"engine", "vllm"}, {"gpu", Json::array({"v100-32gb-sxm2", "a100-80gb-sxm4"})}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Json& v100 = (*r)["targets"][0];
  EXPECT_FALSE(v100["fits"].get<bool>());
  EXPECT_EQ(v100["refusal"], "bf16_hardware");
  EXPECT_TRUE(v100["tpot_seconds"].is_null());
  EXPECT_TRUE(v100["ttft_seconds"].is_null());
  EXPECT_TRUE(v100["serving"].is_null());
  EXPECT_TRUE(v100["low"]["tpot_seconds"].is_null());
  const Json& a100 = (*r)["targets"][1];
  EXPECT_TRUE(a100["fits"].get<bool>());
  EXPECT_FALSE(a100.contains("reason"));
  EXPECT_GT(a100["tpot_seconds"].get<double>(), 0);
}

TEST(Refusal, ComputeCapabilities) {
  EXPECT_EQ(compute_capability(*target("v100-32gb-sxm2").ref.gpu), 70);
  EXPECT_EQ(compute_capability(*target("a100-80gb-sxm4").ref.gpu), 80);
  EXPECT_EQ(compute_capability(*target("a10").ref.gpu), 86);
  EXPECT_EQ(compute_capability(*target("rtx-4090").ref.gpu), 89);
  EXPECT_EQ(compute_capability(*target("h100-80gb-sxm5").ref.gpu), 90);
}

}  // namespace
}  // namespace gpuplan
