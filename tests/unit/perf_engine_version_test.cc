// Engine versions (`--engine NAME@VERSION`) and the llama.cpp kernel mechanisms they switch (issue #17):
// CUDA graphs from PR #6766, MMQ by default from PR #8075 (before it: dequantize + FP16 cuBLAS above 32
// rows), prompts in micro-batches of 512 tokens. src/perf/constants.h, "llama.cpp kernels".
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

TEST(EngineVersion, ParsesReleasesAndDates) {
  auto release = parse_engine_version("0.6.3");
  ASSERT_TRUE(release.ok());
  EXPECT_TRUE(release->given);
  EXPECT_EQ(release->parts, (std::array<int, 3>{0, 6, 3}));
  EXPECT_EQ(engine_version_text(*release), "0.6.3");
  auto date = parse_engine_version("2024-01-10");
  ASSERT_TRUE(date.ok());
  EXPECT_EQ(date->parts, (std::array<int, 3>{2024, 1, 10}));
  EXPECT_EQ(engine_version_text(*date), "2024-01-10");
  auto month = parse_engine_version("2024-05");
  ASSERT_TRUE(month.ok());
  EXPECT_EQ(engine_version_text(*month), "2024-05");
  auto v = parse_engine_version("v0.5");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->parts, (std::array<int, 3>{0, 5, 0}));
  // Ordered by parts: a month alone is its start.
  EXPECT_TRUE(version_before(*month, EngineVersion{{2024, 5, 8}, true, 3, '-'}));
  EXPECT_FALSE(version_before(EngineVersion{}, EngineVersion{{2024, 5, 8}, true, 3, '-'}));  // unset = current
}

TEST(EngineVersion, RejectsWhatIsNotAVersion) {
  for (const char* bad : {"", "b1786", "1..2", "1.2.3.4", "1.2-3", "2024-", "-1", "1000000", "0.6rc1", "v"}) {
    auto v = parse_engine_version(bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.error().code, ErrorCode::kUsage) << bad;
    EXPECT_EQ(v.error().field, "engine") << bad;
    EXPECT_NE(v.error().message.find("llama.cpp@2024-01-10"), std::string::npos) << v.error().message;
  }
}

TEST(EngineVersion, WorkloadReadsNameAtVersion) {
  auto w = parse_workload(Json{{"model", "llama-2-7b"}, {"engine", "llama.cpp@2024-01-10"}});
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(w->engine, Engine::kLlamaCpp);
  EXPECT_EQ(engine_version_text(w->engine_version), "2024-01-10");
  EXPECT_EQ(workload_json(*w)["engine"], "llama.cpp@2024-01-10");
  auto bad = parse_workload(Json{{"model", "llama-2-7b"}, {"engine", "llama.cpp@soon"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "engine");
  auto unknown = parse_workload(Json{{"model", "llama-2-7b"}, {"engine", "llamacpp2@0.1"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().field, "engine");
}

using test::Predicted;
Predicted predict(const char* gpu, const Json& req) { return test::predict_on_one(gpu, req); }

Json llama_cpp(const char* engine, const char* weights, int64_t input, int64_t output) {
  return Json{{"model", "llama-2-7b"}, {"weights", weights},     {"engine", engine}, {"batch", 1},
              {"input_tokens", input}, {"output_tokens", output}};
}

TEST(LlamaCppKernels, CudaGraphsOnlyFromTheirBuild) {
  const Predicted old = predict("rtx-4090", llama_cpp("llama.cpp@2024-04-19", "q4_0", 16, 128));
  const Predicted now = predict("rtx-4090", llama_cpp("llama.cpp", "q4_0", 16, 128));
  EXPECT_FALSE(old.run.cuda_graphs);
  EXPECT_TRUE(now.run.cuda_graphs);
  // Without graphs each kernel adds its native host launch (kNativeLaunchSeconds), not Python's 15 us:
  // a few percent, as PR #6766 measured (138.31 -> 146.81 tokens/s on this GPU).
  const double ratio = old.perf.tpot_seconds / now.perf.tpot_seconds;
  EXPECT_GT(ratio, 1.02);
  EXPECT_LT(ratio, 1.2);
  // The row's own switch still wins over the version's default.
  Json forced = llama_cpp("llama.cpp@2024-04-19", "q4_0", 16, 128);
  forced["cuda_graphs"] = true;
  EXPECT_TRUE(predict("rtx-4090", forced).run.cuda_graphs);
}

TEST(LlamaCppKernels, OldBuildsDequantizeToFp16ForCublasAboveThirtyTwoRows) {
  const Predicted old = predict("rtx-4090", llama_cpp("llama.cpp@2024-01-10", "q4_0", 512, 1));
  const Predicted now = predict("rtx-4090", llama_cpp("llama.cpp", "q4_0", 512, 1));
  EXPECT_EQ(old.run.cublas_above_rows, 32);
  EXPECT_EQ(now.run.cublas_above_rows, 0);  // int8 tensor cores: MMQ for every row count
  // The fp16 copy moves (bits/8 + 2) bytes per weight per micro-batch, and the matmul runs at the 16-bit
  // rate: the old build's prompt processing is slower than MMQ on int8 tensor cores.
  EXPECT_LT(old.perf.prefill_tokens_per_second, now.perf.prefill_tokens_per_second);
  // Decode (one row) is MMVQ in both builds: the cuBLAS path does not touch it beyond the graphs.
  const Predicted old_decode = predict("rtx-4090", llama_cpp("llama.cpp@2024-06-01", "q4_0", 16, 128));
  EXPECT_TRUE(old_decode.run.cuda_graphs);
  EXPECT_NEAR(old_decode.perf.tpot_seconds,
              predict("rtx-4090", llama_cpp("llama.cpp", "q4_0", 16, 128)).perf.tpot_seconds, 1e-12);
  // fp16 weights have nothing to dequantize: the version does not change their prompt speed.
  EXPECT_EQ(predict("rtx-4090", llama_cpp("llama.cpp@2024-01-10", "fp16", 512, 1)).run.cublas_above_rows, 0);
}

TEST(LlamaCppKernels, VoltaDequantizesAboveSixtyFourRowsInCurrentBuilds) {
  // No int8 MMA on V100: dp4a MMQ below MMQ_DP4A_MAX_BATCH_SIZE, FP16 cuBLAS on a copy above.
  EXPECT_EQ(predict("v100-16gb-sxm2", llama_cpp("llama.cpp", "q4_0", 512, 1)).run.cublas_above_rows, 64);
}

TEST(LlamaCppKernels, LongPromptsRunInMicroBatchesOfFiveHundredTwelve) {
  // Each 512-token micro-batch repeats the matmuls' fixed costs and (old builds) the fp16 copy: prompt
  // tokens per second fall from pp512 to pp4096 by more than attention alone makes them.
  const Predicted pp512 = predict("rtx-4090", llama_cpp("llama.cpp@2024-01-10", "q4_0", 512, 1));
  const Predicted pp4096 = predict("rtx-4090", llama_cpp("llama.cpp@2024-01-10", "q4_0", 4096, 1));
  Json whole = llama_cpp("llama.cpp@2024-01-10", "q4_0", 4096, 1);
  Predicted one_pass = predict("rtx-4090", whole);
  one_pass.run.prefill_chunk_tokens = 0;  // the same prompt as one forward pass
  const InferencePerf single =
      predict_inference(one_pass.setup.arch, perf_device(Target::linked(*Catalog::embedded()->resolve("rtx-4090"), 1)),
                        one_pass.setup.workload, one_pass.run, one_pass.setup.efficiency);
  EXPECT_EQ(pp4096.run.prefill_chunk_tokens, 512);
  EXPECT_LT(pp4096.perf.prefill_tokens_per_second, single.prefill_tokens_per_second);
  EXPECT_LT(pp4096.perf.prefill_tokens_per_second, pp512.perf.prefill_tokens_per_second);
  // A prompt inside one micro-batch is one pass either way.
  Predicted short_one = predict("rtx-4090", llama_cpp("llama.cpp@2024-01-10", "q4_0", 512, 1));
  short_one.run.prefill_chunk_tokens = 0;
  const InferencePerf short_single =
      predict_inference(short_one.setup.arch, perf_device(Target::linked(*Catalog::embedded()->resolve("rtx-4090"), 1)),
                        short_one.setup.workload, short_one.run, short_one.setup.efficiency);
  EXPECT_NEAR(short_single.ttft_seconds, pp512.perf.ttft_seconds, 1e-12);
}

// llama.cpp's prompt processing (constants.h, "llama.cpp prompt processing"): attention without flash
// attention before PR #15434 unless the request says flash_attention, FP16-accumulate cuBLAS.
TEST(LlamaCppPrompt, BuildsBeforeTheFlashAttentionDefaultMaterialiseKq) {
  const Predicted old = predict("rtx-4090", llama_cpp("llama.cpp@2024-05", "q4_k_m", 4096, 1));
  const Predicted now = predict("rtx-4090", llama_cpp("llama.cpp", "q4_k_m", 4096, 1));
  EXPECT_EQ(old.run.kq_pass_bytes, perf::kLlamaCppKqPassBytesPerScore);
  EXPECT_EQ(now.run.kq_pass_bytes, 0);
  Json fa = llama_cpp("llama.cpp@2024-05", "q4_k_m", 4096, 1);
  fa["flash_attention"] = true;  // -fa 1 on the old build
  const Predicted old_fa = predict("rtx-4090", fa);
  EXPECT_EQ(old_fa.run.kq_pass_bytes, 0);
  Json no_fa = llama_cpp("llama.cpp", "q4_k_m", 4096, 1);
  no_fa["flash_attention"] = false;  // -fa 0 on a current build
  EXPECT_EQ(predict("rtx-4090", no_fa).run.kq_pass_bytes, perf::kLlamaCppKqPassBytesPerScore);
  // The KQ rectangle grows with the prompt: pp4096 pays for it, pp512 hardly.
  EXPECT_LT(old.perf.prefill_tokens_per_second, 0.9 * old_fa.perf.prefill_tokens_per_second);
  Json short_fa = llama_cpp("llama.cpp@2024-05", "q4_k_m", 512, 1);
  const double pp512 = predict("rtx-4090", short_fa).perf.prefill_tokens_per_second;
  short_fa["flash_attention"] = true;
  EXPECT_GT(pp512, 0.9 * predict("rtx-4090", short_fa).perf.prefill_tokens_per_second);
  // Decode steps (one query) are not the KQ path's concern.
  EXPECT_NEAR(predict("rtx-4090", llama_cpp("llama.cpp@2024-05", "q4_k_m", 16, 128)).perf.tpot_seconds,
              predict("rtx-4090",
                      [] {
                        Json j = llama_cpp("llama.cpp@2024-05", "q4_k_m", 16, 128);
                        j["flash_attention"] = true;
                        return j;
                      }())
                  .perf.tpot_seconds,
              1e-12);
}

TEST(LlamaCppPrompt, CublasAccumulatesInFp16AtTheGeForceRate) {
  // fp16 weights go through 16-bit cuBLAS with CUBLAS_COMPUTE_16F: on the RTX 4090 (330.3 TFLOPS with
  // FP16 accumulate, 165.2 with FP32) the prompt's matmuls run faster than a transformers run of the
  // same prompt; the A100 has no faster FP16-accumulate rate to gain.
  const auto d4090 = perf_device(Target::linked(*Catalog::embedded()->resolve("rtx-4090"), 1));
  EXPECT_NEAR(d4090.fp16_fp16acc_flops, 330.3e12, 1e9);
  const auto da100 = perf_device(Target::linked(*Catalog::embedded()->resolve("a100-80gb-sxm4"), 1));
  EXPECT_EQ(da100.fp16_fp16acc_flops, 0);
  Json fa = llama_cpp("llama.cpp", "fp16", 512, 1);
  fa["flash_attention"] = true;
  Predicted p = predict("rtx-4090", fa);
  EXPECT_TRUE(p.run.fp16_accumulate);
  const double with_acc16 = p.perf.prefill_tokens_per_second;
  p.run.fp16_accumulate = false;
  const double without =
      predict_inference(p.setup.arch, d4090, p.setup.workload, p.run, p.setup.efficiency).prefill_tokens_per_second;
  EXPECT_GT(with_acc16, 1.4 * without);
  Predicted a = predict("a100-80gb-sxm4", fa);
  const double a_with = a.perf.prefill_tokens_per_second;
  a.run.fp16_accumulate = false;
  EXPECT_NEAR(
      a_with,
      predict_inference(a.setup.arch, da100, a.setup.workload, a.run, a.setup.efficiency).prefill_tokens_per_second,
      1e-9 * a_with);
}

// vLLM by major version (constants.h, "engine versions"): V0 before 0.8, V1 from 0.8 and when unset.
Json vllm(const char* engine, int64_t input, int64_t output) {
  return Json{{"model", "llama-3.1-8b"}, {"weights", "bf16"},      {"engine", engine}, {"batch", 1},
              {"input_tokens", input},   {"output_tokens", output}};
}

TEST(VllmVersions, TheV1EngineHasAShorterHostStepThanV0) {
  // Batch-1 decode on an A100 (no Hopper attention to switch): the versions differ by the host step only.
  const Predicted v0 = predict("a100-80gb-sxm4", vllm("vllm@0.6.3", 512, 128));
  const Predicted v1 = predict("a100-80gb-sxm4", vllm("vllm@0.8.0", 512, 128));
  const Predicted now = predict("a100-80gb-sxm4", vllm("vllm", 512, 128));
  EXPECT_NEAR(v0.perf.tpot_seconds - v1.perf.tpot_seconds, perf::kStepSecondsVllm - perf::kStepSecondsVllmV1, 1e-9);
  // Unset: the current release, V1 with async scheduling (0.14+), which hides the host step behind the GPU.
  EXPECT_NEAR(now.perf.tpot_seconds, v1.perf.tpot_seconds - perf::kStepSecondsVllmV1, 1e-12);
  // 0.7.x still defaults to V0 (VLLM_USE_V1=1 was opt-in).
  EXPECT_NEAR(predict("a100-80gb-sxm4", vllm("vllm@0.7.3", 512, 128)).perf.tpot_seconds, v0.perf.tpot_seconds, 1e-12);
  // The user's own step_ms wins over either version's default.
  Json mine = vllm("vllm@0.6.3", 512, 128);
  mine["efficiency"] = "step_ms=0.5";
  EXPECT_NEAR(predict("a100-80gb-sxm4", mine).perf.tpot_seconds, v1.perf.tpot_seconds, 1e-12);
}

TEST(VllmVersions, TheV1EngineRunsFlashAttention3OnHopper) {
  // A long prompt on an H100: V0's FlashAttention 2 reaches 35% of the peak, V1's FA3 the engines' 55%,
  // so V1's prompt is faster by more than the host step; on an A100 only the host step differs.
  const Predicted h_v0 = predict("h100-80gb-sxm5", vllm("vllm@0.6.3", 16384, 1));
  const Predicted h_v1 = predict("h100-80gb-sxm5", vllm("vllm", 16384, 1));
  const double step = perf::kStepSecondsVllm - perf::kStepSecondsVllmV1;
  EXPECT_GT(h_v0.perf.ttft_seconds - h_v1.perf.ttft_seconds, step * 10);
  const Predicted a_v0 = predict("a100-80gb-sxm4", vllm("vllm@0.6.3", 16384, 1));
  const Predicted a_v1 = predict("a100-80gb-sxm4", vllm("vllm", 16384, 1));
  EXPECT_NEAR(a_v0.perf.ttft_seconds - a_v1.perf.ttft_seconds, step, 1e-9);
}

int64_t serving_batch(const char* gpu, const char* engine) {
  auto ref = Catalog::embedded()->resolve(gpu);
  EXPECT_TRUE(ref.ok()) << gpu;
  Json req = vllm(engine, 128, 128);
  req.erase("batch");
  auto s = perf::parse_perf_setup(req);
  EXPECT_TRUE(s.ok());
  perf::MemoryCache cache(*s);
  auto v = cache.verdict(Target::linked(*ref, 1));
  EXPECT_TRUE(v.ok());
  return v.ok() ? v->serving_max_batch : -1;
}

TEST(VllmVersions, MaxNumSeqsIs1024OnLargeGpusFrom09ButNotOnTheA100) {
  // Llama-3.1-8B with 128 + 128 tokens: memory holds thousands of sequences on an 80 GB GPU, so the
  // scheduler's max_num_seqs decides (vllm/engine/arg_utils.py get_batch_defaults).
  EXPECT_EQ(serving_batch("h100-80gb-sxm5", "vllm"), perf::kVllmMaxNumSeqsLargeGpu);
  EXPECT_EQ(serving_batch("h100-80gb-sxm5", "vllm@0.8.5"), perf::kVllmMaxNumSeqs);
  EXPECT_EQ(serving_batch("h100-80gb-sxm5", "vllm@0.6.3"), perf::kVllmMaxNumSeqs);
  EXPECT_EQ(serving_batch("a100-80gb-sxm4", "vllm"), perf::kVllmMaxNumSeqs);  // "a100" excluded (PR #17885)
  EXPECT_EQ(serving_batch("l40s", "vllm"), perf::kVllmMaxNumSeqs);            // 48 GB: under 70 GiB
}

TEST(Tinygemm, CompiledInt4AddsItsIssueTimeToItsTransfer) {
  // constants.h, "tinygemm": compiled PyTorch's int4 linears run _weight_int4pack_mm, whose ~145 warp
  // instructions per 1024 weights add to the transfer time at 4 issues per SM per clock.
  Json req{{"model", "llama-2-7b"}, {"weights", "int4-gptq"}, {"engine", "torch-compile"}, {"batch", 1},
           {"input_tokens", 5},     {"output_tokens", 200}};
  Predicted p = predict("a100-80gb-sxm4", req);
  EXPECT_TRUE(p.run.tinygemm);
  const auto d = perf_device(Target::linked(*Catalog::embedded()->resolve("a100-80gb-sxm4"), 1));
  EXPECT_DOUBLE_EQ(d.sm_clock_hz, 1410e6);
  const double with = p.perf.tpot_seconds;
  p.run.tinygemm = false;
  const double without = predict_inference(p.setup.arch, d, p.setup.workload, p.run, p.setup.efficiency).tpot_seconds;
  // Llama-2-7B's 32 layers of 4 x 4096^2 + 3 x 4096 x 11008 quantized weights, one 16-row pass.
  const double weights = 32.0 * (4.0 * 4096 * 4096 + 3.0 * 4096 * 11008);
  const double issue =
      weights * perf::kTinygemmWarpInstructionsPerWeight / (108 * perf::kWarpIssuesPerSmPerCycle * 1410e6);
  EXPECT_NEAR(with - without, issue, 0.01 * issue);
  // Other engines' int4 kernels keep the dequantizing roofline.
  req["engine"] = "vllm";
  EXPECT_FALSE(predict("a100-80gb-sxm4", req).run.tinygemm);
}

}  // namespace
}  // namespace gpuplan
