// The performance model: how fast a workload runs on a target. A roofline per operator (the QKV, output
// and MLP matmuls of each layer, attention with or without flash attention, element-wise work, the LM
// head, MoE experts, tensor-parallel all-reduces), each with an achievable efficiency that depends on the
// operator's size, summed over a step. Inference (prefill and decode), serving (largest batch and a
// request rate) and training (forward, backward, recomputation, optimizer, data/pipeline parallelism)
// are built from the same operators. Every figure carries a low/high band from the measured error of the
// model (validation/perf.yaml) and says what bounds it. See docs/model.md for every formula and source.
//
// The functions are pure and allocation-free: a PerfArch (from a Model) and a PerfDevice (from a Target)
// are computed once, then predict_*() costs a few hundred floating-point operations, so sweeps over
// millions of configurations run in about a second per core.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gpuplan/formats.h"
#include "gpuplan/status.h"
#include "gpuplan/target.h"
#include "gpuplan/workload.h"

namespace gpuplan {

// What limits a figure: reading memory, tensor-core arithmetic, moving data between GPUs, or fixed
// per-kernel and per-step costs (launches, scheduling) that no resource explains.
enum class PerfBound { kMemory, kCompute, kCommunication, kOverhead };
std::string_view perf_bound_name(PerfBound bound);  // "memory", "compute", "communication", "overhead"

// Engines (workload.h: one Engine for fit, perf, plan and mig) differ in how many kernels a layer costs
// and in their per-step host work; perf.cc has each engine's figures. Engine::kAuto is a tuned serving
// engine (vLLM-like) for inference.

// The efficiency assumptions. Defaults are named constants with sources (src/perf/constants.h); a user
// who measured their own GPU overrides them with `--efficiency key=value,...` (parse_efficiency).
struct PerfEfficiency {
  double gemm_peak_fraction;      // large bf16/fp16/tf32 GEMMs: achieved / dense peak
  double gemm_fp8_peak_fraction;  // large fp8 GEMMs: achieved / dense fp8 peak
  double gemm_half_intensity;  // arithmetic intensity 1/(1/M+1/N+1/K) at which a GEMM reaches half its large-size rate
  double dequant_gemm_fraction;    // compute-bound rate of a matmul that dequantizes 4/8-bit weights in its loop
  double attention_peak_fraction;  // flash attention: achieved / dense peak of its precision
  double bandwidth_fraction;       // large streaming kernels: achieved / peak memory bandwidth
  double link_fraction;            // all-reduce bus bandwidth / link bandwidth (nccl-tests busbw)
  double kernel_seconds;           // fixed cost per kernel (launch gap, ramp-up and tail)
  double step_seconds;             // per-step host work of the engine (scheduling, sampling); <0 = engine default
  double training_overlap;         // share of data-parallel communication hidden behind backward compute
  // GEMM curves measured per precision (a calibration, gpuplan/calibration.h; index = Precision): where
  // set (> 0) they replace gemm_peak_fraction / gemm_fp8_peak_fraction and gemm_half_intensity for the
  // matmuls computed in that precision. 0 = the shared figures above.
  std::array<double, 8> precision_peak_fraction{};
  std::array<double, 8> precision_half_intensity{};
};
PerfEfficiency default_efficiency();
// "gemm=0.7,bandwidth=0.8,kernel_us=5,step_ms=1,...": overrides on top of `base`. Keys are listed in
// efficiency_keys(); an unknown key or a value out of range is a usage error naming it.
Result<PerfEfficiency> parse_efficiency(std::string_view text, const PerfEfficiency& base);
std::string efficiency_keys();

// The shape facts of a model the performance model needs, computed once per model.
struct PerfArch {
  bool cnn = false;      // a convolutional network (ResNet-50): only the cnn_* fields apply
  bool encoder = false;  // bidirectional attention (BERT): no causal halving, no KV cache
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate = 0;
  int64_t vocab = 0;
  int64_t experts = 0;  // routed experts per layer (0 = dense)
  int64_t experts_per_token = 0;
  bool gated_mlp = false;
  bool eager_fp32_softmax = false;
  // Matmul parameters per layer (all layers alike; summed over the model / layers).
  double qkv_params_per_layer = 0;     // Q, K and V projections
  double out_params_per_layer = 0;     // attention output projection
  double mlp_params_per_layer = 0;     // dense MLP (and shared experts)
  double expert_params_per_layer = 0;  // ONE routed expert (gate+up+down)
  double router_params_per_layer = 0;
  double head_params = 0;       // LM head (tied or not: it is read every step)
  double embedding_params = 0;  // token (and position) embeddings: gathered, not multiplied
  double other_params = 0;      // norms, biases, poolers, everything else
  double parameters = 0;
  double active_parameters = 0;
  // Attention window per layer group: `global_layers` attend to everything, `window_layers` to at most
  // `window_tokens` (Mistral, Gemma-2 local layers).
  int64_t global_layers = 0;
  int64_t window_layers = 0;
  int64_t window_tokens = 0;
  // CNNs: forward FLOPs and stored activation elements per sample.
  double cnn_flops_per_sample = 0;
  double cnn_activation_elements_per_sample = 0;
  int64_t cnn_layers = 0;
};
PerfArch perf_arch(const Model& model);

// The rates of one device of a target, computed once per target.
struct PerfDevice {
  std::array<double, 8> peak_flops{};  // dense tensor-core FLOP/s per Precision (index = enum value), 0 = none
  double bandwidth_bytes_per_second = 0;
  double link_bytes_per_second = 0;       // per direction, between the target's devices
  double internode_bytes_per_second = 0;  // per GPU, between nodes (data parallel beyond one node)
  double memory_bytes = 0;
  double compute_fraction = 1;  // MIG: share of the SMs
  bool mig = false;             // the devices are MIG slices (one per process: no split over them)
  int count = 1;
  int sm_count = 0;              // streaming multiprocessors of one device (a MIG slice's own), 0 = unknown
  bool persistent_gemm = false;  // Hopper and later: persistent GEMM kernels spread the last wave
  int devices_per_node = 8;
  bool nvlink = false;
  // Dense FP16 tensor FLOP/s with FP16 accumulate, where the datasheet gives a rate above the FP32-accumulate
  // one (GeForce parts); 0 = the same as peak(kFp16). Engines that ask cuBLAS for CUBLAS_COMPUTE_16F get it.
  double fp16_fp16acc_flops = 0;
  // Boost SM clock (the catalog's boost_clock_mhz), Hz; 0 = not in the catalog (no issue-bound kernels modelled).
  double sm_clock_hz = 0;
  double peak(Precision p) const { return peak_flops[static_cast<size_t>(p)]; }
};
PerfDevice perf_device(const Target& target);

// How the weights are read and what the matmul runs on.
struct PerfWeights {
  double bits_per_weight = 16;           // of quantized matrices, including scales and zeros
  double head_bits = 16;                 // LM head and embeddings (most formats keep them in 16 bits)
  Precision compute = Precision::kBf16;  // tensor-core rate the kernels use
  bool dequantize = false;               // weights are expanded in the matmul's loop (int4/nf4/gguf/weight-only int8)
};
// A weight format (formats.h) on `device` for `engine`: fp8 runs on fp8 tensor cores where the GPU has
// them (else it is dequantized to fp16 in the matmul); fp32 runs as TF32 where the GPU has TF32; int4,
// nf4 and weight-only int8 dequantize to bf16/fp16; llama.cpp GGUF quantized matmuls use int8 tensor
// cores (MMQ). Bits per weight come from formats.h at the model's shapes.
PerfWeights perf_weights(WeightFormat format, const Model& model, const PerfDevice& device, Engine engine);

// The performance model reads the Workload itself (workload.h): task, engine, batch (sequences per
// data-parallel rank: decoded together, or the training micro-batch), context (the training sequence
// length), prompt_tokens() and output_tokens (inference; at least 1 each), tp, pp, zero, checkpointing
// and flash_attention. A PerfRun holds only what the Workload does not say: how its weights run on one
// target's device, bytes per element, and the perf request's layout and runtime switches. Built once per
// target (perf_request.h: run_for), it costs nothing to pass.
struct PerfRun {
  PerfWeights weights;          // perf_weights() of the workload's format on the target's device
  double activation_bytes = 2;  // activation_element_bytes(workload): bf16/fp16, 4 for fp32
  double kv_bytes = 2;          // kv_bytes_per_element(workload.kv_cache)
  int dp = 1;                   // data-parallel ranks: count / (tp x pp) unless the request said
  int layer_split = 1;  // layer split (llama.cpp --split-mode layer, device_map="auto"): GPUs whose slices run in turn
  int64_t global_batch = 0;         // sequences per optimizer step over all ranks (0 = batch x dp)
  bool fsdp = false;                // FSDP full shard (as ZeRO-3)
  int vp = 1;                       // virtual pipeline stages per GPU (Megatron's interleaved 1F1B); 1 = plain 1F1B
  bool cuda_graphs = true;          // decode steps replayed as CUDA graphs
  bool channels_last = true;        // CNNs: NHWC activations (false: NCHW, transposed around tensor-core convs)
  double trainable_parameters = 0;  // LoRA/QLoRA: adapter parameters (0 = a rough 1% of the weights)

  // A quantized matmul of more rows than this dequantizes its weights to a 16-bit copy and runs 16-bit
  // cuBLAS on it: llama.cpp builds before MMQ became the default and GPUs without int8 tensor cores;
  // bitsandbytes 4-bit above one row; 0 = never.
  double cublas_above_rows = 0;
  // Prompt tokens per forward pass (llama.cpp's micro-batch); 0 = the whole prompt in one pass.
  double prefill_chunk_tokens = 0;
  // Linear modules per layer (a dequantize kernel each on the cuBLAS-copy path above; 0 = none counted).
  double linears_per_layer = 0;
  // Kernels per layer launched beside the matmuls on every call (bitsandbytes LLM.int8's decomposition).
  double extra_kernels_per_layer = 0;
  // Prompt micro-batches in flight on different pipeline stages at once (llama.cpp's pipeline
  // parallelism); 1 = one pass at a time, every stage in turn.
  double pipeline_copies = 1;
  // Prompt tokens per engine call (llama.cpp's n_batch per llama_decode): micro-batches overlap on the
  // pipeline within one call only, and every call fills and drains it; 0 = the whole prompt in one call.
  double pipeline_call_tokens = 0;
  // llama.cpp's mat-vec kernels (mmvq for quantized weights, dequantize_mul_mat_vec for F16): a matmul of
  // up to matvec_max_rows rows runs one, whose memory throughput is bounded per SM by the loads each SM
  // keeps in flight (Little's law): at most matvec_bytes_per_sm_second per SM. 0 = no such bound.
  double matvec_max_rows = 0;
  double matvec_bytes_per_sm_second = 0;
  // Bytes per element of the tokens x hidden activations handed from one pipeline stage to the next
  // (llama.cpp: F32); 0 = the hand-off's latency alone.
  double handoff_element_bytes = 0;
  // llama.cpp's 16-bit cuBLAS matmuls (constants.h, "llama.cpp prompt processing"): FP16 accumulation, and
  // the F32 <-> F16 conversions around every call, in bytes per converted element (0 = none).
  bool fp16_accumulate = false;
  double cublas_convert_bytes = 0;
  // F16 weights go to that cuBLAS path above this many rows (0 = the engine has no such path).
  double fp16_cublas_above_rows = 0;
  // Attention without flash attention as llama.cpp runs it: the KQ rectangle of every micro-batch
  // materialised, with these bytes per score element and head (the GEMMs' own, then the element-wise
  // passes between them); 0 = the engine's attention as the workload's flash_attention says.
  double kq_gemm_bytes = 0;
  double kq_pass_bytes = 0;
  // int4 weight-only matmuls run PyTorch's tinygemm kernel (torch.ops.aten._weight_int4pack_mm: compiled
  // PyTorch, gpt-fast and torchao int4 weight-only), whose dequantizing instructions add to its transfer time.
  bool tinygemm = false;
};

// The lengths the performance model reads for inference: at least one prompt and one generated token.
inline int64_t perf_input_tokens(const Workload& w) { return std::max<int64_t>(1, w.prompt_tokens()); }
inline int64_t perf_output_tokens(const Workload& w) { return std::max<int64_t>(1, w.output_tokens); }

// Inference of one static batch: prefill of `batch` prompts, then output_tokens decode steps.
struct InferencePerf {
  double ttft_seconds = 0;                    // prefill of the whole batch + first token
  double tpot_seconds = 0;                    // mean time per decode step (per output token of a sequence)
  double decode_tokens_per_second = 0;        // one sequence: 1 / tpot
  double batch_decode_tokens_per_second = 0;  // whole batch during decode
  double prefill_tokens_per_second = 0;       // prompt tokens processed per second (whole batch)
  double total_seconds = 0;                   // prefill + all decode steps
  double throughput_tokens_per_second = 0;    // generated tokens / total_seconds (whole batch)
  PerfBound prefill_bound = PerfBound::kCompute;
  PerfBound decode_bound = PerfBound::kMemory;
  PerfBound bound = PerfBound::kMemory;  // of the dominant phase
};

// Serving with continuous batching: at the largest batch memory allows, and at a request rate.
struct ServingPerf {
  int64_t max_batch = 0;
  double max_throughput_tokens_per_second = 0;  // generated tokens/s with every slot busy
  double max_rate_requests_per_second = 0;      // the rate that throughput sustains
  // At the requested rate (0 when none was asked, or infinite latency when the rate exceeds capacity).
  double rate_requests_per_second = 0;
  bool saturated = false;
  double mean_batch = 0;
  double ttft_seconds = 0;     // queueing + prefill
  double tpot_seconds = 0;     // decode step at the mean batch, stretched by interleaved prefills
  double latency_seconds = 0;  // ttft + output_tokens x tpot
  double throughput_tokens_per_second = 0;
};

struct TrainPerf {
  double step_seconds = 0;       // one optimizer step over global_batch sequences
  double tokens_per_second = 0;  // whole job
  double tokens_per_second_per_gpu = 0;
  double samples_per_second = 0;     // whole job
  double mfu = 0;                    // model FLOPs (6N + attention, no recompute) / peak, 0..1
  double compute_seconds = 0;        // per step, per GPU: forward + backward + recompute
  double communication_seconds = 0;  // exposed (not overlapped) communication per step
  double optimizer_seconds = 0;
  double bubble_seconds = 0;
  PerfBound bound = PerfBound::kCompute;
};

// Multiplicative error band of the model from validation: prediction x low .. prediction x high.
struct PerfBand {
  double low = 1;
  double high = 1;
};
enum class PerfMetricKind { kDecode, kPrefill, kThroughput, kTraining, kMicrobench };
PerfBand perf_band(PerfMetricKind kind);

// Allocation-free: `w` is read, never copied (its model pointer is not used: `arch` has the shapes).
InferencePerf predict_inference(const PerfArch& arch, const PerfDevice& device, const Workload& w, const PerfRun& run,
                                const PerfEfficiency& eff);

// predict_inference over many batches and prompt lengths of one (arch, device, workload, run), as a
// sweep or a planner asks: the rates and the matmul shapes are resolved once, and the decode step's
// matmuls once per batch (they do not depend on the prompt). at(b, n) equals predict_inference of the
// workload with batch b and input_tokens n bit for bit, and does not allocate; ask the prompt lengths
// of one batch in a row to reuse its decode matmuls.
class InferenceSweep {
 public:
  InferenceSweep(const PerfArch& arch, const PerfDevice& device, const Workload& w, const PerfRun& run,
                 const PerfEfficiency& eff);
  ~InferenceSweep();
  InferenceSweep(InferenceSweep&&) noexcept;
  InferenceSweep& operator=(InferenceSweep&&) noexcept;
  InferenceSweep(const InferenceSweep&) = delete;
  InferenceSweep& operator=(const InferenceSweep&) = delete;

  InferencePerf at(int64_t batch, int64_t input_tokens);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// `max_batch` from the memory model; `rate` in requests/s (0 = none).
ServingPerf predict_serving(const PerfArch& arch, const PerfDevice& device, const Workload& w, const PerfRun& run,
                            const PerfEfficiency& eff, int64_t max_batch, double rate);
TrainPerf predict_training(const PerfArch& arch, const PerfDevice& device, const Workload& w, const PerfRun& run,
                           const PerfEfficiency& eff);

// Microbenchmarks the model is also checked against: one GEMM, and a streaming copy.
double predict_gemm_tflops(const PerfDevice& device, Precision precision, double m, double n, double k,
                           const PerfEfficiency& eff);
double predict_stream_bandwidth_gbps(const PerfDevice& device, const PerfEfficiency& eff);

// Model FLOPs per token of training (6 x active matmul params + attention, no recompute), as MFU counts.
double training_flops_per_token(const PerfArch& arch, int64_t seq_len);

}  // namespace gpuplan
