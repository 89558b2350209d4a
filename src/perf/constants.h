// The named constants of the performance model, each with a one-line reason and its source.
// docs/model.md (performance part) explains how they enter the formulas. They are defaults: a user who
// measured their own hardware overrides the PerfEfficiency ones with `--efficiency`.
#pragma once

namespace gpuplan::perf {

// --- matmuls ---------------------------------------------------------------------------------------
// GEMM efficiency = eff_max x I / (I + kGemmHalfIntensity), I = 1 / (1/M + 1/N + 1/K) the GEMM's
// arithmetic intensity (FLOPs per element moved / 2): small or skinny GEMMs underfill the CTA tiles and
// spend longer in prologue/epilogue (NVIDIA "Matrix Multiplication Background User's Guide": tile and
// wave quantization; throughput rises with each dimension and saturates in the thousands). Half-rate
// intensity 64: a 64-row tile, the smallest that cuBLAS's tensor-core kernels fill.
inline constexpr double kGemmHalfIntensity = 64;
// Output tile of one CTA of a large tensor-core GEMM (cuBLAS/CUTLASS 128x128 and 128x256 tiles on
// Ampere and Hopper); tiles run in waves of one per SM, and a partial last wave leaves SMs idle (NVIDIA
// "Matrix Multiplication Background User's Guide", "Wave quantization"). Hopper and Blackwell GEMMs in
// cuBLAS 12 / CUTLASS 3 are persistent, warp-specialized kernels with a tile scheduler (and stream-K)
// that spread the last wave's work, so wave quantization is applied to earlier GPUs only (CUTLASS
// docs, "Efficient GEMM in CUDA" and "Hopper warp-specialized persistent kernels").
inline constexpr double kGemmTileRows = 128;
inline constexpr double kGemmTileCols = 128;
// eff_max for bf16/fp16/tf32: the best measured cuBLAS matmuls are A100 SXM 271.2/312 = 0.87, A100 PCIe
// 252.9/312 = 0.81, H100 SXM 794.5/989 = 0.80 at intensities I = 790-950 where the curve gives 0.93
// (ml-engineering "Maximum Achievable Matmul FLOPS" table, stas00/ml-engineering
// compute/accelerator/README.md): 0.80 / 0.93 = 0.86, from the Hopper figure, the lowest, because sustained
// power limits clocks below the boost clock the peak is quoted at.
inline constexpr double kGemmPeakFraction = 0.86;
// Same table, fp8 (e4m3): H100 SXM 1402.6/1979 = 0.71, H200 SXM 1453.4/1979 = 0.73; / 0.93 = 0.77.
inline constexpr double kGemmFp8PeakFraction = 0.77;
// A matmul that dequantizes 4/8-bit weights inside its main loop (AWQ/GPTQ/Marlin/GGUF MMQ) reaches
// about half the dense rate once compute-bound (Frantar et al. 2024, "MARLIN", Fig. 1: ~fp16 speed only
// with Marlin; AWQ/exllama kernels at 0.3-0.6 of cuBLAS fp16 for batch >= 64).
inline constexpr double kDequantGemmFraction = 0.55;
// --- attention -------------------------------------------------------------------------------------
// FlashAttention-2 reaches 50-73% of A100 peak forward and 35-63% backward (Dao 2023, arXiv 2307.08691,
// Sec. 4.1); FlashAttention-3 ~75% forward on H100. 0.55 is the middle of the FA2 range.
inline constexpr double kAttentionPeakFraction = 0.55;
// FlashAttention-2 was written for Ampere: on H100 it reaches only ~35% of the bf16 peak (Shah et al.
// 2024, FlashAttention-3, arXiv 2407.08608, abstract). Engines with Hopper-native attention kernels
// (TensorRT-LLM's FMHA, cuDNN's in Megatron-Core/NeMo) are not limited by it.
inline constexpr double kFlashAttention2HopperFraction = 0.35;
// Backward of flash attention does 2.5x the forward matmul FLOPs (recomputes S and P; 5 matmuls vs 2)
// (Dao 2023, Sec. 3.1.2).
inline constexpr double kFlashBackwardFlopsRatio = 2.5;
// Non-flash (eager) attention writes the scores, reads them for softmax, writes the probabilities and
// reads them for P x V: 4 passes over batch x heads x q x k elements.
inline constexpr double kEagerScorePasses = 4;
// --- memory ----------------------------------------------------------------------------------------
// Achieved / peak bandwidth of a large streaming kernel: BabelStream copy on A100 40GB 1394.6/1555 =
// 0.90, custom copy on V100 785/900 = 0.87, on A100 80GB 1536/2039 = 0.75 (validation/perf.yaml rows
// babelstream-*, memcopy-*). 0.87: the median of the three.
inline constexpr double kBandwidthFraction = 0.87;
// Bytes each element-wise pass moves per token per layer, in units of hidden x activation bytes, for a
// pre-norm decoder: 2 norms (read+write), 2 residual adds (2 reads + 1 write), rotary on Q and K. The MLP
// activation adds 3 x intermediate (gated: read gate and up, write one) per token.
inline constexpr double kElementwiseHiddenPasses = 12;
inline constexpr double kElementwiseIntermediatePasses = 3;
// Eager PyTorch runs norms, rotary, activations and residual adds as separate unfused kernels, RMSNorm
// upcast to fp32 (transformers' LlamaRMSNorm: pow, mean, rsqrt, mul, mul, cast): about 3x the bytes
// of the fused kernels Megatron-Core, TensorRT-LLM and vLLM use (Megatron-LM fused layer norm / bias-GeLU
// kernels, Shoeybi et al. 2019 and NVIDIA Apex docs).
inline constexpr double kEagerElementwiseFactor = 3;
// --- fixed costs -----------------------------------------------------------------------------------
// Fixed cost per kernel: launch gap inside a CUDA graph (~1-2 us) plus ramp-up and tail of a small
// kernel (~3-4 us) (NVIDIA CUDA graphs blog 2019: 2-3 us per launch in graphs; Nsight traces of decode
// steps in vLLM issue threads show 4-8 us per small kernel).
inline constexpr double kKernelSeconds = 5e-6;
// Without CUDA graphs (eager PyTorch, transformers generate()), each kernel is launched by Python:
// ~10-20 us of host time per kernel, which then bounds small steps (PyTorch dispatcher overhead).
inline constexpr double kEagerKernelSeconds = 15e-6;
// --- communication ---------------------------------------------------------------------------------
// All-reduce bus bandwidth / per-direction link bandwidth: nccl-tests busbw ~230 GB/s on DGX A100
// (300 GB/s per direction) and ~370 GB/s on DGX H100 (450): 0.77-0.82.
inline constexpr double kLinkFraction = 0.80;
// Latency of one small all-reduce (NCCL ring/LL protocol within a node, ~10 us for 8 GPUs; PCIe doubles).
inline constexpr double kAllReduceLatencySeconds = 10e-6;
inline constexpr double kAllReduceLatencyPcieSeconds = 20e-6;
// Per-GPU network between nodes: DGX A100 has one 200 Gb/s HDR port per GPU (25 GB/s), DGX H100 one
// 400 Gb/s NDR port per GPU (50 GB/s) (NVIDIA DGX A100 / DGX H100 user guides).
inline constexpr double kInternodeAmpereBytesPerSecond = 25e9;
inline constexpr double kInternodeHopperBytesPerSecond = 50e9;
// GPUs per node (HGX/DGX boards): tensor parallelism stays inside, data parallelism crosses nodes.
inline constexpr int kDevicesPerNode = 8;
// Share of data-parallel gradient communication hidden behind the backward pass (PyTorch DDP bucketing,
// Li et al. 2020 VLDB "PyTorch Distributed", Fig. 7: near-complete overlap for large models).
inline constexpr double kTrainingOverlap = 0.9;
// --- optimizer -------------------------------------------------------------------------------------
// Bytes a fused AdamW step moves per parameter under mixed precision: read fp32 master, m, v (12) and
// the gradient (4), write master, m, v (12) and the bf16 weight (2) (apex/torch fused multi-tensor Adam).
inline constexpr double kAdamBytesPerParam = 30;
// SGD with momentum: read weight, momentum, gradient, write weight and momentum (fp32).
inline constexpr double kSgdBytesPerParam = 20;
// --- CNNs ------------------------------------------------------------------------------------------
// Reads + writes per stored activation element in one training step of a CNN with batch norm: forward
// conv write, BN read+write, ReLU read+write (often fused), backward: BN reads 2 and writes 1, ReLU mask,
// conv dgrad write and wgrad read (cuDNN/DALI ResNet-50 reference implementation's kernels).
inline constexpr double kCnnTrainActivationPasses = 10;
inline constexpr double kCnnInferActivationPasses = 3;
// Convolutions reach less of the tensor-core peak than GEMMs of the same FLOPs (im2col-free implicit
// GEMM with small channel counts in early layers): NVIDIA's RN50 v1.5 reference reaches ~0.5 of the
// fp16 peak inside its conv kernels (DeepLearningExamples ConvNets performance notes).
inline constexpr double kConvPeakFraction = 0.5;
// --- error band ------------------------------------------------------------------------------------
// 10th and 90th percentile of measured / predicted rate (time metrics inverted) over the comparable rows
// of validation/perf.yaml, per metric kind (docs/model.md, "Validation"; 14 decode, 9 prefill, 18
// throughput, 15 training, 9 microbenchmark rows). Updated when the model or the rows change.
inline constexpr double kBandDecodeLow = 0.86, kBandDecodeHigh = 1.05;
inline constexpr double kBandPrefillLow = 0.77, kBandPrefillHigh = 0.94;
inline constexpr double kBandThroughputLow = 0.77, kBandThroughputHigh = 1.21;
inline constexpr double kBandTrainingLow = 0.78, kBandTrainingHigh = 1.17;
inline constexpr double kBandMicrobenchLow = 0.98, kBandMicrobenchHigh = 1.09;

}  // namespace gpuplan::perf
