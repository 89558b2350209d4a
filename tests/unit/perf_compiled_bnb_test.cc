// Compiled PyTorch and bitsandbytes in eager transformers (issue #17 mechanism 4): the `torch-compile`
// engine profile (the decode step as one CUDA graph, inductor-fused element-wise kernels); bitsandbytes
// 4-bit runs gemv_4bit for one row and dequantizes to a 16-bit copy + cuBLAS above; LLM.int8 launches
// its outlier decomposition on every call. src/perf/constants.h, "bitsandbytes" and "engines".
#include <gtest/gtest.h>

#include "gpuplan/catalog.h"
#include "gpuplan/perf.h"
#include "gpuplan/workload.h"
#include "perf/perf_request.h"
#include "perf_predict_util.h"

namespace gpuplan {
namespace {

using Json = nlohmann::ordered_json;

using test::Predicted;
Predicted predict(const char* gpu, const Json& req) { return test::predict_on_one(gpu, req); }

Json infer(const char* model, const char* engine, const char* weights, int64_t batch) {
  return Json{{"model", model}, {"engine", engine},    {"weights", weights},
              {"batch", batch}, {"input_tokens", 512}, {"output_tokens", 512}};
}

TEST(CompiledPytorch, IsAnEngineWithItsAliases) {
  for (const char* name : {"torch-compile", "gpt-fast", "torchchat", "compiled"}) {
    auto w = parse_workload(Json{{"model", "llama-2-7b"}, {"engine", name}});
    ASSERT_TRUE(w.ok()) << name << ": " << w.error().message;
    EXPECT_EQ(w->engine, Engine::kTorchCompile) << name;
  }
  auto versioned = parse_workload(Json{{"model", "llama-2-7b"}, {"engine", "torch-compile@2.4"}});
  ASSERT_TRUE(versioned.ok()) << versioned.error().message;
}

TEST(CompiledPytorch, DecodeStepLosesEagerHostWork) {
  // gpt-fast's case: batch 1, bf16. Eager PyTorch moves 3x the element-wise bytes and launches 25 kernels
  // per layer; compiled, 10 fused kernels in one graph and a loop with no per-kernel launch.
  const Predicted eager = predict("a100-80gb-sxm4", infer("llama-2-7b", "pytorch", "bf16", 1));
  const Predicted compiled = predict("a100-80gb-sxm4", infer("llama-2-7b", "torch-compile", "bf16", 1));
  EXPECT_TRUE(compiled.run.cuda_graphs);
  EXPECT_LT(compiled.perf.tpot_seconds, eager.perf.tpot_seconds);
  // Batch-1 decode of 7B stays bound by the weights' bytes.
  EXPECT_EQ(compiled.perf.decode_bound, PerfBound::kMemory);
}

TEST(Bitsandbytes, FourBitGemvForOneRowDequantizedCopyAbove) {
  // Batch 1 on an L40S, where reading the fp16 weights (26 GB at 864 GB/s) outlasts generate()'s host
  // launches; on an A100 both formats are host-bound at batch 1 and take the same time.
  const Predicted nf4_1 = predict("l40s", infer("llama-2-13b", "transformers", "nf4", 1));
  const Predicted fp16_1 = predict("l40s", infer("llama-2-13b", "transformers", "fp16", 1));
  const Predicted nf4_16 = predict("a100-80gb-sxm4", infer("llama-2-13b", "transformers", "nf4", 16));
  const Predicted fp16_16 = predict("a100-80gb-sxm4", infer("llama-2-13b", "transformers", "fp16", 16));
  EXPECT_EQ(nf4_1.run.cublas_above_rows, 1);
  EXPECT_EQ(nf4_1.run.linears_per_layer, 7);  // q, k, v, o, gate, up, down
  EXPECT_EQ(fp16_1.run.cublas_above_rows, 0);
  // One row: gemv_4bit reads the packed weights, faster than fp16's 2 bytes per weight.
  EXPECT_LT(nf4_1.perf.tpot_seconds, fp16_1.perf.tpot_seconds);
  // Sixteen rows: every step writes and reads a 16-bit copy of every matrix: slower than fp16.
  EXPECT_GT(nf4_16.perf.tpot_seconds, fp16_16.perf.tpot_seconds);
  // QLoRA training keeps its own dequantize cost (no copy path from inference).
  Json qlora{{"model", "llama-2-7b"}, {"task", "qlora"}, {"weights", "nf4"}, {"engine", "transformers"}};
  auto ref = Catalog::embedded()->resolve("a100-80gb-sxm4");
  auto s = perf::parse_perf_setup(qlora);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(perf::run_for(*s, perf_device(Target::linked(*ref, 1)), 1).cublas_above_rows, 0);
}

TEST(Bitsandbytes, LlmInt8IsSlowerThanHalfAtSmallBatch) {
  // LLM.int8's decomposition launches ~20 kernels per linear from Python on every call: slower than fp16
  // at batch 1 although it reads half the bytes (the HF blog's finding for models below BLOOM-176B).
  const Predicted int8 = predict("a100-80gb-sxm4", infer("llama-2-7b", "transformers", "llm-int8", 1));
  const Predicted fp16 = predict("a100-80gb-sxm4", infer("llama-2-7b", "transformers", "fp16", 1));
  EXPECT_EQ(int8.run.extra_kernels_per_layer, 7 * 20);
  EXPECT_EQ(int8.run.weights.compute, Precision::kInt8);  // igemmlt on int8 tensor cores
  EXPECT_GT(int8.perf.tpot_seconds, fp16.perf.tpot_seconds);
}

}  // namespace
}  // namespace gpuplan
