// SGLang as an engine profile (issue #17, session 8; docs/model.md "SGLang (issue #17, session 8)"): the
// default mem_fraction_static of its three generations of server_args.py, the KV pool model_runner.py's
// profile_max_num_token sizes from it, and the perf profile's overlap scheduler and FA3 by release. The
// expected figures are SGLang's own arithmetic, not gpuplan's output.
#include <gtest/gtest.h>

#include "gpuplan/api.h"
#include "gpuplan/memory.h"
#include "gpuplan/workload.h"
#include "perf/constants.h"
#include "workload_test_util.h"

namespace gpuplan {
namespace {

using testing_util::gpus;
using testing_util::prepared;

Workload sglang(const char* engine, int tp) {
  auto w = parse_workload({{"model", "llama-3.1-8b"}, {"engine", engine}, {"tp", tp}, {"count", tp}});
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message);
  return *w;
}

constexpr double kH100Bytes = 81559.0 * kBytesPerMib;  // nvidia-smi memory.total of an H100 80GB HBM3

TEST(SglangMemFraction, BeforeGpuMemoryHeuristicsItIsTheTensorParallelTable) {
  // server_args.py __post_init__ of 0.3/0.4: 0.88, 0.87 (tp 2), 0.85 (tp 4), 0.81 (tp 8; 0.83 in 0.3), 0.79.
  EXPECT_DOUBLE_EQ(sglang_mem_fraction_static(sglang("sglang@0.4.6", 1), kH100Bytes), 0.88);
  EXPECT_DOUBLE_EQ(sglang_mem_fraction_static(sglang("sglang@0.4.6", 2), kH100Bytes), 0.87);
  EXPECT_DOUBLE_EQ(sglang_mem_fraction_static(sglang("sglang@0.4.6", 4), kH100Bytes), 0.85);
  EXPECT_DOUBLE_EQ(sglang_mem_fraction_static(sglang("sglang@0.4.6", 8), kH100Bytes), 0.81);
  EXPECT_DOUBLE_EQ(sglang_mem_fraction_static(sglang("sglang@0.3.0", 8), kH100Bytes), 0.83);
  EXPECT_DOUBLE_EQ(sglang_mem_fraction_static(sglang("sglang@0.4.6", 16), kH100Bytes), 0.79);
}

TEST(SglangMemFraction, PullRequest7054ReservesByGpuMemory) {
  // 35-90 GiB: (9.5 + tp x pp / 2) GiB reserved: an H100 at tp 1 keeps 10 GiB.
  const double mib = kH100Bytes / kBytesPerMib;
  const double expected = std::round((mib - 10.0 * 1024) / mib * 1000) / 1000;
  EXPECT_DOUBLE_EQ(sglang_mem_fraction_static(sglang("sglang@0.5.0", 1), kH100Bytes), expected);
}

TEST(SglangMemFraction, CurrentReleaseIsPullRequest10975sReserve) {
  // 512 + 1.5 x 8192 + 2 x 256 + 1 x 1024 / 8 = 13440 MiB on an H100 80GB at tp 1: 0.835 of 81559 MiB
  // (the docs' example rounds the capacity to 80 GiB: 0.836).
  EXPECT_DOUBLE_EQ(sglang_mem_fraction_static(sglang("sglang", 1), kH100Bytes),
                   std::round((81559.0 - 13440) / 81559.0 * 1000) / 1000);
  // A 24 GiB card (RTX 4090, 24564 MiB): 512 + 3072 + 48 + 128 = 3760 MiB, 0.847.
  EXPECT_DOUBLE_EQ(sglang_mem_fraction_static(sglang("sglang", 1), 24564.0 * kBytesPerMib), 0.847);
}

TEST(SglangKvPool, IsTheStaticFractionLessTheWeightsInTokens) {
  // profile_max_num_token: rest = free after load - free at start x (1 - 0.88); cell = 8 KV heads x 128 x
  // 32 layers x 2 x 2 B = 128 KiB per token for Llama-3.1-8B in bf16, page size 1.
  const PreparedWorkload p = prepared("llama-3.1-8b", {{"engine", "sglang@0.4.6"}, {"context", 4096}});
  const Target t = gpus("h100-80gb-sxm5", 1);
  const TargetFit f = fit_target(p, t);
  ASSERT_TRUE(f.fits);
  const double free_at_start = f.capacity_bytes - f.memory.cuda_context_bytes;
  // Workspaces, like activations, live in the rest of the GPU.
  const double pool = 0.88 * free_at_start - f.memory.weights_bytes - f.memory.communication_bytes;
  EXPECT_NEAR(f.kv_pool_bytes, pool, 1e-6 * pool);
  EXPECT_EQ(f.kv_pool_tokens, static_cast<int64_t>(std::floor(f.kv_pool_bytes / (128.0 * 1024))));
  // vLLM at its 0.9 keeps its profile run's activations inside the share; SGLang keeps them in the rest.
  const TargetFit v = fit_target(prepared("llama-3.1-8b", {{"engine", "vllm"}, {"context", 4096}}), t);
  EXPECT_GT(f.kv_pool_tokens, 0);
  EXPECT_NE(f.kv_pool_tokens, v.kv_pool_tokens);
}

TEST(SglangKvPool, SeventyBillionInBf16OnTwoH100sHasAPoolOfAFewThousandTokens) {
  // 131.4 GiB of bf16 weights: 65.7 GiB per GPU at tp 2 leaves 0.87 x (78.85 - 0.5) - 65.7 - 0.38 = 2.1 GiB
  // of pool, 13.6k tokens at 160 KiB a token (80 layers x 4 KV heads per GPU x 128 x 2 x 2 B): one 4k
  // sequence fits, one of 32k does not; at tp 4 (0.85) 33 GiB of weights per GPU leave a pool for 32k.
  const PreparedWorkload two = prepared("llama-3.1-70b", {{"engine", "sglang@0.4.6"}, {"tp", 2}, {"context", 4096}});
  const TargetFit f2 = fit_target(two, gpus("h100-80gb-sxm5", 2));
  EXPECT_TRUE(f2.fits);
  EXPECT_GT(f2.kv_pool_tokens, 12000);
  EXPECT_LT(f2.kv_pool_tokens, 15000);
  const PreparedWorkload long2 = prepared("llama-3.1-70b", {{"engine", "sglang@0.4.6"}, {"tp", 2}, {"context", 32768}});
  EXPECT_FALSE(fit_target(long2, gpus("h100-80gb-sxm5", 2)).fits);
  const PreparedWorkload long4 = prepared("llama-3.1-70b", {{"engine", "sglang@0.4.6"}, {"tp", 4}, {"context", 32768}});
  const TargetFit f4 = fit_target(long4, gpus("h100-80gb-sxm5", 4));
  EXPECT_TRUE(f4.fits);
  EXPECT_GT(f4.kv_pool_tokens, 100000);
}

TEST(SglangPerf, OverlapSchedulerFrom04AndFa3From046) {
  EXPECT_FALSE(perf::engine_perf_at(Engine::kSglang, sglang("sglang@0.3.6", 1).engine_version).overlapped_host);
  EXPECT_TRUE(perf::engine_perf_at(Engine::kSglang, sglang("sglang@0.4.0", 1).engine_version).overlapped_host);
  EXPECT_TRUE(perf::engine_perf_at(Engine::kSglang, EngineVersion{}).overlapped_host);
  EXPECT_FALSE(perf::engine_perf_at(Engine::kSglang, sglang("sglang@0.4.5", 1).engine_version).hopper_attention);
  EXPECT_TRUE(perf::engine_perf_at(Engine::kSglang, sglang("sglang@0.4.6", 1).engine_version).hopper_attention);
  const perf::EnginePerf& row = perf::engine_perf(Engine::kSglang);
  EXPECT_DOUBLE_EQ(row.kernels_per_layer, perf::kKernelsPerLayerServing);
  EXPECT_DOUBLE_EQ(row.step_seconds, perf::kStepSecondsVllmV1);
  EXPECT_TRUE(row.cuda_graphs);
}

TEST(SglangVocabulary, BorrowsVllmsRulesAndHasItsOwnMemory) {
  EXPECT_EQ(memory_engine(Engine::kSglang), Engine::kSglang);
  EXPECT_EQ(rules_engine(Engine::kSglang, Task::kInfer), Engine::kVllm);
  auto e = parse_engine("SGLang");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*e, Engine::kSglang);
}

}  // namespace
}  // namespace gpuplan
