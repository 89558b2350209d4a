// The memory model: per-GPU memory of a Workload, line by line with its arithmetic, and the fit of a
// workload on a Target (verdict, headroom, largest batch, largest context). Pure functions; the fit of
// one prepared workload on one target does not allocate, so a page can recompute the whole catalog
// per keystroke. Formulas and sources: docs/model.md, section "Memory".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/refusal.h"
#include "gpuplan/target.h"
#include "gpuplan/workload.h"

namespace gpuplan {

// Per-GPU bytes. total_bytes is the peak: the live set at the worst moment, which for training is
// weights + optimizer + max(activations at the start of backward, gradients + optimizer-step
// temporaries), so it can be less than the sum of the lines.
struct MemoryBreakdown {
  double weights_bytes = 0;
  double kv_cache_bytes = 0;
  double activations_bytes = 0;  // peak of the largest step (prefill / chunk / forward+logits)
  double gradients_bytes = 0;
  double optimizer_bytes = 0;  // optimizer states and fp32 master weights
  double adapter_bytes = 0;    // LoRA weights
  // Training state kept outside the GPU's allocator and not in total_bytes: paged optimizer states
  // (unified memory the driver evicts to the host), CPU-offloaded weights, gradients and optimizer
  // states, offloaded activations.
  double host_bytes = 0;
  double runtime_overhead_bytes = 0;
  double total_bytes = 0;

  // Parts of runtime_overhead_bytes.
  double cuda_context_bytes = 0;     // driver context, kernels (outside PyTorch's allocator)
  double workspace_bytes = 0;        // cuBLAS workspaces, dequantization buffers
  double allocator_slack_bytes = 0;  // cached but unallocated blocks (reserved - allocated)
  double communication_bytes = 0;    // NCCL / all-gather buffers when several GPUs work together

  // Per-GPU peak while the weights load, before any request: the CUDA context, the weights and what the
  // loader stages beside them (a 16-bit copy it quantizes from). Not part of total_bytes (steady state);
  // the verdict counts it against the whole capacity when it is higher (docs/model.md "Memory at load
  // time"). Independent of batch and context.
  double load_peak_bytes = 0;

  // Counters as tools print them.
  double allocated_bytes() const;  // torch.cuda.max_memory_allocated
  double reserved_bytes() const;   // torch.cuda.max_memory_reserved
  // nvidia-smi "used" = total_bytes.
};

// What a workload needs that does not depend on batch or context: weight bytes, KV bytes per token,
// per-token activation factors. Build it once per workload and reuse it across targets.
struct PreparedWorkload {
  // The workload as the memory model sizes it: its engine is the memory profile it is sized with
  // (memory_engine(), the engine table's column), not necessarily the one the request named.
  Workload workload;
  Engine rules_engine = Engine::kTransformers;  // whose refusal rules apply: rules_engine(named engine, task)
  WeightBytes weights;                          // whole model
  double weights_per_gpu_bytes = 0;
  double active_weights_per_gpu_bytes = 0;  // what one token reads (MoE: routed experts only)
  double trainable_parameters_per_gpu = 0;
  double adapter_parameters = 0;         // LoRA
  double layer_fraction = 1;             // share of the layers one pipeline stage holds
  double kv_global_bytes_per_token = 0;  // per GPU, layers without a window
  struct Window {
    int64_t tokens = 0;
    double bytes_per_token = 0;
  };
  Window windows[4];  // per GPU, sliding-window layers grouped by window
  int window_count = 0;
  bool bound_windows = true;           // the engine frees KV beyond the window
  double kv_full_bytes_per_token = 0;  // all layers at full length (vLLM block size)
  // What the per-call arithmetic reads of the workload, resolved once here: each compares the model's
  // architecture name or looks up a format table, and estimate_memory runs millions of times in sweeps.
  double activation_bytes = 2;      // activation_element_bytes(workload)
  bool eager_inference = false;     // inference materializes attention scores (no flash/SDPA kernel)
  bool eager_training = false;      // training does
  bool rms_norm = true;             // the model's norms are RMSNorm (transformers saves their fp32 upcast input)
  bool kbit_upcast = false;         // PEFT's k-bit preparation upcasts the unquantized parameters to fp32
  double load_peak_bytes = 0;       // MemoryBreakdown::load_peak_bytes, resolved once (it reads no batch)
  double load_transient_bytes = 0;  // what loading allocates and frees beside the weights (torchao 0.1 NF4)
  bool preallocated_kv = false;     // the KV cache of batch x context exists from load (AutoAWQ fused modules)
  bool kv_concat_copy = false;      // each decode step builds a new cache beside the old (transformers < 4.42)
  double eager_score_bytes = 0;     // bytes per eager attention score when the engine fixes them (AutoAWQ)
  double prompt_logit_bytes = 0;    // the head runs on every token of a step: bytes per logit (AutoAWQ)
};

Result<PreparedWorkload> prepare(const Workload& w);

// Per-GPU KV-cache bytes of one sequence of `tokens`.
double kv_bytes_per_sequence(const PreparedWorkload& p, int64_t tokens);

// Per-GPU memory at this batch and context (the workload's own when negative), with the GPUs linked by
// `link` (it sizes communication buffers).
MemoryBreakdown estimate_memory(const PreparedWorkload& p, int64_t batch = -1, int64_t context = -1,
                                Link link = Link::kPcie);

// Memory a target offers a workload: NVML's total (or the MIG instance's) less the driver's reserve.
double capacity_bytes(const Target& t);

// Engines that allocate their KV pool once, at start-up, from a share of the GPU (vLLM's gpu_memory_utilization,
// SGLang's mem_fraction_static): a fit reports that pool (limit_bytes, kv_pool_bytes, kv_pool_tokens), their
// attention kernels never materialise scores, and their quantized kernels keep no dequantized matrix.
bool kv_pool_at_startup(Engine e);

// SGLang's default --mem-fraction-static for workload `w` (its tp, pp and engine version) on a GPU of
// `gpu_total_bytes` (nvidia-smi's memory.total): the share of the memory free at start-up that weights and
// the KV pool may take (server_args.py; memory.cc has the three generations of the rule and their sources).
double sglang_mem_fraction_static(const Workload& w, double gpu_total_bytes);

struct TargetFit {
  double capacity_bytes = 0;  // per GPU
  double limit_bytes = 0;     // what the engine may use of it (vLLM: gpu_memory_utilization x capacity;
                           // SGLang: context + mem_fraction_static of the rest + what activations use of the reserve)
  double total_bytes = 0;     // per GPU
  double headroom_bytes = 0;  // limit - total
  bool fits = false;          // false when refused: a configuration no engine runs does not fit
  bool loads = true;          // memory.load_peak_bytes <= capacity_bytes; when false nothing runs (fits false)
  // Set when no engine can run the workload on this target (refusal.h); then fits is false and
  // max_batch, max_context and the KV pool are 0. The memory figures are still those of the workload.
  std::optional<RefusalCode> refusal;
  int64_t max_batch = 0;       // at the workload's context
  int64_t max_context = 0;     // at the workload's batch, capped at the model's max positions
  double kv_pool_bytes = 0;    // vLLM / SGLang / TensorRT-LLM (fraction of the free memory): KV cache it allocates
  int64_t kv_pool_tokens = 0;  // vLLM: blocks x 16 tokens; SGLang: token-granular pages; TensorRT-LLM: blocks x 64
  MemoryBreakdown memory;
};

// The fit of `p` on `t`, refusals (refusal.h) included, under the rules of p.rules_engine (the "auto"
// engine is sized with the transformers memory profile and refused as vLLM for inference). Does not
// allocate.
TargetFit fit_target(const PreparedWorkload& p, const Target& t);
// Why `p` is refused on `t`, in the words of the engine whose rules refused it (p.rules_engine).
Refusal explain_refusal(RefusalCode code, const PreparedWorkload& p, const Target* t);

// The breakdown as lines with their arithmetic ("KV cache: 2 x 40 layers x 40 heads x 128 x 2 B x
// 4096 tokens = 3.13 GiB"). Allocates: for display, not for sweeps.
struct MemoryLine {
  std::string key;  // "weights_bytes", ...
  double bytes = 0;
  std::string explain;
};
std::vector<MemoryLine> explain_memory(const PreparedWorkload& p, const MemoryBreakdown& m);

std::string format_gib(double bytes);

}  // namespace gpuplan
