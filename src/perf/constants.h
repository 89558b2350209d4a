// The named constants of the performance model, each with a one-line reason and its source.
// docs/model.md (performance part) explains how they enter the formulas. They are defaults: a user who
// measured their own hardware overrides the PerfEfficiency ones with `--efficiency`.
#pragma once

#include <array>
#include <cstddef>

#include "gpuplan/workload.h"

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
// --- compiled PyTorch's int4 weight-only matmul (tinygemm), issue #17 session 8 -----------------------
// torch.ops.aten._weight_int4pack_mm (pytorch aten/src/ATen/native/cuda/int4mm.cu: tinygemm_m16n8k16_chunk_kernel,
// launched HANDLE_Q_GROUP(8, 8, ...): 8 warps x 8 k-tiles per warp iteration, grid (1, n / 8, ceil(m / 16))).
// One warp iteration covers 8 k-tiles x 8 output columns = 1024 weights and issues about 145 instructions
// (group size 64, inner k-tiles 8): 32 predicated 32-bit loads of the activation tile (ALayout_RM::load,
// 4 per k-tile), one 16-byte weight load, 2 scale-and-zero loads and 4 broadcasts, 44 in
// convert_i4x8_to_bf16x2x4 (4 words x (4 lop3 + 3 shifts + 4 bf16x2 fma)), 16 bf16x2 fma applying scale
// and zero, 8 mma.m16n8k16, 32 fp32 adds folding the mma partials into the accumulator, ~6 of loop and
// addressing. Counted from the source, not fitted.
inline constexpr double kTinygemmWarpInstructionsPerWeight = 145.0 / 1024.0;
// Each 16 activation rows (kMTileSize) are a grid row of their own that dequantizes every weight again.
inline constexpr double kTinygemmRowsPerPass = 16;
// Warp instructions an SM issues per clock: 4 schedulers (one per SM sub-partition), one instruction
// each per clock (NVIDIA Volta, Ampere GA100, Ada and Hopper architecture whitepapers, "SM architecture").
inline constexpr double kWarpIssuesPerSmPerCycle = 4;
// The main loop loads an iteration's weights and activations and consumes them in the same iteration
// (no cp.async pipeline or prefetch, unlike Marlin's multi-stage one), so a matmul's issue time adds to
// its transfer time: t = bytes / bandwidth + weights x ceil(m / 16) x instructions / (SMs x 4 x clock).
// --- llama.cpp kernels (ggml-cuda) -------------------------------------------------------------------
// Which matmul ggml-cuda runs for a quantized GGUF matrix times `rows` activation rows:
// - rows <= 8: MMVQ, a matrix-vector kernel over the quantized blocks (mmvq.cu, MMVQ_MAX_BATCH_SIZE 8):
//   memory-bound, the roofline's GEMV side.
// - current builds, GPUs with int8 tensor cores (Turing and later): MMQ on int8 MMA for every larger row
//   count (mmq.cu, ggml_cuda_should_use_mmq: `if (turing_mma_available(cc)) return true;`). MMQ became the
//   default instead of FP16 cuBLAS in PR #8075 (2024-06-23, "use MMQ instead of cuBLAS by default"). Its
//   tensor-core work is int8 (mma m16n8k32 s8), with the blocks unpacked and their scales applied in the
//   loop: the int8 rate at kGemmFp8PeakFraction x kDequantGemmFraction.
// - GPUs with FP16 tensor cores but no int8 MMA (Volta): MMQ on dp4a below MMQ_DP4A_MAX_BATCH_SIZE = 64
//   rows (mmq.cuh), else the weights are dequantized to an fp16 copy and FP16 cuBLAS multiplies it.
// - builds before PR #8075, any GPU with FP16 tensor cores: above MMQ_MAX_BATCH_SIZE = 32 rows
//   (ggml-cuda.cu of early 2024: "max batch size to use MMQ kernels when tensor cores are available"),
//   the same dequantize + FP16 cuBLAS path (ggml_cuda_op_mul_mat_cublas: to_fp16_cuda(src0) into a pool
//   buffer, then cublasGemmEx), on every call, so once per matrix per micro-batch.
// MMQ's conversion pipe (issue #17, session 9): the int8 MMA accumulates one 32-value block (the m16n8k32
// K) into int32, and the loop converts every result to float before scaling it by the two block scales
// (mmq.cuh@00cd208554e3f21e967084e9845c4de64dc761c0, vec_dot_q8_0_q8_1_mma: `sum[...] += C.x[l]*dA*dB`
// with tile_C = tile<16, 8, int>; the Q4_0 and Q4_K paths share that shape): one int32 -> fp32 conversion per
// output element per 32 multiply-adds. GPUs convert 16 results per clock per SM ("all other type
// conversions", CUDA C++ Programming Guide, Throughput of Native Arithmetic Instructions, compute capability
// 7.x-9.0), the same on every architecture, while the int8 MMA rate per SM doubles on GA100 and again on
// GH100: so MMQ runs at most SMs x clock x 16 x 32 multiply-adds per second, a bound below the int8 tensor
// path on A100, A30, H100 and H200 and above it on GA102/AD102 boards. Not fitted to a row.
inline constexpr double kConversionsPerSmPerCycle = 16;
inline constexpr double kMmqMacsPerConversion = 32;
inline constexpr double kLlamaCppCublasAboveRowsOld = 32;
inline constexpr double kLlamaCppCublasAboveRowsDp4a = 64;
// The fp16 copy the dequantize kernel writes per weight (to_fp16_cuda), read back by cuBLAS.
inline constexpr double kDequantCopyBytesPerWeight = 2;
// llama.cpp splits a prompt into micro-batches of n_ubatch = 512 tokens (common.h default; llama-bench's
// default -ub 512; before n_ubatch existed, PR #6017 of 2024-03, n_batch = 512 played that part): each is
// one forward pass, and every matmul runs once per micro-batch.
inline constexpr double kLlamaCppUbatchTokens = 512;
// Without CUDA graphs a native C++ engine launches each kernel from the host: cudaLaunchKernel plus
// ggml's per-node work. Two measurements of the same change (CUDA graphs, llama.cpp PR #6766) give the
// host cost per kernel that the graph removes, at 14 kernels per layer (kKernelsPerLayerLlamaCpp): RTX
// 4090, Llama-2-7B Q4_0, 138.31 -> 146.81 tokens/s: 0.42 ms per token over 32 x 14 kernels = 0.9 us
// (PR #6766, JohannesGaessler's table); H100 PCIe, Llama-2-7B Q4_K_M, 143.35 -> 163.83 tokens/s: 0.87 ms
// = 1.9 us (issue #6763, NVIDIA's description). 1.4 us: their mean.
inline constexpr double kNativeLaunchSeconds = 1.4e-6;
// --- llama.cpp prompt processing (issue #17, session 8) ----------------------------------------------
// ggml-cuda's 16-bit cuBLAS matmul (ggml_cuda_op_mul_mat_cublas, ggml-cuda.cu: "convert src0 and src1 to
// fp16, multiply as fp16, convert dst to fp32"; and ggml_cuda_mul_mat_batched_cublas for F16 src0), used
// for F16 weights above one row and for the dequantized copy of quantized weights on the cuBLAS path:
// - the GEMM asks for FP16 accumulation (cublasGemmEx ... CUBLAS_COMPUTE_16F, half alpha/beta, F16 dst)
//   on NVIDIA GPUs, so it runs at the tensor cores' FP16-accumulate rate. Datacenter and workstation
//   parts accumulate FP16 in FP32 at the same rate; GeForce parts accumulate FP16 in FP16 at twice the
//   FP32-accumulate rate (Ada whitepaper: RTX 4090 FP16 tensor 330.3 with FP16 accumulate, 165.2 with
//   FP32): the catalog's fp16_fp16acc_tensor_tflops where it differs.
// - around the GEMM, one kernel converts the F32 activations (src1) to F16 (to_fp16_cuda: read 4, write 2
//   bytes per element) and one converts the F16 result back to F32 (to_fp32_cuda: read 2, write 4), for
//   every matmul: 6 bytes per input and per output element, two kernels per linear.
inline constexpr double kLlamaCppCublasConvertBytesPerElement = 6;
inline constexpr double kLlamaCppCublasConvertKernels = 2;
// F16 weights: one row runs dequantize_mul_mat_vec, more rows go to cuBLAS (ggml_cuda_mul_mat of 2024:
// `use_dequantize_mul_mat_vec = ... && src1->ne[1] == 1`, else ggml_cuda_op_mul_mat_cublas).
inline constexpr double kLlamaCppFp16CublasAboveRows = 1;
// Quantized weights: up to MMVQ_MAX_BATCH_SIZE = 8 rows run mul_mat_vec_q (mmvq.cuh), one block of a few
// warps per output row.
inline constexpr double kLlamaCppMmvqMaxRows = 8;
// Those mat-vec kernels read the weights at a rate bounded per SM, not by the DRAM: each block keeps a few
// warps' loads in flight for its row (mmvq: nwarps = 4 warps per output row for one vector), so by Little's
// law (throughput = bytes in flight / latency; V. Volkov, "Understanding Latency Hiding on GPUs", UC
// Berkeley 2016, ch. 4) an SM moves a bounded number of bytes per second whatever the DRAM could give.
// GDDR GPUs stay DRAM-bound (RTX 4090: 128 SMs x 11 GB/s = 1.4 TB/s above its 1.0 TB/s); HBM GPUs do not
// (A100: 108 x 11 = 1.19 TB/s of 2.04). Fixed from two GPUs' measurements where the weight reads are ~85%
// of the step: XiongjieDai's Llama-3-70B Q4_K_M tg512 (42.5 GB per token) on one A100 SXM4 80GB, 24.61
// tokens/s, and one H100 PCIe, 25.03 tokens/s (rows xd-llamabench-llama-3-70b-q4-k-m-{a100-sxm4,h100-pcie}-
// tg512): 10.8 and 11.1 GB/s per SM after the step's fixed costs. The llama.cpp scoreboard's A100 80GB
// (discussion #15013, Llama-2-7B Q4_0, 190.9 tokens/s, a 2025 build) comes out within 9% of it.
inline constexpr double kLlamaCppMatVecBytesPerSmSecond = 11e9;
// llama.cpp's q, k, v (and gate, up) are separate mul_mat calls on the same input (llama.cpp's
// llm_build_llama: wq, wk, wv; ffn_gate, ffn_up): each converts that input to F16 again.
inline constexpr double kLlamaCppQkvInputs = 3;
inline constexpr double kLlamaCppGatedUpInputs = 2;
// Attention without flash attention (llama.cpp's llm_build_kqv / build_attn_mha when -fa is off:
// kq = ggml_mul_mat(k, q); kq = ggml_soft_max_ext(kq, kq_mask, ...); kqv = ggml_mul_mat(v, kq)): per
// micro-batch the KQ matrix of n_kv x n_tokens x heads is materialised over every cell of the cache in
// use (the mask hides the future and other sequences; nothing is skipped), so both matmuls cover the
// whole n_kv x n_tokens rectangle. Per score element and head, in bytes:
// - the two batched cuBLAS GEMMs (F16 K/V, 16F compute): KQ written as F16 (2), read back by the KQV
//   GEMM as F16 (2): kLlamaCppKqGemmBytesPerScore, overlapped with their arithmetic;
// - three element-wise kernels between them, pure traffic: the KQ result converted F16 -> F32 (2 + 4),
//   soft_max_ext reading and writing F32 (4 + 4), the probabilities converted F32 -> F16 for the second
//   GEMM (4 + 2): 20 bytes, kLlamaCppKqPassBytesPerScore.
// (That is LLaMA's KQ at GGML_PREC_DEFAULT, as in 2024's llm_build_kqv. A KQ set to GGML_PREC_F32 (some
// architectures then, every one in later llama-graph.cpp) is written as F32 with no conversion: 4 + 16.)
inline constexpr double kLlamaCppKqGemmBytesPerScore = 4;
inline constexpr double kLlamaCppKqPassBytesPerScore = 20;
// Flash attention became llama.cpp's default (-fa auto, on where the backend supports it) in PR #15434
// ("llama: use FA + max. GPU layers by default", JohannesGaessler, opened 2025-08-19; llama.node PR #102
// of 2025-08-31 syncs b6327 with the new flash_attn_type auto|on|off). Before it llama-cli, llama-server
// and llama-bench (cmd_params_defaults `/* flash_attn */ {false}`) ran the KQ path above unless -fa was
// given; current llama-bench defaults to LLAMA_FLASH_ATTN_TYPE_AUTO. 2025-08-30.
inline constexpr EngineVersion kLlamaCppFlashAttnDefaultSince{{2025, 8, 30}, true, 3, '-'};
// --- llama.cpp over several GPUs (issue #17, session 7) -----------------------------------------------
// The layer split itself (since build 2024-01-12): layer_split, src/fit/workload.cc.
// Pipeline parallelism, PR #6017 (merged 2024-03-13, b2413): with every layer offloaded in the layer split
// (llama-context.cpp: `n_devices() > 1 && n_gpu_layers > n_layer && split_mode == LAYER && offload_kqv`),
// ggml_backend_sched keeps `n_copies = GGML_SCHED_MAX_COPIES` input copies (ggml/CMakeLists.txt:
// GGML_SCHED_MAX_COPIES "4", "max input copies for pipeline parallelism"), so up to 4 micro-batches of a
// prompt are in flight on different GPUs at once. Decode (one micro-batch) still runs the GPUs in turn.
inline constexpr EngineVersion kLlamaCppPipelineSince{{2024, 3, 13}, true, 3, '-'};
inline constexpr double kLlamaCppSchedMaxCopies = 4;
// The overlap holds within one llama_decode call only: PR #6017 splits a call's batch of up to n_batch
// tokens into n_ubatch micro-batches and queues them asynchronously ("this allows current applications
// to take advantage of pipeline parallelism by setting a larger n_batch"), and llama-bench's test_prompt
// (like llama-server's prompt loop) calls llama_decode once per n_batch tokens, n_batch = 2048 by default
// (llama-bench cmd_params_defaults `n_batch {2048}, n_ubatch {512}`; common.h n_batch 2048). So a prompt
// of 4096 tokens runs two calls of 4 micro-batches, each filling and draining the pipeline: speedup
// 4P/(P+3) over P GPUs in turn, not 8P/(P+7). Checked against the ratio of two independent measurements,
// XiongjieDai's RTX 4090 x2/x4/x8 pp4096 over x1 (1.60/2.37/2.87x, the model 1.60/2.29/2.91x).
inline constexpr double kLlamaCppPipelineCallTokens = 2048;
// ggml hands the residual stream from one GPU's graph split to the next as an F32 tensor (the graph's
// activations are F32; ggml_backend_tensor_copy_async of the split's input): 4 bytes per element of
// tokens x hidden, over the link between the GPUs (PCIe without NVLink).
inline constexpr double kLlamaCppHandoffBytesPerElement = 4;
// --- bitsandbytes (eager transformers, issue #17 mechanism 4) ----------------------------------------
// 4-bit NF4/FP4 (with or without double quantization), bitsandbytes/autograd/_functions.py matmul_4bit:
// an input of ONE row (`A.numel() == A.shape[-1]` and no grad) runs F.gemv_4bit over the packed weights
// (memory bound: the roofline's GEMV side at the 4-bit bytes); any other input runs MatMul4Bit.forward,
// `linear(A, F.dequantize_4bit(B, quant_state).to(A.dtype).t())`: on every call a dequantize kernel reads
// the packed weights and writes a 16-bit copy (kDequantCopyBytesPerWeight), which cuBLAS then multiplies
// at the dense 16-bit rate. Prompts and decode batches above one sequence take that path.
inline constexpr double kBnb4bitGemvMaxRows = 1;
// LLM.int8() inference (MatMul8bitLt.forward with threshold 6.0, transformers' llm_int8_threshold
// default): besides the int8 GEMM on int8 tensor cores (F.igemmlt, Turing and later: supports_igemmlt),
// every linear call launches from Python: double_quant of the input (col/row absmax, quantize, the COO
// outlier tensor: ~4), torch.unique of the outlier columns (~3, with a host sync), extract_outliers, the
// outlier weights' scale, /127, transpose-copy and cast (4), two index writes zeroing outlier columns,
// the gather of outlier inputs, the col32 transform, mm_dequant, the fp16 outlier matmul and its add,
// the output clone: about 20 kernels more than a plain linear.
inline constexpr double kLlmInt8ExtraKernelsPerLinear = 20;
// Linear modules per transformer layer in transformers' modeling code (each a separate call to
// bitsandbytes): q, k, v, o projections, and gate, up, down of a gated MLP (fc1, fc2 of a plain one).
inline constexpr double kAttentionLinears = 4;
inline constexpr double kGatedMlpLinears = 3;
inline constexpr double kPlainMlpLinears = 2;
// --- engine versions -------------------------------------------------------------------------------
// llama.cpp builds are named by date (`--engine llama.cpp@2024-01-10`); a change applies from the day
// its pull request was merged (github.com/ggml-org/llama.cpp):
// - CUDA graphs for batch-1 decode: PR #6766, merged in early May 2024 (PR #7302 of 2024-05-15 already
//   fixes its graphs being disabled for long prompts); 2024-05-08.
// - MMQ instead of FP16 cuBLAS by default on int8-tensor-core GPUs: PR #8075, opened 2024-06-23 and merged
//   by 2024-06-25 (PR #8115 of that day documents it as merged); 2024-06-24.
inline constexpr EngineVersion kLlamaCppCudaGraphsSince{{2024, 5, 8}, true, 3, '-'};
inline constexpr EngineVersion kLlamaCppMmqDefaultSince{{2024, 6, 24}, true, 3, '-'};
// vLLM's V1 engine (`VLLM_USE_V1=1` from 0.7.0, Jan 2025, "vLLM V1: A Major Upgrade to vLLM's Core
// Architecture", blog.vllm.ai 2025-01-27) became the default engine in 0.8.0 (Mar 2025 release notes:
// "V1 engine enabled by default"); `vllm@0.6.3` and every release before 0.8 run the V0 LLMEngine.
inline constexpr EngineVersion kVllmV1DefaultSince{{0, 8, 0}, true, 3, '.'};
// From the V1 blog, what changes for the model (the blog: "the kernels used for V0 and V1 are almost
// identical, the performance difference is mainly due to ... reduced CPU overheads"):
// - Host work per step: V1 runs the scheduler and model runner in an isolated EngineCore busy loop, with
//   tokenization, detokenization and streaming in other processes, and a persistent batch that applies
//   only diffs to the cached input tensors. What is left on the step's critical path is schedule(),
//   prepare_inputs and update_from_output: 0.54 ms per engine step amortized over a 128-request
//   workload, measured with the GPU work stubbed out (openfabric-systems/simllm PR #204, vLLM 0.27.1's
//   engine loop under cProfile), and 0.14 ms of it update_from_output at 128 running requests (vllm PR
//   #46112's micro-benchmark). 0.5 ms, a quarter of V0's 2 ms (kStepSecondsVllm); not fitted to a row.
inline constexpr double kStepSecondsVllmV1 = 0.5e-3;
// - Attention: V1 integrated FlashAttention 3 (blog section 8; vllm-flash-attn builds FA3 for sm90),
//   Hopper-native, so V1 is not held to kFlashAttention2HopperFraction; V0 ran FlashAttention 2.
// - Scheduler defaults (vllm/engine/arg_utils.py, get_batch_defaults of the V1 engine): GPUs with at
//   least 70 GiB whose name has no "a100" get max_num_seqs 1024 (H100, H200, B200, MI300X: "use larger
//   default values"; A100 is excluded because a large token budget lowered its throughput, PR #17885),
//   every other GPU 256. The branch came with that PR (May 2025): 0.9.0 is the first release with it.
inline constexpr EngineVersion kVllmLargeGpuDefaultsSince{{0, 9, 0}, true, 3, '.'};
// - Async scheduling, the default from 0.14.0 (PR #27614 "[Core] Enable async scheduling by default"; v0.14.0
//   release notes: "Async scheduling is now enabled by default ... Overlaps engine core scheduling with GPU
//   execution", excluding pipeline parallel, the CPU backend and non-MTP/Eagle speculative decoding): the
//   scheduler runs one step ahead of the GPU, with placeholders for the tokens still being sampled (PR
//   #19970, after NanoFlow, arXiv 2408.12757), so the host step (kStepSecondsVllmV1) runs while the GPU
//   executes the previous step: a step the engine is busy behind takes the longer of the two, not their sum.
//   A request's first step after an idle engine still waits for its schedule (prefill keeps the host step).
inline constexpr EngineVersion kVllmAsyncSchedulingSince{{0, 14, 0}, true, 3, '.'};
inline constexpr int64_t kVllmMaxNumSeqs = 256;
// SGLang (github.com/sgl-project/sglang):
// - The overlap ("zero-overhead") scheduler: "The scheduler runs one batch ahead and prepares all the metadata
//   required for the next batch ... we can keep the GPUs always busy" (SGLang v0.4 blog, lmsys.org
//   2024-12-04, "Zero-Overhead Batch Scheduler"; managers/tp_worker_overlap_thread.py, scheduler.py
//   event_loop_overlap; default since PR #2067 "Enable overlap by default", 2024-11-19, announced with v0.4.0;
//   --disable-overlap-schedule turns it off). As vLLM's async scheduling: a busy decode step costs
//   max(GPU, host). bench_one_batch drives the model runner without the scheduler; gpuplan does not tell
//   the two apart.
inline constexpr EngineVersion kSglangOverlapScheduleSince{{0, 4, 0}, true, 3, '.'};
// - Host work per step: SGLang runs tokenization (TokenizerManager), the scheduler with the model runner,
//   and detokenization (DetokenizerManager) in separate processes (managers/), the layout vLLM V1 adopted,
//   so its per-step host critical path is priced as V1's (kStepSecondsVllmV1, 0.5 ms); not fitted to a row.
inline constexpr double kStepSecondsSglang = kStepSecondsVllmV1;
// - Attention on Hopper: FlashAttention 3 is the default backend on sm90 "since v0.4.5.post1" (issue #5514,
//   zhyncs 2025-04-18; server_args.py picks fa3 for sm90 when the model supports it); EngineVersion has no
//   post-releases, so from 0.4.6. Before it FlashInfer (the default from 0.2), held to FA2's Hopper share.
inline constexpr EngineVersion kSglangFa3DefaultSince{{0, 4, 6}, true, 3, '.'};
// - Requests in flight: the request-to-token pool holds at most 4096 requests (model_runner.py
//   init_memory_pool: max_num_reqs = min(max(max_total_num_tokens / context_len * 512, 2048), 4096));
//   below it the KV pool bounds them.
inline constexpr int64_t kSglangMaxRunningRequests = 4096;
inline constexpr int64_t kVllmMaxNumSeqsLargeGpu = 1024;
inline constexpr double kVllmLargeGpuMinBytes = 70.0 * 1024 * 1024 * 1024;
// vLLM before 0.6.0 (the V0 engine of 0.4 and 0.5): the step's outputs (sampler results into sequence
// groups, stop checks, detokenization) were processed on the host between GPU steps. vllm issue #6913
// ("[RFC]: Asynchronous Output Processor", 2024-07-29) measured that host time beside the TPOT, Llama-3-70B
// fp8 on 4xH100: `_process_model_outputs` 0.2 ms at batch 1 and 3.4 ms at batch 32, (3.4 - 0.2) / 31 =
// 0.1 ms per running sequence. 0.6.0 overlapped it with the next step (PR #7049, the async output
// processor: "Overlap detokenization + Python output construction with the next GPU step"), which the
// 0.6 V0 profile (kStepSecondsVllm) already assumes. Not fitted to a TPOT.
inline constexpr EngineVersion kVllmAsyncOutputSince{{0, 6, 0}, true, 3, '.'};
inline constexpr double kVllmV0OutputSecondsPerSequence = 0.1e-3;
// TensorRT-LLM releases (docs/source/release-notes.md; the blogs and perf tables of each release):
// - Decode attention of MQA/GQA models: XQA ("XQA kernel provides optimization for MQA and GQA during
//   generation phase ... reducing data loading", blogs/XQA-kernel.md) was experimental behind
//   TRTLLM_ENABLE_XQA=1 in 0.6/0.7 (performance.md of 0.6.x: "These kernels are currently experimental and
//   not enabled by default") and on by default from 0.8.0 (advanced/gpt-attention.md: "This is default
//   enabled. To disable this, you need to use the flag --disable_xqa"). Before it the masked MHA kernel
//   (decoderMaskedMultiheadAttentionTemplate.h) runs one thread block per query head and sequence, each
//   loading the whole K/V cache of its KV head (`hi_kv = hi / qhead_per_kv`): the shared cache is read
//   once per query head, heads / kv_heads times. The XQA blog's 2.4x on Llama-70B (H200, 128/2048, v0.8a)
//   is consistent with it (the KV read ~20% of the XQA step, x8); not fitted to a row.
inline constexpr EngineVersion kTensorrtLlmXqaDefaultSince{{0, 8, 0}, true, 3, '.'};
// Engine defaults of TensorRT-LLM's serving runtime (in-flight batching; every release from 0.10's
// perf-overview on: gptManagerBenchmark --scheduler_policy guaranteed_no_evict, trtllm-bench "Scheduling
// Policy: Guaranteed No Evict"): the capacity scheduler admits a request only when the KV cache can hold
// its whole prompt plus maximum output, so the sequences in flight are KV tokens / (input + output), not
// the half-way average a scheduler that allocates on demand and preempts (vLLM) reaches. trtllm-bench
// sizes the engine's max batch from the same KV estimate, capped at 4096 and divided by the pipeline
// stages (tensorrt_llm/bench/build/tuning.py, finetune_setting: `raw_bs = min(kv_cache_max_requests,
// 4096) / pp_size`).
inline constexpr int64_t kTensorrtLlmBenchMaxBatch = 4096;
// TensorRT-LLM's static-batch runtime (GptSession, what gptSessionBenchmark times in the 0.5-0.9
// performance docs; the executor / in-flight batching benchmarks from 0.10's perf-overview on) runs a
// request's context step from the host every time: generateSingleBatch / generateMultiBatch call
// `mRuntime->executeContext` at step 0 after prepareContextStep and setInputTensors (new input shapes on
// the TensorRT execution context), and replay a CUDA graph (`mCudaGraphInstances[...].launch`) only for
// generation steps (cpp/tensorrt_llm/runtime/gptSession.cpp). The host enqueues the engine layer by layer
// ahead of the GPU, so a short context step takes the longer of the GPU's work and that enqueue.
// The enqueue per layer: the batch-1 TTFT of a 128-token prompt, minus the 0.2 ms host step, per layer, in
// two engines whose per-GPU layers differ 2x in weights and whose GPU time is ~half of it (0.8.0
// performance.md, H200 FP8): GPT-J 6B (28 layers) (5.2 - 0.2) / 28 = 179 us, Llama-2-70B TP8 (80 layers)
// (16.0 - 0.2) / 80 = 198 us; the two agree, so the time is the host's, not the GPU's: 190 us.
inline constexpr EngineVersion kTensorrtLlmExecutorSince{{0, 10, 0}, true, 3, '.'};
inline constexpr double kTensorrtSessionContextEnqueueSecondsPerLayer = 190e-6;
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
// --- engines ---------------------------------------------------------------------------------------
// Kernels one transformer layer costs per forward pass. TensorRT-LLM fuses residual+norm, rotary+KV
// write into attention and the gated activation into the MLP GEMM (7); vLLM (and TGI, ExLlamaV2, the
// "auto" engine) launches norm, QKV, rotary, cache write, attention, out, add+norm, gate_up, activation,
// down (10); llama.cpp's ggml graph has ~14 nodes per layer, as do Megatron-Core's fused TE layers;
// eager PyTorch (transformers, plain PyTorch, DeepSpeed) ~25: separate adds, casts, transposes (Nsight
// Systems traces of one decode step of Llama-2-7B in each engine).
inline constexpr double kKernelsPerLayerTensorrtLlm = 7;
inline constexpr double kKernelsPerLayerServing = 10;
inline constexpr double kKernelsPerLayerLlamaCpp = 14;
inline constexpr double kKernelsPerLayerMegatron = 14;
inline constexpr double kKernelsPerLayerEager = 25;
// Host work per decode step outside the kernels: scheduling, sampling, detokenisation, Python. vLLM 0.6
// (V0 engine, no multi-step): ~1.5-2 ms at batch 1 (vLLM blog "vLLM v0.6.0", Sep 2024: CPU overhead was
// most of the step before 0.6); TGI's Rust router with a Python model server ~1.5 ms; TensorRT-LLM's C++
// runtime ~0.2 ms and llama.cpp's / ExLlamaV2's ~0.3 ms; a Python generate() loop ~1 ms.
inline constexpr double kStepSecondsVllm = 2.0e-3;
inline constexpr double kStepSecondsTgi = 1.5e-3;
inline constexpr double kStepSecondsTensorrtLlm = 0.2e-3;
inline constexpr double kStepSecondsNative = 0.3e-3;  // llama.cpp, ExLlamaV2
inline constexpr double kStepSecondsEager = 1.0e-3;   // transformers, PyTorch, DeepSpeed, Megatron
// Compiled PyTorch (torch.compile mode="reduce-overhead", fullgraph; gpt-fast generate.py decode_one_token,
// torchchat, transformers' StaticCache + compiled forward): inductor fuses every point-wise op of a layer into
// the kernel beside it and the whole decode step, sampling included, is replayed as one CUDA graph, so
// per-token host work is the Python loop around the graph (gpt-fast decode_n_tokens: replay, append, no
// host sync). Kernels per layer, from gpt-fast model.py TransformerBlock.forward: fused RMSNorm, wqkv
// matmul, fused rotary + KV cache index_copy, scaled_dot_product_attention, wo matmul, fused residual add
// + RMSNorm, w1 and w3 matmuls, fused silu x mul, w2 matmul: 10, a serving engine's count
// (kKernelsPerLayerServing). Host work: a C++-like loop with no per-kernel launches, as llama.cpp's
// (kStepSecondsNative); not fitted to a row.
inline constexpr double kKernelsPerLayerCompiled = kKernelsPerLayerServing;
inline constexpr double kStepSecondsCompiled = kStepSecondsNative;
// What the performance model knows of each engine: a column per figure (the constants above, with their
// reasons and sources), a row per Engine, in the enum's order (the vocabulary's engine table,
// fit/vocabulary.cc; a static_assert below checks it). A new engine is one row here and one there.
struct EnginePerf {
  Engine engine;
  double kernels_per_layer;  // kKernelsPerLayer*: kernels one transformer layer launches per forward pass
  double step_seconds;       // kStepSeconds*: host work per decode step outside the kernels
  // Fused norm / activation / residual kernels; an eager engine moves kEagerElementwiseFactor x the bytes.
  bool fused_elementwise;
  // Hopper-native attention kernels (TensorRT-LLM's FMHA, cuDNN's in Megatron-Core): not held to
  // kFlashAttention2HopperFraction on a GPU with persistent GEMMs.
  bool hopper_attention;
  // Multiplies GGUF block-quantized weights on int8 tensor cores (llama.cpp's MMQ, PR #7676) instead of
  // dequantizing to 16 bits, where the GPU has int8 tensor cores.
  bool int8_block_matmul;
  // Replays decode steps as CUDA graphs unless `cuda_graphs: false`: every engine but transformers'
  // generate(), which launches each kernel from Python.
  bool cuda_graphs;
  // Schedules step N+1 on the host while the GPU runs step N (vLLM's async scheduling, from 0.14): a busy
  // step costs max(GPU, host) instead of GPU + host. Set by engine_perf_at, never in the table.
  bool overlapped_host = false;
  // Host seconds per layer to enqueue a context step the runtime launches without a CUDA graph, which the
  // step cannot finish before (TensorRT-LLM's GptSession, before 0.10). Set by engine_perf_at.
  double context_enqueue_seconds_per_layer = 0;
};
inline constexpr EnginePerf kEnginePerfTable[] = {
    // {engine, kernels_per_layer, step_seconds, fused_elementwise, hopper_attention, int8_block_matmul, cuda_graphs}
    {Engine::kTransformers, kKernelsPerLayerEager, kStepSecondsEager, false, false, false, false},
    {Engine::kPytorch, kKernelsPerLayerEager, kStepSecondsEager, false, false, false, true},
    {Engine::kVllm, kKernelsPerLayerServing, kStepSecondsVllm, true, false, false, true},
    {Engine::kTgi, kKernelsPerLayerServing, kStepSecondsTgi, true, false, false, true},
    {Engine::kDeepspeed, kKernelsPerLayerEager, kStepSecondsEager, false, false, false, true},
    {Engine::kLlamaCpp, kKernelsPerLayerLlamaCpp, kStepSecondsNative, true, false, true, true},
    {Engine::kMegatron, kKernelsPerLayerMegatron, kStepSecondsEager, true, true, false, true},
    {Engine::kTensorrtLlm, kKernelsPerLayerTensorrtLlm, kStepSecondsTensorrtLlm, true, true, false, true},
    {Engine::kExllama, kKernelsPerLayerServing, kStepSecondsNative, true, false, false, true},
    // torch.compile: inductor-fused element-wise kernels, the decode step as one CUDA graph.
    {Engine::kTorchCompile, kKernelsPerLayerCompiled, kStepSecondsCompiled, true, false, false, true},
    // AutoAWQ's fused modules: a transformers model driven from Python, as transformers is priced.
    {Engine::kAutoawq, kKernelsPerLayerEager, kStepSecondsEager, false, false, false, false},
    // SGLang: per layer python/sglang/srt/models/llama.py runs fused add+RMSNorm (sgl-kernel), qkv_proj,
    // rotary, KV write, attention, o_proj, fused add+RMSNorm, gate_up_proj, SiluAndMul, down_proj: a
    // serving engine's 10; CUDA graphs for decode (cuda_graph_runner.py) unless --disable-cuda-graph.
    {Engine::kSglang, kKernelsPerLayerServing, kStepSecondsSglang, true, false, false, true},
    // "auto", the tuned engine: a serving engine's kernels and vLLM's host work.
    {Engine::kAuto, kKernelsPerLayerServing, kStepSecondsVllm, true, false, false, true},
};
constexpr bool engine_perf_table_in_enum_order() {
  for (size_t i = 0; i < std::size(kEnginePerfTable); ++i) {
    if (static_cast<size_t>(kEnginePerfTable[i].engine) != i) return false;
  }
  return static_cast<size_t>(Engine::kAuto) + 1 == std::size(kEnginePerfTable);
}
static_assert(engine_perf_table_in_enum_order(), "kEnginePerfTable lists every Engine, in enum order");
// The row of an engine: one index, no allocation (the perf inner loop reads it per prediction).
constexpr const EnginePerf& engine_perf(Engine e) {
  const auto i = static_cast<size_t>(e);
  return kEnginePerfTable[i < std::size(kEnginePerfTable) ? i : 0];
}
// The row of an engine at the version a workload names (unset: its current release), where a source
// documents the difference ("engine versions" above): vLLM from 0.8 is the V1 engine.
constexpr EnginePerf engine_perf_at(Engine e, const EngineVersion& v) {
  EnginePerf p = engine_perf(e);
  if (e == Engine::kVllm && !version_before(v, kVllmV1DefaultSince)) {
    p.step_seconds = kStepSecondsVllmV1;
    p.hopper_attention = true;
    p.overlapped_host = !version_before(v, kVllmAsyncSchedulingSince);
  }
  if (e == Engine::kTensorrtLlm && version_before(v, kTensorrtLlmExecutorSince)) {
    p.context_enqueue_seconds_per_layer = kTensorrtSessionContextEnqueueSecondsPerLayer;
  }
  if (e == Engine::kSglang) {
    p.overlapped_host = !version_before(v, kSglangOverlapScheduleSince);
    p.hopper_attention = !version_before(v, kSglangFa3DefaultSince);
  }
  return p;
}
// PerfEfficiency::step_seconds below zero: the engine's own figure above (`--efficiency step_ms=` sets one).
inline constexpr double kEngineDefaultStepSeconds = -1.0;
// Prefill work per request when a serving engine batches prompts into chunks of this many tokens
// (TensorRT-LLM max_num_tokens and vLLM max_num_batched_tokens default to 8192).
inline constexpr double kPrefillChunkTokens = 8192;
// --- shapes ----------------------------------------------------------------------------------------
// Share of a dense MLP's parameters in its first (input-side) matmul: gate + up of a gated MLP (SwiGLU:
// three equal matrices), up of a plain one (two equal matrices); the rest is the down projection.
inline constexpr double kGatedMlpUpShare = 2.0 / 3.0;
inline constexpr double kPlainMlpUpShare = 0.5;
// A masked-language-model step (BERT) predicts only the masked tokens: 15% of them (Devlin et al. 2019,
// Sec. 3.1), the rows that go through the LM head in training.
inline constexpr double kMlmMaskedFraction = 0.15;
// --- training --------------------------------------------------------------------------------------
// One training micro-step runs each layer forward once and backward once, backward costing two forwards
// (input and weight gradients): 3 passes of element-wise work and kernels, 2 of tensor-parallel
// all-reduces (one forward, one backward); full recompute adds one forward of each.
inline constexpr double kTrainPasses = 3;
inline constexpr double kTrainTpAllReducePasses = 2;
// Tensor parallelism all-reduces twice per layer and pass: after attention's output projection and after
// the MLP's down projection (Shoeybi et al. 2019, Megatron-LM, Fig. 3).
inline constexpr double kTpAllReducesPerLayer = 2;
// bitsandbytes QLoRA dequantizes each 4-bit matrix to bf16 before every use: forward and backward (2),
// plus the recompute; each time it reads the 4-bit data and writes then reads the 16-bit copy (2).
inline constexpr double kQloraDequantPasses = 2;
inline constexpr double kQloraDequantCopyPasses = 2;
// Eager attention's backward: dS = dP x V^T-like and dQ, dK, dV matmuls, twice the forward's two matmuls.
inline constexpr double kEagerAttentionBackwardRatio = 2.0;
// A frozen base (LoRA/QLoRA) computes input gradients only: backward matmuls cost one forward, not two.
inline constexpr double kFrozenGemmBackwardRatio = 1.0;
inline constexpr double kGemmBackwardRatio = 2.0;
// Selective activation checkpointing on the PyTorch engines (pytorch, torch-compile) is PyTorch's op-level
// selective checkpointing as torchtitan applies it (torchtitan parallelize_llama.py, _save_list and
// _custom_policy at 3faaa1a): each block saves the outputs of SDPA and of every odd-numbered matmul in
// forward order and recomputes everything else, so in the backward the block re-runs every second matmul
// (q saved, k recomputed, v saved, o recomputed, gate saved, up recomputed, down saved), all its norms,
// rotary and activations, and no attention. Megatron-Core's selective recompute is the other one: core
// attention only (Korthikanti et al. 2022), kept for every other engine.
inline constexpr double kOpSacElementwiseRecompute = 1.0;
inline constexpr double kOpSacAttentionRecompute = 0.0;
// float8 training casts each fp8 GEMM operand from bf16 with a scale from its current absolute maximum
// (Transformer Engine current scaling, "FP8-CS" in NeMo's tables; torchao Float8Linear's dynamic
// tensorwise scaling, torchao/float8/float8_linear.py): per element of a linear layer's input (forward)
// and of its output gradient (backward) one read for the amax reduction (2 B), one read for the cast
// (2 B) and one 1-byte fp8 write per layout the GEMMs need: row-major, plus the transposed copy the
// weight-gradient GEMM reads (TE's fused cast_transpose; torchao casts a second, column-major copy, as
// Hopper's fp8 MMA takes only K-major operands, and torch.compile fuses the two casts of one tensor). A
// frozen base (LoRA) computes no weight gradient: one layout. torchao re-casts the saved bf16 input in
// backward (one more read): not counted, so torchao's casts are a lower bound. Weights are cast once per step (TE's
// is_first_microbatch cache, torchao's precompute_float8_dynamic_scale_for_fsdp), under 1% of a step: not counted.
inline constexpr double kFp8AmaxReadBytes = 2.0;
inline constexpr double kFp8CastReadBytes = 2.0;
inline constexpr double kFp8CastWriteBytesPerLayout = 1.0;
inline constexpr double kFp8TrainedLayouts = 2.0;
inline constexpr double kFp8FrozenLayouts = 1.0;
// LoRA without adapter parameters to count (a CNN, an unknown target set): about 1% of the weights train
// (Hu et al. 2021, LoRA: rank 8-16 adapters on q,v are 0.1-1% of GPT-3's; 1% is the high end).
inline constexpr double kDefaultTrainableFraction = 0.01;
// Gradient bytes all-reduced per trained parameter: bf16 for transformer training (DDP/FSDP mixed
// precision reduce in bf16), fp32 for CNNs (torchvision's reference recipes keep fp32 gradients).
inline constexpr double kHalfGradBytes = 2.0;
inline constexpr double kCnnGradBytes = 4.0;
// FSDP / ZeRO-3 per micro-step: all-gather the weights for forward, again for backward, reduce-scatter
// the gradients: 3 passes of the ring (Zhao et al. 2023, "PyTorch FSDP", Sec. 3.2).
inline constexpr double kShardedRingPasses = 3;
// DDP / ZeRO-1/2: reduce-scatter + all-gather (or one all-reduce) of the gradients: 2 ring passes, each
// with its latency.
inline constexpr double kReplicatedRingPasses = 2;
inline constexpr double kDataParallelCollectives = 2;
// DDP overlaps gradient buckets with backward only: backward is 2/3 of forward + backward compute.
inline constexpr double kDdpOverlapShare = 2.0 / 3.0;
// Kernels of one optimizer step: foreach / fused multi-tensor AdamW launches about ten kernels over
// all parameters (torch.optim._multi_tensor_adamw: lerp, mul, addcmul, sqrt, div, add, ... over lists).
inline constexpr double kOptimizerKernels = 10;
// Kernels per CNN layer: conv + fused BN/ReLU forward (2); forward, dgrad and wgrad with their BN/ReLU
// backward in training (6) (cuDNN ResNet-50 traces, NVIDIA DeepLearningExamples).
inline constexpr double kCnnInferKernelsPerLayer = 2;
inline constexpr double kCnnTrainKernelsPerLayer = 6;
// Forward FLOPs of a CNN are counted once per sample; training does forward + 2x backward.
inline constexpr double kCnnTrainFlopsRatio = 3;
// Model FLOPs per token of training, as MFU counts them: 6 per active matmul parameter (2 forward, 4
// backward) + 12 x layers x heads x head_dim x seq for attention, no causal halving (PaLM, Chowdhery et
// al. 2022, Appendix B; llm-foundry's MFU). A frozen base does 4 per parameter: no weight gradients.
inline constexpr double kTrainFlopsPerParam = 6;
inline constexpr double kFrozenFlopsPerParamSaved = 2;
inline constexpr double kAttentionTrainFlopsFactor = 12;
// --- weights ---------------------------------------------------------------------------------------
// Bits of the LM head where the model has no head tensor to read them from (perf_weights): the mean of
// the unquantized rest, never below 8 (formats keep the head at 8 bits or more outside GGUF, whose Q6_K
// head is read at its own bits); fp32 weights keep it at 32.
inline constexpr double kMinHeadBits = 8;
inline constexpr double kFp32Bits = 32;
// --- fixed costs -----------------------------------------------------------------------------------
// Fixed cost per kernel: launch gap inside a CUDA graph (~1-2 us) plus ramp-up and tail of a small
// kernel (~3-4 us) (NVIDIA CUDA graphs blog 2019: 2-3 us per launch in graphs; Nsight traces of decode
// steps in vLLM issue threads show 4-8 us per small kernel).
inline constexpr double kKernelSeconds = 5e-6;
// Without CUDA graphs (eager PyTorch, transformers generate()), each kernel is launched by Python:
// ~10-20 us of host time per kernel, which then bounds small steps (PyTorch dispatcher overhead).
inline constexpr double kEagerKernelSeconds = 15e-6;
// transformers' generate() (eager, no CUDA graphs) launches every kernel from Python, asynchronously: a
// launch returns before the kernel runs (CUDA C++ Programming Guide, "Asynchronous Concurrent Execution":
// kernel launches are asynchronous with respect to the host), so the host runs ahead of the GPU until the
// step's one synchronisation (GenerationMixin._sample: `unfinished_sequences.max() == 0` read on the host
// every token). A step therefore takes max(host launches + loop work, GPU work), not their sum (issue #17,
// session 8). The host side counts the ATen ops a Llama decoder layer calls per forward in transformers'
// modeling_llama.py (4.4x, sdpa attention): LlamaRMSNorm 8 (to fp32, pow, mean, + eps, rsqrt, mul, to
// dtype, x weight) twice; q, k, v, o projections 4; apply_rotary_pos_emb 10 (q and k: x cos, rotate_half's
// neg and cat, x sin, add); DynamicCache.update's two torch.cat; repeat_kv's two copies (GQA); the
// contiguous query and output 2; scaled_dot_product_attention 1; residual adds 2; LlamaMLP 5 (gate, act,
// up, mul, down): 44. Each at kEagerKernelSeconds of host time; the GPU side keeps the engine's kernels
// per layer at kKernelSeconds.
inline constexpr double kEagerHostOpsPerLayer = 44;
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
// Activations in PyTorch's default NCHW layout (no `channels_last`): cuDNN's tensor-core convolutions
// (fp16/bf16, TF32) compute in NHWC, so each convolution transposes its input to NHWC and its output back
// (nchwToNhwc / nhwcToNchw kernels, NVIDIA "Convolutional Layers User's Guide", "Tensor layouts in
// memory: NCHW vs NHWC": NCHW tensor-core convolutions "perform the transposes automatically", at a cost;
// channels_last "avoids" them). One read and one write per element per transpose. Per training step:
// forward (input, output), dgrad (output gradient in, input gradient out), wgrad (input, output
// gradient): 6 transposes of a convolution's input- or output-sized tensor; inference: the 2 of forward.
// A convolution's input and output are each about half of the stored activation elements (a conv output
// and its batch norm's output per layer, model.cc), so in units of stored elements: 6 read+write passes of
// one half and of the other, i.e. 6 passes for training and 2 for inference. CUDA-core convolutions
// (fp32 on V100) work in NCHW natively: no transposes. NVIDIA's recipes set it (DeepLearningExamples
// ConvNets configs.yml: `memory_format: nhwc` for every AMP run; TF32 and FP32 runs leave main.py's
// default `nchw`), Lambda's deeplearning-benchmark does not (config_v1: no --memory-format).
inline constexpr double kNchwTransposeTrainPasses = 6;
inline constexpr double kNchwTransposeInferPasses = 2;

}  // namespace gpuplan::perf
