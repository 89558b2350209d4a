// llama.cpp over several GPUs (issue #17, session 7): the default --split-mode layer runs each GPU's
// slice of the layers in turn (a pipeline, not tensor parallelism), hands the F32 residual stream from
// GPU to GPU, and from PR #6017 overlaps a prompt's micro-batches on different GPUs (up to
// GGML_SCHED_MAX_COPIES = 4 in flight). src/perf/constants.h, "llama.cpp over several GPUs".
#include <gtest/gtest.h>

#include "gpuplan/catalog.h"
#include "gpuplan/perf.h"
#include "gpuplan/workload.h"
#include "perf/constants.h"
#include "perf/perf_request.h"

namespace gpuplan {
namespace {

using Json = nlohmann::ordered_json;

struct Split {
  perf::PerfSetup setup;
  PerfRun run;
  InferencePerf perf;
  perf::MemoryVerdict verdict;
};

Split predict(int count, Json req) {
  auto ref = Catalog::embedded()->resolve("rtx-4090");
  EXPECT_TRUE(ref.ok());
  const Target t = Target::linked(*ref, count);
  const PerfDevice d = perf_device(t);
  req["count"] = count;
  auto s = perf::parse_perf_setup(req);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  Split p{*s, perf::run_for(*s, d, count), {}, {}};
  p.perf = predict_inference(p.setup.arch, d, p.setup.workload, p.run, p.setup.efficiency);
  perf::MemoryCache memory(p.setup);
  auto v = memory.verdict(t);
  EXPECT_TRUE(v.ok());
  if (v.ok()) p.verdict = *v;
  return p;
}

Json llama_cpp(const char* engine, const char* model, const char* weights, int64_t input, int64_t output) {
  return Json{{"model", model}, {"weights", weights},    {"engine", engine},
              {"batch", 1},     {"input_tokens", input}, {"output_tokens", output}};
}

TEST(LlamaCppLayerSplit, SeveralGpusRunTheirSlicesOfTheLayersInTurn) {
  const Split one = predict(1, llama_cpp("llama.cpp@2024-05", "llama-3-8b", "q4_k_m", 16, 128));
  const Split two = predict(2, llama_cpp("llama.cpp@2024-05", "llama-3-8b", "q4_k_m", 16, 128));
  EXPECT_EQ(one.run.layer_split, 1);
  EXPECT_EQ(two.run.layer_split, 2);
  EXPECT_EQ(two.run.dp, 1);  // one model over both GPUs, not two replicas
  // The slices run in turn: a decode step reads every weight once at one GPU's bandwidth, so it is no
  // faster than on one GPU (tensor parallelism would halve it), and slower by the hand-off only.
  EXPECT_GE(two.perf.tpot_seconds, one.perf.tpot_seconds);
  EXPECT_LT(two.perf.tpot_seconds, 1.05 * one.perf.tpot_seconds);
  // A tensor-parallel request keeps its meaning; so do replicas asked for with dp.
  Json tp = llama_cpp("llama.cpp@2024-05", "llama-3-8b", "q4_k_m", 16, 128);
  tp["tp"] = 2;
  EXPECT_EQ(predict(2, tp).run.layer_split, 1);
  Json dp = llama_cpp("llama.cpp@2024-05", "llama-3-8b", "q4_k_m", 16, 128);
  dp["dp"] = 2;
  EXPECT_EQ(predict(2, dp).run.layer_split, 1);
}

TEST(LlamaCppLayerSplit, A70BModelFitsOverTwoGpusItCouldNotFitOnOne) {
  // Llama-3-70B Q4_K_M is ~40 GB (XiongjieDai's README: 39.59 GB): over one 24 GB GPU, but half of it per
  // GPU in the layer split.
  const Split two = predict(2, llama_cpp("llama.cpp@2024-05", "llama-3-70b", "q4_k_m", 0, 512));
  EXPECT_TRUE(two.verdict.fits);
  // Decode reads the whole model once per token at one GPU's bandwidth: under the roofline of one RTX 4090
  // (1008 GB/s over ~40 GB: 25 tokens/s), where tensor parallelism would allow twice that.
  EXPECT_LT(two.perf.decode_tokens_per_second, 25.5);
  EXPECT_GT(two.perf.decode_tokens_per_second, 12.0);
}

TEST(LlamaCppLayerSplit, PromptMicroBatchesOverlapFromPipelineParallelism) {
  // PR #6017 (2024-03-13): up to GGML_SCHED_MAX_COPIES = 4 micro-batches in flight on different GPUs.
  const Split before = predict(4, llama_cpp("llama.cpp@2024-03-01", "llama-3-8b", "fp16", 4096, 1));
  const Split after = predict(4, llama_cpp("llama.cpp@2024-05", "llama-3-8b", "fp16", 4096, 1));
  EXPECT_EQ(before.run.pipeline_copies, 1);
  EXPECT_EQ(after.run.pipeline_copies, perf::kLlamaCppSchedMaxCopies);
  // 8 micro-batches of 512 over 4 stages: 8 x 4 = 32 stage-times in turn. Pipelined, they overlap within
  // each llama_decode call of n_batch = 2048 tokens only: two calls of 4 + 4 - 1 = 7, 14 stage-times.
  EXPECT_EQ(after.run.pipeline_call_tokens, perf::kLlamaCppPipelineCallTokens);
  const double speedup = after.perf.prefill_tokens_per_second / before.perf.prefill_tokens_per_second;
  EXPECT_NEAR(speedup, 32.0 / 14.0, 0.1);
  // A prompt of one call (2048 tokens, 4 micro-batches) gets the same overlap as two: 16 / 7.
  const Split call_before = predict(4, llama_cpp("llama.cpp@2024-03-01", "llama-3-8b", "fp16", 2048, 1));
  const Split call_after = predict(4, llama_cpp("llama.cpp@2024-05", "llama-3-8b", "fp16", 2048, 1));
  EXPECT_NEAR(call_after.perf.prefill_tokens_per_second / call_before.perf.prefill_tokens_per_second, 16.0 / 7.0, 0.1);
  // Two micro-batches over 4 stages: 8 stage-times in turn, 4 + 1 = 5 with the second one stage behind.
  const Split two_before = predict(4, llama_cpp("llama.cpp@2024-03-01", "llama-3-8b", "fp16", 1024, 1));
  const Split two_after = predict(4, llama_cpp("llama.cpp@2024-05", "llama-3-8b", "fp16", 1024, 1));
  EXPECT_NEAR(two_after.perf.prefill_tokens_per_second / two_before.perf.prefill_tokens_per_second, 8.0 / 5.0, 0.1);
  // A prompt of one micro-batch has nothing to overlap.
  const Split short_before = predict(4, llama_cpp("llama.cpp@2024-03-01", "llama-3-8b", "fp16", 512, 1));
  const Split short_after = predict(4, llama_cpp("llama.cpp@2024-05", "llama-3-8b", "fp16", 512, 1));
  EXPECT_NEAR(short_after.perf.ttft_seconds, short_before.perf.ttft_seconds, 1e-12);
}

TEST(LlamaCppLayerSplit, BuildsBeforeTheLayerSplitAreNotSplitByLayers) {
  // Before PR #4766 (2024-01-12) llama.cpp split every matrix by rows over the GPUs: not modelled.
  EXPECT_EQ(predict(2, llama_cpp("llama.cpp@2023-12", "llama-3-8b", "q4_k_m", 16, 128)).run.layer_split, 1);
  EXPECT_EQ(predict(2, llama_cpp("vllm", "llama-3-8b", "bf16", 16, 128)).run.layer_split, 1);
}

}  // namespace
}  // namespace gpuplan
