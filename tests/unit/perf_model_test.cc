// Roofline limits and mechanisms of the performance model (perf.h), on zoo models and catalog GPUs.
#include <gtest/gtest.h>

#include "gpuplan/catalog.h"
#include "gpuplan/formats.h"
#include "gpuplan/model.h"
#include "gpuplan/perf.h"
#include "perf/perf_request.h"

namespace gpuplan {
namespace {

const Model& model(const char* id) {
  auto m = zoo_model(id);
  EXPECT_TRUE(m.ok()) << id;
  return **m;
}

Target target(const char* name, int count = 1) {
  auto ref = Catalog::embedded()->resolve(name);
  EXPECT_TRUE(ref.ok()) << name;
  return Target::linked(*ref, count);
}

// A workload (the perf model reads it directly) and what a target resolves for it.
struct PerfCase {
  Workload w;
  PerfRun run;
};
InferencePerf predict_inference(const PerfArch& a, const PerfDevice& d, const PerfCase& c, const PerfEfficiency& e) {
  return gpuplan::predict_inference(a, d, c.w, c.run, e);
}
ServingPerf predict_serving(const PerfArch& a, const PerfDevice& d, const PerfCase& c, const PerfEfficiency& e,
                            int64_t max_batch, double rate) {
  return gpuplan::predict_serving(a, d, c.w, c.run, e, max_batch, rate);
}
TrainPerf predict_training(const PerfArch& a, const PerfDevice& d, const PerfCase& c, const PerfEfficiency& e) {
  return gpuplan::predict_training(a, d, c.w, c.run, e);
}

PerfCase infer(const Model& m, const PerfDevice& d, WeightFormat f, int64_t batch, int64_t in, int64_t out,
               Engine e = Engine::kVllm) {
  PerfCase c;
  c.w.engine = e;
  c.run.weights = perf_weights(f, m, d, e);
  c.w.batch = batch;
  c.w.input_tokens = in;
  c.w.output_tokens = out;
  c.w.context = in + out;
  return c;
}

TEST(PerfModel, DecodeAtBatchOneIsBandwidthBound) {
  const Model& m = model("llama-2-7b");
  const PerfArch a = perf_arch(m);
  const PerfDevice d = perf_device(target("a100-80gb-sxm4"));
  const InferencePerf p = predict_inference(a, d, infer(m, d, WeightFormat::kBf16, 1, 128, 128), default_efficiency());
  EXPECT_EQ(p.decode_bound, PerfBound::kMemory);
  // A step can never beat reading the weights once at the peak bandwidth.
  const double weight_bytes = model_weight_bytes(m, WeightFormat::kBf16).total_bytes;
  EXPECT_GT(p.tpot_seconds, weight_bytes / d.bandwidth_bytes_per_second);
  EXPECT_LT(p.tpot_seconds, 2.0 * weight_bytes / d.bandwidth_bytes_per_second);
}

TEST(PerfModel, LongPrefillIsComputeBound) {
  const Model& m = model("llama-2-7b");
  const PerfDevice d = perf_device(target("h100-80gb-sxm5"));
  const InferencePerf p =
      predict_inference(perf_arch(m), d, infer(m, d, WeightFormat::kBf16, 1, 4096, 1), default_efficiency());
  EXPECT_EQ(p.prefill_bound, PerfBound::kCompute);
  // ... and slower than 2 x params x tokens at the dense peak.
  EXPECT_GT(p.ttft_seconds, 2.0 * 6.5e9 * 4096 / d.peak(Precision::kBf16));
}

TEST(PerfModel, MigSliceGetsItsShare) {
  const Model& m = model("llama-2-7b");
  const PerfArch a = perf_arch(m);
  const PerfDevice full = perf_device(target("a100-80gb-sxm4"));
  const PerfDevice half = perf_device(target("a100-80gb-sxm4/3g.40gb"));
  const PerfEfficiency eff = default_efficiency();
  const auto pf = predict_inference(a, full, infer(m, full, WeightFormat::kBf16, 1, 2048, 256), eff);
  const auto ph = predict_inference(a, half, infer(m, half, WeightFormat::kBf16, 1, 2048, 256), eff);
  // Decode: bandwidth of 4 of 8 memory slices (fixed per-step costs keep it above one half).
  const double decode_ratio = ph.decode_tokens_per_second / pf.decode_tokens_per_second;
  EXPECT_GT(decode_ratio, 0.45);
  EXPECT_LT(decode_ratio, 0.75);
  // Prefill: compute of 42 of 98 SMs.
  const double prefill_ratio = ph.prefill_tokens_per_second / pf.prefill_tokens_per_second;
  EXPECT_NEAR(prefill_ratio, 42.0 / 98.0, 0.06);
}

TEST(PerfModel, TensorParallelSpeedupIsSublinear) {
  const Model& m = model("llama-2-70b");
  const PerfArch a = perf_arch(m);
  const PerfEfficiency eff = default_efficiency();
  double tpot[3];
  int i = 0;
  for (int tp : {2, 4, 8}) {
    const PerfDevice d = perf_device(target("h100-80gb-sxm5", tp));
    PerfCase w = infer(m, d, WeightFormat::kBf16, 1, 512, 128);
    w.w.tp = tp;
    tpot[i++] = predict_inference(a, d, w, eff).tpot_seconds;
  }
  EXPECT_LT(tpot[1], tpot[0]);
  EXPECT_GT(tpot[1], tpot[0] / 2);
  EXPECT_LT(tpot[2], tpot[1]);
  EXPECT_GT(tpot[2], tpot[1] / 2);
}

TEST(PerfModel, PcieAllReducesCostMoreThanNvlink) {
  const Model& m = model("llama-2-13b");
  const PerfArch a = perf_arch(m);
  const PerfDevice nv = perf_device(target("h100-80gb-sxm5", 4));
  PerfDevice pcie = nv;
  pcie.link_bytes_per_second = 63e9;
  pcie.nvlink = false;
  PerfCase w = infer(m, nv, WeightFormat::kBf16, 16, 2048, 1);
  w.w.tp = 4;
  const PerfEfficiency eff = default_efficiency();
  EXPECT_GT(predict_inference(a, pcie, w, eff).ttft_seconds, 1.2 * predict_inference(a, nv, w, eff).ttft_seconds);
}

TEST(PerfModel, Fp8TensorCoresOnlyWhereTheGpuHasThem) {
  const Model& m = model("llama-2-7b");
  const PerfDevice a100 = perf_device(target("a100-80gb-sxm4"));
  const PerfDevice h100 = perf_device(target("h100-80gb-sxm5"));
  const PerfWeights on_a100 = perf_weights(WeightFormat::kFp8, m, a100, Engine::kVllm);
  const PerfWeights on_h100 = perf_weights(WeightFormat::kFp8, m, h100, Engine::kVllm);
  EXPECT_NE(on_a100.compute, Precision::kFp8);
  EXPECT_TRUE(on_a100.dequantize);
  EXPECT_EQ(on_h100.compute, Precision::kFp8);
  EXPECT_NEAR(on_h100.bits_per_weight, 8.0, 0.5);
  // Long prefill: fp8 is faster than bf16 on the H100, not on the A100.
  const PerfArch a = perf_arch(m);
  const PerfEfficiency eff = default_efficiency();
  const auto h8 = predict_inference(a, h100, infer(m, h100, WeightFormat::kFp8, 4, 2048, 1), eff);
  const auto h16 = predict_inference(a, h100, infer(m, h100, WeightFormat::kBf16, 4, 2048, 1), eff);
  const auto a8 = predict_inference(a, a100, infer(m, a100, WeightFormat::kFp8, 4, 2048, 1), eff);
  const auto a16 = predict_inference(a, a100, infer(m, a100, WeightFormat::kBf16, 4, 2048, 1), eff);
  EXPECT_LT(h8.ttft_seconds, 0.8 * h16.ttft_seconds);
  EXPECT_GE(a8.ttft_seconds, a16.ttft_seconds);
}

TEST(PerfModel, Fp32RunsAsTf32WhereAvailable) {
  const Model& m = model("bert-large");
  EXPECT_EQ(perf_weights(WeightFormat::kFp32, m, perf_device(target("a100-80gb-sxm4")), Engine::kPytorch).compute,
            Precision::kTf32);
  EXPECT_EQ(perf_weights(WeightFormat::kFp32, m, perf_device(target("v100-16gb-sxm2")), Engine::kPytorch).compute,
            Precision::kFp32);
}

TEST(PerfModel, Int4DecodesFasterButDequantizesToSixteenBits) {
  const Model& m = model("llama-2-13b");
  const PerfArch a = perf_arch(m);
  const PerfDevice d = perf_device(target("a100-80gb-sxm4"));
  const PerfWeights q = perf_weights(WeightFormat::kInt4Awq, m, d, Engine::kVllm);
  EXPECT_EQ(q.compute, Precision::kBf16);
  EXPECT_TRUE(q.dequantize);
  EXPECT_LT(q.bits_per_weight, 4.5);
  const PerfEfficiency eff = default_efficiency();
  const auto i4 = predict_inference(a, d, infer(m, d, WeightFormat::kInt4Awq, 1, 128, 128), eff);
  const auto bf = predict_inference(a, d, infer(m, d, WeightFormat::kBf16, 1, 128, 128), eff);
  EXPECT_GT(i4.decode_tokens_per_second, 1.8 * bf.decode_tokens_per_second);
  // Large prefill: the dequantizing matmul is slower than the bf16 one.
  const auto i4p = predict_inference(a, d, infer(m, d, WeightFormat::kInt4Awq, 16, 2048, 1), eff);
  const auto bfp = predict_inference(a, d, infer(m, d, WeightFormat::kBf16, 16, 2048, 1), eff);
  EXPECT_GT(i4p.ttft_seconds, bfp.ttft_seconds);
}

TEST(PerfModel, MoeDecodeReadsOnlyTheExpertsItTouches) {
  const Model& m = model("mixtral-8x7b");
  const PerfArch a = perf_arch(m);
  EXPECT_EQ(a.experts, 8);
  const PerfDevice d = perf_device(target("h100-80gb-sxm5", 2));
  const PerfEfficiency eff = default_efficiency();
  PerfCase w1 = infer(m, d, WeightFormat::kBf16, 1, 128, 128);
  w1.w.tp = 2;
  PerfCase w64 = w1;
  w64.w.batch = 64;
  const double t1 = predict_inference(a, d, w1, eff).tpot_seconds;
  const double t64 = predict_inference(a, d, w64, eff).tpot_seconds;
  // Batch 1 reads 2 of 8 experts per layer, far less than a model whose tokens used all 8; batch 64
  // touches all of them.
  PerfArch dense = a;
  dense.experts_per_token = dense.experts;
  const double t1_all = predict_inference(dense, d, w1, eff).tpot_seconds;
  EXPECT_LT(t1, 0.6 * t1_all);
  const double all_weights_per_gpu = model_weight_bytes(m, WeightFormat::kBf16).total_bytes / 2;
  EXPECT_GT(t64, 0.9 * all_weights_per_gpu / d.bandwidth_bytes_per_second);
}

PerfCase train(const Model& m, const PerfDevice& d, int64_t micro, int64_t seq) {
  PerfCase c;
  c.w.task = Task::kTrain;
  c.w.engine = Engine::kMegatron;
  c.run.weights = perf_weights(WeightFormat::kBf16, m, d, c.w.engine);
  c.w.batch = micro;
  c.w.context = seq;
  return c;
}

TEST(PerfModel, TrainingAccountsForRecomputeAndPipelineAndDataParallel) {
  const Model& m = model("llama-2-7b");
  const PerfArch a = perf_arch(m);
  const PerfDevice d = perf_device(target("a100-80gb-sxm4", 8));
  const PerfEfficiency eff = default_efficiency();
  PerfCase w = train(m, d, 4, 2048);
  const TrainPerf base = predict_training(a, d, w, eff);
  EXPECT_GT(base.mfu, 0.3);
  EXPECT_LT(base.mfu, 0.8);
  w.w.checkpointing = Checkpointing::kFull;
  const TrainPerf full = predict_training(a, d, w, eff);
  EXPECT_GT(full.step_seconds, 1.2 * base.step_seconds);  // one more forward: ~4/3
  EXPECT_LT(full.step_seconds, 1.45 * base.step_seconds);
  EXPECT_NEAR(full.mfu * full.step_seconds, base.mfu * base.step_seconds,
              1e-9 * base.step_seconds);  // MFU excludes recompute
  // Pipeline bubble shrinks with more micro-batches.
  PerfCase p = train(m, d, 1, 2048);
  p.w.pp = 4;
  p.run.global_batch = 4;
  const double bubble_few = predict_training(a, d, p, eff).bubble_seconds / predict_training(a, d, p, eff).step_seconds;
  p.run.global_batch = 64;
  const double bubble_many =
      predict_training(a, d, p, eff).bubble_seconds / predict_training(a, d, p, eff).step_seconds;
  EXPECT_GT(bubble_few, 3 * bubble_many);
  // Megatron's interleaved 1F1B with vp model chunks per GPU divides the bubble by vp (Narayanan et al. 2021).
  const double bubble_plain = predict_training(a, d, p, eff).bubble_seconds;
  p.run.vp = 5;
  EXPECT_NEAR(predict_training(a, d, p, eff).bubble_seconds, bubble_plain / 5, 1e-12);
  // Data parallel: per-GPU throughput never beats one GPU's.
  PerfCase dp = train(m, d, 4, 2048);
  dp.run.dp = 8;
  EXPECT_LE(predict_training(a, d, dp, eff).tokens_per_second_per_gpu, base.tokens_per_second_per_gpu * 1.0001);
  EXPECT_GT(predict_training(a, d, dp, eff).tokens_per_second, 6 * base.tokens_per_second);
}

// Selective checkpointing on the PyTorch engines is torchtitan's op-level policy: every second matmul of a
// block recomputed (k, o, up), no attention; Megatron's recomputes core attention only (constants.h).
TEST(PerfModel, SelectiveCheckpointingFollowsTheEnginesPolicy) {
  const Model& m = model("llama-3-8b");
  const PerfArch a = perf_arch(m);
  const PerfDevice d = perf_device(target("h100-80gb-sxm5", 8));
  const PerfEfficiency eff = default_efficiency();
  auto step = [&](Engine e, Checkpointing c) {
    PerfCase w = train(m, d, 1, 8192);
    w.w.engine = e;
    w.w.checkpointing = c;
    w.run.weights = perf_weights(WeightFormat::kBf16, m, d, e);
    return predict_training(a, d, w, eff).step_seconds;
  };
  for (Engine e : {Engine::kPytorch, Engine::kTorchCompile, Engine::kMegatron}) {
    const double none = step(e, Checkpointing::kNone), sel = step(e, Checkpointing::kSelective);
    EXPECT_GT(sel, none) << engine_name(e);
    EXPECT_LT(sel, step(e, Checkpointing::kFull)) << engine_name(e);
  }
  // Llama 3 8B: k (1024 x 4096), o (4096 x 4096) and up (14336 x 4096) of 218 M matmul weights a layer.
  const double gemm_share =
      (1024.0 + 4096 + 14336) * 4096 / (a.qkv_params_per_layer + a.out_params_per_layer + a.mlp_params_per_layer);
  EXPECT_NEAR(gemm_share, 0.365, 0.005);
}

// float8 training pays the casts of every fp8 GEMM operand: memory time that bf16 training has not.
TEST(PerfModel, Fp8TrainingPaysItsCasts) {
  const Model& m = model("llama-2-7b");
  const PerfArch a = perf_arch(m);
  const PerfDevice d = perf_device(target("h100-80gb-sxm5", 8));
  const PerfEfficiency eff = default_efficiency();
  PerfCase bf = train(m, d, 1, 4096);
  bf.w.engine = Engine::kMegatron;
  bf.run.weights = perf_weights(WeightFormat::kBf16, m, d, bf.w.engine);
  PerfCase f8 = bf;
  f8.w.weights = WeightFormat::kFp8;
  f8.run.weights = perf_weights(WeightFormat::kFp8, m, d, f8.w.engine);
  ASSERT_EQ(f8.run.weights.compute, Precision::kFp8);
  const TrainPerf tb = predict_training(a, d, bf, eff), t8 = predict_training(a, d, f8, eff);
  EXPECT_LT(t8.step_seconds, tb.step_seconds);
  // Per token and layer: inputs 3 x 4096 + 11008, output gradients 12288 + 4096 + 22016 + 4096 elements,
  // 6 bytes each, over 32 layers and 4096 tokens, at the achieved bandwidth.
  const double cast_bytes = 32.0 * 4096 * ((3 * 4096.0 + 11008) + (12288.0 + 4096 + 22016 + 4096)) * 6;
  const double cast_seconds = cast_bytes / (d.bandwidth_bytes_per_second * eff.bandwidth_fraction);
  EXPECT_GT(t8.step_seconds, cast_seconds);
  // The casts keep the end-to-end gain well below the 2x of the fp8 tensor cores (torchao's float8 README:
  // 1.25x on Llama 3 8B; torchtitan's H100 table: 1.28x).
  EXPECT_GT(tb.step_seconds / t8.step_seconds, 1.05);
  EXPECT_LT(tb.step_seconds / t8.step_seconds, 1.6);
  // LoRA: the frozen base needs one layout of each cast, not two.
  PerfCase lora = f8;
  lora.w.task = Task::kLora;
  PerfCase lora_bf = bf;
  lora_bf.w.task = Task::kLora;
  EXPECT_LT(predict_training(a, d, lora, eff).step_seconds, predict_training(a, d, lora_bf, eff).step_seconds);
}

TEST(PerfModel, CnnTrainingUsesFlopsPerSample) {
  const Model& m = model("resnet-50");
  const PerfArch a = perf_arch(m);
  EXPECT_TRUE(a.cnn);
  EXPECT_GT(a.cnn_flops_per_sample, 7e9);
  const PerfDevice d = perf_device(target("a100-80gb-sxm4"));
  PerfCase w;
  w.w.task = Task::kTrain;
  w.w.engine = Engine::kPytorch;
  w.run.weights = perf_weights(WeightFormat::kFp16, m, d, w.w.engine);
  w.w.batch = 256;
  const TrainPerf t = predict_training(a, d, w, default_efficiency());
  EXPECT_GT(t.samples_per_second, 1000);
  EXPECT_LT(t.samples_per_second, 5000);
}

TEST(PerfModel, ServingLatencyGrowsWithRateUntilSaturation) {
  const Model& m = model("llama-3.1-8b");
  const PerfArch a = perf_arch(m);
  const PerfDevice d = perf_device(target("h100-80gb-sxm5"));
  const PerfCase w = infer(m, d, WeightFormat::kBf16, 1, 512, 256);
  const PerfEfficiency eff = default_efficiency();
  const ServingPerf cap = predict_serving(a, d, w, eff, 256, 0);
  ASSERT_GT(cap.max_rate_requests_per_second, 1);
  const ServingPerf lo = predict_serving(a, d, w, eff, 256, 0.2 * cap.max_rate_requests_per_second);
  const ServingPerf hi = predict_serving(a, d, w, eff, 256, 0.8 * cap.max_rate_requests_per_second);
  const ServingPerf over = predict_serving(a, d, w, eff, 256, 1.5 * cap.max_rate_requests_per_second);
  EXPECT_FALSE(lo.saturated);
  EXPECT_FALSE(hi.saturated);
  EXPECT_TRUE(over.saturated);
  EXPECT_LT(lo.latency_seconds, hi.latency_seconds);
  EXPECT_LT(lo.mean_batch, hi.mean_batch);
  EXPECT_NEAR(hi.throughput_tokens_per_second, 0.8 * cap.max_rate_requests_per_second * 256,
              1e-6 * cap.max_throughput_tokens_per_second);
}

TEST(PerfModel, EfficiencyOverrides) {
  auto e = parse_efficiency("gemm=0.7,bandwidth=0.8,kernel_us=3,step_ms=0.5", default_efficiency());
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_DOUBLE_EQ(e->gemm_peak_fraction, 0.7);
  EXPECT_DOUBLE_EQ(e->bandwidth_fraction, 0.8);
  EXPECT_DOUBLE_EQ(e->kernel_seconds, 3e-6);
  EXPECT_DOUBLE_EQ(e->step_seconds, 0.5e-3);
  auto bad = parse_efficiency("gemmm=0.7", default_efficiency());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "efficiency");
  EXPECT_NE(bad.error().message.find("gemm_fp8"), std::string::npos);
  EXPECT_FALSE(parse_efficiency("bandwidth=1.5", default_efficiency()).ok());
  EXPECT_FALSE(parse_efficiency("bandwidth", default_efficiency()).ok());
  // A lower bandwidth efficiency slows decode in proportion (nearly: fixed costs stay).
  const Model& m = model("llama-2-7b");
  const PerfDevice d = perf_device(target("a100-80gb-sxm4"));
  const PerfCase w = infer(m, d, WeightFormat::kBf16, 1, 128, 128);
  const double base = predict_inference(perf_arch(m), d, w, default_efficiency()).tpot_seconds;
  auto e2 = parse_efficiency("bandwidth=0.6", default_efficiency());
  ASSERT_TRUE(e2.ok());
  const double slow = predict_inference(perf_arch(m), d, w, *e2).tpot_seconds;
  EXPECT_GT(slow, base);
}

TEST(PerfModel, MicrobenchmarksNearMeasuredCeilings) {
  const PerfDevice h100 = perf_device(target("h100-80gb-sxm5"));
  const PerfEfficiency eff = default_efficiency();
  const double big = predict_gemm_tflops(h100, Precision::kBf16, 8192, 8192, 8192, eff);
  EXPECT_GT(big, 0.75 * 989);
  EXPECT_LT(big, 0.9 * 989);
  // Skinny GEMMs are slower: memory-bound at M = 16.
  EXPECT_LT(predict_gemm_tflops(h100, Precision::kBf16, 16, 8192, 8192, eff), 0.1 * big);
  EXPECT_NEAR(predict_stream_bandwidth_gbps(h100, eff), 0.87 * 3350, 0.02 * 3350);
}

}  // namespace
}  // namespace gpuplan

namespace gpuplan {
namespace {

// Volta has no bf16 tensor cores: PyTorch runs bf16 matmuls on the CUDA cores (vLLM refuses them,
// refusal_test.cc), so a bf16 prefill on a V100 is priced at the fp32 rate, not fp16's 125 TFLOPS.
TEST(PerfModel, Bf16OnVoltaRunsOnCudaCores) {
  const Model& m = model("llama-2-7b");
  const PerfDevice v100 = perf_device(target("v100-32gb-sxm2"));
  EXPECT_EQ(perf_weights(WeightFormat::kBf16, m, v100, Engine::kTransformers).compute, Precision::kFp32);
  EXPECT_EQ(perf_weights(WeightFormat::kFp16, m, v100, Engine::kTransformers).compute, Precision::kFp16);
  const PerfDevice a100 = perf_device(target("a100-80gb-sxm4"));
  EXPECT_EQ(perf_weights(WeightFormat::kBf16, m, a100, Engine::kTransformers).compute, Precision::kBf16);
  const PerfArch a = perf_arch(m);
  const auto run = [&](WeightFormat f) {
    return predict_inference(a, v100, infer(m, v100, f, 1, 2048, 1, Engine::kTransformers), default_efficiency());
  };
  EXPECT_GT(run(WeightFormat::kBf16).ttft_seconds, 4 * run(WeightFormat::kFp16).ttft_seconds);
}

}  // namespace
}  // namespace gpuplan
