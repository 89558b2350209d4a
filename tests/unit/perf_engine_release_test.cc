// TensorRT-LLM by release, vLLM before 0.6.0 and the engine defaults that change an answer (issue #17,
// session 7): src/perf/constants.h "vLLM before 0.6.0", "TensorRT-LLM releases"; docs/model.md
// "TensorRT-LLM by release, vLLM before 0.6 and engine defaults".
#include <gtest/gtest.h>

#include "gpuplan/catalog.h"
#include "gpuplan/perf.h"
#include "gpuplan/workload.h"
#include "perf/constants.h"
#include "perf/perf_request.h"
#include "perf_predict_util.h"

namespace gpuplan {
namespace {

using Json = nlohmann::ordered_json;

InferencePerf predict(const char* gpu, const Json& req) { return test::predict_on_one(gpu, req).perf; }

Json trtllm(const char* engine, const char* model, int64_t batch, int64_t input, int64_t output) {
  return Json{{"model", model},        {"weights", "fp8"},        {"batch", batch},
              {"input_tokens", input}, {"output_tokens", output}, {"engine", engine}};
}

TEST(TensorrtLlmReleases, XqaFrom08IsWhatTheBlogMeasuredOnLlama70B) {
  // blogs/XQA-kernel.md (v0.8a): Llama-70B FP8 on one H200, 128 in / 2048 out, 1,227 tok/s/GPU without XQA
  // and 2,941 with it, 2.4x; the batch is not stated (its curve sweeps 1-256: 128, the middle, here). The
  // masked MHA kernel of the releases before 0.8.0 reads the 8-head group's K/V once per query head.
  const InferencePerf before = predict("h200-141gb-sxm", trtllm("tensorrt-llm@0.7.1", "llama-2-70b", 128, 128, 2048));
  const InferencePerf after = predict("h200-141gb-sxm", trtllm("tensorrt-llm@0.8.0", "llama-2-70b", 128, 128, 2048));
  const double speedup = after.throughput_tokens_per_second / before.throughput_tokens_per_second;
  EXPECT_GT(speedup, 1.5);  // the blog's 2.4x, with the batch unknown: between 1.5x and 3.5x
  EXPECT_LT(speedup, 3.5);
  // The current release is the XQA one.
  const InferencePerf current = predict("h200-141gb-sxm", trtllm("tensorrt-llm", "llama-2-70b", 128, 128, 2048));
  EXPECT_DOUBLE_EQ(current.throughput_tokens_per_second, after.throughput_tokens_per_second);
}

TEST(TensorrtLlmReleases, MultiHeadModelsDecodeTheSameBeforeXqa) {
  // Llama-2-13B has as many KV heads as query heads: masked MHA reads each once, as XQA would.
  const InferencePerf before = predict("h200-141gb-sxm", trtllm("tensorrt-llm@0.5.0", "llama-2-13b", 256, 128, 2048));
  const InferencePerf after = predict("h200-141gb-sxm", trtllm("tensorrt-llm@0.9.0", "llama-2-13b", 256, 128, 2048));
  EXPECT_DOUBLE_EQ(before.tpot_seconds, after.tpot_seconds);
}

TEST(TensorrtLlmReleases, GptSessionContextStepWaitsForTheHostEnqueue) {
  // GptSession (before 0.10) enqueues the context step from the host without a CUDA graph
  // (gptSession.cpp, executeContext at step 0): a 128-token prompt on Hopper with FP8 takes at least the
  // enqueue of its layers plus the host step; the executor releases and long prompts keep the GPU's time.
  const double floor = 32 * perf::kTensorrtSessionContextEnqueueSecondsPerLayer + perf::kStepSecondsTensorrtLlm;
  const InferencePerf session = predict("h100-80gb-sxm5", trtllm("tensorrt-llm@0.9.0", "llama-2-7b", 1, 128, 1));
  const InferencePerf executor = predict("h100-80gb-sxm5", trtllm("tensorrt-llm@0.11.0", "llama-2-7b", 1, 128, 1));
  EXPECT_NEAR(session.ttft_seconds, floor, 1e-9);
  EXPECT_LT(executor.ttft_seconds, floor);
  EXPECT_DOUBLE_EQ(session.tpot_seconds, executor.tpot_seconds);  // generation steps: unchanged
  const InferencePerf long_session = predict("h100-80gb-sxm5", trtllm("tensorrt-llm@0.9.0", "llama-2-7b", 1, 2048, 1));
  const InferencePerf long_executor =
      predict("h100-80gb-sxm5", trtllm("tensorrt-llm@0.11.0", "llama-2-7b", 1, 2048, 1));
  EXPECT_DOUBLE_EQ(long_session.ttft_seconds, long_executor.ttft_seconds);  // GPU-bound at 2048 tokens
}

Json vllm(const char* engine, int64_t batch) {
  return Json{{"model", "llama-3-70b"}, {"weights", "fp8"}, {"batch", batch}, {"input_tokens", 128},
              {"output_tokens", 128},   {"engine", engine}, {"tp", 4},        {"count", 4}};
}

TEST(VllmBefore06, OutputProcessingIsOnTheStepAsIssue6913Measured) {
  // vllm#6913's table (Llama-3-70B fp8, 4xH100): _process_model_outputs 0.2 ms at batch 1, 3.4 ms at 32.
  // vLLM 0.6.0 overlaps it with the next step, so 0.5.3 is slower per token by about that much.
  auto tpot = [](const char* engine, int64_t batch) {
    auto ref = Catalog::embedded()->resolve("h100-80gb-sxm5");
    EXPECT_TRUE(ref.ok());
    const Target t = Target::linked(*ref, 4);
    const PerfDevice d = perf_device(t);
    auto s = perf::parse_perf_setup(vllm(engine, batch));
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    const PerfRun run = perf::run_for(*s, d, 4);
    return predict_inference(s->arch, d, s->workload, run, s->efficiency).tpot_seconds;
  };
  EXPECT_NEAR(tpot("vllm@0.5.3", 32) - tpot("vllm@0.6.3", 32), 3.4e-3, 0.3e-3);
  EXPECT_NEAR(tpot("vllm@0.5.3", 1) - tpot("vllm@0.6.3", 1), 0.2e-3, 0.15e-3);
}

Json llama8b(const char* engine) {
  return Json{
      {"model", "llama-3.1-8b"}, {"batch", 1}, {"input_tokens", 1024}, {"output_tokens", 128}, {"engine", engine}};
}

TEST(VllmAsyncScheduling, From014ADecodeStepHidesTheHostStepBehindTheGpu) {
  // v0.14.0 release notes / PR #27614: the scheduler runs one step ahead of the GPU, so a decode step that
  // takes longer on the GPU than the host's 0.5 ms loses the host step; the prefill keeps it.
  const InferencePerf sync = predict("h100-80gb-sxm5", llama8b("vllm@0.13.0"));
  const InferencePerf async = predict("h100-80gb-sxm5", llama8b("vllm@0.14.0"));
  EXPECT_NEAR(sync.tpot_seconds - async.tpot_seconds, perf::kStepSecondsVllmV1, 1e-12);
  EXPECT_DOUBLE_EQ(sync.ttft_seconds, async.ttft_seconds);
  const InferencePerf current = predict("h100-80gb-sxm5", llama8b("vllm"));
  EXPECT_DOUBLE_EQ(current.tpot_seconds, async.tpot_seconds);
  // V0 and the V1 releases before 0.14 add the host step to the GPU's.
  const InferencePerf v0 = predict("h100-80gb-sxm5", llama8b("vllm@0.6.3"));
  EXPECT_GT(v0.tpot_seconds, sync.tpot_seconds);
}

TEST(VllmAsyncScheduling, AHostStepLongerThanTheGpuStepIsTheStep) {
  // max(GPU, host): with a 50 ms host step (--efficiency step_ms=50) the overlapped decode step is the host
  // step itself, the synchronous one the GPU's time plus it.
  Json slow_host = llama8b("vllm@0.14.0");
  slow_host["efficiency"] = "step_ms=50";
  Json slow_sync = llama8b("vllm@0.13.0");
  slow_sync["efficiency"] = "step_ms=50";
  const InferencePerf async = predict("h100-80gb-sxm5", slow_host);
  const InferencePerf sync = predict("h100-80gb-sxm5", slow_sync);
  EXPECT_DOUBLE_EQ(async.tpot_seconds, 50e-3);
  EXPECT_GT(sync.tpot_seconds, 50e-3 + 1e-3);
}

TEST(VllmAsyncScheduling, PipelineParallelKeepsTheHostStep) {
  // The release notes exclude pipeline parallelism from async scheduling.
  auto tpot = [](const char* engine, int pp) {
    auto ref = Catalog::embedded()->resolve("h100-80gb-sxm5");
    EXPECT_TRUE(ref.ok());
    const Target t = Target::linked(*ref, 2);
    const PerfDevice d = perf_device(t);
    Json req = llama8b(engine);
    req["count"] = 2;
    req[pp > 1 ? "pp" : "tp"] = 2;
    auto s = perf::parse_perf_setup(req);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    const PerfRun run = perf::run_for(*s, d, 2);
    return predict_inference(s->arch, d, s->workload, run, s->efficiency).tpot_seconds;
  };
  EXPECT_DOUBLE_EQ(tpot("vllm@0.13.0", 2), tpot("vllm@0.14.0", 2));
  EXPECT_NEAR(tpot("vllm@0.13.0", 1) - tpot("vllm@0.14.0", 1), perf::kStepSecondsVllmV1, 1e-12);  // tp 2
}

TEST(EngineDefaults, TensorrtLlmKeepsAnFp8BuildsKvCacheInFp8AndVllmIn16Bits) {
  auto trt = parse_workload(Json{{"model", "llama-3.1-8b"}, {"weights", "fp8"}, {"engine", "tensorrt-llm"}});
  ASSERT_TRUE(trt.ok()) << trt.error().message;
  EXPECT_EQ(trt->kv_cache, KvFormat::kFp8);
  auto given = parse_workload(
      Json{{"model", "llama-3.1-8b"}, {"weights", "fp8"}, {"kv_cache", "fp16"}, {"engine", "tensorrt-llm"}});
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(given->kv_cache, KvFormat::kFp16);  // a stated format wins
  auto vllm_fp8 = parse_workload(Json{{"model", "llama-3.1-8b"}, {"weights", "fp8"}, {"engine", "vllm"}});
  ASSERT_TRUE(vllm_fp8.ok());
  EXPECT_NE(vllm_fp8->kv_cache, KvFormat::kFp8);  // --kv-cache-dtype auto: the model's 16-bit type
  auto bf16 = parse_workload(Json{{"model", "llama-3.1-8b"}, {"engine", "tensorrt-llm"}});
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ(bf16->kv_cache, KvFormat::kBf16);
}

int64_t serving_batch(const char* gpu, int count, Json req) {
  auto ref = Catalog::embedded()->resolve(gpu);
  EXPECT_TRUE(ref.ok()) << gpu;
  auto s = perf::parse_perf_setup(req);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  perf::MemoryCache cache(*s);
  auto v = cache.verdict(Target::linked(*ref, count));
  EXPECT_TRUE(v.ok());
  return v.ok() ? v->serving_max_batch : -1;
}

TEST(EngineDefaults, TrtllmBenchCapsTheBatchAt4096AndReservesWholeSequences) {
  // Llama-3.1-8B FP8 with its FP8 KV cache (2 x 32 layers x 8 KV heads x 128 x 1 byte = 64 KiB a token) on
  // an H200: ~120 GB of cache holds far more than 4096 sequences of 256 tokens, so tuning.py's cap decides.
  Json short_req{{"model", "llama-3.1-8b"},
                 {"weights", "fp8"},
                 {"input_tokens", 128},
                 {"output_tokens", 128},
                 {"engine", "tensorrt-llm"}};
  EXPECT_EQ(serving_batch("h200-141gb-sxm", 1, short_req), perf::kTensorrtLlmBenchMaxBatch);
  // guaranteed_no_evict reserves the prompt and the whole output: at 128 in / 2048 out each sequence holds
  // 2176 tokens, so an 80 GB H100 holds fewer than 80 GiB / (2176 x 64 KiB) = 602 of them (on-demand
  // blocks, 128 + 1024 tokens on average, would admit about twice as many).
  Json long_req{{"model", "llama-3.1-8b"},
                {"weights", "fp8"},
                {"input_tokens", 128},
                {"output_tokens", 2048},
                {"engine", "tensorrt-llm"}};
  const int64_t batch = serving_batch("h100-80gb-sxm5", 1, long_req);
  EXPECT_GT(batch, 100);
  EXPECT_LT(batch, 602);
}

}  // namespace
}  // namespace gpuplan
