// The performance model: operators, their rooflines, and inference / serving / training built from them.
// docs/model.md ("Performance") derives every formula used here.
#include "gpuplan/perf.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>

#include "gpuplan/sweep.h"
#include "perf/constants.h"

namespace gpuplan {

using namespace perf;

namespace {

double dbl(int64_t v) { return static_cast<double>(v); }

// Time accumulator that remembers which resource each operator was bound by.
struct Cost {
  double compute = 0;   // seconds of operators bound by arithmetic
  double memory = 0;    // bound by memory bandwidth
  double comm = 0;      // moving data between GPUs
  double overhead = 0;  // fixed per-kernel / per-step costs
  double total() const { return compute + memory + comm + overhead; }
  PerfBound bound() const {
    PerfBound b = PerfBound::kCompute;
    double m = compute;
    if (memory > m) b = PerfBound::kMemory, m = memory;
    if (comm > m) b = PerfBound::kCommunication, m = comm;
    if (overhead > m) b = PerfBound::kOverhead;
    return b;
  }
  void roof(double t_compute, double t_memory) {
    if (t_compute >= t_memory)
      compute += t_compute;
    else
      memory += t_memory;
  }
  void add(const Cost& o, double k = 1) {
    compute += k * o.compute, memory += k * o.memory, comm += k * o.comm, overhead += k * o.overhead;
  }
};

// The time of one roofline operator and which side bounds it (roof() without the accumulation).
struct RoofTime {
  double seconds = 0;
  bool compute = true;
  bool any = false;  // false: the operator is empty and adds nothing
};

void add_roof(Cost& c, const RoofTime& t) {
  if (!t.any) return;
  (t.compute ? c.compute : c.memory) += t.seconds;
}

// Everything a step needs, resolved once per prediction.
struct Rates {
  double gemm_flops;       // achievable rate of a large GEMM in the weights' compute precision
  double attn_flops;       // achievable rate of flash attention (16-bit, or tf32/fp32)
  double attn_gemm_flops;  // eager attention's batched matmuls
  double head_flops;       // LM head and router: kept in 16 bits by every quantized format
  double cuda_core_flops;  // GEMV kernels on CUDA cores (fp32 FMA), what engines pick for a few rows
  double bandwidth;        // achievable bytes/s
  double sms;              // SMs that run the GEMM tiles (0 = no wave quantization)
  double half_intensity;
  double kernel_seconds;
  double allreduce_bw;  // bus bandwidth of tensor-parallel all-reduces
  double allreduce_latency;
  double inv_bandwidth;  // 1 / bandwidth, to tell the bound side of a GEMM without dividing
  // Matmuls of up to matvec_max_rows rows read their weights at matvec_bandwidth (<= bandwidth): llama.cpp's
  // mat-vec kernels, bounded per SM (PerfRun::matvec_bytes_per_sm_second). 0 rows = none.
  double matvec_max_rows;
  double matvec_bandwidth;
  double inv_cuda_core_flops;  // 1 / cuda_core_flops (0 when there is none)
  // gemm_flops without the in-loop dequantization: 16-bit cuBLAS on a dequantized copy (llama.cpp).
  double dense_gemm_flops;
  // Host seconds per kernel launched from Python by transformers' generate(), which overlap the GPU's work
  // (constants.h, kEagerHostOpsPerLayer); 0 when the engine does not launch that way.
  double python_op_seconds;
  // Issue seconds per weight and 16-row pass of compiled PyTorch's int4 tinygemm (constants.h); 0 = none.
  double tinygemm_seconds_per_weight;
};

double peak_16bit(const PerfDevice& d) {
  if (d.peak(Precision::kBf16) > 0) return d.peak(Precision::kBf16);
  if (d.peak(Precision::kFp16) > 0) return d.peak(Precision::kFp16);
  return d.peak(Precision::kFp32);
}

double compute_peak(const PerfDevice& d, Precision p) {
  const double v = d.peak(p);
  if (v > 0) return v;
  if (p == Precision::kBf16 || p == Precision::kFp8 || p == Precision::kInt8 || p == Precision::kInt4)
    return peak_16bit(d);
  if (p == Precision::kTf32) return d.peak(Precision::kFp32);
  return peak_16bit(d);
}

Rates make_rates(const PerfDevice& d, Engine engine, const EngineVersion& version, const PerfRun& run,
                 const PerfEfficiency& eff) {
  Rates r{};
  const Precision p = run.weights.compute;
  double gemm_frac =
      p == Precision::kFp8 || p == Precision::kInt8 ? eff.gemm_fp8_peak_fraction : eff.gemm_peak_fraction;
  if (p == Precision::kFp32) gemm_frac = eff.gemm_peak_fraction;  // CUDA-core SGEMM reaches a similar share
  const auto pi = static_cast<size_t>(p);
  if (eff.precision_peak_fraction[pi] > 0) gemm_frac = eff.precision_peak_fraction[pi];  // measured
  // llama.cpp's cuBLAS calls accumulate in FP16 (CUBLAS_COMPUTE_16F, constants.h): the FP16-accumulate
  // rate where the GPU's datasheet gives a faster one (GeForce), else the 16-bit peak.
  const bool acc16 = run.fp16_accumulate && d.fp16_fp16acc_flops > 0;
  const double peak16 = acc16 ? d.fp16_fp16acc_flops : peak_16bit(d);
  const bool half_gemm = p == Precision::kBf16 || p == Precision::kFp16;
  r.gemm_flops = (acc16 && half_gemm && !run.weights.dequantize ? peak16 : compute_peak(d, p)) * gemm_frac;
  // A dequantized copy is multiplied by 16-bit cuBLAS (llama.cpp's cuBLAS path, constants.h).
  r.dense_gemm_flops = run.weights.dequantize ? peak16 * eff.gemm_peak_fraction : r.gemm_flops;
  if (run.weights.dequantize) r.gemm_flops *= eff.dequant_gemm_fraction;
  // llama.cpp's MMQ on int8 MMA: at most one int32 -> float conversion per 32 multiply-adds at the GPU's
  // conversion rate (constants.h, "MMQ's conversion pipe"); the roofline's compute rate is the lower one.
  if (engine == Engine::kLlamaCpp && p == Precision::kInt8 && run.weights.dequantize && d.sm_count > 0 &&
      d.sm_clock_hz > 0) {
    const double conversion_flops =
        2.0 * d.sm_count * d.sm_clock_hz * kConversionsPerSmPerCycle * kMmqMacsPerConversion;
    r.gemm_flops = std::min(r.gemm_flops, conversion_flops);
  }
  const double attn_peak = (p == Precision::kTf32 || p == Precision::kFp32) ? compute_peak(d, p) : peak_16bit(d);
  double attn_frac = eff.attention_peak_fraction;
  if (d.persistent_gemm && !engine_perf_at(engine, version).hopper_attention) {
    attn_frac = std::min(attn_frac, kFlashAttention2HopperFraction);  // FlashAttention-2 on Hopper
  }
  r.attn_flops = attn_peak * attn_frac;
  // Attention as batched 16-bit cuBLAS GEMMs: llama.cpp's KQ path accumulates in FP16 as well.
  r.attn_gemm_flops = (acc16 && run.kq_gemm_bytes > 0 ? peak16 : attn_peak) * eff.gemm_peak_fraction;
  r.head_flops = (p == Precision::kTf32 || p == Precision::kFp32) ? r.gemm_flops : attn_peak * eff.gemm_peak_fraction;
  const double fp32_measured = eff.precision_peak_fraction[static_cast<size_t>(Precision::kFp32)];
  r.cuda_core_flops = d.peak(Precision::kFp32) * (fp32_measured > 0 ? fp32_measured : eff.gemm_peak_fraction);
  r.bandwidth = d.bandwidth_bytes_per_second * eff.bandwidth_fraction;
  r.half_intensity = eff.precision_half_intensity[pi] > 0 ? eff.precision_half_intensity[pi] : eff.gemm_half_intensity;
  r.sms = d.persistent_gemm ? 0 : d.sm_count;
  r.kernel_seconds = run.cuda_graphs ? eff.kernel_seconds : std::max(eff.kernel_seconds, kEagerKernelSeconds);
  // llama.cpp launches from C++: without graphs each kernel adds its host launch, not Python's.
  if (!run.cuda_graphs && engine == Engine::kLlamaCpp) r.kernel_seconds = eff.kernel_seconds + kNativeLaunchSeconds;
  // transformers' generate() without CUDA graphs: the launches are host time that overlaps the GPU's, whose
  // kernels keep their own fixed cost (inference_step).
  r.python_op_seconds = 0;
  if (!run.cuda_graphs && engine == Engine::kTransformers) {
    r.python_op_seconds = r.kernel_seconds;
    r.kernel_seconds = eff.kernel_seconds;
  }
  r.allreduce_bw = d.link_bytes_per_second * eff.link_fraction;
  r.allreduce_latency = d.nvlink ? kAllReduceLatencySeconds : kAllReduceLatencyPcieSeconds;
  r.inv_bandwidth = 1.0 / r.bandwidth;
  r.matvec_bandwidth = r.bandwidth;
  if (run.matvec_max_rows > 0 && run.matvec_bytes_per_sm_second > 0 && d.sm_count > 0) {
    r.matvec_max_rows = run.matvec_max_rows;
    r.matvec_bandwidth = std::min(r.bandwidth, d.sm_count * run.matvec_bytes_per_sm_second);
  }
  r.inv_cuda_core_flops = r.cuda_core_flops > 0 ? 1.0 / r.cuda_core_flops : 0.0;
  r.tinygemm_seconds_per_weight = 0;
  if (run.tinygemm && d.sm_count > 0 && d.sm_clock_hz > 0) {
    r.tinygemm_seconds_per_weight =
        kTinygemmWarpInstructionsPerWeight / (d.sm_count * kWarpIssuesPerSmPerCycle * d.sm_clock_hz);
  }
  return r;
}

// Layout transposes around tensor-core convolutions of NCHW activations (constants.h): none in NHWC
// (channels_last) or on CUDA cores (fp32).
double nchw_transpose_passes(const PerfRun& run, double passes) {
  return run.channels_last || run.weights.compute == Precision::kFp32 ? 0.0 : passes;
}

// Convolutions: tensor-core convs reach kConvPeakFraction of peak; fp32 convs on CUDA cores reach the
// GEMM fraction (no MMA tile to underfill with 64-channel layers).
double conv_flops(const PerfDevice& d, Precision p, const PerfEfficiency& eff) {
  if (p == Precision::kFp32) return d.peak(Precision::kFp32) * eff.gemm_peak_fraction;
  return compute_peak(d, p) * kConvPeakFraction;
}

// One GEMM's facts that do not depend on its rows (M): N, K, their reciprocals, the column tiles and
// the weight bytes. Resolved once per model, tensor-parallel degree and format (matmul_shapes).
struct GemmShape {
  double n = 0;
  double k = 0;
  double inv_n = 0;         // 1 / n
  double inv_k = 0;         // 1 / k
  double col_tiles = 0;     // ceil(n / kGemmTileCols)
  double weight_bytes = 0;  // n x k x bytes per weight
};

GemmShape gemm_shape(double n, double k, double w_bytes) {
  return GemmShape{n, k, 1.0 / n, 1.0 / k, std::ceil(n / kGemmTileCols), n * k * w_bytes};
}

// The rows of a GEMM and what depends on them alone (shared by every matmul of a step).
struct GemmRows {
  double m = 0;
  double inv_m = 0;      // 1 / m
  double row_tiles = 0;  // ceil(m / kGemmTileRows)
};

GemmRows gemm_rows(double m) { return GemmRows{m, 1.0 / m, std::ceil(m / kGemmTileRows)}; }

// A product with a precomputed reciprocal is within a few ulps of the quotient, so when it clears the
// other side of a comparison by this relative margin the comparison is decided without dividing; near
// ties divide exactly. The results are bit for bit those of dividing every time.
constexpr double kQuotientMargin = 1e-9;

// One GEMM: M rows (tokens) x K inputs x N outputs, weights of `w_bytes` per element (in the shape).
RoofTime gemm_time(const Rates& r, const GemmRows& rows, const GemmShape& g, double a_bytes, double flop_rate) {
  const double m = rows.m, n = g.n, k = g.k;
  if (m <= 0 || n <= 0 || k <= 0) return {};
  const double intensity = 1.0 / (rows.inv_m + g.inv_n + g.inv_k);  // FLOPs per element moved, /2
  const double eff_m = intensity / (intensity + r.half_intensity);
  const double flops = 2.0 * m * n * k;
  double t_c = flops / (flop_rate * eff_m);
  // Wave quantization: output tiles run in waves of one tile per SM; a partial last wave idles the rest.
  if (r.sms > 0) {
    const double tiles = rows.row_tiles * g.col_tiles;
    const double waves = tiles / r.sms;
    t_c *= std::ceil(waves) / waves;
  }
  // Engines pick the faster kernel: for a few rows a CUDA-core GEMV beats an underfilled tensor-core tile.
  if (r.cuda_core_flops > 0 && !(flops * r.inv_cuda_core_flops > t_c * (1 + kQuotientMargin))) {
    t_c = std::min(t_c, flops / r.cuda_core_flops);
  }
  const double bytes = g.weight_bytes + (m * k + m * n) * a_bytes;
  const bool matvec = m <= r.matvec_max_rows;
  if (!matvec && bytes * r.inv_bandwidth < t_c * (1 - kQuotientMargin)) return RoofTime{t_c, true, true};
  const double t_m = bytes / (matvec ? r.matvec_bandwidth : r.bandwidth);
  return t_c >= t_m ? RoofTime{t_c, true, true} : RoofTime{t_m, false, true};
}

void gemm(Cost& c, const Rates& r, double m, double n, double k, double w_bytes, double a_bytes, double flop_rate) {
  add_roof(c, gemm_time(r, gemm_rows(m), gemm_shape(n, k, w_bytes), a_bytes, flop_rate));
}

// gemm_time of a quantized matmul that runs compiled PyTorch's int4 tinygemm (constants.h): its issue time,
// one pass per 16 rows, adds to its transfer time; the tensor-core side stays as it was.
RoofTime tinygemm_time(const Rates& r, const GemmRows& rows, const GemmShape& g, double a_bytes, double flop_rate) {
  const RoofTime t = gemm_time(r, rows, g, a_bytes, flop_rate);
  if (!(r.tinygemm_seconds_per_weight > 0) || !t.any) return t;
  const double passes = std::ceil(rows.m / kTinygemmRowsPerPass);
  const double bytes = g.weight_bytes + (rows.m * g.k + rows.m * g.n) * a_bytes;
  const double t_m = bytes / r.bandwidth + g.n * g.k * passes * r.tinygemm_seconds_per_weight;
  return t_m > t.seconds ? RoofTime{t_m, false, true} : t;
}

// Ring all-reduce of `bytes` over n devices: 2(n-1)/n x bytes over the bus bandwidth, plus latency.
double allreduce_seconds(double bytes, int n, double bus_bw, double latency) {
  if (n <= 1 || bytes <= 0) return 0;
  return 2.0 * (n - 1) / n * bytes / bus_bw + latency;
}

// Sum over the q new positions of the tokens each attends to, with `ctx0` tokens already cached, a
// window (0 = none) and causal masking (an encoder attends to all ctx0 + q).
double attended_pairs(double q, double ctx0, double window, bool causal) {
  if (!causal) {
    const double kv = ctx0 + q;
    return q * (window > 0 ? std::min(kv, window) : kv);
  }
  // positions p = ctx0+1 .. ctx0+q attend to min(p, window)
  const double lo = ctx0 + 1, hi = ctx0 + q;
  if (window <= 0 || hi <= window) return (lo + hi) * q / 2.0;
  if (lo >= window) return q * window;
  const double below = window - lo + 1;  // positions lo..window
  return (lo + window) * below / 2.0 + (q - below) * window;
}

// Forward pass of one step on one GPU: `batch` sequences each adding `q` tokens after `ctx0` cached ones.
// `logit_rows`: rows that go through the LM head. Layers: this GPU's share (pipeline stage).
struct StepShape {
  double batch;
  double q;
  double ctx0;
  double logit_rows;
  bool training;  // activations kept (no KV cache write); attention over the micro-batch itself
};

struct LayerCosts {
  Cost gemm;       // matmuls of one layer
  Cost attention;  // attention of one layer (global layer), and of a window layer
  Cost attention_window;
  Cost elementwise;
  double attention_flops_global = 0;
  double attention_flops_window = 0;
  Cost comm;
};

// The matmuls of a layer and the LM head, as shapes: they depend on the model, the tensor-parallel
// degree and the weight format only, so a sweep resolves them once.
struct MatmulShapes {
  GemmShape qkv, out, up, down;              // attention projections and the dense MLP
  GemmShape router, expert_up, expert_down;  // MoE: the router and ONE routed expert
  GemmShape head;
  bool mlp = false;
  bool experts = false;
};

MatmulShapes matmul_shapes(const PerfArch& a, const Workload& w, const PerfRun& run) {
  MatmulShapes sh;
  const double tp = std::max(1, w.tp);
  const double wb = run.weights.bits_per_weight / 8.0;
  const double h = dbl(a.hidden);
  // Attention projections and dense MLP: N split across tensor-parallel ranks.
  sh.qkv = gemm_shape(a.qkv_params_per_layer / h / tp, h, wb);
  const double out_in = a.out_params_per_layer / h;
  sh.out = gemm_shape(h, out_in / tp, wb);
  sh.mlp = a.mlp_params_per_layer > 0;
  if (sh.mlp) {
    const double inter_total = a.mlp_params_per_layer / h;  // summed inner widths of up(+gate) and down
    const double up_share = a.gated_mlp ? kGatedMlpUpShare : kPlainMlpUpShare;
    sh.up = gemm_shape(inter_total * up_share / tp, h, wb);
    sh.down = gemm_shape(h, inter_total * (1 - up_share) / tp, wb);
  }
  sh.experts = a.experts > 0 && a.expert_params_per_layer > 0;
  if (sh.experts) {
    sh.router = gemm_shape(a.router_params_per_layer / h, h, 2);
    const double inner = a.expert_params_per_layer / h;
    const double up_share = a.gated_mlp ? kGatedMlpUpShare : kPlainMlpUpShare;
    sh.expert_up = gemm_shape(inner * up_share / tp, h, wb);
    sh.expert_down = gemm_shape(h, inner * (1 - up_share) / tp, wb);
  }
  sh.head = gemm_shape(a.head_params / dbl(a.hidden) / std::max(1, w.tp), dbl(a.hidden), run.weights.head_bits / 8.0);
  return sh;
}

// The parts of a layer that depend only on the step's tokens (batch x new tokens): matmuls,
// element-wise passes and tensor-parallel all-reduces; and the LM head of `logit_rows`.
struct TokenCosts {
  Cost gemm;
  Cost elementwise;
  Cost comm;
  RoofTime head;
};

// llama.cpp's cuBLAS path (constants.h, "llama.cpp kernels"): above run.cublas_above_rows rows the weights are
// first dequantized to an fp16 copy (read the quantized bytes, write 2 bytes per weight), then multiplied at the
// dense rate.
bool cublas_copy_path(const PerfRun& run, double rows) {
  return run.cublas_above_rows > 0 && rows > run.cublas_above_rows;
}

TokenCosts token_costs(const PerfArch& a, const Workload& w, const PerfRun& run, const Rates& r, const MatmulShapes& sh,
                       double tokens, double logit_rows) {
  TokenCosts tc;
  const double tp = std::max(1, w.tp);
  const double ab = run.activation_bytes;
  const double h = dbl(a.hidden);
  const GemmRows rows = gemm_rows(tokens);
  const bool cublas_copy = cublas_copy_path(run, tokens);
  const double rate = cublas_copy ? r.dense_gemm_flops : r.gemm_flops;
  // cuBLAS reads the 16-bit copy, not the packed weights.
  const GemmShape* lin[] = {&sh.qkv, &sh.out, &sh.up, &sh.down};
  GemmShape copy[std::size(lin)];
  if (cublas_copy) {
    for (size_t i = 0; i < std::size(lin); ++i) {
      copy[i] = gemm_shape(lin[i]->n, lin[i]->k, kDequantCopyBytesPerWeight);
      lin[i] = &copy[i];
    }
  }
  add_roof(tc.gemm, tinygemm_time(r, rows, *lin[0], ab, rate));
  add_roof(tc.gemm, tinygemm_time(r, rows, *lin[1], ab, rate));
  if (sh.mlp) {
    add_roof(tc.gemm, tinygemm_time(r, rows, *lin[2], ab, rate));
    add_roof(tc.gemm, tinygemm_time(r, rows, *lin[3], ab, rate));
  }
  // Per call: one dequantize kernel per linear on the copy path, and LLM.int8's decomposition kernels.
  tc.gemm.overhead += ((cublas_copy ? run.linears_per_layer : 0.0) + run.extra_kernels_per_layer) * r.kernel_seconds;
  if (sh.experts) {
    const double e = dbl(a.experts), k = dbl(a.experts_per_token);
    add_roof(tc.gemm, gemm_time(r, rows, sh.router, ab, r.head_flops));
    // Experts a step touches: each token picks k of e; expected distinct = e (1 - (1 - k/e)^tokens).
    const double touched = e * (1.0 - std::pow(1.0 - k / e, tokens));
    const GemmRows expert_rows = gemm_rows(tokens * k / touched);
    Cost one;
    add_roof(one, tinygemm_time(r, expert_rows, sh.expert_up, ab, rate));
    add_roof(one, tinygemm_time(r, expert_rows, sh.expert_down, ab, rate));
    tc.gemm.add(one, touched);
  }
  if (cublas_copy) {
    double weights = a.qkv_params_per_layer + a.out_params_per_layer + a.mlp_params_per_layer;
    if (sh.experts) weights += dbl(a.experts) * a.expert_params_per_layer;  // every expert, as ggml's copy
    const double bytes_per_weight = run.weights.bits_per_weight / 8.0 + kDequantCopyBytesPerWeight;
    tc.gemm.memory += weights / tp * bytes_per_weight / r.bandwidth;
  }
  // llama.cpp's cuBLAS calls convert their F32 input to F16 and the F16 result back to F32, in kernels of
  // their own (constants.h): q, k, v (and gate, up) each convert the same input again.
  const bool fp16_cublas =
      run.fp16_cublas_above_rows > 0 && !run.weights.dequantize && tokens > run.fp16_cublas_above_rows;
  if (run.cublas_convert_bytes > 0 && (cublas_copy || fp16_cublas) && !sh.experts) {
    const double up_calls = sh.mlp ? (a.gated_mlp ? kLlamaCppGatedUpInputs : 1.0) : 0.0;
    const double inputs = kLlamaCppQkvInputs * sh.qkv.k + sh.out.k + (sh.mlp ? up_calls * sh.up.k + sh.down.k : 0.0);
    const double outputs = sh.qkv.n + sh.out.n + (sh.mlp ? sh.up.n + sh.down.n : 0.0);
    const double calls = kLlamaCppQkvInputs + 1.0 + (sh.mlp ? up_calls + 1.0 : 0.0);
    tc.gemm.memory += tokens * (inputs + outputs) * run.cublas_convert_bytes / r.bandwidth;
    tc.gemm.overhead += calls * kLlamaCppCublasConvertKernels * r.kernel_seconds;
  }
  // Element-wise passes (norms, residual adds, rotary, activation).
  const double inter_active =
      a.mlp_params_per_layer / h / (a.gated_mlp ? 3.0 : 2.0) +
      (a.experts > 0 ? dbl(a.experts_per_token) * a.expert_params_per_layer / h / (a.gated_mlp ? 3.0 : 2.0) : 0);
  const double ew_bytes =
      tokens * ab * (kElementwiseHiddenPasses * h + kElementwiseIntermediatePasses * inter_active / tp);
  tc.elementwise.memory +=
      ew_bytes * (engine_perf(w.engine).fused_elementwise ? 1.0 : kEagerElementwiseFactor) / r.bandwidth;
  // Tensor parallel: one all-reduce after attention, one after the MLP.
  if (w.tp > 1)
    tc.comm.comm +=
        kTpAllReducesPerLayer * allreduce_seconds(tokens * h * ab, w.tp, r.allreduce_bw, r.allreduce_latency);
  if (logit_rows > 0 && a.head_params > 0) {
    tc.head = gemm_time(r, gemm_rows(logit_rows), sh.head, run.activation_bytes, r.head_flops);
  }
  return tc;
}

// Attention of one global layer and of one window layer.
struct AttentionCosts {
  Cost global;
  Cost window;
  double flops_global = 0;
  double flops_window = 0;
};

// What an engine's release changes in a step, where a source documents it (constants.h, "vLLM before 0.6.0"
// and "TensorRT-LLM releases"). TensorRT-LLM before 0.8.0 decodes MQA/GQA attention with the masked MHA
// kernel, which reads the shared K/V once per query head.
bool masked_mha_decode(const Workload& w) {
  return w.task == Task::kInfer && w.engine == Engine::kTensorrtLlm &&
         version_before(w.engine_version, kTensorrtLlmXqaDefaultSince);
}
// vLLM before 0.6.0 processes each step's outputs on the host between steps: seconds per running sequence.
double host_seconds_per_sequence(const Workload& w) {
  return w.task == Task::kInfer && w.engine == Engine::kVllm && version_before(w.engine_version, kVllmAsyncOutputSince)
             ? kVllmV0OutputSecondsPerSequence
             : 0.0;
}

AttentionCosts attention_costs(const PerfArch& a, const Workload& w, const PerfRun& run, const Rates& r,
                               const StepShape& s) {
  AttentionCosts ac;
  const double tp = std::max(1, w.tp);
  const double tokens = s.batch * s.q;
  const double ab = run.activation_bytes;
  // Heads split across tensor-parallel ranks (KV heads too, at least one per rank).
  const double heads = dbl(a.heads) / tp;
  const double kv_heads = std::max(1.0, dbl(a.kv_heads) / tp);
  const double d = dbl(a.head_dim);
  const bool causal = !a.encoder;
  const bool mmha = s.q == 1 && masked_mha_decode(w);
  auto attention = [&](Cost& c, double window, double& flops_out) {
    if (run.kq_pass_bytes > 0 && s.q > 1) {
      // llama.cpp without flash attention (constants.h): each micro-batch of `chunk` tokens multiplies
      // its queries by every cached cell so far (ctx0 + the prompt up to the micro-batch's end), masked
      // but not skipped, and reads those cells' K and V once. P passes, the last of n_last tokens.
      const double chunk =
          run.prefill_chunk_tokens > 0 ? std::max(1.0, std::floor(run.prefill_chunk_tokens / s.batch)) : s.q;
      const double passes = std::ceil(s.q / chunk);
      const double full = passes - 1, n_last = s.q - full * chunk;
      const double cells_before_last = s.ctx0 * full + chunk * full * passes / 2.0;  // summed over the full passes
      const double kv_sum = cells_before_last + (s.ctx0 + s.q);                      // cells read, per pass
      const double rect = chunk * cells_before_last + (s.ctx0 + s.q) * n_last;
      const double pairs = s.batch * rect;
      const double flops = 4.0 * pairs * heads * d;
      flops_out = flops;
      const double kv_read = s.batch * kv_sum * 2.0 * kv_heads * d * run.kv_bytes;
      const double qo = 2.0 * tokens * heads * d * ab;
      c.roof(flops / r.attn_gemm_flops, (kv_read + qo + pairs * heads * run.kq_gemm_bytes) / r.bandwidth);
      c.memory += pairs * heads * run.kq_pass_bytes / r.bandwidth;  // the element-wise passes between
      return;
    }
    const double pairs = s.batch * attended_pairs(s.q, s.ctx0, window, causal);
    const double flops = 4.0 * pairs * heads * d;
    flops_out = flops;
    const double kv_tokens = s.batch * (window > 0 ? std::min(s.ctx0 + s.q, window) : s.ctx0 + s.q);
    double kv_read = kv_tokens * 2.0 * kv_heads * d * (s.training ? ab : run.kv_bytes);
    if (mmha) kv_read *= heads / kv_heads;  // masked MHA: the group's K/V once per query head
    const double qo = 2.0 * tokens * heads * d * ab;
    if (w.flash_attention || s.q == 1) {
      c.roof(flops / r.attn_flops, (kv_read + qo) / r.bandwidth);
    } else {
      const double score_bytes = a.eager_fp32_softmax ? 4.0 : ab;
      const double scores = pairs * heads * score_bytes * kEagerScorePasses * (causal ? 2.0 : 1.0);
      c.roof(flops / r.attn_gemm_flops, (kv_read + qo + scores) / r.bandwidth);
    }
  };
  attention(ac.global, 0, ac.flops_global);
  if (a.window_layers > 0) attention(ac.window, dbl(a.window_tokens), ac.flops_window);
  return ac;
}

LayerCosts layer_costs(const PerfArch& a, const Workload& w, const PerfRun& run, const Rates& r, const StepShape& s) {
  const TokenCosts tc = token_costs(a, w, run, r, matmul_shapes(a, w, run), s.batch * s.q, 0);
  const AttentionCosts ac = attention_costs(a, w, run, r, s);
  LayerCosts lc;
  lc.gemm = tc.gemm;
  lc.attention = ac.global;
  lc.attention_window = ac.window;
  lc.elementwise = tc.elementwise;
  lc.attention_flops_global = ac.flops_global;
  lc.attention_flops_window = ac.flops_window;
  lc.comm = tc.comm;
  return lc;
}

// Forward step over this GPU's layers (all layers / pp), without the LM head (the caller adds it once, for
// the last stage); `tc` holds the parts that depend only on the step's tokens (token_costs of s.batch x s.q
// and s.logit_rows).
Cost forward_step(const PerfArch& a, const Workload& w, const PerfRun& run, const Rates& r, const StepShape& s,
                  double kernels, const TokenCosts& tc) {
  const AttentionCosts ac = attention_costs(a, w, run, r, s);
  const double pp = std::max(1, w.pp);
  const double global = dbl(a.global_layers) / pp, window = dbl(a.window_layers) / pp;
  const double layers = global + window;
  Cost c;
  c.add(tc.gemm, layers);
  c.add(ac.global, global);
  c.add(ac.window, window);
  c.add(tc.elementwise, layers);
  c.add(tc.comm, layers);
  c.overhead += layers * kernels * r.kernel_seconds;
  return c;
}

double engine_step_seconds(const Workload& w, const PerfEfficiency& eff) {
  return eff.step_seconds >= 0 ? eff.step_seconds : engine_perf_at(w.engine, w.engine_version).step_seconds;
}

// Whether the engine schedules the next step on the host while the GPU runs this one (vLLM's async
// scheduling, constants.h kVllmAsyncSchedulingSince): not with pipeline parallelism, which it excludes.
bool host_overlaps_gpu(const Workload& w) {
  return engine_perf_at(w.engine, w.engine_version).overlapped_host && std::max(1, w.pp) == 1;
}

// The host time a step adds after its GPU work: all of it, or, when the engine is busy behind the step
// and overlaps its host work with the GPU, only what outlasts the GPU (the step takes max(GPU, host)).
double visible_host_seconds(double host, double gpu, bool overlapped) {
  return overlapped ? std::max(0.0, host - gpu) : host;
}

// The hand-offs of one pass of `tokens` through `stages` pipeline stages: stages - 1 point-to-point
// copies of the residual stream, each the link's latency plus, where the run states the element size
// (llama.cpp's F32 activations, constants.h), its tokens x hidden bytes over the link.
double handoff_seconds(const PerfArch& a, const PerfRun& run, const Rates& r, double stages, double tokens) {
  if (stages <= 1) return 0;
  const double bytes = tokens * dbl(a.hidden) * run.handoff_element_bytes;
  return (stages - 1) * (bytes > 0 ? r.allreduce_latency + bytes / r.allreduce_bw : r.allreduce_latency);
}

// One inference step as the user sees it: every pipeline stage in turn, plus the engine's host work.
// `busy`: the engine has the next step to schedule while this one runs (decode steps, serving), which an
// engine with async scheduling overlaps with the GPU.
Cost inference_step(const PerfArch& a, const Workload& w, const PerfRun& run, const Rates& r, const StepShape& s,
                    const PerfEfficiency& eff, const TokenCosts& tc, bool busy = false) {
  Cost c = forward_step(a, w, run, r, s, engine_perf(w.engine).kernels_per_layer, tc);
  const double pp = std::max(1, w.pp);
  Cost out;
  out.add(c, pp);
  add_roof(out, tc.head);                                     // the LM head runs once, on the last stage
  out.comm += handoff_seconds(a, run, r, pp, s.batch * s.q);  // point-to-point hand-offs between stages
  const double per_sequence = host_seconds_per_sequence(w);   // vLLM before 0.6.0
  const double host_step = engine_step_seconds(w, eff) + (per_sequence > 0 ? per_sequence * s.batch : 0.0);
  if (r.python_op_seconds > 0) {
    // transformers' generate(): Python launches every op of every layer (and the bitsandbytes kernels of
    // each linear call) ahead of the GPU, and the loop waits for the GPU once per step, so the step is
    // the longer of the two (constants.h, kEagerHostOpsPerLayer).
    const double ops_per_layer = kEagerHostOpsPerLayer +
                                 (cublas_copy_path(run, s.batch * s.q) ? run.linears_per_layer : 0.0) +
                                 run.extra_kernels_per_layer;
    const double launches = dbl(a.global_layers + a.window_layers) * ops_per_layer * r.python_op_seconds;
    out.overhead += visible_host_seconds(launches + host_step, out.total(), true);
    return out;
  }
  out.overhead += visible_host_seconds(host_step, out.total(), busy && host_overlaps_gpu(w));
  return out;
}

Cost inference_step(const PerfArch& a, const Workload& w, const PerfRun& run, const Rates& r, const MatmulShapes& sh,
                    const StepShape& s, const PerfEfficiency& eff, bool busy = false) {
  return inference_step(a, w, run, r, s, eff, token_costs(a, w, run, r, sh, s.batch * s.q, s.logit_rows), busy);
}

// Prefill of `batch` prompts of `input` tokens in `passes` passes of `q` tokens. An engine that splits prompts
// into micro-batches (run.prefill_chunk_tokens: llama.cpp's n_ubatch) runs one forward pass per micro-batch:
// its matmuls, kernels and host work repeat per pass, at the pass's row count; attention covers the same
// query-key pairs as one pass over the whole prompt, so it is counted once over the whole prompt.
Cost prefill_passes(const PerfArch& a, const Workload& w, const PerfRun& run, const Rates& r, const MatmulShapes& sh,
                    double batch, double input, double q, double passes, const PerfEfficiency& eff) {
  if (passes <= 1) return inference_step(a, w, run, r, sh, StepShape{batch, input, 0, batch, false}, eff);
  const double last_q = input - (passes - 1) * q;
  const AttentionCosts ac = attention_costs(a, w, run, r, StepShape{batch, input, 0, batch, false});
  const TokenCosts full = token_costs(a, w, run, r, sh, batch * q, 0);
  const TokenCosts last = token_costs(a, w, run, r, sh, batch * last_q, batch);
  const double pp = std::max(1, w.pp);
  const double global = dbl(a.global_layers) / pp, window = dbl(a.window_layers) / pp;
  const double layers = global + window;
  Cost stage;
  stage.add(ac.global, global);
  stage.add(ac.window, window);
  for (const auto& [tc, k] : {std::pair<const TokenCosts*, double>{&full, passes - 1}, {&last, 1.0}}) {
    stage.add(tc->gemm, layers * k);
    stage.add(tc->elementwise, layers * k);
    stage.add(tc->comm, layers * k);
  }
  stage.overhead += passes * layers * engine_perf(w.engine).kernels_per_layer * r.kernel_seconds;
  // Every pass crosses every stage. One pass at a time, the prompt takes pp x the stage's time. With
  // `in_flight` passes on different stages at once (llama.cpp's pipeline parallelism, constants.h), a
  // pass still takes pp stage-times of its own, but in_flight of them run together: pp x k / in_flight
  // pass-stage-times for k passes, plus in_flight - 1 to fill the pipeline (in_flight = pp: k + pp - 1).
  // The passes overlap within one engine call (run.pipeline_call_tokens) and each call fills and drains
  // the pipeline again.
  const double per_call = run.pipeline_call_tokens > 0
                              ? std::clamp(std::floor(run.pipeline_call_tokens / (batch * q)), 1.0, passes)
                              : passes;
  const auto call_stage_times = [&](double k) {
    const double m = std::min({run.pipeline_copies, pp, k});
    return m > 1 ? pp * k / m + m - 1 : pp * k;
  };
  const double full_calls = std::floor(passes / per_call);
  const double rest = passes - full_calls * per_call;
  const double stage_times =
      (full_calls * call_stage_times(per_call) + (rest > 0 ? call_stage_times(rest) : 0.0)) / passes;
  const double in_flight = std::min({run.pipeline_copies, pp, per_call});
  const double hops =
      (passes - 1) * handoff_seconds(a, run, r, pp, batch * q) + handoff_seconds(a, run, r, pp, batch * last_q);
  Cost out;
  out.add(stage, stage_times);
  add_roof(out, last.head);  // once, on the last stage, for the prompt's last pass
  out.comm += in_flight > 1 ? hops * stage_times / pp : hops;
  out.overhead += passes * engine_step_seconds(w, eff);
  return out;
}

// A context pass the host enqueues layer by layer without a CUDA graph (TensorRT-LLM's GptSession,
// constants.h kTensorrtSessionContextEnqueueSecondsPerLayer) ends no earlier than that enqueue and the
// host step: each pass takes max(GPU + host step, layers x enqueue + host step).
Cost prefill_step(const PerfArch& a, const Workload& w, const PerfRun& run, const Rates& r, const MatmulShapes& sh,
                  double batch, double input, const PerfEfficiency& eff) {
  const double chunk = run.prefill_chunk_tokens;
  const double q = chunk > 0 ? std::max(1.0, std::floor(chunk / batch)) : input;  // prompt tokens per pass
  const double passes = std::ceil(input / q);
  Cost out = prefill_passes(a, w, run, r, sh, batch, input, q, passes, eff);
  const double enqueue = engine_perf_at(w.engine, w.engine_version).context_enqueue_seconds_per_layer;
  if (enqueue > 0) {
    const double per_pass = dbl(a.global_layers + a.window_layers) * enqueue + engine_step_seconds(w, eff);
    out.overhead += visible_host_seconds(passes * per_pass, out.total(), true);
  }
  return out;
}

}  // namespace

std::string_view perf_bound_name(PerfBound bound) {
  switch (bound) {
    case PerfBound::kMemory:
      return "memory";
    case PerfBound::kCompute:
      return "compute";
    case PerfBound::kCommunication:
      return "communication";
    case PerfBound::kOverhead:
      return "overhead";
  }
  return "?";
}

PerfEfficiency default_efficiency() {
  return PerfEfficiency{kGemmPeakFraction,         kGemmFp8PeakFraction, kGemmHalfIntensity, kDequantGemmFraction,
                        kAttentionPeakFraction,    kBandwidthFraction,   kLinkFraction,      kKernelSeconds,
                        kEngineDefaultStepSeconds, kTrainingOverlap};
}

namespace {
struct EffKey {
  std::string_view key;
  double PerfEfficiency::*field;
  double scale;  // user unit -> field unit
  double min, max;
  std::string_view help;
};
constexpr EffKey kEffKeys[] = {
    {"gemm", &PerfEfficiency::gemm_peak_fraction, 1, 0.01, 1, "large 16-bit GEMM / dense peak"},
    {"gemm_fp8", &PerfEfficiency::gemm_fp8_peak_fraction, 1, 0.01, 1, "large fp8/int8 GEMM / dense peak"},
    {"gemm_half_intensity", &PerfEfficiency::gemm_half_intensity, 1, 0, 1e6,
     "GEMM intensity 1/(1/M+1/N+1/K) at half the large-size rate"},
    {"dequant", &PerfEfficiency::dequant_gemm_fraction, 1, 0.01, 1, "dequantizing matmul / dense rate"},
    {"attention", &PerfEfficiency::attention_peak_fraction, 1, 0.01, 1, "flash attention / dense peak"},
    {"bandwidth", &PerfEfficiency::bandwidth_fraction, 1, 0.01, 1, "streaming kernel / peak bandwidth"},
    {"link", &PerfEfficiency::link_fraction, 1, 0.01, 1, "all-reduce bus bandwidth / link bandwidth"},
    {"kernel_us", &PerfEfficiency::kernel_seconds, 1e-6, 0, 1e4, "fixed cost per kernel, microseconds"},
    {"step_ms", &PerfEfficiency::step_seconds, 1e-3, 0, 1e4, "engine host time per step, milliseconds"},
    {"overlap", &PerfEfficiency::training_overlap, 1, 0, 1, "share of data-parallel traffic hidden by backward"},
};
}  // namespace

std::string efficiency_keys() {
  std::string s;
  for (const auto& k : kEffKeys) s += (s.empty() ? "" : ", ") + std::string(k.key) + " (" + std::string(k.help) + ")";
  return s;
}

Result<PerfEfficiency> parse_efficiency(std::string_view text, const PerfEfficiency& base) {
  PerfEfficiency e = base;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return usage_error("--efficiency takes key=value pairs separated by commas, got '" + std::string(item) +
                             "'; keys: " + efficiency_keys(),
                         "efficiency");
    }
    const std::string key(item.substr(0, eq)), value(item.substr(eq + 1));
    const EffKey* found = nullptr;
    for (const auto& k : kEffKeys) found = (k.key == key) ? &k : found;
    if (!found) return usage_error("unknown efficiency key '" + key + "'; keys: " + efficiency_keys(), "efficiency");
    char* stop = nullptr;
    const double v = std::strtod(value.c_str(), &stop);
    if (value.empty() || stop != value.c_str() + value.size() || !(v >= found->min && v <= found->max)) {
      std::string message = "efficiency '" + key;
      message += "' must be a number in [";
      message += std::to_string(found->min);
      message += ", ";
      message += std::to_string(found->max);
      message += "], got '";
      message += value;
      message += "'";
      return usage_error(message, "efficiency");
    }
    e.*(found->field) = v * found->scale;
  }
  return e;
}

PerfArch perf_arch(const Model& m) {
  PerfArch a;
  a.cnn = m.kind == ModelKind::kCnn;
  a.encoder = m.kind == ModelKind::kEncoder;
  a.layers = m.layers;
  a.hidden = m.hidden;
  a.heads = m.heads;
  a.kv_heads = m.kv_heads > 0 ? m.kv_heads : m.heads;
  a.head_dim = m.head_dim;
  a.intermediate = m.intermediate;
  a.vocab = m.vocab;
  a.experts = m.experts;
  a.experts_per_token = m.experts_per_token;
  a.gated_mlp = m.gated_mlp;
  a.eager_fp32_softmax = m.eager_fp32_softmax;
  a.parameters = dbl(m.parameters);
  a.active_parameters = dbl(m.active_parameters);
  const double layers = std::max<double>(1, dbl(m.layers));
  double embedding = 0, head = 0;
  for (const auto& t : m.tensors) {
    const double n = dbl(t.elements());
    switch (t.role) {
      case TensorRole::kAttnQ:
      case TensorRole::kAttnK:
      case TensorRole::kAttnV:
        (t.per_layer ? a.qkv_params_per_layer : a.other_params) += t.per_layer ? n / layers : n;
        break;
      case TensorRole::kAttnOut:
        (t.per_layer ? a.out_params_per_layer : a.other_params) += t.per_layer ? n / layers : n;
        break;
      case TensorRole::kMlpGate:
      case TensorRole::kMlpUp:
      case TensorRole::kMlpDown:
      case TensorRole::kLinear:
        if (t.expert && m.experts > 0)
          a.expert_params_per_layer += n / layers / dbl(m.experts);
        else if (t.per_layer)
          a.mlp_params_per_layer += n / layers;
        else
          a.other_params += n;
        break;
      case TensorRole::kRouter:
        a.router_params_per_layer += t.per_layer ? n / layers : n;
        break;
      case TensorRole::kEmbedding:
        embedding += n;
        break;
      case TensorRole::kPositionEmbedding:
        a.embedding_params += n;
        break;
      case TensorRole::kHead:
        head += n;
        break;
      default:
        a.other_params += n;
        break;
    }
  }
  a.embedding_params += embedding;
  // A tied head multiplies by the embedding table; an untied one has its own.
  a.head_params = head > 0 ? head : (m.kind == ModelKind::kCnn ? 0 : dbl(m.vocab) * dbl(m.hidden));
  if (m.kind == ModelKind::kEncoder && head <= 0) a.head_params = dbl(m.vocab) * dbl(m.hidden);
  for (const auto& l : m.attention) {
    if (l.window_tokens > 0) {
      ++a.window_layers;
      a.window_tokens = l.window_tokens;
    } else {
      ++a.global_layers;
    }
  }
  if (m.attention.empty()) a.global_layers = m.layers;
  a.cnn_flops_per_sample = m.cnn_flops_per_sample;
  a.cnn_activation_elements_per_sample = m.cnn_activation_elements_per_sample;
  for (const auto& t : m.tensors) a.cnn_layers += (t.role == TensorRole::kConv) ? t.count : 0;
  return a;
}

PerfDevice perf_device(const Target& t) {
  PerfDevice d;
  for (size_t i = 0; i < d.peak_flops.size(); ++i) {
    const auto v = t.peak_tflops(static_cast<Precision>(i));
    d.peak_flops[i] = v ? *v * 1e12 : 0;
  }
  if (d.peak_flops[static_cast<size_t>(Precision::kFp32)] <= 0) {
    d.peak_flops[static_cast<size_t>(Precision::kFp32)] =
        t.ref.gpu->number("fp32_tflops", 0) * 1e12 * t.compute_fraction();
  }
  d.fp16_fp16acc_flops = t.ref.gpu->number("fp16_fp16acc_tensor_tflops", 0) * 1e12 * t.compute_fraction();
  d.bandwidth_bytes_per_second = t.memory_bandwidth_gbps() * 1e9;
  d.link_bytes_per_second = t.link_gbps() * 1e9;
  d.nvlink = t.link == Link::kNvlink && t.ref.gpu->number("nvlink_gbps", 0) > 0;
  const std::string& arch = t.ref.gpu->architecture;
  d.internode_bytes_per_second =
      (arch == "hopper" || arch == "blackwell") ? kInternodeHopperBytesPerSecond : kInternodeAmpereBytesPerSecond;
  d.memory_bytes = t.memory_total_bytes();
  d.compute_fraction = t.compute_fraction();
  d.count = t.count;
  d.mig = t.ref.is_mig();
  d.sm_count = t.sm_count();
  d.sm_clock_hz = t.ref.gpu->number("boost_clock_mhz", 0) * 1e6;
  d.persistent_gemm = arch == "hopper" || arch == "blackwell";
  d.devices_per_node = kDevicesPerNode;
  return d;
}

PerfWeights perf_weights(WeightFormat format, const Model& model, const PerfDevice& device, Engine engine) {
  PerfWeights pw;
  const WeightBytes wb = model_weight_bytes(model, format);
  if (wb.quantized_parameters > 0) pw.bits_per_weight = wb.quantized_bytes * 8.0 / wb.quantized_parameters;
  // The head at the bits its tensor is stored in (GGUF's Q6_K output); without a head tensor, the
  // unquantized rest's mean, never below kMinHeadBits.
  if (wb.head_parameters > 0) {
    pw.head_bits = wb.head_bytes * 8.0 / wb.head_parameters;
  } else if (wb.other_parameters > 0) {
    pw.head_bits = std::max(kMinHeadBits, wb.other_bytes * 8.0 / wb.other_parameters);
  }
  const bool has_bf16 = device.peak(Precision::kBf16) > 0;
  const Precision half = has_bf16 ? Precision::kBf16 : Precision::kFp16;
  switch (format) {
    case WeightFormat::kFp32:
      pw.compute = device.peak(Precision::kTf32) > 0 ? Precision::kTf32 : Precision::kFp32;
      pw.head_bits = kFp32Bits;
      break;
    case WeightFormat::kBf16:
      // Without bf16 tensor cores (Volta, Turing) PyTorch still runs bf16 matmuls, on the CUDA cores
      // (emulated: torch.cuda.is_bf16_supported(including_emulation=True)); vLLM refuses (refusal.h).
      pw.compute = has_bf16 || device.peak(Precision::kFp32) <= 0 ? half : Precision::kFp32;
      break;
    case WeightFormat::kFp16:
      pw.compute = device.peak(Precision::kFp16) > 0 ? Precision::kFp16 : half;
      break;
    case WeightFormat::kFp8:
      if (device.peak(Precision::kFp8) > 0) {
        pw.compute = Precision::kFp8;
      } else {
        pw.compute = half;  // fp8 weights upcast in the matmul (Marlin fp8 on Ampere)
        pw.dequantize = true;
      }
      break;
    case WeightFormat::kQ8_0:
    case WeightFormat::kQ6_K:
    case WeightFormat::kQ5_K_M:
    case WeightFormat::kQ4_K_M:
    case WeightFormat::kQ4_0:
      // llama.cpp multiplies quantized blocks on int8 tensor cores (MMQ, PR #7676), unpacking and scaling
      // them in its loop; others dequantize to 16 bits in theirs (constants.h, "llama.cpp kernels").
      pw.compute = engine_perf(engine).int8_block_matmul && device.peak(Precision::kInt8) > 0 ? Precision::kInt8 : half;
      pw.dequantize = true;
      break;
    case WeightFormat::kW8A8:
      // SmoothQuant W8A8: each input quantized per token, the matmul on int8 tensor cores with the scales
      // applied in its epilogue (TensorRT-LLM SmoothQuant plugin, vLLM cutlass_scaled_mm); no dequantize.
      // The refusal rules keep it off GPUs without int8 MMA (refusal.cc kW8A8Capability).
      pw.compute = device.peak(Precision::kInt8) > 0 ? Precision::kInt8 : half;
      break;
    case WeightFormat::kLlmInt8:
      // LLM.int8() multiplies int8 weights by the int8-quantized input on int8 tensor cores (F.igemmlt) and
      // scales the int32 result after (mm_dequant); without int8 MMA it casts the weights to 16 bits.
      pw.compute = device.peak(Precision::kInt8) > 0 ? Precision::kInt8 : half;
      pw.dequantize = device.peak(Precision::kInt8) <= 0;
      break;
    default:  // weight-only int8, GPTQ, AWQ, NF4, FP4: dequantize to 16 bits inside the matmul
      pw.compute = half;
      pw.dequantize = true;
      break;
  }
  return pw;
}

double training_flops_per_token(const PerfArch& a, int64_t seq_len) {
  if (a.cnn) return kCnnTrainFlopsRatio * a.cnn_flops_per_sample;
  const double active_matmul =
      dbl(a.layers) * (a.qkv_params_per_layer + a.out_params_per_layer + a.mlp_params_per_layer +
                       a.router_params_per_layer + dbl(a.experts_per_token) * a.expert_params_per_layer) +
      a.head_params;
  // PaLM / llm-foundry convention: 6N + 12 x layers x heads x head_dim x seq (no causal halving).
  return kTrainFlopsPerParam * active_matmul +
         kAttentionTrainFlopsFactor * dbl(a.layers) * dbl(a.heads) * dbl(a.head_dim) * dbl(seq_len);
}

namespace {

// A transformer's answer from its prefill and decode steps (shared by inference_with and the sweep, so the
// two stay bit for bit equal).
void finish_inference(InferencePerf& out, const Cost& pre, const Cost& dec, double batch, double input, double output) {
  out.ttft_seconds = pre.total();
  out.tpot_seconds = dec.total();
  out.decode_tokens_per_second = 1.0 / out.tpot_seconds;
  out.batch_decode_tokens_per_second = batch / out.tpot_seconds;
  out.prefill_tokens_per_second = batch * input / out.ttft_seconds;
  out.total_seconds = out.ttft_seconds + (output - 1) * out.tpot_seconds;
  out.throughput_tokens_per_second = batch * output / out.total_seconds;
  out.prefill_bound = pre.bound();
  out.decode_bound = dec.bound();
  out.bound = out.ttft_seconds >= (output - 1) * out.tpot_seconds ? out.prefill_bound : out.decode_bound;
}

// The decode step's token costs of the last batch a sweep asked for (they do not depend on the
// prompt length, which only the attention reads).
struct DecodeCache {
  bool valid = false;
  double batch = 0;
  TokenCosts costs;
};

InferencePerf inference_with(const PerfArch& a, const PerfDevice& d, const Workload& w, const PerfRun& run,
                             const PerfEfficiency& eff, const Rates& r, const MatmulShapes& sh, DecodeCache* cache) {
  InferencePerf out;
  const double batch = dbl(std::max<int64_t>(1, w.batch));
  const double input = dbl(perf_input_tokens(w));
  const double output = dbl(perf_output_tokens(w));
  if (a.cnn) {
    // One forward pass of `batch` samples.
    const double flops = a.cnn_flops_per_sample * batch;
    const double bytes = a.cnn_activation_elements_per_sample * batch * run.activation_bytes *
                         (kCnnInferActivationPasses + nchw_transpose_passes(run, kNchwTransposeInferPasses));
    Cost c;
    c.compute += flops / conv_flops(d, run.weights.compute, eff);
    c.memory += bytes / r.bandwidth;
    // A CNN's eager forward keeps the serial launch cost (the host/GPU overlap is generate()'s decoder loop).
    const double launch = r.python_op_seconds > 0 ? r.python_op_seconds : r.kernel_seconds;
    c.overhead += dbl(a.cnn_layers) * kCnnInferKernelsPerLayer * launch;
    out.ttft_seconds = out.total_seconds = out.tpot_seconds = c.total();
    out.throughput_tokens_per_second = batch / c.total();
    out.bound = out.prefill_bound = out.decode_bound = c.bound();
    return out;
  }
  const Cost pre = prefill_step(a, w, run, r, sh, batch, input, eff);
  const double mean_ctx = input + (output - 1) / 2.0;
  const StepShape decode{batch, 1, mean_ctx, batch, false};
  TokenCosts own;
  const TokenCosts* decode_costs = &own;
  if (cache && cache->valid && cache->batch == batch) {
    decode_costs = &cache->costs;
  } else {
    own = token_costs(a, w, run, r, sh, decode.batch * decode.q, decode.logit_rows);
    if (cache) *cache = DecodeCache{true, batch, own};
  }
  const Cost dec = inference_step(a, w, run, r, decode, eff, *decode_costs, true);
  finish_inference(out, pre, dec, batch, input, output);
  return out;
}

// A layer split (PerfRun::layer_split, set by run_for): the target's GPUs as pipeline stages.
Workload layer_split_stages(const Workload& w, const PerfRun& run) {
  Workload staged = w;
  staged.pp = run.layer_split;
  return staged;
}

}  // namespace

InferencePerf predict_inference(const PerfArch& a, const PerfDevice& d, const Workload& w, const PerfRun& run,
                                const PerfEfficiency& eff) {
  if (run.layer_split > std::max(1, w.pp)) return predict_inference(a, d, layer_split_stages(w, run), run, eff);
  const Rates r = make_rates(d, w.engine, w.engine_version, run, eff);
  return inference_with(a, d, w, run, eff, r, matmul_shapes(a, w, run), nullptr);
}

namespace {

// What inference_with reads of the arch, the workload and the run that a sweep's batch and prompt do not
// change, resolved once (InferenceSweep's fast path). Each is the very expression the generic path
// evaluates per call (same operands, same order), so the fast path's answers are bit for bit the same.
struct SweepConstants {
  // Doubles first, then the int and the flags (clang-tidy's padding check: 38 bytes of padding otherwise).
  double ab = 0;  // run.activation_bytes
  double h = 0;
  double output = 0;            // dbl(perf_output_tokens(w))
  double gemm_overhead = 0;     // (0 + extra kernels) x kernel seconds: token_costs' per-layer overhead
  double ew_width = 0;          // elements per token the element-wise passes move
  double ew_factor = 1;         // 1 when the engine fuses them
  double allreduce_factor = 0;  // 2 (n - 1) / n of the ring all-reduce
  // attention_costs
  double heads = 0, kv_heads = 0, d = 0;
  double score_bytes = 0;
  double window_tokens = 0;
  // forward_step / inference_step
  double pp = 1, global = 0, window = 0, layers = 0;
  double layer_kernel_seconds = 0;  // layers x kernels per layer x kernel seconds
  double step_seconds = 0;          // engine_step_seconds
  int tp = 1;                       // w.tp as written (the all-reduce's n)
  bool fast = false;                // a transformer without routed experts, one prefill pass, no cuBLAS copy
  bool head = false;                // an LM head runs (logit rows > 0 and head parameters)
  bool causal = true;
  bool flash = true;
  bool windows = false;
  bool pp_multi = false;
  bool overlapped_host = false;  // host_overlaps_gpu: a decode step takes max(GPU, host)
};

SweepConstants sweep_constants(const PerfArch& a, const Workload& w, const PerfRun& run, const PerfEfficiency& eff,
                               const Rates& r, const MatmulShapes& sh) {
  SweepConstants k;
  k.fast = !a.cnn && !sh.experts && !(run.prefill_chunk_tokens > 0) && !(run.cublas_above_rows > 0) &&
           !masked_mha_decode(w) && !(host_seconds_per_sequence(w) > 0) &&  // old releases: the generic path
           !(r.python_op_seconds > 0) &&            // generate()'s host/GPU overlap: the generic path
           !(r.tinygemm_seconds_per_weight > 0) &&  // tinygemm's passes per 16 rows: the generic path
           !(engine_perf_at(w.engine, w.engine_version).context_enqueue_seconds_per_layer > 0);  // GptSession
  const double tp = std::max(1, w.tp);
  k.ab = run.activation_bytes;
  k.h = dbl(a.hidden);
  k.output = dbl(perf_output_tokens(w));
  k.gemm_overhead = (0.0 + run.extra_kernels_per_layer) * r.kernel_seconds;
  const double inter_active =
      a.mlp_params_per_layer / k.h / (a.gated_mlp ? 3.0 : 2.0) +
      (a.experts > 0 ? dbl(a.experts_per_token) * a.expert_params_per_layer / k.h / (a.gated_mlp ? 3.0 : 2.0) : 0);
  k.ew_width = kElementwiseHiddenPasses * k.h + kElementwiseIntermediatePasses * inter_active / tp;
  k.ew_factor = engine_perf(w.engine).fused_elementwise ? 1.0 : kEagerElementwiseFactor;
  k.tp = w.tp;
  k.allreduce_factor = w.tp > 1 ? 2.0 * (w.tp - 1) / w.tp : 0.0;
  k.head = a.head_params > 0;
  k.heads = dbl(a.heads) / tp;
  k.kv_heads = std::max(1.0, dbl(a.kv_heads) / tp);
  k.d = dbl(a.head_dim);
  k.causal = !a.encoder;
  k.flash = w.flash_attention;
  k.score_bytes = a.eager_fp32_softmax ? 4.0 : run.activation_bytes;
  k.windows = a.window_layers > 0;
  k.window_tokens = dbl(a.window_tokens);
  k.pp = std::max(1, w.pp);
  k.global = dbl(a.global_layers) / k.pp;
  k.window = dbl(a.window_layers) / k.pp;
  k.layers = k.global + k.window;
  k.layer_kernel_seconds = k.layers * engine_perf(w.engine).kernels_per_layer * r.kernel_seconds;
  k.pp_multi = w.pp > 1;
  k.step_seconds = engine_step_seconds(w, eff);
  k.overlapped_host = host_overlaps_gpu(w);
  return k;
}

// A step's token costs (token_costs) without routed experts, the cuBLAS copy and the LM head, as the
// only components they can have: the matmuls' compute, memory and per-layer kernel overhead, the
// element-wise passes' memory and the all-reduces' communication. The generic path's other components
// are zeros, and adding a zero (or a finite multiple of one) leaves a sum bit for bit as it was.
struct LeanTokens {
  double gemm_compute = 0, gemm_memory = 0, gemm_overhead = 0;
  double elementwise_memory = 0;
  double comm = 0;
};

// add_roof into the two components a matmul can add to.
void add_roof2(double& compute, double& memory, const RoofTime& t) {
  if (!t.any) return;
  (t.compute ? compute : memory) += t.seconds;
}

LeanTokens sweep_token_costs(const SweepConstants& k, const Rates& r, const MatmulShapes& sh, double tokens) {
  LeanTokens tc;
  const GemmRows rows = gemm_rows(tokens);
  add_roof2(tc.gemm_compute, tc.gemm_memory, gemm_time(r, rows, sh.qkv, k.ab, r.gemm_flops));
  add_roof2(tc.gemm_compute, tc.gemm_memory, gemm_time(r, rows, sh.out, k.ab, r.gemm_flops));
  if (sh.mlp) {
    add_roof2(tc.gemm_compute, tc.gemm_memory, gemm_time(r, rows, sh.up, k.ab, r.gemm_flops));
    add_roof2(tc.gemm_compute, tc.gemm_memory, gemm_time(r, rows, sh.down, k.ab, r.gemm_flops));
  }
  tc.gemm_overhead += k.gemm_overhead;
  const double ew_bytes = tokens * k.ab * k.ew_width;
  tc.elementwise_memory += ew_bytes * k.ew_factor / r.bandwidth;
  if (k.tp > 1) {
    const double bytes = tokens * k.h * k.ab;
    const double seconds = bytes <= 0 ? 0 : k.allreduce_factor * bytes / r.allreduce_bw + r.allreduce_latency;
    tc.comm += kTpAllReducesPerLayer * seconds;
  }
  return tc;
}

// attention_costs' lambda for one window (0 = global) of a step of `batch` x `q` tokens after `ctx0`:
// its roof, added x `layers` into compute or memory (Cost::roof then Cost::add of the other zero side).
void sweep_attention(const SweepConstants& k, const PerfRun& run, const Rates& r, double batch, double q, double ctx0,
                     double window, double layers, double& compute, double& memory) {
  const double tokens = batch * q;
  const double pairs = batch * attended_pairs(q, ctx0, window, k.causal);
  const double flops = 4.0 * pairs * k.heads * k.d;
  const double kv_tokens = batch * (window > 0 ? std::min(ctx0 + q, window) : ctx0 + q);
  const double kv_read = kv_tokens * 2.0 * k.kv_heads * k.d * run.kv_bytes;
  const double qo = 2.0 * tokens * k.heads * k.d * k.ab;
  double t_compute, t_memory;
  if (k.flash || q == 1) {
    t_compute = flops / r.attn_flops;
    t_memory = (kv_read + qo) / r.bandwidth;
  } else {
    const double scores = pairs * k.heads * k.score_bytes * kEagerScorePasses * (k.causal ? 2.0 : 1.0);
    t_compute = flops / r.attn_gemm_flops;
    t_memory = (kv_read + qo + scores) / r.bandwidth;
  }
  if (t_compute >= t_memory)
    compute += layers * t_compute;
  else
    memory += layers * t_memory;
}

// The per-layer token costs of one step multiplied out by the layers (forward_step's first adds),
// shared by every prompt length of a batch for the decode step.
struct LeanLayers {
  double compute = 0, memory = 0, overhead = 0, elementwise_memory = 0, comm = 0;
};

LeanLayers times_layers(const SweepConstants& k, const LeanTokens& tc) {
  return LeanLayers{k.layers * tc.gemm_compute, k.layers * tc.gemm_memory, k.layers * tc.gemm_overhead,
                    k.layers * tc.elementwise_memory, k.layers * tc.comm};
}

// inference_step of an inference step (forward_step over the stages + host work), in forward_step's
// order of additions: matmuls, global attention, window attention, element-wise, all-reduces, kernels,
// LM head; then the stages and the engine's step.
Cost sweep_step(const SweepConstants& k, const PerfRun& run, const Rates& r, double batch, double q, double ctx0,
                const LeanLayers& l, const RoofTime& head, bool busy) {
  double compute = l.compute, memory = l.memory;
  sweep_attention(k, run, r, batch, q, ctx0, 0, k.global, compute, memory);
  if (k.windows) sweep_attention(k, run, r, batch, q, ctx0, k.window_tokens, k.window, compute, memory);
  memory += l.elementwise_memory;
  double overhead = l.overhead + k.layer_kernel_seconds;
  Cost out;
  out.compute = k.pp * compute;
  out.memory = k.pp * memory;
  add_roof2(out.compute, out.memory, head);  // the LM head runs once, on the last stage
  out.comm = k.pp * l.comm;
  out.overhead = k.pp * overhead;
  if (k.pp_multi) out.comm += (k.pp - 1) * r.allreduce_latency;
  out.overhead += visible_host_seconds(k.step_seconds, out.total(), busy && k.overlapped_host);
  return out;
}

// The decode step's layer costs and LM head of the last batch a sweep asked for.
struct LeanDecode {
  bool valid = false;
  double batch = 0;
  LeanLayers layers;
  RoofTime head;
};

// InferenceSweepLean (sweep.h): the fast path's steps rewritten as sums of terms linear in the step's
// tokens, with the coefficients resolved once. Each term is the fast path's expression regrouped (none
// dropped, no rate changed), so the answer is InferenceSweep::at's within a few dozen roundings.

// One matmul as gemm_time, linear in its rows m. With s = 1/m + 1/n + 1/k and the half-rate intensity
// hi, gemm_time's t_c = 2mnk / (rate x (1/s) / (1/s + hi)) = 2mnk (1 + hi s) / rate
// = m x 2nk (1 + hi (1/n + 1/k)) / rate + 2nk hi / rate; the GEMV's time and the bytes are linear in m.
// The wave count stays exact, in integers.
struct LeanGemm {
  double alpha = 0, beta = 0;   // tensor-core time alpha m + beta
  double gemv = 0;              // CUDA-core GEMV time gemv m (infinity when there is none)
  double mem0 = 0, mem1 = 0;    // memory time mem0 + mem1 m
  double sms_per_col_tile = 0;  // sms / col_tiles
  int64_t col_tiles = 0;        // ceil(n / kGemmTileCols)
};

LeanGemm lean_gemm(const Rates& r, const GemmShape& g, double a_bytes, double rate) {
  LeanGemm l;
  const double nk2 = 2.0 * g.n * g.k;
  l.alpha = nk2 * (1 + r.half_intensity * (g.inv_n + g.inv_k)) / rate;
  l.beta = nk2 * r.half_intensity / rate;
  l.gemv = r.cuda_core_flops > 0 ? nk2 / r.cuda_core_flops : INFINITY;
  l.mem0 = g.weight_bytes / r.bandwidth;
  l.mem1 = (g.k + g.n) * a_bytes / r.bandwidth;
  l.sms_per_col_tile = r.sms / g.col_tiles;
  l.col_tiles = static_cast<int64_t>(g.col_tiles);
  return l;
}

// The rows of a step's matmuls and what their wave quantization reads of them.
struct LeanRows {
  double m = 0;
  double inv_row_tiles = 0;  // 1 / row_tiles
  int64_t row_tiles = 0;     // ceil(m / kGemmTileRows)
};

// Rows are whole tokens (below 2^53: the sweep's batch x prompt in int64).
constexpr int64_t kLeanTileRows = static_cast<int64_t>(kGemmTileRows);
// Bounds under which the wave count's integers stay below 2^53 (exact as doubles): rows of a step
// (batch x prompt; validated workloads stay far below), column tiles of a matmul (n up to a million) and
// SMs (a GPU has a few hundred). Beyond them InferenceSweep answers.
constexpr int64_t kLeanMaxRows = int64_t{1} << 40;
constexpr double kLeanMaxColTiles = 1 << 13;
constexpr double kLeanMaxSms = 1 << 20;
// Fibonacci hashing of a prompt length into kLeanPromptSlots slots (2^64 / golden ratio; top 4 bits).
constexpr uint64_t kLeanPromptHash = 0x9E3779B97F4A7C15ull;
constexpr int kLeanPromptShift = 60;

LeanRows lean_rows(int64_t m) {
  LeanRows rows;
  rows.m = dbl(m);
  rows.row_tiles = (m + kLeanTileRows - 1) / kLeanTileRows;
  rows.inv_row_tiles = 1.0 / dbl(rows.row_tiles);
  return rows;
}

// gemm_time(...).seconds of `l` at `rows`: wave quantization, the faster kernel, the slower roofline side.
double lean_gemm_seconds(const LeanGemm& l, const LeanRows& rows, int64_t sms, double inv_sms) {
  double t_c = l.alpha * rows.m + l.beta;
  if (sms > 0) {
    // ceil(tiles / sms) exactly: truncating the product by the reciprocal gives the quotient's floor,
    // or one less when the quotient is a whole number (a non-whole one is >= 1/sms from the next).
    const int64_t tiles = rows.row_tiles * l.col_tiles;
    int64_t waves = static_cast<int64_t>(dbl(tiles) * inv_sms);
    if (waves * sms < tiles) ++waves;
    t_c *= dbl(waves) * l.sms_per_col_tile * rows.inv_row_tiles;  // ceil(waves) / waves of gemm_time
  }
  t_c = std::min(t_c, l.gemv * rows.m);
  return std::max(t_c, l.mem0 + l.mem1 * rows.m);
}

// Everything of the fast path's steps that the batch and the prompt do not change, as coefficients.
struct LeanConstants {
  LeanGemm gemm[4];                    // qkv, out and the MLP's up and down that run (gemm_time's n, k > 0)
  LeanGemm head;                       // the LM head (head_flops)
  double inv_sms = 0;                  // 1 / sms
  double tokens_seconds = 0;           // element-wise passes + all-reduces per token of a layer
  double comm_seconds = 0;             // all-reduces' latency per layer (tensor parallel)
  double fixed_seconds = 0;            // per step: kernels x stages, hand-offs between stages, the engine's step
  double overlapped_host_seconds = 0;  // the engine's step when a decode step overlaps it (then not in fixed)
  // Attention per sequence: flash (or one query) compute and eager compute per attended pair, KV read
  // per cached token, queries and outputs per new token, eager scores per pair.
  double pair_flash = 0, pair_eager = 0, kv_token = 0, new_token = 0, pair_scores = 0;
  int64_t sms = 0;  // r.sms (0 = no wave quantization)
  int gemms = 0;
  bool usable = false;  // the fast path with positive rates (else InferenceSweep answers)
  bool head_runs = false;
};

LeanConstants lean_constants(const SweepConstants& k, const PerfRun& run, const Rates& r, const MatmulShapes& sh) {
  LeanConstants l;
  const bool rates = r.gemm_flops > 0 && r.head_flops > 0 && r.bandwidth > 0 && r.attn_flops > 0 &&
                     r.attn_gemm_flops > 0 && (k.tp <= 1 || r.allreduce_bw > 0) && std::isfinite(r.inv_bandwidth) &&
                     r.sms >= 0 && r.sms < kLeanMaxSms;
  const bool tiles = sh.qkv.col_tiles < kLeanMaxColTiles && sh.out.col_tiles < kLeanMaxColTiles &&
                     sh.up.col_tiles < kLeanMaxColTiles && sh.down.col_tiles < kLeanMaxColTiles &&
                     sh.head.col_tiles < kLeanMaxColTiles;
  l.usable = k.fast && rates && tiles;
  if (!l.usable) return l;
  const GemmShape* lin[] = {&sh.qkv, &sh.out, &sh.up, &sh.down};
  const size_t count = sh.mlp ? 4 : 2;
  for (size_t i = 0; i < count; ++i) {
    if (lin[i]->n > 0 && lin[i]->k > 0) l.gemm[l.gemms++] = lean_gemm(r, *lin[i], k.ab, r.gemm_flops);
  }
  l.head_runs = k.head && sh.head.n > 0 && sh.head.k > 0;
  if (l.head_runs) l.head = lean_gemm(r, sh.head, run.activation_bytes, r.head_flops);
  l.sms = static_cast<int64_t>(r.sms);
  l.inv_sms = r.sms > 0 ? 1.0 / r.sms : 0.0;
  l.tokens_seconds = k.ab * k.ew_width * k.ew_factor / r.bandwidth;
  if (k.tp > 1) {
    l.tokens_seconds += kTpAllReducesPerLayer * k.allreduce_factor * k.h * k.ab / r.allreduce_bw;
    l.comm_seconds = kTpAllReducesPerLayer * r.allreduce_latency;
  }
  l.fixed_seconds = k.pp * (k.layers * k.gemm_overhead + k.layer_kernel_seconds) +
                    (k.pp_multi ? (k.pp - 1) * r.allreduce_latency : 0.0) + (k.overlapped_host ? 0.0 : k.step_seconds);
  l.overlapped_host_seconds = k.overlapped_host ? k.step_seconds : 0.0;
  l.pair_flash = 4.0 * k.heads * k.d / r.attn_flops;
  l.pair_eager = 4.0 * k.heads * k.d / r.attn_gemm_flops;
  l.kv_token = 2.0 * k.kv_heads * k.d * run.kv_bytes / r.bandwidth;
  l.new_token = 2.0 * k.heads * k.d * k.ab / r.bandwidth;
  l.pair_scores = k.heads * k.score_bytes * kEagerScorePasses * (k.causal ? 2.0 : 1.0) / r.bandwidth;
  return l;
}

// One layer's matmuls, element-wise passes and all-reduces of a step of `m` tokens.
double lean_layer_seconds(const LeanConstants& l, const LeanRows& rows) {
  double t = rows.m * l.tokens_seconds + l.comm_seconds;
  for (int i = 0; i < l.gemms; ++i) t += lean_gemm_seconds(l.gemm[i], rows, l.sms, l.inv_sms);
  return t;
}

// sweep_attention of one sequence of the prefill (q = n new tokens, none cached) under `window`.
double lean_prefill_attention(const SweepConstants& k, const LeanConstants& l, double n, double window) {
  const double pairs = attended_pairs(n, 0, window, k.causal);
  const double kv_tokens = window > 0 ? std::min(n, window) : n;
  const bool eager = !(k.flash || n == 1);
  const double t_compute = pairs * (eager ? l.pair_eager : l.pair_flash);
  const double t_memory = kv_tokens * l.kv_token + n * l.new_token + (eager ? pairs * l.pair_scores : 0.0);
  return std::max(t_compute, t_memory);
}

// sweep_attention of one sequence of a decode step (one new token after `ctx0`) under `window`: every
// one of its attended pairs is a cached token read.
double lean_decode_attention(const LeanConstants& l, double ctx0, double window) {
  const double kv_tokens = window > 0 ? std::min(ctx0 + 1, window) : ctx0 + 1;
  return std::max(kv_tokens * l.pair_flash, kv_tokens * l.kv_token + l.new_token);
}

// The parts of a batch's steps that no prompt length changes.
struct LeanBatch {
  double batch = 0;          // 0 = none yet
  double prefill_fixed = 0;  // the prefill's LM head and per-step costs
  double decode_fixed = 0;   // the whole decode step but its attention
};

// The attention of one sequence at a prompt length (the prefill's, and the decode step's at the mean
// context), per layer kind weighted by its layers: a sweep asks the same prompts for every batch.
struct LeanPrompt {
  double input = 0;  // 0 = empty
  double prefill = 0;
  double decode = 0;
};
constexpr size_t kLeanPromptSlots = 16;  // prompt lengths remembered (a sweep's grid has a handful)
}  // namespace

struct InferenceSweep::State {
  PerfArch arch;
  PerfDevice device;
  Workload workload;
  PerfRun run;
  PerfEfficiency eff;
  Rates rates;
  MatmulShapes shapes;
  SweepConstants constants;
  DecodeCache decode;      // the generic path's
  LeanDecode lean_decode;  // the fast path's
};

InferenceSweep::InferenceSweep(const PerfArch& arch, const PerfDevice& device, const Workload& w, const PerfRun& run,
                               const PerfEfficiency& eff)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.arch = arch;
  s.device = device;
  s.workload = run.layer_split > std::max(1, w.pp) ? layer_split_stages(w, run) : w;
  s.run = run;
  s.eff = eff;
  s.rates = make_rates(device, w.engine, w.engine_version, run, eff);
  s.shapes = matmul_shapes(arch, s.workload, run);
  s.constants = sweep_constants(arch, s.workload, run, eff, s.rates, s.shapes);
}

InferenceSweep::~InferenceSweep() = default;
InferenceSweep::InferenceSweep(InferenceSweep&&) noexcept = default;
InferenceSweep& InferenceSweep::operator=(InferenceSweep&&) noexcept = default;

InferencePerf InferenceSweep::at(int64_t batch_size, int64_t input_tokens) {
  State& s = *state_;
  s.workload.batch = batch_size;
  s.workload.input_tokens = input_tokens;
  const SweepConstants& k = s.constants;
  if (!k.fast) return inference_with(s.arch, s.device, s.workload, s.run, s.eff, s.rates, s.shapes, &s.decode);
  // inference_with for a transformer, with the constants above: the decode step's token costs once per
  // batch (DecodeCache), and the prefill's LM head is the decode step's (both run gemm_rows(batch)).
  const Rates& r = s.rates;
  const double batch = dbl(std::max<int64_t>(1, batch_size));
  const double input = dbl(perf_input_tokens(s.workload));
  const double output = k.output;
  LeanDecode& dc = s.lean_decode;
  if (!(dc.valid && dc.batch == batch)) {
    dc.valid = true;
    dc.batch = batch;
    dc.layers = times_layers(k, sweep_token_costs(k, r, s.shapes, batch));
    dc.head = k.head ? gemm_time(r, gemm_rows(batch), s.shapes.head, s.run.activation_bytes, r.head_flops) : RoofTime{};
  }
  const Cost pre = sweep_step(k, s.run, r, batch, input, 0,
                              times_layers(k, sweep_token_costs(k, r, s.shapes, batch * input)), dc.head, false);
  const double mean_ctx = input + (output - 1) / 2.0;
  const Cost dec = sweep_step(k, s.run, r, batch, 1, mean_ctx, dc.layers, dc.head, true);
  InferencePerf out;
  finish_inference(out, pre, dec, batch, input, output);
  return out;
}

struct InferenceSweepLean::State {
  PerfRun run;
  Workload workload;
  SweepConstants constants;
  LeanConstants lean;
  LeanBatch batch;
  LeanPrompt prompts[kLeanPromptSlots];
  std::optional<InferenceSweep> exact;  // exact(), and at() where the rewrite does not apply
};

InferenceSweepLean::InferenceSweepLean(const PerfArch& arch, const PerfDevice& device, const Workload& w,
                                       const PerfRun& run, const PerfEfficiency& eff)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.run = run;
  s.workload = w;
  const Rates rates = make_rates(device, w.engine, w.engine_version, run, eff);
  const MatmulShapes shapes = matmul_shapes(arch, w, run);
  s.constants = sweep_constants(arch, w, run, eff, rates, shapes);
  s.lean = lean_constants(s.constants, run, rates, shapes);
  s.exact.emplace(arch, device, w, run, eff);
}

InferenceSweep& InferenceSweepLean::exact() { return *state_->exact; }

InferenceSweepLean::~InferenceSweepLean() = default;
InferenceSweepLean::InferenceSweepLean(InferenceSweepLean&&) noexcept = default;
InferenceSweepLean& InferenceSweepLean::operator=(InferenceSweepLean&&) noexcept = default;

InferenceLean InferenceSweepLean::at(int64_t batch_size, int64_t input_tokens) {
  State& s = *state_;
  const LeanConstants& l = s.lean;
  s.workload.batch = batch_size;
  s.workload.input_tokens = input_tokens;
  const int64_t batch_rows = std::max<int64_t>(1, batch_size);
  const int64_t input_rows = perf_input_tokens(s.workload);
  if (!l.usable || batch_rows > kLeanMaxRows / input_rows) {
    const InferencePerf p = s.exact->at(batch_size, input_tokens);
    return InferenceLean{p.ttft_seconds, p.tpot_seconds, p.total_seconds, p.throughput_tokens_per_second};
  }
  const SweepConstants& k = s.constants;
  const double batch = dbl(batch_rows);
  const double input = dbl(input_rows);
  const double output = k.output;
  LeanBatch& lb = s.batch;
  if (lb.batch != batch) {
    // Once per batch: the LM head (prefill and decode run it on `batch` rows) and the decode step's
    // matmuls, element-wise passes and all-reduces.
    const LeanRows rows = lean_rows(batch_rows);
    const double head = l.head_runs ? lean_gemm_seconds(l.head, rows, l.sms, l.inv_sms) : 0.0;
    lb.batch = batch;
    // The LM head runs once, on the last stage; the prefill keeps the host step (sweep_step, busy = false).
    lb.prefill_fixed = head + l.fixed_seconds + l.overlapped_host_seconds;
    lb.decode_fixed = k.pp * k.layers * lean_layer_seconds(l, rows) + head + l.fixed_seconds;
  }
  LeanPrompt& p = s.prompts[(static_cast<uint64_t>(input_rows) * kLeanPromptHash) >> kLeanPromptShift];
  if (p.input != input) {
    p.input = input;
    p.prefill = k.global * lean_prefill_attention(k, l, input, 0);
    // Decode at the mean context: only its attention reads the prompt.
    const double mean_ctx = input + (output - 1) / 2.0;
    p.decode = k.global * lean_decode_attention(l, mean_ctx, 0);
    if (k.windows) {
      p.prefill += k.window * lean_prefill_attention(k, l, input, k.window_tokens);
      p.decode += k.window * lean_decode_attention(l, mean_ctx, k.window_tokens);
    }
  }
  // The prefill: the layers' matmuls, element-wise passes and all-reduces of batch x input tokens (whole
  // tokens: the product is exact in int64), and `batch` sequences' attention.
  const LeanRows rows = lean_rows(batch_rows * input_rows);
  InferenceLean out;
  out.ttft_seconds = lb.prefill_fixed + k.pp * (k.layers * lean_layer_seconds(l, rows) + batch * p.prefill);
  out.tpot_seconds = lb.decode_fixed + k.pp * batch * p.decode;
  out.tpot_seconds += visible_host_seconds(l.overlapped_host_seconds, out.tpot_seconds, l.overlapped_host_seconds > 0);
  out.total_seconds = out.ttft_seconds + (output - 1) * out.tpot_seconds;
  out.throughput_tokens_per_second = batch * output / out.total_seconds;
  return out;
}

ServingPerf predict_serving(const PerfArch& a, const PerfDevice& d, const Workload& w, const PerfRun& run,
                            const PerfEfficiency& eff, int64_t max_batch, double rate) {
  if (run.layer_split > std::max(1, w.pp)) {
    return predict_serving(a, d, layer_split_stages(w, run), run, eff, max_batch, rate);
  }
  ServingPerf s;
  if (a.cnn || max_batch < 1) return s;
  const Rates r = make_rates(d, w.engine, w.engine_version, run, eff);
  const MatmulShapes sh = matmul_shapes(a, w, run);
  const double input = dbl(perf_input_tokens(w));
  const double output = dbl(perf_output_tokens(w));
  const double bmax = dbl(max_batch);
  const double mean_ctx = input + (output - 1) / 2.0;
  auto step = [&](double b) {
    return inference_step(a, w, run, r, sh, StepShape{b, 1, mean_ctx, b, false}, eff, true).total();
  };
  // Prefill work per request, prompts batched into chunks of kPrefillChunkTokens. Serving keeps the engine
  // busy, so steps with async scheduling overlap their host work (busy = true) here and in step().
  const double per_chunk = std::max(1.0, std::floor(kPrefillChunkTokens / input));
  const double prefill_batch = std::min(per_chunk, bmax);
  const double prefill_per_request =
      inference_step(a, w, run, r, sh, StepShape{prefill_batch, input, 0, prefill_batch, false}, eff, true).total() /
      prefill_batch;
  const double t_max = step(bmax);
  s.max_batch = max_batch;
  const double cycle = output * t_max + bmax * prefill_per_request;  // every slot serves one request per cycle
  s.max_rate_requests_per_second = bmax / cycle;
  s.max_throughput_tokens_per_second = bmax * output / cycle;
  if (rate <= 0) return s;
  // Decode step time is linear in the batch: t(b) = t0 + slope x b.
  const double t1 = step(1);
  const double slope = bmax > 1 ? (t_max - t1) / (bmax - 1) : 0;
  const double t0 = t1 - slope;
  const double rho_prefill = rate * prefill_per_request;  // share of GPU time spent on prompts
  s.rate_requests_per_second = rate;
  const double denom = 1.0 - rho_prefill - rate * output * slope;
  double b = denom > 0 ? rate * output * t0 / denom : INFINITY;  // Little's law: b = rate x residence
  if (!(b <= bmax) || rho_prefill >= 1) {
    s.saturated = true;
    s.mean_batch = bmax;
    s.tpot_seconds = t_max;
    s.ttft_seconds = INFINITY;
    s.latency_seconds = INFINITY;
    s.throughput_tokens_per_second = s.max_throughput_tokens_per_second;
    return s;
  }
  b = std::max(b, 1.0);
  s.mean_batch = b;
  const double t_b = t0 + slope * b;
  s.tpot_seconds = t_b / (1.0 - rho_prefill);
  const double prefill_one = inference_step(a, w, run, r, sh, StepShape{1, input, 0, 1, false}, eff).total();
  // A new request waits for the running step to end (half a step on average) and for prompts ahead of
  // it (M/D/1 waiting time rho P / (2 (1 - rho))), then its own prefill.
  s.ttft_seconds = t_b / 2 + rho_prefill * prefill_per_request / (2 * (1 - rho_prefill)) + prefill_one;
  s.latency_seconds = s.ttft_seconds + (output - 1) * s.tpot_seconds;
  s.throughput_tokens_per_second = rate * output;
  return s;
}

namespace {

// The PyTorch engines' selective checkpointing is PyTorch's op-level policy as torchtitan applies it
// (constants.h, kOpSac*); Megatron's (and every other engine's) recomputes core attention only.
bool op_level_selective_checkpointing(Engine e) { return e == Engine::kPytorch || e == Engine::kTorchCompile; }

// Share of a block's matmul FLOPs the op-level policy recomputes: every second matmul in forward order,
// q, k, v, o, then gate, up, down (gated MLP) or up, down (plain), counted from one in each block, so k,
// o and the MLP's second matmul (up, or down without a gate).
double op_sac_recomputed_gemm_share(const PerfArch& a) {
  const double h = dbl(a.hidden);
  const double k = h * dbl(a.kv_heads) * dbl(a.head_dim);
  const double mlp = a.mlp_params_per_layer;
  const double second_mlp = a.gated_mlp ? mlp * kGatedMlpUpShare / 2 : mlp * (1 - kPlainMlpUpShare);
  const double total = a.qkv_params_per_layer + a.out_params_per_layer + mlp;
  if (total <= 0) return 0;
  return std::min(1.0, (k + a.out_params_per_layer + second_mlp) / total);
}

}  // namespace

TrainPerf predict_training(const PerfArch& a, const PerfDevice& d, const Workload& w, const PerfRun& run,
                           const PerfEfficiency& eff) {
  TrainPerf t;
  Rates r = make_rates(d, w.engine, w.engine_version, run, eff);
  // Training kernels are large: launches run ahead asynchronously and only the per-kernel gap remains.
  r.kernel_seconds = eff.kernel_seconds;
  const double tp = std::max(1, w.tp), pp = std::max(1, w.pp), dp = std::max(1, run.dp);
  const double mb = dbl(std::max<int64_t>(1, w.batch));
  const double global = run.global_batch > 0 ? dbl(run.global_batch) : mb * dp;
  const double micro_steps = std::max(1.0, std::round(global / (mb * dp)));
  const double seq = a.cnn ? 1 : dbl(std::max<int64_t>(1, w.context));
  const bool frozen = w.task == Task::kLora || w.task == Task::kQlora;
  Cost micro;  // one micro-batch on one GPU (its pipeline stage)
  double params_local = a.parameters / (tp * pp);
  if (a.cnn) {
    const double flops = a.cnn_flops_per_sample * mb;
    const double act = a.cnn_activation_elements_per_sample * mb * run.activation_bytes;
    micro.compute += kCnnTrainFlopsRatio * flops / conv_flops(d, run.weights.compute, eff);
    micro.memory +=
        act * (kCnnTrainActivationPasses + nchw_transpose_passes(run, kNchwTransposeTrainPasses)) / r.bandwidth;
    micro.overhead += dbl(a.cnn_layers) * kCnnTrainKernelsPerLayer * r.kernel_seconds;
  } else {
    const StepShape shape{mb, seq, 0, a.encoder ? mb * seq * kMlmMaskedFraction : mb * seq, true};
    const LayerCosts lc = layer_costs(a, w, run, r, shape);
    const double layers = dbl(a.global_layers + a.window_layers) / pp;
    const double g = dbl(a.global_layers) / pp, wl = dbl(a.window_layers) / pp;
    Cost attn;
    attn.add(lc.attention, g);
    attn.add(lc.attention_window, wl);
    const double attn_bwd = w.flash_attention ? kFlashBackwardFlopsRatio : kEagerAttentionBackwardRatio;
    const double gemm_bwd = frozen ? kFrozenGemmBackwardRatio : kGemmBackwardRatio;
    const double recompute = w.checkpointing == Checkpointing::kFull ? 1.0 : 0.0;
    // Recomputed share of the block's matmuls, of its attention and of its element-wise work.
    double gemm_recompute = recompute;
    double attn_recompute = w.checkpointing == Checkpointing::kNone ? 0.0 : 1.0;
    double elementwise_recompute = recompute;
    if (w.checkpointing == Checkpointing::kSelective && op_level_selective_checkpointing(w.engine)) {
      gemm_recompute = op_sac_recomputed_gemm_share(a);
      attn_recompute = kOpSacAttentionRecompute;
      elementwise_recompute = kOpSacElementwiseRecompute;
    }
    micro.add(lc.gemm, layers * (1 + gemm_bwd + gemm_recompute));
    micro.add(attn, 1 + attn_bwd + attn_recompute);
    micro.add(lc.elementwise, layers * (kTrainPasses + elementwise_recompute));
    micro.add(lc.comm, layers * (kTrainTpAllReducePasses + recompute));
    micro.overhead +=
        layers * engine_perf(w.engine).kernels_per_layer * (kTrainPasses + elementwise_recompute) * r.kernel_seconds;
    if (run.weights.compute == Precision::kFp8) {
      // float8 training: each fp8 GEMM operand cast from bf16 with its amax, the inputs in forward (again
      // when recomputed) and the output gradients in backward (constants.h, kFp8*).
      const MatmulShapes sh = matmul_shapes(a, w, run);
      const double inputs = sh.qkv.k + sh.out.k + (sh.mlp ? sh.up.k + sh.down.k : 0.0);
      const double outputs = sh.qkv.n + sh.out.n + (sh.mlp ? sh.up.n + sh.down.n : 0.0);
      const double bytes = kFp8AmaxReadBytes + kFp8CastReadBytes +
                           (frozen ? kFp8FrozenLayouts : kFp8TrainedLayouts) * kFp8CastWriteBytesPerLayout;
      micro.memory += layers * shape.batch * shape.q * (inputs * (1 + gemm_recompute) + outputs) * bytes / r.bandwidth;
    }
    if (w.task == Task::kQlora) {
      // bitsandbytes dequantizes each 4-bit matrix to bf16 before every use (forward, backward, recompute).
      const double linear = (a.qkv_params_per_layer + a.out_params_per_layer + a.mlp_params_per_layer) / tp;
      micro.memory += layers * (kQloraDequantPasses + recompute) * linear *
                      (run.weights.bits_per_weight / 8 + kQloraDequantCopyPasses * run.activation_bytes) / r.bandwidth;
    }
    // LM head: forward + 2 x backward (or 1 x when frozen).
    Cost head;
    gemm(head, r, shape.logit_rows, a.head_params / dbl(a.hidden) / tp, dbl(a.hidden), run.weights.head_bits / 8,
         run.activation_bytes, r.head_flops);
    micro.add(head, 1 + gemm_bwd);
  }
  // Pipeline: (m + pp - 1) stage slots per step, of which pp - 1 are the bubble; the interleaved schedule
  // (vp model chunks per GPU) divides the bubble by vp (Narayanan et al. 2021, arXiv 2104.04473, Sec. 2.2.2:
  // bubble time (p - 1)(t_f + t_b) / v).
  const double t_micro = micro.total();
  t.compute_seconds = micro_steps * t_micro;
  t.bubble_seconds = (pp - 1) * t_micro / std::max(1, run.vp);
  // Data-parallel gradient traffic: all-reduce of bf16 gradients (DDP, ZeRO-1/2: reduce-scatter +
  // all-gather, same bytes), or FSDP/ZeRO-3: all-gather weights forward and backward + reduce-scatter.
  double trainable = params_local;
  if (frozen) {
    trainable =
        run.trainable_parameters > 0 ? run.trainable_parameters / (tp * pp) : kDefaultTrainableFraction * params_local;
  }
  const double grad_bytes = trainable * (a.cnn ? kCnnGradBytes : kHalfGradBytes);
  const bool sharded_weights = w.zero >= 3 || run.fsdp;
  const double ranks_in_node = std::max(1.0, d.devices_per_node / (tp * pp));
  // Beyond one node NCCL runs hierarchical rings: every GPU's NIC carries its share, so the bus bandwidth
  // is the node's NICs together (GPUs per node x per-GPU NIC), capped by the links inside the node.
  const double node_nics = d.internode_bytes_per_second * d.devices_per_node;
  const double bw = (dp <= ranks_in_node ? d.link_bytes_per_second : std::min(d.link_bytes_per_second, node_nics)) *
                    eff.link_fraction;
  double comm = 0;
  if (dp > 1) {
    const double ring = (dp - 1) / dp;
    // FSDP gathers the weights for forward and for backward and reduce-scatters gradients every micro-step.
    comm = sharded_weights ? kShardedRingPasses * ring * params_local * run.activation_bytes * micro_steps / bw
                           : kReplicatedRingPasses * ring * grad_bytes / bw;
    comm += r.allreduce_latency * kDataParallelCollectives;
  }
  // Overlap: DDP hides gradient buckets behind backward; FSDP prefetches behind forward and backward.
  const double window = t.compute_seconds * (sharded_weights ? 1.0 : kDdpOverlapShare);
  const double exposed = std::max(comm - eff.training_overlap * window, (1 - eff.training_overlap) * comm);
  t.communication_seconds = std::max(0.0, exposed);
  // Optimizer: memory-bound pass over this rank's share of the parameters.
  const double opt_share = (w.zero >= 1 || run.fsdp) ? trainable / dp : trainable;
  const double opt_bytes = a.cnn ? kSgdBytesPerParam : kAdamBytesPerParam;
  t.optimizer_seconds = opt_share * opt_bytes / r.bandwidth + kOptimizerKernels * r.kernel_seconds;
  t.step_seconds = t.compute_seconds + t.bubble_seconds + t.communication_seconds + t.optimizer_seconds;
  const double sequences = micro_steps * mb * dp;
  t.samples_per_second = sequences / t.step_seconds;
  t.tokens_per_second = t.samples_per_second * seq;
  t.tokens_per_second_per_gpu = t.tokens_per_second / (dp * tp * pp);
  const double peak = compute_peak(d, run.weights.compute);
  // A frozen base does no weight gradients: 4N instead of 6N matmul FLOPs per token.
  const double attention_flops =
      kAttentionTrainFlopsFactor * dbl(a.layers) * dbl(a.heads) * dbl(a.head_dim) * dbl(w.context);
  const double model_flops =
      training_flops_per_token(a, w.context) -
      (frozen && !a.cnn ? kFrozenFlopsPerParamSaved * (training_flops_per_token(a, w.context) - attention_flops) /
                              kTrainFlopsPerParam
                        : 0.0);
  t.mfu = peak > 0 ? model_flops * (a.cnn ? t.samples_per_second : t.tokens_per_second) / (dp * tp * pp * peak) : 0;
  Cost total = micro;
  total.add(micro, micro_steps - 1);
  total.comm += t.communication_seconds;
  total.memory += t.optimizer_seconds;
  total.overhead += t.bubble_seconds;
  t.bound = total.bound();
  return t;
}

double predict_gemm_tflops(const PerfDevice& d, Precision p, double m, double n, double k, const PerfEfficiency& eff) {
  PerfRun run;
  run.weights.compute = p;
  run.weights.bits_per_weight =
      p == Precision::kFp8 || p == Precision::kInt8 ? 8 : (p == Precision::kFp32 || p == Precision::kTf32 ? 32 : 16);
  run.activation_bytes = run.weights.bits_per_weight / 8;
  const Rates r =
      make_rates(d, Engine::kAuto, EngineVersion{}, run, eff);  // a cuBLAS GEMM: no engine's attention kernels
  Cost c;
  gemm(c, r, m, n, k, run.activation_bytes, run.activation_bytes, r.gemm_flops);
  return 2.0 * m * n * k / (c.total() + r.kernel_seconds) / 1e12;
}

double predict_stream_bandwidth_gbps(const PerfDevice& d, const PerfEfficiency& eff) {
  return d.bandwidth_bytes_per_second * eff.bandwidth_fraction / 1e9;
}

}  // namespace gpuplan
