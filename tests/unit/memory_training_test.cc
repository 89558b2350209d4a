// Training recipes' memory (issue #17, session 7): optimizer state in the dtype it steps, paged
// optimizers, optimizer step in backward, FSDP CPU offload, activation offloading, loss chunks; session 9:
// use_cache under a foreign checkpoint wrapper, FSDP1 units mixing frozen and trained weights, no_sync.
// Expected values come from the mechanisms' sources (docs/model.md "Training recipes"), not from the
// model's own output.
#include <gtest/gtest.h>

#include <cmath>

#include "gpuplan/api.h"
#include "gpuplan/memory.h"

namespace gpuplan {
namespace {

using Json = nlohmann::ordered_json;

Workload workload(const char* model, Json extra) {
  extra["model"] = model;
  auto w = parse_workload(extra);
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message);
  return w.ok() ? *w : Workload{};
}

MemoryBreakdown memory(const char* model, Json extra) {
  auto p = prepare(workload(model, std::move(extra)));
  EXPECT_TRUE(p.ok());
  return p.ok() ? estimate_memory(*p) : MemoryBreakdown{};
}

// Llama-2-7B: 6,738,415,616 parameters (config.json shapes), vocabulary 32000 x hidden 4096.
constexpr double kLlama2Params = 6738415616.0;
constexpr double kLlama2Edge = 32000.0 * 4096.0;

Json pure_bf16_full(Json extra = Json::object()) {
  Json j = {{"task", "train"}, {"weights", "bf16"}, {"master_weights", false}, {"batch", 1}, {"context", 512}};
  for (auto& [k, v] : extra.items()) j[k] = v;
  return j;
}

// torch.optim.AdamW's moments are zeros_like(param): bf16 for a pure-bf16 model, 2 x 2 B per parameter.
TEST(MemoryTraining, PureBf16AdamWKeepsBf16Moments) {
  const MemoryBreakdown m = memory("llama-2-7b", pure_bf16_full());
  EXPECT_DOUBLE_EQ(m.optimizer_bytes, kLlama2Params * 4);
  // With the fp32 master they step fp32: 8 B of moments + 4 B of master.
  const MemoryBreakdown mixed = memory("llama-2-7b", {{"task", "train"}, {"batch", 1}, {"context", 512}});
  EXPECT_DOUBLE_EQ(mixed.optimizer_bytes, kLlama2Params * 12);
}

// bitsandbytes' paged optimizers keep their states in cudaMallocManaged memory: off the GPU's total.
TEST(MemoryTraining, PagedOptimizerStatesAreHostMemory) {
  const MemoryBreakdown plain = memory("llama-2-7b", pure_bf16_full({{"optimizer", "adamw-8bit"}}));
  const MemoryBreakdown paged = memory("llama-2-7b", pure_bf16_full({{"optimizer", "PagedAdamW8bit"}}));
  EXPECT_DOUBLE_EQ(paged.optimizer_bytes, 0);
  EXPECT_DOUBLE_EQ(paged.host_bytes, plain.optimizer_bytes);
  EXPECT_NEAR(plain.total_bytes - paged.total_bytes, plain.optimizer_bytes, 1.0);
  // PagedAdamW (32-bit) keeps fp32 states, 8 B per parameter, whatever the parameters' dtype.
  const MemoryBreakdown paged32 = memory("llama-2-7b", pure_bf16_full({{"optimizer", "paged_adamw_32bit"}}));
  EXPECT_DOUBLE_EQ(paged32.host_bytes, kLlama2Params * 8);
  EXPECT_DOUBLE_EQ(paged32.optimizer_bytes, 0);
}

// optimizer_in_bwd: each gradient is freed after its parameter's step; the largest one (the
// embedding or head, 32000 x 4096 in bf16) is what lives, beside the activations.
TEST(MemoryTraining, OptimizerInBackwardHoldsOneParametersGradient) {
  const MemoryBreakdown m =
      memory("llama-2-7b", pure_bf16_full({{"optimizer", "paged-adamw"}, {"optimizer_in_backward", true}}));
  EXPECT_DOUBLE_EQ(m.gradients_bytes, kLlama2Edge * 2);
  const MemoryBreakdown without = memory("llama-2-7b", pure_bf16_full({{"optimizer", "paged-adamw"}}));
  EXPECT_DOUBLE_EQ(without.gradients_bytes, kLlama2Params * 2);
  // The whole-model gradient buffer (13.5 GB) is gone from the peak.
  EXPECT_LT(m.total_bytes, without.total_bytes - kLlama2Params * 2 * 0.8);
}

// FSDP CPU offload: sharded weights, gradients and optimizer states in host memory; the GPU keeps the
// gathered layers and one layer's unsharded gradient.
TEST(MemoryTraining, CpuOffloadKeepsShardsOnTheHost) {
  const Json base = {{"task", "train"},    {"weights", "bf16"}, {"master_weights", false}, {"count", 8},
                     {"zero", 3},          {"batch", 2},        {"context", 2048},         {"checkpointing", "full"},
                     {"cpu_offload", true}};
  const MemoryBreakdown m = memory("llama-3.1-70b", base);
  EXPECT_DOUBLE_EQ(m.weights_bytes, 0);
  EXPECT_DOUBLE_EQ(m.optimizer_bytes, 0);
  Json on_gpu = base;
  on_gpu.erase("cpu_offload");
  const MemoryBreakdown g = memory("llama-3.1-70b", on_gpu);
  EXPECT_NEAR(m.host_bytes, g.weights_bytes + g.gradients_bytes + g.optimizer_bytes, 1e3);
  // One of 80 layers' gradient, unsharded: the whole model's bf16 gradient / 8 GPUs x 8 / 80.
  EXPECT_NEAR(m.gradients_bytes, g.gradients_bytes * 8 / 80, g.gradients_bytes * 0.001);
}

// Activation offloading keeps two layers' checkpointed inputs of 32 (2 x s x b x h each) on the GPU.
TEST(MemoryTraining, ActivationOffloadKeepsTwoLayersInputs) {
  const Json base = {
      {"task", "lora"}, {"batch", 1}, {"context", 2048}, {"checkpointing", "full"}, {"engine", "pytorch"}};
  Json off = base;
  off["activation_offload"] = true;
  const MemoryBreakdown kept = memory("llama-2-7b", base);
  const MemoryBreakdown moved = memory("llama-2-7b", off);
  const double layer_input = 2048.0 * 4096 * 2;  // bf16 residual stream, one sequence
  EXPECT_NEAR(kept.activations_bytes - moved.activations_bytes, 30 * layer_input, 1.0);
  EXPECT_NEAR(moved.host_bytes, 30 * layer_input, 1.0);
}

// Loss chunks: 2 + 12/N bytes per logit; torchtune's profile defaults to its 8 chunks, 1 is the
// whole-logits torch.nn.CrossEntropyLoss.
TEST(MemoryTraining, LossChunksSizeTheLossBuffers) {
  const Json base = {{"task", "lora"}, {"batch", 1}, {"context", 2048}, {"engine", "pytorch"}};
  Json whole = base;
  whole["loss_chunks"] = 1;
  const MemoryBreakdown chunked = memory("llama-2-7b", base);
  const MemoryBreakdown full = memory("llama-2-7b", whole);
  const double logits = 2048.0 * 32000;
  EXPECT_NEAR(full.activations_bytes - chunked.activations_bytes, logits * (14.0 - (2.0 + 12.0 / 8)), 1.0);
}

TEST(MemoryTraining, OffloadNeedsTrainingAndFsdp) {
  auto no_zero = parse_workload(Json{{"model", "llama-2-7b"}, {"task", "train"}, {"cpu_offload", true}});
  ASSERT_FALSE(no_zero.ok());
  EXPECT_EQ(no_zero.error().field, "cpu_offload");
  auto infer = parse_workload(Json{{"model", "llama-2-7b"}, {"optimizer_in_backward", true}});
  ASSERT_FALSE(infer.ok());
  EXPECT_EQ(infer.error().field, "optimizer_in_backward");
}

// transformers with use_cache=True under FSDP's own checkpoint wrapper (llama-recipes before its PR 165): every
// layer's K and V, 2 x b x s x kv_heads x head_dim x 2 B, are held with the layer inputs and the loss buffers at
// the end of forward. Llama-2-7B, 4 x 2048 tokens: 32 x 2 x 8192 x 4096 x 2 B = 4.29 GB, "~4 GB" in PR 165.
// Without recomputation they are the tensors attention saves anyway.
TEST(MemoryTraining, UseCacheHoldsEveryLayersKvUnderFullCheckpointing) {
  const Json base = {
      {"task", "lora"},           {"lora_rank", 8},         {"batch", 4}, {"context", 2048}, {"count", 4}, {"zero", 3},
      {"engine", "transformers"}, {"checkpointing", "full"}};
  Json cached = base;
  cached["use_cache"] = true;
  const double kv = 32.0 * 2 * 4 * 2048 * 4096 * 2;
  EXPECT_NEAR(memory("llama-2-7b", cached).activations_bytes - memory("llama-2-7b", base).activations_bytes, kv, 1e3);
  Json plain = base;
  plain["checkpointing"] = "none";
  Json plain_cached = plain;
  plain_cached["use_cache"] = true;
  EXPECT_DOUBLE_EQ(memory("llama-2-7b", plain_cached).activations_bytes, memory("llama-2-7b", plain).activations_bytes);
}

// Lit-GPT's FSDP LoRA: a block's frozen base and adapters share one FlatParameter (use_orig_params), whose
// gradient covers the block: Llama-2-7B's 32 x (4 x 4096^2 + 3 x 4096 x 11008) = 6,476,005,376 matrix
// parameters + 4,194,304 adapter parameters (r 8 on q, v), 2 B each, sharded over 2 GPUs after the
// reduce-scatter, and whole under no_sync, where they are held beside the next micro-batch's activations.
TEST(MemoryTraining, FsdpMixedUnitsGradientCoversTheBlock) {
  const Json base = {{"task", "lora"},
                     {"lora_rank", 8},
                     {"batch", 1},
                     {"context", 1304},
                     {"count", 2},
                     {"zero", 3},
                     {"engine", "pytorch"},
                     {"checkpointing", "full"},
                     {"master_weights", false},
                     {"fsdp_mixed_units", true}};
  const double unit = (6476005376.0 + 4194304.0) * 2;
  const MemoryBreakdown sharded = memory("llama-2-7b", base);
  EXPECT_NEAR(sharded.gradients_bytes, unit / 2, 1e3);
  Json no_sync = base;
  no_sync["fsdp_no_sync"] = true;
  const MemoryBreakdown whole = memory("llama-2-7b", no_sync);
  EXPECT_NEAR(whole.gradients_bytes, unit, 1e3);
  EXPECT_GE(whole.total_bytes, whole.weights_bytes + whole.gradients_bytes + whole.activations_bytes);
}

TEST(MemoryTraining, FsdpAndCacheSettingsNeedTheirTraining) {
  auto infer = parse_workload(Json{{"model", "llama-2-7b"}, {"use_cache", true}});
  ASSERT_FALSE(infer.ok());
  EXPECT_EQ(infer.error().field, "use_cache");
  auto no_zero = parse_workload(Json{{"model", "llama-2-7b"}, {"task", "lora"}, {"fsdp_no_sync", true}});
  ASSERT_FALSE(no_zero.ok());
  EXPECT_EQ(no_zero.error().field, "fsdp_no_sync");
  auto qlora = parse_workload(
      Json{{"model", "llama-2-7b"}, {"task", "qlora"}, {"zero", 3}, {"count", 2}, {"fsdp_mixed_units", true}});
  ASSERT_FALSE(qlora.ok());
  EXPECT_EQ(qlora.error().field, "fsdp_mixed_units");
}

// bitsandbytes' MatMul4Bit keeps its input A for backward whenever an input needs a gradient
// (autograd/_functions.py: `ctx.tensors = (A, B)`): with LoRA on q and v only, the frozen 4-bit o_proj,
// gate/up and down projections each keep an input the bf16 layer would not: the attention output
// (4096), the normed MLP input (4096) and the gated product (11008), 2 B each, per token and layer.
// torchao's NF4Tensor (torchtune) keeps none of them.
TEST(MemoryTraining, BitsandbytesQloraKeepsTheFrozenLinearsInputs) {
  Json q = {{"task", "qlora"},
            {"weights", "nf4"},
            {"engine", "pytorch"},
            {"batch", 1},
            {"context", 1024},
            {"checkpointing", "none"},
            {"lora_targets", {"q_proj", "v_proj"}}};
  q["qlora_kernel"] = "torchao";
  const MemoryBreakdown torchao = memory("llama-2-7b", q);
  q["qlora_kernel"] = "bitsandbytes";
  const MemoryBreakdown bnb = memory("llama-2-7b", q);
  const double expected = 1024.0 * 32 * (4096 + 4096 + 11008) * 2;
  EXPECT_NEAR(bnb.activations_bytes - torchao.activations_bytes, expected, 1e-6 * expected);
  // The default follows the engine: torchtune (pytorch) runs torchao, PEFT (transformers) bitsandbytes.
  q.erase("qlora_kernel");
  EXPECT_DOUBLE_EQ(memory("llama-2-7b", q).activations_bytes, torchao.activations_bytes);
  // A bf16 LoRA keeps none of them either way.
  Json lora = q;
  lora["task"] = "lora";
  lora["weights"] = "bf16";
  lora["qlora_kernel"] = "bitsandbytes";
  const MemoryBreakdown l = memory("llama-2-7b", lora);
  lora["qlora_kernel"] = "torchao";
  EXPECT_DOUBLE_EQ(memory("llama-2-7b", lora).activations_bytes, l.activations_bytes);
}

}  // namespace
}  // namespace gpuplan
