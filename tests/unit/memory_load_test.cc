// Memory at load time (issue #17, session 7; docs/model.md "Memory at load time"): what a loader stages
// beside the weights before any request, and the verdict when that peak is above the steady state. The
// expected figures come from the loaders' code and the maintainers' statements, not from gpuplan.
#include <gtest/gtest.h>

#include "gpuplan/api.h"
#include "gpuplan/formats.h"
#include "gpuplan/memory.h"
#include "gpuplan/perf.h"
#include "gpuplan/sweep.h"
#include "workload_test_util.h"

namespace gpuplan {
namespace {

// Bytes of one GB as the sources print them (decimal).
constexpr double kGb = 1e9;
// What an eager PyTorch process (the transformers and pytorch memory profiles) holds outside PyTorch's allocator,
// beside the weights at load: 1386 MB, measured (memory.cc kEagerTorchOutsideBytes; docs/model.md "What the
// counters read"). Was the 512 MiB CUDA context before 2026-12-02; the staging each test checks is unchanged.
constexpr double kEagerTorchOutsideBytes = 1386e6;

using testing_util::gpus;
using testing_util::prepared;

// TensorRT-LLM issue 1331, maintainer: "A BF16 LLaMA 70B is about 140G, a FP8 LLaMA 70B is about 70G. So,
// the peak GPU memory consumption when doing FP8 quantizaton is more than 210G ... we need a node with 4*
// H100 or 8 * H100 to run the quantization command. After quantization, 2 GPUs are okay".
TEST(MemoryLoad, TensorrtLlmQuantizesWithTheSixteenBitModelResident) {
  const nlohmann::ordered_json base = {{"engine", "tensorrt-llm"},
                                       {"weights", "fp8"},
                                       {"kv_cache", "fp8"},
                                       {"context", 2048},
                                       {"quantize_on_load", true}};
  nlohmann::ordered_json one = base;
  one["tp"] = 1;
  const PreparedWorkload p1 = prepared("llama-2-70b", one);
  // The whole node's share: 16-bit model + the FP8 export, about 210 GB on one GPU (the context aside).
  EXPECT_NEAR(p1.load_peak_bytes, 210 * kGb, 0.05 * 210 * kGb);
  EXPECT_FALSE(fit_target(p1, gpus("h100-80gb-sxm5", 1)).fits);
  nlohmann::ordered_json two = base;
  two["tp"] = 2;
  const TargetFit f2 = fit_target(prepared("llama-2-70b", two), gpus("h100-80gb-sxm5", 2));
  EXPECT_FALSE(f2.loads);
  EXPECT_FALSE(f2.fits);
  EXPECT_EQ(f2.max_batch, 0);
  EXPECT_EQ(f2.max_context, 0);
  nlohmann::ordered_json four = base;
  four["tp"] = 4;
  EXPECT_TRUE(fit_target(prepared("llama-2-70b", four), gpus("h100-80gb-sxm5", 4)).fits);
  // A checkpoint already in FP8 loads as it runs: 2 GPUs are enough.
  two["quantize_on_load"] = false;
  const TargetFit q2 = fit_target(prepared("llama-2-70b", two), gpus("h100-80gb-sxm5", 2));
  EXPECT_TRUE(q2.loads);
  EXPECT_TRUE(q2.fits);
}

// vLLM docs, features/quantization/fp8.md (online dynamic quantization): "we load the model at original
// precision before quantizing down to 8-bits, so you need enough memory to load the whole model".
TEST(MemoryLoad, VllmOnlineFp8NeedsTheWholeSixteenBitModel) {
  const PreparedWorkload online = prepared(
      "llama-3.1-70b", {{"engine", "vllm"}, {"weights", "fp8"}, {"context", 4096}, {"quantize_on_load", true}});
  const WeightBytes w16 = model_weight_bytes(*online.workload.model, WeightFormat::kBf16);
  EXPECT_GE(online.load_peak_bytes, w16.total_bytes);
  EXPECT_LT(online.load_peak_bytes, w16.total_bytes + 1 * kGb);  // + the CUDA context only
  const TargetFit f = fit_target(online, gpus("h100-80gb-sxm5", 1));
  EXPECT_FALSE(f.loads);
  EXPECT_FALSE(f.fits);
  EXPECT_EQ(f.kv_pool_tokens, 0);
  const PreparedWorkload stored =
      prepared("llama-3.1-70b", {{"engine", "vllm"}, {"weights", "fp8"}, {"context", 4096}});
  EXPECT_TRUE(fit_target(stored, gpus("h100-80gb-sxm5", 1)).loads);
  // Over two GPUs each holds half of the 16-bit model, 70 GB: it loads.
  const PreparedWorkload tp2 =
      prepared("llama-3.1-70b",
               {{"engine", "vllm"}, {"weights", "fp8"}, {"context", 4096}, {"tp", 2}, {"quantize_on_load", true}});
  EXPECT_NEAR(tp2.load_peak_bytes, w16.total_bytes / 2, 1 * kGb);
  EXPECT_TRUE(fit_target(tp2, gpus("h100-80gb-sxm5", 2)).loads);
}

// bitsandbytes Int8Params.cuda: the 16-bit matrix is copied to the GPU, double_quant makes CB (kept) and
// CBt, then CBt and the 16-bit copy are freed: 2 + 1 bytes per parameter of one matrix beside the weights.
TEST(MemoryLoad, BitsandbytesStagesOneMatrix) {
  const PreparedWorkload p = prepared("llama-2-13b", {{"weights", "llm-int8"}, {"context", 1024}});
  const double staged = p.load_peak_bytes - p.weights_per_gpu_bytes;
  // Llama-2-13B's largest matrix is an MLP projection, 5120 x 13824 (config.json).
  const double matrix = 5120.0 * 13824.0;
  EXPECT_NEAR(staged - kEagerTorchOutsideBytes, matrix * 3, 1);  // beside the memory outside PyTorch
  // Below the steady state: it does not decide the verdict.
  EXPECT_LT(p.load_peak_bytes, estimate_memory(p).total_bytes);
  // A GPTQ checkpoint loads as stored: no staging.
  const PreparedWorkload g = prepared("llama-2-13b", {{"weights", "int4-gptq"}, {"context", 1024}});
  EXPECT_NEAR(g.load_peak_bytes - g.weights_per_gpu_bytes, kEagerTorchOutsideBytes, 1);
}

TEST(MemoryLoad, SweepAgreesWhenTheModelDoesNotLoad) {
  auto w = parse_workload(nlohmann::ordered_json{{"model", "llama-3.1-70b"},
                                                 {"engine", "vllm"},
                                                 {"weights", "fp8"},
                                                 {"output_tokens", 128},
                                                 {"quantize_on_load", true}});
  ASSERT_TRUE(w.ok());
  const Target t = gpus("h100-80gb-sxm5", 1);
  PerfRun run;
  run.weights = perf_weights(w->weights, *w->model, perf_device(t), w->engine);
  auto point = SweepPoint::make(*w, t, run, default_efficiency());
  ASSERT_TRUE(point.ok()) << point.error().message;
  const SweepAnswer a = point->at(1, 128);
  EXPECT_FALSE(a.fits);
}

// torchao 0.1 (pinned by torchtune from 2024-04-09 to 2024-06-26) quantizes a whole bf16 matrix at once:
// the matrix, its scaled blocks and the (numel x 16) bf16 distances to the NF4 codes with the difference they
// are taken of, 68 B per element (torchao/dtypes/nf4tensor.py v0.1). Llama-2-7B's largest layer matrix is
// 11008 x 4096; the caching allocator keeps that transient reserved through training.
TEST(MemoryLoad, TorchaoWholeMatrixNf4QuantizationBeforeTheChunkedRelease) {
  const nlohmann::ordered_json base = {{"task", "qlora"},       {"weights", "nf4-dq"}, {"batch", 2},
                                       {"context", 512},        {"lora_rank", 8},      {"checkpointing", "full"},
                                       {"lora_targets", "all"}, {"optimizer", "adamw"}};
  nlohmann::ordered_json old = base;
  old["engine"] = "pytorch@2024-04-15";
  const PreparedWorkload p_old = prepared("llama-2-7b", old);
  EXPECT_NEAR(p_old.load_transient_bytes, 11008.0 * 4096.0 * 68.0, 1.0);
  nlohmann::ordered_json now = base;
  now["engine"] = "pytorch";
  const PreparedWorkload p_now = prepared("llama-2-7b", now);
  EXPECT_EQ(p_now.load_transient_bytes, 0);
  EXPECT_EQ(p_now.load_peak_bytes, 0);
  nlohmann::ordered_json chunked = base;
  chunked["engine"] = "pytorch@2024-07-01";
  EXPECT_EQ(prepared("llama-2-7b", chunked).load_transient_bytes, 0);
  // The allocated peak of training is the same; the reserved one is at least the load's allocated peak.
  const MemoryBreakdown m_old = estimate_memory(p_old);
  const MemoryBreakdown m_now = estimate_memory(p_now);
  EXPECT_NEAR(m_old.allocated_bytes(), m_now.allocated_bytes(), 1.0);
  EXPECT_GT(m_old.reserved_bytes(), m_now.reserved_bytes());
  EXPECT_GE(m_old.reserved_bytes(), p_old.load_peak_bytes - kEagerTorchOutsideBytes);
}

// AutoAWQ's fused modules allocate the whole fp16 cache (batch x max_seq_len) at load and, before 0.2.7,
// prefill with eager attention: fp16 scores, their fp32 copy and the fp32 softmax (awq/modules/fused).
TEST(MemoryLoad, AutoawqFusedCacheAndEagerPrefill) {
  const nlohmann::ordered_json base = {
      {"weights", "int4-awq"}, {"batch", 1}, {"input_tokens", 2048}, {"output_tokens", 2048}, {"context", 4096}};
  nlohmann::ordered_json old = base;
  old["engine"] = "autoawq@0.1.8";
  const PreparedWorkload p_old = prepared("llama-2-7b", old);
  EXPECT_TRUE(p_old.preallocated_kv);
  EXPECT_TRUE(p_old.eager_inference);
  EXPECT_EQ(p_old.eager_score_bytes, 10.0);
  EXPECT_EQ(p_old.prompt_logit_bytes, 6.0);
  nlohmann::ordered_json now = base;
  now["engine"] = "autoawq";
  const PreparedWorkload p_now = prepared("llama-2-7b", now);
  EXPECT_TRUE(p_now.preallocated_kv);
  EXPECT_FALSE(p_now.eager_inference);  // LlamaLikeBlock runs SDPA from 0.2.7
  EXPECT_EQ(p_now.prompt_logit_bytes, 2.0);
  // The eager prefill's scores: 32 heads x 2048^2 x 10 B = 1.25 GiB above the SDPA prefill.
  const double eager = estimate_memory(p_old).allocated_bytes();
  const double sdpa = estimate_memory(p_now).allocated_bytes();
  EXPECT_GT(eager - sdpa, 32.0 * 2048 * 2048 * 10 * 0.9);
  // transformers keeps the prompt's KV only as it grows: less than the preallocated whole cache at prefill.
  nlohmann::ordered_json hf = base;
  hf["engine"] = "transformers";
  EXPECT_LT(estimate_memory(prepared("llama-2-7b", hf)).allocated_bytes(), sdpa);
}

// transformers' generate() by release (docs/model.md "transformers' generate() by release"): before 4.45 the head
// runs on every prompt token (fp16 logits + their fp32 upcast), before 4.36 Llama's attention is eager (2 + 4 + 2 B
// per score), and before 4.42 a decode step holds the previous step's cache beside the new one.
TEST(MemoryLoad, TransformersGenerateByRelease) {
  const nlohmann::ordered_json base = {
      {"weights", "fp16"}, {"batch", 16}, {"input_tokens", 512}, {"output_tokens", 512}, {"context", 1024}};
  nlohmann::ordered_json old = base;
  old["engine"] = "transformers@4.32.0";
  const PreparedWorkload p_old = prepared("llama-2-13b", old);
  EXPECT_EQ(p_old.prompt_logit_bytes, 6.0);
  EXPECT_TRUE(p_old.eager_inference);
  EXPECT_EQ(p_old.eager_score_bytes, 8.0);
  EXPECT_TRUE(p_old.kv_concat_copy);
  nlohmann::ordered_json now = base;
  now["engine"] = "transformers";
  const PreparedWorkload p_now = prepared("llama-2-13b", now);
  EXPECT_EQ(p_now.prompt_logit_bytes, 0.0);
  EXPECT_FALSE(p_now.eager_inference);
  EXPECT_FALSE(p_now.kv_concat_copy);
  nlohmann::ordered_json mid = base;
  mid["engine"] = "transformers@4.44.2";  // one cache, SDPA, still every prompt token's logits
  const PreparedWorkload p_mid = prepared("llama-2-13b", mid);
  EXPECT_EQ(p_mid.prompt_logit_bytes, 6.0);
  EXPECT_FALSE(p_mid.eager_inference);
  EXPECT_FALSE(p_mid.kv_concat_copy);
  // At the end of generation 4.32 holds two caches: 16 x 1023 tokens x 40 layers x 2 x 5120 x 2 B more.
  const double extra = estimate_memory(p_old).allocated_bytes() - estimate_memory(p_now).allocated_bytes();
  EXPECT_GT(extra, 0.99 * 16.0 * 1023 * 40 * 2 * 5120 * 2);
  // A prefill-only call (one new token) runs no decode step: no second cache.
  nlohmann::ordered_json prefill = old;
  prefill["output_tokens"] = 1;
  prefill["context"] = 513;
  const MemoryBreakdown m_prefill = estimate_memory(prepared("llama-2-13b", prefill));
  EXPECT_LT(m_prefill.allocated_bytes(), estimate_memory(p_old).allocated_bytes() - extra / 2);
}

}  // namespace
}  // namespace gpuplan
