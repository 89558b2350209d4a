// Memory at load time (issue #17, session 7; docs/model.md "Memory at load time"): what a loader stages
// beside the weights before any request, and the verdict when that peak is above the steady state. The
// expected figures come from the loaders' code and the maintainers' statements, not from gpuplan.
#include <gtest/gtest.h>

#include "gpuplan/api.h"
#include "gpuplan/formats.h"
#include "gpuplan/memory.h"
#include "gpuplan/perf.h"
#include "gpuplan/sweep.h"

namespace gpuplan {
namespace {

// Bytes of one GB as the sources print them (decimal).
constexpr double kGb = 1e9;

PreparedWorkload prepared(const char* model, nlohmann::ordered_json extra) {
  extra["model"] = model;
  auto w = parse_workload(extra);
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message);
  auto p = prepare(*w);
  EXPECT_TRUE(p.ok());
  return *p;
}

Target gpus(const char* id, int count) {
  auto catalog = Catalog::embedded();
  auto ref = catalog->resolve(id);
  EXPECT_TRUE(ref.ok());
  return Target::linked(*ref, count);
}

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
  EXPECT_NEAR(staged - 512.0 * 1024 * 1024, matrix * 3, 1);  // beside the 512 MiB CUDA context
  // Below the steady state: it does not decide the verdict.
  EXPECT_LT(p.load_peak_bytes, estimate_memory(p).total_bytes);
  // A GPTQ checkpoint loads as stored: no staging.
  const PreparedWorkload g = prepared("llama-2-13b", {{"weights", "int4-gptq"}, {"context", 1024}});
  EXPECT_NEAR(g.load_peak_bytes - g.weights_per_gpu_bytes, 512.0 * 1024 * 1024, 1);
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

}  // namespace
}  // namespace gpuplan
