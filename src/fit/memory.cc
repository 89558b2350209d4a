// The memory model. Every constant is named with its reason and source; docs/model.md lists the
// formulas. Units: bytes unless the name says otherwise.
#include "gpuplan/memory.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>

#include "core/format.h"
#include "gpuplan/sweep.h"
#include "gpuplan/units.h"

namespace gpuplan {

namespace {

// ---- constants ---------------------------------------------------------------------------------

// What the driver keeps of NVML's total before CUDA can allocate: cudaMemGetInfo's total is ~1% below
// nvidia-smi's (A100-SXM4-80GB 81920 -> 81251 MiB, A100-SXM4-40GB 40960 -> 40536 MiB, RTX 4090 24564 ->
// 24217 MiB, as torch.cuda.get_device_properties prints them in public issue logs).
constexpr double kDriverReserveFraction = 0.01;
// CUDA context + loaded kernels (cuBLAS, cuDNN, PyTorch) outside PyTorch's allocator. ~300-600 MiB with
// lazy module loading (CUDA >= 11.7); gpu_poor uses 650 MB, vLLM logs show 0.25-1.8 GiB non-torch.
constexpr double kCudaContextBytes = 512.0 * kBytesPerMib;
// What an eager PyTorch process (transformers, plain PyTorch loops, torch.compile) holds outside PyTorch's
// allocator once a transformer has run: CUDA context and the modules of the kernels it loaded (PyTorch's own,
// cuBLAS, cuDNN), with lazy module loading on (torch/cuda/__init__.py _lazy_init sets CUDA_MODULE_LOADING=LAZY
// when unset, PyTorch >= 1.13). Measured as NVML used - torch.cuda.max_memory_reserved = 1386 MB in each of the
// ten fp16 readings of optimum-benchmark's running-llamas report of 2023-10-31 (9a0db86, Llama-2-7B, generate()
// and forward at batch 1-16, PyTorch 2.1.0+cu118, one A100-SXM4-80GB); the HF "Efficient training on one GPU"
// guide measured 1343 MiB (1408 MB) of CUDA context on a V100 under PyTorch 1.x without lazy loading. Lazy
// loading defers modules, but a forward loads the ones it needs: the two agree within 2%.
constexpr double kEagerTorchOutsideBytes = 1386e6;
// cuBLAS workspace: CUBLAS_WORKSPACE_CONFIG default ":4096:8" = 8 x 4 MiB on Hopper (PyTorch docs,
// "Reproducibility"); allocated through PyTorch's caching allocator.
constexpr double kCublasWorkspaceBytes = 32.0 * kBytesPerMib;
// NCCL communicator buffers when GPUs talk: NCCL_BUFFSIZE 4 MiB x channels x peers plus proxy;
// aiconfigurator budgets 342-392 MB by TP degree (base_backend.py).
constexpr double kNcclBytes = 384.0 * kBytesPerMib;
// vLLM with tensor parallelism over NVLink keeps its own NCCL communicator beside torch.distributed's
// and registers custom all-reduce buffers: its non-torch memory at tp 2-4 exceeds tp 1 by 1.79 GiB
// (vLLM PR 10511 log: 3.58 vs 1.79 GiB) and 1.82-1.88 GiB (llm-d planner accuracy report, vLLM 0.19 on
// H100: 2.07 / 2.13 vs 0.25 GiB). Both measured on 80 GB Hopper GPUs; used for every NVLink pair.
constexpr double kVllmNvlinkTpCommunicationBytes = 1.8 * kBytesPerGib;
// Caching-allocator slack: blocks PyTorch keeps reserved after freeing them, as a share of the memory
// allocated and freed during a step (KV growth, activations). PyTorch CUDA semantics notes; the
// reserved/allocated ratios of 1.05-1.15 seen in public torch.cuda.memory_summary logs.
constexpr double kAllocatorSlackFraction = 0.10;
// vLLM: KV cache is paged in blocks of 16 tokens (default --block-size).
constexpr int64_t kVllmBlockTokens = 16;
// vLLM profiling run: max_num_seqs = 256 dummy sequences sample one token each (fp32 logits + probs).
constexpr double kVllmMaxNumSeqs = 256;
// vLLM V1 default max_num_batched_tokens for serving with chunked prefill (vllm/engine/arg_utils.py).
constexpr int64_t kVllmDefaultChunkTokens = 8192;
// SGLang (python/sglang/srt, github.com/sgl-project/sglang). model_executor/model_runner.py
// profile_max_num_token sizes the KV pool from the memory free at start-up (total_gpu_memory, measured after
// CUDA initialisation) and the memory free after loading: rest = available - total_gpu_memory x (1 -
// mem_fraction_static), max_total_num_tokens = rest / cell_size, cell_size = kv_heads / tp x head_dim x layers
// x 2 x element bytes per token (page size 1: no block rounding). So weights + KV pool take mem_fraction_static
// of the free memory; activations, CUDA graph buffers and sampling live in the rest ("mem_fraction_static =
// (model weights + KV cache pool) / GPU memory capacity", docs/advanced_features/hyperparameter_tuning.md).
// The default fraction (server_args.py __post_init__ / _handle_gpu_memory_settings), three generations:
// - before 0.4.7, by tensor-parallel degree: tp >= 16: 0.79, >= 8: 0.81 (0.83 in the 0.2/0.3 server_args),
//   >= 4: 0.85, >= 2: 0.87, else 0.88.
// - PR #7054 ("Simplify the heuristics for setting --mem-fraction-static", 2025-06-10; 0.4.7 is the first
//   release after it): reserve by GPU memory, parallel = tp x pp: below 35 GiB (2.8 + parallel / 10) GiB,
//   below 90 GiB (9.5 + parallel / 2) GiB (H100, A100), below 160 GiB (12 + parallel / 2) GiB (H20, H200),
//   else 32 GiB (B200, MI300); fraction = (memory - reserve) / memory.
// - PR #10975 ("Use more general heuristics to set the default value of --mem-fraction-static",
//   2025-09-27; 0.5.3 the first release after it) and the current release: reserve in MiB = 512 + 1.5 x
//   max(chunked_prefill_size, 2048) (activations) + 2 x cuda_graph_max_bs (graph buffers) + tp x pp / 8 x
//   1024, at least 10 GiB on GPUs over 60 GiB, with chunked_prefill_size 2048 below 35 GiB, 8192 below 160
//   GiB, else 16384, and cuda_graph_max_bs 24 / 256 / 512 in the same buckets (an H100 80GB: 13440 MiB,
//   0.836). Rounded to 3 decimals as SGLang does.
constexpr EngineVersion kSglangGpuMemoryReserveSince{{0, 4, 7}, true, 3, '.'};
constexpr EngineVersion kSglangGeneralReserveSince{{0, 5, 3}, true, 3, '.'};
constexpr EngineVersion kSglangTp8Fraction081Since{{0, 4, 0}, true, 3, '.'};
// SGLang's default chunked prefill (server_args.py: 8192; 2048 below 25 GiB before 0.4.7 and below 35 GiB
// after): the largest forward step, whose activations the reserve holds.
constexpr int64_t kSglangChunkTokens = 8192;
// TensorRT-LLM's executor sizes its paged KV pool from the memory free once the engine, its execution context
// and the runtime buffers are allocated: kv_cache_free_gpu_mem_fraction of it, 0.9 by default
// (docs/source/examples/kvcacheconfig.md: "TensorRT-LLM tries to allocate 90% of free GPU memory (after loading
// weights) for KV cache"; the 0.12 perf-benchmarking.md log: "available: 63.62 GiB" then "Allocated 62.99 GiB for
// max tokens in paged KV cache" at "KV Memory Percentage: 99.0%"). gpuplan reads the fraction from
// gpu_memory_utilization, whose default 0.9 is TensorRT-LLM's too. The pool is whole blocks of trtllm-build's
// default --tokens_per_block, 64 (the same log: "Number of tokens per block: 64.").
constexpr int64_t kTensorrtLlmBlockTokens = 64;
// TGI default --max-batch-prefill-tokens (text-generation-launcher docs).
constexpr int64_t kTgiPrefillTokens = 4096;
// TGI warm-up with prefill log-probs: the gathered logits and their log_softmax, both tokens x vocab in
// the model's dtype.
constexpr double kTgiWarmupLogitCopies = 2;
// llama.cpp default physical micro-batch (n_ubatch 512) sets its compute buffer.
constexpr int64_t kLlamaCppUbatchTokens = 512;
// Inference logits of the sampled position: fp32 logits + one fp32 working copy (softmax / processors).
constexpr double kInferLogitBytes = 8;
// Training logits per element at the start of backward: bf16 logits kept in the model output (2) +
// log-softmax output saved by cross_entropy on the fp32 upcast (4) + the gradient flowing into
// log-softmax (4) + the gradient it produces (4): transformers ForCausalLMLoss (logits.float()) and
// torch.nn.functional.cross_entropy; the fp32 upcast itself is freed after the forward.
constexpr double kTrainLogitBytes = 14;
// torchtune computes the loss with CEWithChunkedOutputLoss (num_output_chunks = 8): the bf16 logits
// (2 B) stay, the fp32 upcast and log-softmax exist for one chunk at a time (torchtune/modules/loss).
constexpr double kTorchtuneLogitChunks = 8;
// torch.nn.functional.dropout saves its mask as a bool tensor: 1 byte per element
// (aten native_dropout returns (output, mask: bool)).
constexpr double kDropoutMaskBytes = 1;
// 8-bit Adam: m and v in 1 B each plus block scales (Dettmers et al. 2021, bitsandbytes); the other
// optimizers' states are sized by optimizer_state_bytes below.
constexpr double kAdam8bitStateBytes = 2.0 + 2.0 * 4 / 2048;  // m, v + fp32 absmax per 2048-blocks
// fp32 master copy of 16-bit weights under mixed precision (Micikevicius et al. 2018).
constexpr double kMasterWeightBytes = 4;
// torch.optim.AdamW(foreach=True), the default of transformers/torchtune: the step materialises
// sqrt(v) for every parameter at once (torch/optim/adamw.py _multi_tensor_adamw), 4 B per parameter.
constexpr double kForeachAdamTempBytes = 4;
// DeepSpeed ZeRO keeps an fp32 copy of the gradient partition for the optimizer step: model states of
// 2 + 2 + 16/dp B per parameter for stages 1-2 and 18/dp for stage 3 (DeepSpeed docs, "Memory
// Requirements": estimate_zero2_model_states_mem_needs / estimate_zero3_model_states_mem_needs).
constexpr double kDeepSpeedFp32GradBytes = 4;

// torch.autocast casts each fp32 weight to a 16-bit copy for its matmul (2 bytes per parameter).
constexpr double kAutocastCopyBytes = 2;
// K and V: the two tensors attention caches per layer and KV head.
constexpr int kKvTensors = 2;
// Slack under a layer count before its ceiling: a pipeline stage's share of 32 layers x 0.25 from
// rounding is 8 layers, not 9 (doubles carry ~16 digits).
constexpr double kCeilSlack = 1e-9;
// Parameters are printed in billions (7.24B), as model cards state them.
constexpr double kParametersPerBillion = 1e9;
// Below 10^15 a double holds every integer exactly, so "%.0f" prints it; above it "%.4g".
constexpr double kExactIntegerLimit = 1e15;
// FSDP / ZeRO-3 hold two layers' full weights at once: the one computing and the next, prefetched
// (FSDP forward_prefetch / backward_prefetch; DeepSpeed stage3 prefetch bucket).
constexpr double kZero3GatheredLayers = 2;

// ---- training recipes (issue #17, session 7; docs/model.md "Training recipes") ----------------------
// torch.optim.AdamW and SGD create their states with torch.zeros_like(param) / a clone of the gradient
// (torch/optim/adamw.py _init_group, sgd.py momentum_buffer): in the dtype of the parameters they step.
// Two moments for AdamW, one momentum buffer for SGD.
constexpr double kAdamMoments = 2;
constexpr double kSgdMoments = 1;
// bitsandbytes' 32-bit optimizers (AdamW32bit, PagedAdamW) keep both states in fp32 whatever the
// parameters' dtype (bitsandbytes/optim/optimizer.py Optimizer2State.init_state, optim_bits 32).
constexpr double kBnb32bitAdamStateBytes = 8;
// FSDP CPU offload: a layer's unsharded gradient exists on the GPU from its backward until the
// reduce-scatter's shard is copied to the host (torch.distributed.fsdp CPUOffload(offload_params=True):
// "gradients ... offloaded to CPU"), one layer at a time.
constexpr double kOffloadGradientLayers = 1;
// Activation offloading keeps two layers' saved tensors on the GPU: the one being copied on the side
// stream while the next layer computes, and in backward the one prefetched ahead of its use
// (torchtune/training/_activation_offloading.py OffloadActivations with use_streams).
constexpr double kOffloadResidentLayers = 2;

// QLoRA through PEFT (HF Trainer / TRL, alone or with DeepSpeed) on a bitsandbytes base whose unquantized parameters
// are 16-bit: prepare_model_for_kbit_training upcasts them (peft/utils/other.py, "cast all non INT8 parameters to
// fp32").
bool peft_kbit_upcast(const Workload& w) {
  const WeightFormatInfo& f = weight_format_info(w.weights);
  const bool peft = w.engine == Engine::kTransformers || w.engine == Engine::kDeepspeed;  // HF Trainer/TRL + PEFT
  return w.task == Task::kQlora && peft && f.family == FormatFamily::kBitsAndBytes && f.unquantized_bytes < kFp32Bytes;
}

// bitsandbytes' paged optimizers allocate their states with cudaMallocManaged (bitsandbytes functional.py
// get_paged / cget_managed_ptr): unified memory outside PyTorch's caching allocator, which the driver
// evicts to the host when the GPU runs short. It neither counts in torch.cuda.max_memory_reserved nor
// makes a run fail with out-of-memory, so the model keeps those states in host_bytes, off the GPU.
bool paged_optimizer(Optimizer o) { return o == Optimizer::kPagedAdamw || o == Optimizer::kPagedAdamw8bit; }

// Optimizer state per trained parameter, without an fp32 master copy. `element_bytes`: the dtype the
// optimizer steps (the fp32 master under mixed precision, else the parameters' own: torchtune's pure bf16
// and PEFT's fp32 adapters alike).
double optimizer_state_bytes(Optimizer o, double element_bytes) {
  switch (o) {
    case Optimizer::kAdamw:
      return kAdamMoments * element_bytes;
    case Optimizer::kSgd:
      return kSgdMoments * element_bytes;
    case Optimizer::kPagedAdamw:
      return kBnb32bitAdamStateBytes;
    case Optimizer::kAdamw8bit:
    case Optimizer::kPagedAdamw8bit:
      return kAdam8bitStateBytes;
  }
  return kAdamMoments * element_bytes;
}

// NCCL buffers of a multi-GPU run; vLLM with tensor parallelism over NVLink holds its own communicator
// and custom all-reduce buffers too.
double communication_bytes(const Workload& w, Link link) {
  const bool vllm_tp_over_nvlink = w.engine == Engine::kVllm && w.tp > 1 && link == Link::kNvlink;
  return vllm_tp_over_nvlink ? kVllmNvlinkTpCommunicationBytes : kNcclBytes;
}

bool quantized_dequant(WeightFormat f) {
  switch (f) {
    case WeightFormat::kInt4Gptq:
    case WeightFormat::kInt4Awq:
    case WeightFormat::kNf4:
    case WeightFormat::kNf4Dq:
    case WeightFormat::kFp4:
    case WeightFormat::kFp4Dq:
      return true;
    default:
      return false;
  }
}

// ---- memory at load time (issue #17, session 7; docs/model.md "Memory at load time") --------------
// bitsandbytes through transformers quantizes each weight as it moves to the GPU: Int8Params.cuda copies
// the 16-bit matrix there, double_quant makes its row-major (kept) and column-major int8 copies, and the
// column-major copy and the 16-bit one are freed (bitsandbytes/nn/modules.py, Int8Params.cuda): one
// matrix stages 2 B (fp16) + 1 B (CBt) per parameter beside the kept int8 weights.
constexpr double kBnbInt8LoadStagingBytes = k16BitBytes + 1.0;
// Params4bit.cuda: the 16-bit copy on the GPU, then quantize_4bit (bitsandbytes/nn/modules.py).
constexpr double kBnb4bitLoadStagingBytes = k16BitBytes;

// ---- torchtune QLoRA at load, torchao 0.1 (issue #17, session 8; docs/model.md "Load transients") ----------
// torchao 0.1's to_nf4 quantizes a whole bf16 matrix at once (torchao/dtypes/nf4tensor.py v0.1,
// NF4Tensor.from_tensor -> convert_to_norm_float_weight -> quantize_tensor_nearest): beside the bf16 matrix
// on the GPU (2 B) it holds the scaled blocks (2 B) and `(value.unsqueeze(-1) - nf4).abs()`, every element's
// distance to the 16 NF4 codes in bf16, together with the difference it is taken of (2 x 16 x 2 B). torchtune
// runs it on the GPU for every LoRALinear base weight when it builds the model and again in load_state_dict
// (the NF4 copy_ dispatch quantizes the incoming bf16 tensor on the destination's device).
constexpr double kTorchaoWholeTensorNf4Bytes = k16BitBytes + k16BitBytes + 2.0 * 16.0 * k16BitBytes;
// torchtune pinned torchao==0.1 from 2024-04-09 (pyproject.toml, torchtune PR 656) until 2024-06-26
// (PR 1125, torchao 0.3), which quantizes in chunks of 2^20 elements (torchao PR 196 "perform in chunks",
// in 0.2.0): a `pytorch@DATE` before that date quantizes whole matrices; no date is today's torchtune.
constexpr EngineVersion kTorchtuneChunkedNf4Since{{2024, 6, 26}, true, 3, '-'};

// torchtune (engine pytorch) of a date before kTorchtuneChunkedNf4Since, quantizing an NF4 base on one GPU.
bool torchao_whole_tensor_nf4(const Workload& w) {
  const bool nf4 = w.weights == WeightFormat::kNf4 || w.weights == WeightFormat::kNf4Dq;
  const bool dated = w.engine_version.given && w.engine_version.count >= 2 && w.engine_version.separator == '-';
  return w.engine == Engine::kPytorch && nf4 && w.zero < 3 && dated &&
         version_before(w.engine_version, kTorchtuneChunkedNf4Since);
}

// ---- AutoAWQ's fused modules (issue #17, session 8; docs/model.md "AutoAWQ's fused modules") -----------------
// QuantAttentionFused prefills with `scores = torch.matmul(xq, keys.transpose(2, 3)) / sqrt(head_dim)` in fp16,
// then `F.softmax(scores.float(), dim=-1).type_as(xq)`: the fp16 scores, their fp32 copy and the fp32 softmax
// live at once (awq/modules/fused/attn.py, 0.1.x to 0.2.x).
constexpr double kAutoawqEagerScoreBytes = k16BitBytes + kFp32Bytes + kFp32Bytes;
// From 0.2.7 LlamaLikeBlock (llama, mistral, qwen2 and the other Llama-like models) builds its attention with
// use_sdpa=True (awq/modules/fused/block.py, PR 549 eab1a4a of 2024-09-12, first released in 0.2.7 on
// 2024-11-16): torch SDPA, no score matrix. The other blocks (Mixtral, Falcon, MPT, Phi-3, ...) stay eager.
// 0.2.7 is also the first release after transformers 4.46 (October 2024) stopped upcasting the logits to fp32
// in the model's forward ("Starting from v4.46, the `logits` model output will have the same type as the
// model"; up to 4.45 LlamaForCausalLM ran `logits = logits.float()`).
constexpr EngineVersion kAutoawqSdpaSince{{0, 2, 7}, true, 3, '.'};

// ---- transformers' generate() by release (issue #17, session 8; docs/model.md "transformers' generate() by
// release") --------------------------------------------------------------------------------------------------
// Before 4.45 every CausalLM forward ran the head on every position (`logits = self.lm_head(hidden_states)`)
// and the Llama-like models upcast the result (`logits = logits.float()`, LlamaForCausalLM.forward of 4.3x,
// modeling_qwen2.py of v4.41.2 line 1163, as issue 30860 quotes it): the prefill holds batch x prompt x vocab
// logits in 16 bits and their fp32 copy at once, beside the last hidden states. PR 31292 (num_logits_to_keep,
// ready to merge 2024-08-23, after the 4.44 branch) makes generate() ask for the last position only; the first
// release with it is 4.45.0.
constexpr EngineVersion kTransformersLastLogitSince{{4, 45, 0}, true, 3, '.'};
// Llama-like models got torch SDPA attention in 4.36 (issue 28005: "In Transformers 4.36, we started adding
// native support of torch.nn.functional.scaled_dot_product_attention (SDPA), enabled by default"); before, their
// attention is eager whatever the workload says.
constexpr EngineVersion kTransformersSdpaSince{{4, 36, 0}, true, 3, '.'};
// Eager LlamaAttention: `softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)` holds the
// 16-bit scores (the softmax input), their fp32 softmax (ATen's half-to-float softmax, no copy of the input) and
// its 16-bit cast at once: 2 + 4 + 2 B per score (modeling_llama.py, LlamaAttention.forward, 4.3x and eager
// since).
constexpr double kTransformersLlamaEagerScoreBytes = k16BitBytes + kFp32Bytes + k16BitBytes;

// Each decode step builds a new cache beside the old: the attention layers grow it with `key_states =
// torch.cat([past_key_value[0], key_states], dim=2)` (tuples, and DynamicCache.from_legacy_cache over them from 4.36)
// while generate()'s model_kwargs still hold the previous step's cache until the forward returns, and the first
// step's outputs (its logits of every prompt token) stay referenced into the second step. transformers PR 30536
// ("Reduce by 2 the memory requirement in generate()", comment of 2024-05-07: "the memory peak consisted of
// 2*past_KV + first_iteration_logits") removed both; 4.41.0 (2024-05-17) was branched before it, so the first
// release without them is taken as 4.42.0.
constexpr EngineVersion kTransformersSingleCacheSince{{4, 42, 0}, true, 3, '.'};

// The architectures whose transformers forward upcasts the logits and whose attention follows LlamaAttention.
bool transformers_llama_like(const Model& m) {
  return m.architecture == "llama" || m.architecture == "mistral" || m.architecture == "mixtral" ||
         m.architecture == "qwen2";
}

// Memory outside PyTorch's allocator for the memory profile `e` (memory_engine): eager PyTorch processes hold what
// they measured (kEagerTorchOutsideBytes); the serving engines' own rows calibrate the rest around the context.
double outside_torch_bytes(Engine e) {
  return e == Engine::kTransformers || e == Engine::kPytorch ? kEagerTorchOutsideBytes : kCudaContextBytes;
}

// Weight bytes per GPU of `wb` split as the workload splits its model: pipeline stages hold ceil(L/pp)
// layers and the stage with the embedding (or head) holds it too; tensor parallelism divides each.
double per_gpu_weight_bytes(const Workload& w, const WeightBytes& wb, double layer_fraction) {
  const double layer_bytes = std::max(0.0, wb.total_bytes - wb.non_layer_bytes);
  if (w.model->layers > 0 && w.pp > 1) return (layer_bytes * layer_fraction + wb.largest_edge_bytes) / w.tp;
  return wb.total_bytes / w.tp;
}

// The weights' extra bytes per GPU at the worst moment of loading, beside the kept weights.
//  - bitsandbytes (transformers' loader): one matrix staged in 16 bits as it is quantized (above).
//  - quantize_on_load, vLLM (--quantization fp8 and the other online methods): the model is created and
//    loaded at its checkpoint's precision and each layer is quantized after loading (vLLM docs,
//    features/quantization/fp8.md: "we load the model at original precision before quantizing down to
//    8-bits, so you need enough memory to load the whole model"; maintainer in vllm issue 4387). PRs
//    29196/31914 (0.13, January 2026) tried to stream it and PR 32773 reports 0.13 and 0.14 still peak
//    above bf16, so no release is modelled as streaming: the whole 16-bit share is resident.
//  - quantize_on_load, TensorRT-LLM: its quantize step (examples/quantization, hf_ptq.py/quantize.py)
//    loads the Hugging Face model with device_map="auto" in 16 bits over every GPU of the node, calibrates
//    it and exports the quantized checkpoint while it is resident: the 16-bit model and the quantized one
//    at once, over all the GPUs (maintainer, TensorRT-LLM issue 1331: 140 GB + 70 GB for Llama 70B FP8).
//  - quantize_on_load, other engines (transformers' quantizers): one matrix staged in 16 bits, as
//    bitsandbytes does (HfQuantizer.create_quantized_param quantizes parameter by parameter).
// A checkpoint loaded in the format it is stored in adds nothing: each tensor is copied into place.
double load_staging_bytes(const PreparedWorkload& p) {
  const Workload& w = p.workload;
  const WeightFormatInfo& f = weight_format_info(w.weights);
  const double largest_matrix = p.weights.largest_matrix_parameters / w.tp;
  if (f.family == FormatFamily::kBitsAndBytes) {
    const double staging = w.weights == WeightFormat::kLlmInt8 ? kBnbInt8LoadStagingBytes : kBnb4bitLoadStagingBytes;
    return largest_matrix * staging;
  }
  if (!w.quantize_on_load || !is_quantized(w.weights) || f.family == FormatFamily::kGguf) return 0;
  const WeightBytes w16 = model_weight_bytes(*w.model, WeightFormat::kBf16);
  switch (w.engine) {
    case Engine::kVllm:
      // The 16-bit share replaces the quantized one until the layers are processed.
      return std::max(0.0, per_gpu_weight_bytes(w, w16, p.layer_fraction) - p.weights_per_gpu_bytes);
    case Engine::kTensorrtLlm:
      // device_map="auto" spreads the 16-bit model over the node; the export adds the quantized copy.
      return std::max(
          0.0, (w16.total_bytes + p.weights.total_bytes) / static_cast<double>(w.gpus()) - p.weights_per_gpu_bytes);
    default:
      return largest_matrix * k16BitBytes;
  }
}

// Bytes per element of activations: the compute dtype.

bool is_training(Task t) { return t != Task::kInfer; }

double ceil_div(double a, double b) { return std::ceil(a / b); }

// Inference activation peak of the largest step (bytes per GPU).
struct InferAct {
  double tokens = 0;  // tokens in the largest forward step
  double mlp_bytes = 0;
  double attn_bytes = 0;
  double logits_bytes = 0;
  double dequant_bytes = 0;
  bool logits_after_layers = false;  // the logits of every token exist only once the layers are done
  double total() const {
    return logits_after_layers ? std::max(std::max(mlp_bytes, attn_bytes), logits_bytes)
                               : std::max(mlp_bytes, attn_bytes) + logits_bytes;
  }
};

InferAct inference_activations(const PreparedWorkload& p, int64_t batch, int64_t context) {
  const Workload& w = p.workload;
  const Model& m = *w.model;
  InferAct a;
  const double e = p.activation_bytes;
  if (m.kind == ModelKind::kCnn) {
    // Input and output of the largest layer live at once.
    a.mlp_bytes = 2.0 * static_cast<double>(batch) * m.cnn_max_layer_elements_per_sample * e;
    return a;
  }
  const int64_t prompt = std::min<int64_t>(w.input_tokens > 0 ? w.input_tokens : context, context);
  double tokens = static_cast<double>(batch) * static_cast<double>(prompt);
  double seqs = static_cast<double>(batch);
  switch (w.engine) {
    case Engine::kVllm: {
      const int64_t chunk =
          w.max_num_batched_tokens > 0 ? w.max_num_batched_tokens : std::max<int64_t>(kVllmDefaultChunkTokens, 2048);
      tokens = static_cast<double>(chunk);  // the profiling run uses the whole chunk
      seqs = kVllmMaxNumSeqs;
      break;
    }
    case Engine::kSglang:
      // SGLang keeps the rest of the GPU for its largest step, one chunk of the chunked prefill, whatever
      // the requests are (the reserve of server_args.py is sized from chunked_prefill_size).
      tokens = static_cast<double>(w.max_num_batched_tokens > 0 ? w.max_num_batched_tokens : kSglangChunkTokens);
      break;
    case Engine::kTgi:
      // TGI's warm-up prefills its whole --max-batch-prefill-tokens budget before serving, whatever the
      // requests will be (router warmup: requests until the budget is filled).
      tokens = static_cast<double>(w.max_num_batched_tokens > 0 ? w.max_num_batched_tokens : kTgiPrefillTokens);
      break;
    case Engine::kLlamaCpp:
      tokens = std::min<double>(tokens, kLlamaCppUbatchTokens);
      break;
    case Engine::kTensorrtLlm:
      // TensorRT sizes the execution context for the engine's largest shape, max_num_tokens tokens with packed
      // (remove_input_padding) inputs, at build time (docs/source/reference/memory.md, "Activation size": "TensorRT
      // pre-computes the activation tensors memory requirement at build time ... by using the max tensor shape").
      if (w.max_num_batched_tokens > 0) tokens = static_cast<double>(w.max_num_batched_tokens);
      break;
    default:
      break;
  }
  a.tokens = tokens;
  const double tp = w.tp;
  const double h = static_cast<double>(m.hidden);
  const double experts = std::max<double>(1, static_cast<double>(m.experts_per_token));
  const double inner = static_cast<double>(m.intermediate) * experts / tp;
  // MLP: gated: act(gate), up and their product live at once (gate is freed after the activation);
  // plain: fc1 output and the activation's output. Plus residual, normed input and the block output.
  const double mlp_inner = m.gated_mlp ? 3.0 : 2.0;
  a.mlp_bytes = tokens * (mlp_inner * inner + 3.0 * h) * e;
  // Attention: q, k, v and the attention output per GPU, plus residual and normed input.
  const double qkv = static_cast<double>(m.heads * m.head_dim + kKvTensors * m.kv_heads * m.head_dim) / tp;
  a.attn_bytes = tokens * (qkv + h / tp + 2.0 * h) * e;
  // Eager attention materialises batch x heads x prompt x prompt scores (and softmax output); models
  // that upcast the softmax to fp32 (BLOOM, StarCoder) hold fp32 copies too (p.eager_inference).
  if (p.eager_inference && !kv_pool_at_startup(w.engine) && w.engine != Engine::kTgi) {
    const double score_bytes =
        p.eager_score_bytes > 0 ? p.eager_score_bytes : 2.0 * e + (m.eager_fp32_softmax ? 8.0 : 0.0);
    const double p2 = static_cast<double>(prompt) * static_cast<double>(prompt);
    a.attn_bytes += static_cast<double>(batch) * static_cast<double>(m.heads) / tp * p2 * score_bytes;
  }
  a.logits_bytes = seqs * static_cast<double>(m.vocab) * kInferLogitBytes;
  if (p.prompt_logit_bytes > 0) {
    // The head runs on every token of the step (AutoAWQ's fused model, called directly): the logits and the
    // final hidden states they come from, after the last layer has freed its activations.
    a.logits_bytes = tokens * (static_cast<double>(m.vocab) * p.prompt_logit_bytes + h * e);
    a.logits_after_layers = true;
  }
  if (w.engine == Engine::kTgi) {
    // The warm-up requests set prefill_logprobs: true, so the head runs on every prefill token, the
    // tensor-parallel head gathers the full vocabulary on each GPU, and log_softmax makes a second copy
    // (text-generation-inference router warmup and flash_causal_lm generate_token).
    a.logits_bytes = kTgiWarmupLogitCopies * tokens * static_cast<double>(m.vocab) * e;
  }
  // 4-bit kernels dequantize the weight they multiply to fp16 for prefill (bitsandbytes 4-bit,
  // AutoGPTQ exllama temp_dq, AutoAWQ for long inputs): one largest matrix per GPU.
  if (quantized_dequant(w.weights) && !kv_pool_at_startup(w.engine)) {
    a.dequant_bytes = p.weights.largest_matrix_parameters * 2.0 / tp;
  }
  return a;
}

// Training activations per GPU: Korthikanti et al. 2022 (arXiv 2205.05198) section 4, per layer
// s*b*h*(34 + 5*a*s/h) bytes for a GPT block in 16-bit, rederived per tensor so that GQA, gated MLPs of
// any width, RMSNorm's fp32 upcast, flash attention and no dropout are counted as they are.
struct TrainAct {
  double per_layer_bytes = 0;  // without recomputation
  double layer_input_bytes = 0;
  double score_bytes = 0;  // the s^2 part of per_layer_bytes
  double logits_bytes = 0;
  double cast_copy_bytes = 0;  // autocast's 16-bit weight copies held for backward
  double offloaded_bytes = 0;  // saved activations copied to host memory (activation offloading)
  double cache_bytes = 0;      // K and V every layer returns under use_cache, held until forward ends
  double total = 0;
};

// Chunks of the logits the training loss works on: as the workload says, else the engine's default
// (torchtune's CEWithChunkedOutputLoss for the pytorch profile, the whole logits elsewhere).
double loss_chunks(const Workload& w) {
  if (w.loss_chunks > 0) return w.loss_chunks;
  return w.engine == Engine::kPytorch ? kTorchtuneLogitChunks : 1.0;
}

// Activation offloading (torchtune enable_activation_offloading / OffloadActivations, Answer.AI
// fsdp_qlora use_activation_cpu_offload): every saved tensor a layer keeps for backward is copied to
// pinned host memory, so the GPU keeps kOffloadResidentLayers layers' worth of what checkpointing leaves
// (the layer inputs with full recomputation, every saved activation without); the loss's buffers and the
// recomputed layer stay on the GPU. Returns the bytes that stay; `offloaded` gets those moved.
double offload_layers(double layers, double per_layer_bytes, double& offloaded) {
  const double resident = std::min(layers, kOffloadResidentLayers);
  offloaded = (layers - resident) * per_layer_bytes;
  return resident * per_layer_bytes;
}

TrainAct training_activations(const PreparedWorkload& p, int64_t batch, int64_t seq) {
  const Workload& w = p.workload;
  const Model& m = *w.model;
  TrainAct t;
  const double e = p.activation_bytes;
  const double b = static_cast<double>(batch);
  if (m.kind == ModelKind::kCnn) {
    // Every layer output is kept for the backward pass.
    t.total = b * m.cnn_activation_elements_per_sample * e;
    return t;
  }
  const double s = static_cast<double>(seq);
  const double n = b * s;
  const double tp = w.tp;
  const double h = static_cast<double>(m.hidden);
  const double q = static_cast<double>(m.heads * m.head_dim);
  const double kv = static_cast<double>(m.kv_heads * m.head_dim);
  const double experts = std::max<double>(1, static_cast<double>(m.experts_per_token));
  const double inner = static_cast<double>(m.intermediate) * experts;
  // Norms: RMSNorm in transformers saves its fp32 upcast input; LayerNorm its 16-bit input.
  const bool rms = p.rms_norm;
  // The residual stream: 16-bit, except after PEFT's k-bit preparation, whose fp32 embedding makes every
  // residual add fp32 (bf16 projection outputs promote to the fp32 residual); the norms then read fp32
  // and need no upcast copy.
  const double stream = p.kbit_upcast || w.amp != Amp::kNone ? kFp32Bytes : e;
  const double norm_saved = stream > e ? stream : (rms ? e + 4.0 : e);
  const double norms = (m.parallel_attn ? 1.0 : 2.0) * h * norm_saved;
  // Attention: normed input (shared by q, k, v), q, k, v, attention output (input of o_proj).
  const double attn = (h + (q + 2.0 * kv + q) / tp) * e;
  // MLP: normed input, then gated: gate, up, act(gate), product; plain: fc1 output, activation output.
  // Autograd saves a linear layer's input only when its weight needs a gradient: with LoRA the input
  // of a frozen, untargeted down projection (the gated product / activation output) is not kept.
  const bool adapters = w.task == Task::kLora || w.task == Task::kQlora;
  const double down_input = adapters && !(w.lora_targets & kLoraDown) ? 0.0 : 1.0;
  const double mlp_in = adapters && !(w.lora_targets & (kLoraGate | kLoraUp)) ? 0.0 : h;
  const double mlp = (mlp_in + ((m.gated_mlp ? 3.0 : 1.0) + down_input) * inner / tp) * e;
  // Dropout (training applies the config's probabilities): each dropout saves a 1-byte mask; on the
  // residual branches that is all (the add after it saves nothing), after the attention and MLP
  // output projections (one shared branch for parallel attention).
  const double residual_masks = m.hidden_dropout > 0 ? (m.parallel_attn ? 1.0 : 2.0) * h / tp * kDropoutMaskBytes : 0.0;
  // LoRA dropout (PEFT, torchtune: one nn.Dropout per targeted module when lora_dropout > 0): each
  // target keeps its own dropped copy of its input for lora_A's weight gradient, and the mask.
  double lora_dropout = 0;
  if (adapters && w.lora_dropout > 0) {
    const double in_dims[] = {h, h, h, q / tp, h, h, inner / tp};  // q, k, v, o, gate, up, down inputs
    for (int i = 0; i < 7; ++i) {
      if (w.lora_targets & (1u << i)) lora_dropout += in_dims[i] * (e + kDropoutMaskBytes);
    }
  }
  // bitsandbytes' 4-bit matmul keeps its input for backward whenever an input needs a gradient
  // (bitsandbytes autograd/_functions.py MatMul4Bit.forward: `if any(ctx.needs_input_grad[:2]):
  // ctx.tensors = (A, B)`), though its backward needs only B: every frozen base linear of QLoRA keeps its
  // input. Beyond what the layer keeps anyway: o_proj's input (the attention output reshaped, a copy),
  // and the MLP's inputs the frozen up and down projections would not keep (mlp_in, down_input above).
  double bnb_inputs = 0;
  if (w.task == Task::kQlora && !w.qlora_torchao &&
      weight_format_info(w.weights).family == FormatFamily::kBitsAndBytes && w.weights != WeightFormat::kLlmInt8) {
    bnb_inputs = (q / tp + (h - mlp_in) + (1.0 - down_input) * inner / tp) * e;
  }
  t.per_layer_bytes = n * (norms + attn + mlp + residual_masks + lora_dropout + bnb_inputs);
  if (p.eager_training) {
    // Softmax output (kept for its backward), fp32 copies where the model upcasts, and with dropout on
    // the probabilities its mask and output (the input of probs x V). Flash/SDPA kernels regenerate
    // dropout from the RNG state and keep no s^2 tensors.
    const double dropout_bytes = m.attention_dropout > 0 ? kDropoutMaskBytes + e : 0.0;
    // Autocast runs softmax in fp32 (its fp32-op list), like models that upcast it themselves.
    const bool fp32_softmax = m.eager_fp32_softmax || w.amp != Amp::kNone;
    t.score_bytes = b * static_cast<double>(m.heads) / tp * s * s * (e + (fp32_softmax ? 4.0 : 0.0) + dropout_bytes);
    t.per_layer_bytes += t.score_bytes;
  }
  t.layer_input_bytes = n * h * stream;
  const double layers = static_cast<double>(m.layers);
  // The 16-bit logits stay whole; the fp32 upcast, log-softmax and their gradients exist one chunk at a time.
  const double logit_bytes = k16BitBytes + (kTrainLogitBytes - k16BitBytes) / loss_chunks(w);
  t.logits_bytes = m.kind == ModelKind::kDecoder ? n * static_cast<double>(m.vocab) * logit_bytes / tp : 0;
  // The live set at the worst moment. Without full recomputation every layer's activations are held
  // when the loss's backward runs. With it only the layer inputs stay; the loss's buffers are freed
  // before the first layer is recomputed, so the one recomputed layer and the logits never coexist.
  // Pipeline 1F1B: the first stage holds pp micro-batches of its L/pp layers = L layers' worth.
  // Autocast keeps a 16-bit copy of every weight a matmul used until that matmul's backward: the whole
  // model's matrices at the start of backward, one layer's with full recomputation (the forward keeps
  // nothing; the recomputed layer casts again).
  if (w.amp != Amp::kNone) {
    const double matrices = static_cast<double>(m.linear_parameters()) / tp * p.layer_fraction;
    const double head = m.kind == ModelKind::kDecoder ? static_cast<double>(m.vocab) * h / tp : 0.0;
    t.cast_copy_bytes =
        kAutocastCopyBytes * (w.checkpointing == Checkpointing::kFull ? matrices / layers : matrices + head);
  }
  // What each layer keeps until its backward, by checkpointing; activation offloading moves all but
  // kOffloadResidentLayers layers' worth of it to the host.
  const double kept_per_layer = w.checkpointing == Checkpointing::kFull        ? t.layer_input_bytes
                                : w.checkpointing == Checkpointing::kSelective ? t.per_layer_bytes - t.score_bytes
                                                                               : t.per_layer_bytes;
  const double kept =
      w.activation_offload ? offload_layers(layers, kept_per_layer, t.offloaded_bytes) : layers * kept_per_layer;
  t.total = w.checkpointing == Checkpointing::kFull ? kept + std::max(t.per_layer_bytes, t.logits_bytes)
                                                    : kept + t.logits_bytes;
  // transformers with use_cache=True in training (the config's default; only transformers' own gradient
  // checkpointing turns it off, modeling_llama.py "`use_cache=True` is incompatible with gradient
  // checkpointing"): each decoder layer returns its K and V (present_key_value, later a DynamicCache) and the
  // model holds them until its forward returns. Without recomputation they are the very tensors attention
  // saves for backward; under a checkpoint wrapper that is not transformers' own (FSDP
  // apply_activation_checkpointing in llama-recipes before its PR 165, which measured "~4 GB" on LLaMA-7B)
  // they are extra, held beside the layer inputs while the head and the loss run at the end of forward.
  if (w.use_cache && w.checkpointing == Checkpointing::kFull && m.kind == ModelKind::kDecoder) {
    t.cache_bytes = b * m.kv_elements(seq) * e / tp * p.layer_fraction;
    t.total = std::max(t.total, kept + t.cache_bytes + t.logits_bytes);
  }
  t.total += t.cast_copy_bytes;
  return t;
}

}  // namespace

double MemoryBreakdown::allocated_bytes() const {
  return total_bytes - cuda_context_bytes - allocator_slack_bytes - communication_bytes;
}
double MemoryBreakdown::reserved_bytes() const { return total_bytes - cuda_context_bytes - communication_bytes; }

Result<PreparedWorkload> prepare(const Workload& requested) {
  if (!requested.model) return usage_error("the workload has no model", "model");
  PreparedWorkload p;
  p.workload = requested;
  // An engine without a memory profile of its own is sized with the one it borrows (engine table).
  p.rules_engine = rules_engine(requested.engine, requested.task);
  p.workload.engine = memory_engine(requested.engine);
  const Workload& w = p.workload;
  const Model& m = *w.model;
  p.activation_bytes = activation_element_bytes(w);
  // BLOOM has no SDPA path in transformers.
  p.eager_inference = !w.flash_attention || (w.engine == Engine::kTransformers && m.architecture == "bloom");
  p.eager_training = !w.flash_attention || m.architecture == "bloom";
  if (requested.engine == Engine::kAutoawq && !is_training(w.task)) {
    // WindowedCache (awq/modules/fused/cache.py) allocates each layer's k and v with torch.zeros((batch,
    // max_seq_len, kv_heads, head_dim), float16) when the model is fused, and rolls it past max_seq_len:
    // the whole cache exists from load; `context` is max_seq_len.
    p.preallocated_kv = true;
    const bool llama_like = m.architecture == "llama" || m.architecture == "mistral" || m.architecture == "qwen2";
    const bool before_sdpa = version_before(requested.engine_version, kAutoawqSdpaSince);
    if (!llama_like || before_sdpa) {
      p.eager_inference = true;
      p.eager_score_bytes = kAutoawqEagerScoreBytes;
    }
    // The fused LlamaLikeModel returns every position and the transformers head turns each into logits (fp16),
    // upcast to fp32 by the transformers of the releases before 0.2.7.
    p.prompt_logit_bytes = k16BitBytes + (before_sdpa ? kFp32Bytes : 0.0);
  }
  if (requested.engine == Engine::kTransformers && !is_training(w.task) && m.kind == ModelKind::kDecoder &&
      transformers_llama_like(m) && requested.engine_version.given) {
    // A release before 4.45 computes the logits of every prompt token (fp16 + fp32 upcast); before 4.36 the
    // attention is eager. No release given: today's transformers (last position only, SDPA).
    if (version_before(requested.engine_version, kTransformersLastLogitSince)) {
      p.prompt_logit_bytes = k16BitBytes + kFp32Bytes;
    }
    if (version_before(requested.engine_version, kTransformersSdpaSince)) p.eager_inference = true;
    p.kv_concat_copy = version_before(requested.engine_version, kTransformersSingleCacheSince);
  }
  if (requested.engine == Engine::kTransformers && p.eager_inference && transformers_llama_like(m)) {
    p.eager_score_bytes = kTransformersLlamaEagerScoreBytes;
  }
  p.rms_norm = m.architecture != "falcon" && m.architecture != "bloom" && m.architecture != "gpt_bigcode" &&
               m.architecture != "gptj" && m.architecture != "opt" && m.architecture != "bert" &&
               m.architecture != "gpt2";
  p.kbit_upcast = peft_kbit_upcast(w);
  p.weights = model_weight_bytes(m, w.weights, w.group_size);
  if (p.kbit_upcast) {
    // PEFT's prepare_model_for_kbit_training (TRL's SFTTrainer calls it for k-bit models) casts every
    // fp16/bf16 parameter that is not a Params4bit to fp32: embeddings, head, norms, biases. For
    // bitsandbytes formats everything outside the quantized matrices is such a parameter.
    const double factor = kFp32Bytes / weight_format_info(w.weights).unquantized_bytes;
    const double added = p.weights.other_bytes * (factor - 1.0);
    p.weights.other_bytes += added;
    p.weights.total_bytes += added;
    p.weights.active_bytes += added;
    p.weights.non_layer_bytes *= factor;
    p.weights.largest_edge_bytes *= factor;
  }
  const double tp = w.tp, pp = w.pp;
  // Pipeline stages hold ceil(L/pp) layers; the stage with the embedding (or head) holds it too.
  if (m.layers > 0 && w.pp > 1) {
    p.layer_fraction = ceil_div(static_cast<double>(m.layers), pp) / static_cast<double>(m.layers);
  }
  p.weights_per_gpu_bytes = per_gpu_weight_bytes(w, p.weights, p.layer_fraction);
  // Inference here: training loaders shard (ZeRO-3, FSDP) or stage one matrix while states dwarf both
  // (torchao 0.1's whole-matrix NF4 quantization, below, is the exception).
  if (!is_training(w.task)) {
    p.load_peak_bytes = outside_torch_bytes(w.engine) + p.weights_per_gpu_bytes + load_staging_bytes(p);
  }
  p.active_weights_per_gpu_bytes =
      p.weights.total_bytes > 0 ? p.weights_per_gpu_bytes * p.weights.active_bytes / p.weights.total_bytes : 0;
  // KV per token per GPU: each GPU holds ceil(kv_heads / tp) heads (replicated when kv_heads < tp).
  const double kv_b = kv_bytes_per_element(w.kv_cache);
  p.bound_windows = !(w.engine == Engine::kTransformers || w.engine == Engine::kPytorch) || m.architecture == "gemma2";
  for (const auto& a : m.attention) {
    const double heads_gpu = std::ceil(static_cast<double>(a.kv_heads) / tp);
    const double per_token = kKvTensors * heads_gpu * static_cast<double>(a.head_dim) * kv_b * p.layer_fraction;
    p.kv_full_bytes_per_token += per_token;
    if (a.window_tokens <= 0 || !p.bound_windows) {
      p.kv_global_bytes_per_token += per_token;
      continue;
    }
    int i = 0;
    while (i < p.window_count && p.windows[i].tokens != a.window_tokens) ++i;
    if (i == p.window_count) {
      if (p.window_count ==
          static_cast<int>(std::size(p.windows))) {  // more distinct windows than slots: count as global (conservative)
        p.kv_global_bytes_per_token += per_token;
        continue;
      }
      p.windows[p.window_count++] = PreparedWorkload::Window{a.window_tokens, 0};
    }
    p.windows[i].bytes_per_token += per_token;
  }
  if (w.task == Task::kTrain) {
    // A pipeline stage trains its own layers (the embedding/head share is folded into layer_fraction).
    p.trainable_parameters_per_gpu = static_cast<double>(m.parameters) / tp * (w.pp > 1 ? p.layer_fraction : 1.0);
  }
  if (w.task == Task::kLora || w.task == Task::kQlora) {
    p.adapter_parameters = lora_parameters(m, w.lora_targets, w.lora_rank) / tp * (w.pp > 1 ? p.layer_fraction : 1.0);
  }
  if (is_training(w.task) && torchao_whole_tensor_nf4(w)) {
    // Loading peaks while the largest base matrix is quantized, with the NF4 weights and the bf16 adapters
    // in place (torchtune builds the LoRA modules before it loads the checkpoint).
    p.load_transient_bytes = p.weights.largest_matrix_parameters / tp * kTorchaoWholeTensorNf4Bytes;
    p.load_peak_bytes = outside_torch_bytes(w.engine) + p.weights_per_gpu_bytes + p.adapter_parameters * k16BitBytes +
                        p.load_transient_bytes;
  }
  // Results count bytes in 64-bit integers: a workload whose own memory is beyond 2^53 bytes (8 PiB per
  // GPU, 50,000x an H200; where doubles stop counting bytes exactly) has no answer to print.
  constexpr double kMaxMemoryBytes = 9007199254740992.0;  // 2^53
  const double total = estimate_memory(p).total_bytes;
  if (!std::isfinite(total) || total > kMaxMemoryBytes) {
    return usage_error("the workload needs " + std::to_string(total / kBytesPerGib) +
                           " GiB per GPU, over the bound of 2^53 bytes (8 PiB) gpuplan can count; lower --batch or "
                           "--context (batch " +
                           std::to_string(w.batch) + ", context " + std::to_string(w.context) + ")",
                       "context");
  }
  return p;
}

double kv_bytes_per_sequence(const PreparedWorkload& p, int64_t tokens) {
  double b = p.kv_global_bytes_per_token * static_cast<double>(tokens);
  for (int i = 0; i < p.window_count; ++i) {
    b += p.windows[i].bytes_per_token * static_cast<double>(std::min(tokens, p.windows[i].tokens));
  }
  return b;
}

namespace {

// FSDP / ZeRO-3 gather one layer's full weights and prefetch the next.
double zero3_gather_bytes(const PreparedWorkload& p) {
  const double layers = std::max<double>(1, static_cast<double>(p.workload.model->layers));
  return kZero3GatheredLayers * (p.weights_per_gpu_bytes / layers);
}

// Buffers of data-parallel training that PyTorch's caching allocator holds, so that they count in
// torch.cuda.max_memory_allocated/reserved like any tensor (unlike NCCL's own buffers): FSDP's unsharded
// parameters (FSDP1 FlatParamHandle and FSDP2 all-gather outputs are torch.empty tensors; DeepSpeed
// ZeRO-3 gathers into torch tensors too) and DDP's gradient buckets (the Reducer's bucket tensors).
void add_allocator_communication(MemoryBreakdown& r, double bytes) { r.workspace_bytes += bytes; }

// Inference: KV cache (paged for vLLM), activations of the prefill or the decode step, and the runtime
// around them; the total is the live set at its peak.
void add_inference(const PreparedWorkload& p, int64_t batch, int64_t context, MemoryBreakdown& r) {
  const Workload& w = p.workload;
  const Model& m = *w.model;
  const double b = static_cast<double>(batch);
  const int64_t prompt = std::min<int64_t>(w.input_tokens > 0 ? w.input_tokens : context, context);
  if (m.kind == ModelKind::kDecoder) {
    double kv_tokens_bytes = kv_bytes_per_sequence(p, context);
    if (w.engine == Engine::kVllm) {
      // Paged: whole blocks of 16 tokens per sequence.
      const int64_t blocks = (context + kVllmBlockTokens - 1) / kVllmBlockTokens;
      kv_tokens_bytes = kv_bytes_per_sequence(p, blocks * kVllmBlockTokens);
    }
    r.kv_cache_bytes = b * kv_tokens_bytes;
  }
  const InferAct act = inference_activations(p, batch, context);
  r.activations_bytes = act.total();
  r.workspace_bytes += act.dequant_bytes;
  if (kv_pool_at_startup(w.engine)) {
    // vLLM allocates the KV pool once (no slack); the profile run's activations are freed. SGLang too
    // allocates its pool at start-up; its largest step is a prefill chunk.
    r.allocator_slack_bytes = kAllocatorSlackFraction * r.activations_bytes;
    r.runtime_overhead_bytes =
        r.cuda_context_bytes + r.workspace_bytes + r.communication_bytes + r.allocator_slack_bytes;
    r.total_bytes = r.weights_bytes + r.kv_cache_bytes + r.activations_bytes + r.runtime_overhead_bytes;
    return;
  }
  // The live set peaks either at prefill (prompt KV + prefill activations) or at the end of
  // generation (full KV + one decode step).
  // AutoAWQ's fused modules hold the whole cache (batch x context) from load.
  const double kv_prompt = m.kind != ModelKind::kDecoder ? 0
                           : p.preallocated_kv           ? r.kv_cache_bytes
                                                         : b * kv_bytes_per_sequence(p, prompt);
  const double at_prefill = kv_prompt + r.activations_bytes;
  const InferAct decode = m.kind == ModelKind::kDecoder ? inference_activations(p, batch, 1) : act;
  // transformers before 4.42 holds the previous step's cache beside the new one once a decode step runs, and the
  // second step still holds the first step's fp32 logits of every prompt token (kTransformersSingleCacheSince).
  const bool decodes = p.kv_concat_copy && m.kind == ModelKind::kDecoder && context - prompt >= 2;
  const double old_kv = decodes ? b * kv_bytes_per_sequence(p, context - 1) : 0.0;
  const double at_end = r.kv_cache_bytes + old_kv + decode.total();
  const double leaked_logits =
      p.prompt_logit_bytes > 0 ? b * static_cast<double>(prompt) * static_cast<double>(m.vocab) * kFp32Bytes : 0.0;
  const double at_second = decodes ? b * (kv_bytes_per_sequence(p, prompt) + kv_bytes_per_sequence(p, prompt + 1)) +
                                         leaked_logits + decode.total()
                                   : 0.0;
  const double dynamic = std::max({at_prefill, at_end, at_second});
  r.allocator_slack_bytes = kAllocatorSlackFraction * dynamic;
  r.runtime_overhead_bytes = r.cuda_context_bytes + r.workspace_bytes + r.communication_bytes + r.allocator_slack_bytes;
  r.total_bytes = r.weights_bytes + dynamic + r.runtime_overhead_bytes;
}

// Full training: optimizer states, gradients and weights sharded by the ZeRO stage, communication
// buffers; returns the optimizer step's temporary bytes. A paged optimizer's states go to host_bytes.
double add_full_training(const PreparedWorkload& p, MemoryBreakdown& r) {
  const Workload& w = p.workload;
  const double dp = w.data_parallel();
  const double param_bytes = w.weights == WeightFormat::kFp32 ? kFp32Bytes : k16BitBytes;
  const double params = p.trainable_parameters_per_gpu;
  const bool mixed = w.weights != WeightFormat::kFp32 && w.master_weights;
  const double optimizer_shards = w.zero >= 1 ? dp : 1.0;
  const double state_bytes =
      params * optimizer_state_bytes(w.optimizer, mixed ? kFp32Bytes : param_bytes) / optimizer_shards;
  double fp32_copies = mixed ? kMasterWeightBytes : 0.0;
  if (w.engine == Engine::kDeepspeed && w.zero >= 1 && mixed) fp32_copies += kDeepSpeedFp32GradBytes;
  r.optimizer_bytes = params * fp32_copies / optimizer_shards;
  if (paged_optimizer(w.optimizer)) {
    r.host_bytes += state_bytes;
  } else {
    r.optimizer_bytes += state_bytes;
  }
  // FSDP1's no_sync keeps every unit's gradient unsharded between micro-batches (fsdp_no_sync).
  r.gradients_bytes = params * param_bytes / (w.zero >= 2 && !w.fsdp_no_sync ? dp : 1.0);
  if (w.zero >= 3) {
    r.weights_bytes /= dp;
    add_allocator_communication(r, zero3_gather_bytes(p));
  } else if (dp > 1) {
    // DDP gradient buckets hold a second copy of the gradients.
    add_allocator_communication(r, r.gradients_bytes);
  }
  const bool foreach_adam =
      w.optimizer == Optimizer::kAdamw && (w.engine == Engine::kTransformers || w.engine == Engine::kPytorch);
  return foreach_adam ? params * kForeachAdamTempBytes / optimizer_shards : 0;
}

// LoRA / QLoRA: the adapters, their gradients and optimizer states, a dequantized base matrix at a
// time; returns the optimizer step's temporary bytes.
double add_adapter_training(const PreparedWorkload& p, MemoryBreakdown& r) {
  const Workload& w = p.workload;
  // PEFT keeps the adapters in fp32 (autocast_adapter_dtype), torchtune in the model's bf16, and the
  // optimizer steps them in their own dtype.
  const bool bf16_adapters = w.engine == Engine::kPytorch;
  const double a_bytes = bf16_adapters ? k16BitBytes : kFp32Bytes;
  r.adapter_bytes = p.adapter_parameters * a_bytes;
  r.gradients_bytes = p.adapter_parameters * a_bytes;
  if (w.fsdp_mixed_units) {
    // FSDP1 with use_orig_params flattens a block's frozen base and its adapters into one FlatParameter, and
    // the flat gradient covers all of it (torch/distributed/fsdp/_wrap_utils.py _validate_frozen_params: "the
    // gradient memory usage will be higher than expected (<all> numel instead of <trained> numel before
    // sharding via reduce-scatter)"), in the base's 16-bit dtype; reduce-scatter leaves each GPU its shard,
    // and under no_sync the whole unsharded gradient stays (FSDP1 no_sync, fsdp_no_sync).
    const double unit_params =
        static_cast<double>(w.model->linear_parameters()) / w.tp * p.layer_fraction + p.adapter_parameters;
    r.gradients_bytes = unit_params * k16BitBytes / (w.fsdp_no_sync ? 1.0 : w.data_parallel());
  }
  const double state_bytes = p.adapter_parameters * optimizer_state_bytes(w.optimizer, a_bytes);
  if (paged_optimizer(w.optimizer)) {
    r.host_bytes += state_bytes;
  } else {
    r.optimizer_bytes = state_bytes;
  }
  if (w.zero >= 3) {
    r.weights_bytes /= w.data_parallel();
    add_allocator_communication(r, zero3_gather_bytes(p));
  }
  // A 4-bit base is dequantized one matrix at a time, to 16 bits, for forward and backward.
  if (quantized_dequant(w.weights)) r.workspace_bytes += p.weights.largest_matrix_parameters * k16BitBytes / w.tp;
  return w.optimizer == Optimizer::kAdamw ? p.adapter_parameters * kForeachAdamTempBytes : 0;
}

// The largest single parameter a GPU trains, in elements: the embedding or the head (vocab x hidden)
// in decoders, else the largest matrix; sharded by ZeRO-3/FSDP and split by tensor parallelism.
double largest_trained_parameter(const PreparedWorkload& p) {
  const Workload& w = p.workload;
  const Model& m = *w.model;
  const double edge = m.kind == ModelKind::kCnn ? 0.0 : static_cast<double>(m.vocab) * static_cast<double>(m.hidden);
  const double largest = std::max(p.weights.largest_matrix_parameters, edge) / w.tp;
  return w.zero >= 3 ? largest / w.data_parallel() : largest;
}

// Optimizer step in backward (torchtune optimizer_in_bwd; PyTorch tutorial "How to save memory by fusing
// the optimizer step into the backward pass"): a post-accumulate-grad hook steps each parameter as soon
// as its gradient is complete and frees it (zero_grad set_to_none), so no gradient buffer of the whole
// model exists. The live gradient is the largest single parameter's, and it appears while the
// activations are still held (the head's gradient comes first in backward). Full training only: the
// recipes that have it (torchtune full_finetune_*) train every weight. Returns the step's temporaries.
double apply_optimizer_in_backward(const PreparedWorkload& p, MemoryBreakdown& r) {
  const Workload& w = p.workload;
  const double param_bytes = w.weights == WeightFormat::kFp32 ? kFp32Bytes : k16BitBytes;
  const double largest = largest_trained_parameter(p);
  r.gradients_bytes = largest * param_bytes;
  // One optimizer per parameter: a foreach AdamW materialises sqrt(v) for that parameter only.
  const bool foreach_adam =
      w.optimizer == Optimizer::kAdamw && (w.engine == Engine::kTransformers || w.engine == Engine::kPytorch);
  return foreach_adam ? largest * kForeachAdamTempBytes : 0;
}

// FSDP CPU offload (torch.distributed.fsdp CPUOffload(offload_params=True); torchtune fsdp_cpu_offload):
// the sharded weights, gradients and optimizer states live in host memory and the optimizer steps on
// the CPU. The GPU holds the layers FSDP gathers (zero3_gather_bytes, already counted) and one layer's
// unsharded gradient before its reduce-scatter.
void apply_cpu_offload(const PreparedWorkload& p, MemoryBreakdown& r) {
  const Workload& w = p.workload;
  const double layers = std::max<double>(1, static_cast<double>(w.model->layers));
  r.host_bytes += r.weights_bytes + r.gradients_bytes + r.optimizer_bytes;
  r.weights_bytes = 0;
  r.optimizer_bytes = 0;
  const double param_bytes = w.weights == WeightFormat::kFp32 ? kFp32Bytes : k16BitBytes;
  r.gradients_bytes = w.task == Task::kTrain
                          ? kOffloadGradientLayers * p.trainable_parameters_per_gpu / layers * param_bytes
                          : r.gradients_bytes;
}

}  // namespace

MemoryBreakdown estimate_memory(const PreparedWorkload& p, int64_t batch, int64_t context, Link link) {
  const Workload& w = p.workload;
  if (batch < 0) batch = w.batch;
  if (context < 0) context = w.context;
  MemoryBreakdown r;
  // GPUs exchange activations (tp, pp) or gradients (data parallel training); inference replicas
  // (count > tp x pp) do not talk.
  const bool multi = w.tp * w.pp > 1 || (is_training(w.task) && w.gpus() > 1);
  r.cuda_context_bytes = outside_torch_bytes(w.engine);
  r.communication_bytes = multi ? communication_bytes(w, link) : 0;
  r.workspace_bytes = kCublasWorkspaceBytes;
  r.weights_bytes = p.weights_per_gpu_bytes;
  r.load_peak_bytes = p.load_peak_bytes;
  if (!is_training(w.task)) {
    add_inference(p, batch, context, r);
    return r;
  }
  const TrainAct act = training_activations(p, batch, context);
  r.activations_bytes = act.total;
  r.host_bytes += act.offloaded_bytes;
  double step_temp = w.task == Task::kTrain ? add_full_training(p, r) : add_adapter_training(p, r);
  // Peak: activations are freed layer by layer as gradients appear (zero_grad(set_to_none=True)), so
  // the worst moment is the start of backward or the optimizer step, whichever holds more. Recipes that
  // never hold the whole gradient (optimizer in backward, CPU offload) peak in backward, with the one
  // live gradient beside the activations.
  double at_backward = r.activations_bytes;
  double at_step = r.gradients_bytes + step_temp;
  if (w.cpu_offload) {
    apply_cpu_offload(p, r);
    step_temp = 0;  // the optimizer steps on the CPU
  } else if (w.optimizer_in_backward && w.task == Task::kTrain) {
    step_temp = apply_optimizer_in_backward(p, r);
  }
  if (w.cpu_offload || (w.optimizer_in_backward && w.task == Task::kTrain)) {
    at_backward = r.activations_bytes + r.gradients_bytes + step_temp;
    at_step = 0;
  } else if (w.fsdp_no_sync) {
    // Gradient accumulation inside FSDP1's no_sync (torch.distributed.fsdp FullyShardedDataParallel.no_sync:
    // gradients "accumulated ... in unsharded form", more memory; Lightning Fabric's no_backward_sync wraps it):
    // the unsharded gradients of the earlier micro-batches are held while the next one's activations are.
    at_backward = r.activations_bytes + r.gradients_bytes;
  }
  const double dynamic = std::max(at_backward, at_step);
  r.allocator_slack_bytes = kAllocatorSlackFraction * dynamic;
  r.runtime_overhead_bytes = r.cuda_context_bytes + r.workspace_bytes + r.communication_bytes + r.allocator_slack_bytes;
  r.total_bytes = r.weights_bytes + r.adapter_bytes + r.optimizer_bytes + dynamic + r.runtime_overhead_bytes;
  if (p.load_transient_bytes > 0) {
    // The caching allocator keeps the segments the load's transient took (torchtune's recipes call no
    // torch.cuda.empty_cache, and reset_peak_memory_stats after init resets the peaks to what is reserved
    // now): training's reserved memory never drops below the load's allocated peak plus its slack. The
    // allocated peak of training is unchanged.
    const double load_reserved =
        p.load_peak_bytes - r.cuda_context_bytes + kAllocatorSlackFraction * p.load_transient_bytes;
    const double extra = load_reserved - r.reserved_bytes();
    if (extra > 0) {
      r.allocator_slack_bytes += extra;
      r.runtime_overhead_bytes += extra;
      r.total_bytes += extra;
    }
  }
  return r;
}

MemorySweep::MemorySweep(const PreparedWorkload& p, Link link) : p_(p), link_(link) {
  const Workload& w = p_.workload;
  // add_inference's vLLM branch: the activations are the profile run's (the whole chunk, the maximum
  // number of sequences), whatever the batch and context; only the paged KV cache reads them.
  fast_ = !is_training(w.task) && w.engine == Engine::kVllm && w.model && w.model->kind == ModelKind::kDecoder;
  if (fast_) {
    const MemoryBreakdown m = estimate_memory(p_, 1, 1, link_);
    weights_bytes_ = m.weights_bytes;
    activations_bytes_ = m.activations_bytes;
    runtime_overhead_bytes_ = m.runtime_overhead_bytes;
  }
}

double MemorySweep::total_bytes(int64_t batch, int64_t prompt_tokens, int64_t context) {
  if (!fast_ || batch < 0 || context < 0) {
    p_.workload.input_tokens = prompt_tokens;
    return estimate_memory(p_, batch, context, link_).total_bytes;
  }
  const int64_t blocks = (context + kVllmBlockTokens - 1) / kVllmBlockTokens;
  const double kv_cache_bytes = static_cast<double>(batch) * kv_bytes_per_sequence(p_, blocks * kVllmBlockTokens);
  return weights_bytes_ + kv_cache_bytes + activations_bytes_ + runtime_overhead_bytes_;
}

bool kv_pool_at_startup(Engine e) { return e == Engine::kVllm || e == Engine::kSglang; }

double capacity_bytes(const Target& t) { return t.memory_total_bytes() * (1.0 - kDriverReserveFraction); }

double sglang_mem_fraction_static(const Workload& w, double gpu_total_bytes) {
  const EngineVersion& v = w.engine_version;
  const int tp = std::max(1, w.tp);
  if (version_before(v, kSglangGpuMemoryReserveSince)) {
    if (tp >= 16) return 0.79;
    if (tp >= 8) return version_before(v, kSglangTp8Fraction081Since) ? 0.83 : 0.81;
    if (tp >= 4) return 0.85;
    if (tp >= 2) return 0.87;
    return 0.88;
  }
  const double gpu_mib = gpu_total_bytes / kBytesPerMib;
  if (gpu_mib <= 0) return 0.88;  // SGLang's fallback when the capacity is unknown
  const double parallel = static_cast<double>(tp) * std::max(1, w.pp);
  double reserve_mib = 0;
  if (version_before(v, kSglangGeneralReserveSince)) {
    const double gib = gpu_mib < 35 * 1024.0    ? 2.8 + parallel / 10
                       : gpu_mib < 90 * 1024.0  ? 9.5 + parallel / 2
                       : gpu_mib < 160 * 1024.0 ? 12 + parallel / 2
                                                : 32;
    reserve_mib = gib * 1024;
  } else {
    const double chunk = gpu_mib < 35 * 1024.0 ? 2048 : gpu_mib < 160 * 1024.0 ? 8192 : 16384;
    const double graph_bs = gpu_mib < 35 * 1024.0 ? 24 : gpu_mib < 160 * 1024.0 ? 256 : 512;
    reserve_mib = 512 + 1.5 * std::max(chunk, 2048.0) + 2 * graph_bs + parallel / 8 * 1024;
    if (gpu_mib > 60 * 1024.0) reserve_mib = std::max(reserve_mib, 10 * 1024.0);
  }
  return std::round((gpu_mib - reserve_mib) / gpu_mib * 1000) / 1000;
}

namespace {

// SGLang: the CUDA context, mem_fraction_static of the memory free after it (weights, KV pool, buffers
// allocated at start-up), and the activations in the rest; activations larger than the rest eat into the
// fraction (SGLang would run out of memory at its first long prefill).
double sglang_limit(const PreparedWorkload& p, const Target& t, double capacity) {
  const MemoryBreakdown m = estimate_memory(p, 1, 1, t.link);
  const double free_at_start = std::max(0.0, capacity - m.cuda_context_bytes);
  const double fraction = sglang_mem_fraction_static(p.workload, t.memory_total_bytes());
  const double dynamic = m.activations_bytes + m.allocator_slack_bytes + m.workspace_bytes;
  return m.cuda_context_bytes + fraction * free_at_start + std::min(dynamic, (1.0 - fraction) * free_at_start);
}

double limit_for(const PreparedWorkload& p, const Target& t, double capacity) {
  if (p.workload.engine == Engine::kSglang) return sglang_limit(p, t, capacity);
  return p.workload.engine == Engine::kVllm ? capacity * p.workload.gpu_memory_utilization : capacity;
}

// Largest n in [lo, hi] with ok(n), given ok is monotone (true then false); 0 when ok(lo) fails.
template <typename F>
int64_t largest(int64_t lo, int64_t hi, F ok) {
  if (!ok(lo)) return 0;
  if (ok(hi)) return hi;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (ok(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

Refusal explain_refusal(RefusalCode code, const PreparedWorkload& p, const Target* t) {
  if (p.rules_engine == p.workload.engine) return explain_refusal(code, p.workload, t);
  Workload as = p.workload;  // copies a shared_ptr: for messages, not sweeps
  as.engine = p.rules_engine;
  return explain_refusal(code, as, t);
}

TargetFit fit_target(const PreparedWorkload& p, const Target& t) {
  const Workload& w = p.workload;
  TargetFit f;
  f.capacity_bytes = capacity_bytes(t);
  f.limit_bytes = limit_for(p, t, f.capacity_bytes);
  f.memory = estimate_memory(p, -1, -1, t.link);
  f.total_bytes = f.memory.total_bytes;
  f.headroom_bytes = f.limit_bytes - f.total_bytes;
  // Loading needs its peak of the whole GPU (before vLLM sizes its share): a model that cannot load
  // runs at no batch and no context.
  f.loads = p.load_peak_bytes <= f.capacity_bytes;
  f.fits = f.headroom_bytes >= 0 && f.loads;
  if (p.rules_engine == w.engine) {
    f.refusal = refusal_code(w, t);
  } else {
    Workload as = w;  // copies a shared_ptr, allocates nothing
    as.engine = p.rules_engine;
    f.refusal = refusal_code(as, t);
  }
  if (f.refusal || !f.loads) {
    // Nothing runs: no batch, no context, no pool.
    f.fits = false;
    return f;
  }
  const double limit = f.limit_bytes;
  if (w.engine == Engine::kVllm && w.model->kind == ModelKind::kDecoder) {
    // The pool vLLM hands the KV cache: its budget less weights, non-torch memory and the profile peak.
    const MemoryBreakdown& m = f.memory;
    f.kv_pool_bytes = std::max(0.0, limit - (m.total_bytes - m.kv_cache_bytes));
    const double block_bytes = p.kv_full_bytes_per_token * kVllmBlockTokens;
    const double blocks = block_bytes > 0 ? std::floor(f.kv_pool_bytes / block_bytes) : 0;
    f.kv_pool_tokens = static_cast<int64_t>(blocks) * kVllmBlockTokens;
  }
  if (w.engine == Engine::kSglang && w.model->kind == ModelKind::kDecoder) {
    // profile_max_num_token: what the fraction leaves after weights and start-up buffers, in tokens.
    const MemoryBreakdown& m = f.memory;
    f.kv_pool_bytes = std::max(0.0, limit - (m.total_bytes - m.kv_cache_bytes));
    f.kv_pool_tokens = p.kv_full_bytes_per_token > 0
                           ? static_cast<int64_t>(std::floor(f.kv_pool_bytes / p.kv_full_bytes_per_token))
                           : 0;
  }
  if (w.engine == Engine::kTensorrtLlm && w.model->kind == ModelKind::kDecoder) {
    // kv_cache_free_gpu_mem_fraction (gpu_memory_utilization) of what loading leaves free, in whole blocks. No
    // caching-allocator slack: the runtime allocates its buffers and the pool once, through its own buffer
    // manager (cudaMallocAsync, tensorrt_llm/runtime/tllmBuffers.h, in the trace of TensorRT-LLM issue 401).
    const MemoryBreakdown& m = f.memory;
    const double loaded = m.total_bytes - m.kv_cache_bytes - m.allocator_slack_bytes;
    const double free_after_load = std::max(0.0, f.capacity_bytes - loaded);
    const double pool = w.gpu_memory_utilization * free_after_load;
    const double block_bytes = p.kv_full_bytes_per_token * kTensorrtLlmBlockTokens;
    const double blocks = block_bytes > 0 ? std::floor(pool / block_bytes) : 0;
    f.kv_pool_bytes = blocks * block_bytes;
    f.kv_pool_tokens = static_cast<int64_t>(blocks) * kTensorrtLlmBlockTokens;
  }
  const int64_t max_positions = w.model->max_positions > 0 ? w.model->max_positions : (int64_t{1} << 24);
  if (w.model->kind == ModelKind::kCnn) {
    f.max_context = 0;
  } else {
    f.max_context = largest(1, max_positions,
                            [&](int64_t c) { return estimate_memory(p, w.batch, c, t.link).total_bytes <= limit; });
  }
  f.max_batch = largest(1, int64_t{1} << 20,
                        [&](int64_t b) { return estimate_memory(p, b, w.context, t.link).total_bytes <= limit; });
  return f;
}

std::string format_gib(double bytes) {
  // Rounds half away from zero (3.125 GiB prints as 3.13), as people round by hand.
  char buf[48];
  const double g = bytes_to_gib(bytes);
  if (std::fabs(g) >= 100)
    std::snprintf(buf, sizeof buf, "%.1f GiB", round_to(g, 1));
  else if (std::fabs(g) >= 0.1 || g == 0)
    std::snprintf(buf, sizeof buf, "%.2f GiB", round_to(g, 2));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", round_to(bytes_to_mib(bytes), 1));
  return buf;
}

namespace {
std::string num(double v) {
  char buf[48];
  if (v == std::floor(v) && std::fabs(v) < kExactIntegerLimit)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}
std::string billions(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3gB", v / kParametersPerBillion);
  return v >= kParametersPerBillion / 10 ? std::string(buf) : num(v);  // from 0.1B on, in billions
}
}  // namespace

std::vector<MemoryLine> explain_memory(const PreparedWorkload& p, const MemoryBreakdown& m) {
  const Workload& w = p.workload;
  const Model& md = *w.model;
  std::vector<MemoryLine> out;
  const WeightFormatInfo& fi = weight_format_info(w.weights);
  const std::string split =
      (w.tp > 1 ? " / tp " + std::to_string(w.tp) : std::string()) +
      (w.pp > 1 ? ", pipeline stage of " + num(std::ceil(static_cast<double>(md.layers) / w.pp)) + " layers + embedding"
                : std::string());
  std::string wexp = "Weights (" + std::string(fi.name) + "): ";
  if (is_quantized(w.weights)) {
    wexp +=
        billions(p.weights.quantized_parameters) + " quantized params x " +
        num(std::round(p.weights.quantized_bytes * 8 / std::max(1.0, p.weights.quantized_parameters) * 1000) / 1000) +
        " bits + " + billions(p.weights.other_parameters) + " kept unquantized" +
        (peft_kbit_upcast(w) ? " (in fp32: PEFT's k-bit preparation)" : "") + " = " + format_gib(p.weights.total_bytes);
  } else {
    wexp += billions(static_cast<double>(md.parameters)) + " params x " + num(fi.unquantized_bytes) +
            " B = " + format_gib(p.weights.total_bytes);
  }
  if (w.tp > 1 || w.pp > 1) wexp += split + " = " + format_gib(p.weights_per_gpu_bytes) + " per GPU";
  if (w.zero >= 3 && w.task != Task::kInfer) {
    wexp += ", sharded over " + num(w.data_parallel()) + " GPUs (ZeRO-3) = " + format_gib(m.weights_bytes) + " per GPU";
  }
  out.push_back({"weights_bytes", m.weights_bytes, wexp});

  if (md.kind == ModelKind::kDecoder && w.task == Task::kInfer) {
    const int64_t kvh = static_cast<int64_t>(std::ceil(static_cast<double>(md.kv_heads) / w.tp));
    const double stage_layers = std::ceil(static_cast<double>(md.layers) * p.layer_fraction - kCeilSlack);
    std::string kexp = "KV cache: 2 x " + num(stage_layers) + " layers x " + num(static_cast<double>(kvh)) +
                       " KV heads x " + num(static_cast<double>(md.head_dim)) + " x " +
                       num(kv_bytes_per_element(w.kv_cache)) + " B x " + num(static_cast<double>(w.context)) +
                       " tokens x batch " + num(static_cast<double>(w.batch));
    if (p.window_count > 0)
      kexp += " (sliding-window layers hold at most their window)";
    else if (!md.attention.empty() && md.attention[0].window_tokens > 0 && !p.bound_windows)
      kexp += " (this engine keeps the full sequence even in sliding-window layers)";
    if (w.engine == Engine::kVllm) kexp += ", in blocks of " + std::to_string(kVllmBlockTokens) + " tokens";
    kexp += " = " + format_gib(m.kv_cache_bytes);
    out.push_back({"kv_cache_bytes", m.kv_cache_bytes, kexp});
  }
  std::string aexp;
  if (w.task == Task::kInfer && md.kind == ModelKind::kCnn) {
    aexp = "Activations: input and output of the largest layer, " + num(md.cnn_max_layer_elements_per_sample) +
           " elements per sample x 2 x batch " + num(static_cast<double>(w.batch)) + " x " +
           num(activation_element_bytes(w)) + " B = " + format_gib(m.activations_bytes);
  } else if (w.task == Task::kInfer) {
    const InferAct a = inference_activations(p, w.batch, w.context);
    const std::string step = "largest step " + num(a.tokens) + " tokens x (" + (md.gated_mlp ? "3" : "2") + " x " +
                             num(static_cast<double>(md.intermediate)) + " MLP + 3 x " +
                             num(static_cast<double>(md.hidden)) + " hidden) x " + num(activation_element_bytes(w)) +
                             " B" + (w.tp > 1 ? " (MLP / tp)" : "");
    if (a.logits_after_layers) {
      aexp = std::string(p.preallocated_kv ? "Activations (AutoAWQ fused modules"
                                           : "Activations (transformers before 4.45: the head on every prompt token") +
             (p.eager_score_bytes > 0
                  ? ", eager prefill: fp16 scores + fp32 softmax, " + num(p.eager_score_bytes) + " B per score"
                  : ", SDPA prefill") +
             "): max(" + step + (p.eager_inference ? ", its attention with batch x heads x prompt^2 scores" : "") +
             ", logits of every token x " + num(p.prompt_logit_bytes) + " B " + format_gib(a.logits_bytes) +
             ") = " + format_gib(m.activations_bytes);
    } else {
      aexp =
          "Activations: " + step + " + logits " + format_gib(a.logits_bytes) + " = " + format_gib(m.activations_bytes);
    }
  } else if (md.kind == ModelKind::kCnn) {
    aexp = "Activations: every layer output kept for backward, " + num(md.cnn_activation_elements_per_sample) +
           " elements per sample x batch " + num(static_cast<double>(w.batch)) + " x " +
           num(activation_element_bytes(w)) + " B = " + format_gib(m.activations_bytes);
  } else {
    const TrainAct a = training_activations(p, w.batch, w.context);
    aexp = "Activations (Korthikanti et al. 2022, " + std::string(checkpointing_name(w.checkpointing)) +
           " checkpointing" + (w.flash_attention ? ", flash attention" : ", eager attention") +
           (w.activation_offload ? ", offloaded to the host but " + num(kOffloadResidentLayers) + " layers" : "") +
           "): " +
           (w.checkpointing == Checkpointing::kFull
                ? num(static_cast<double>(md.layers)) + " layer inputs x " + format_gib(a.layer_input_bytes) +
                      " + max(one layer recomputed " + format_gib(a.per_layer_bytes) + ", loss buffers " +
                      format_gib(a.logits_bytes) + ")"
                : num(static_cast<double>(md.layers)) + " layers x " + format_gib(a.per_layer_bytes) +
                      " + loss buffers (logits) " + format_gib(a.logits_bytes)) +
           (a.cast_copy_bytes > 0 ? " + autocast 16-bit weight copies " + format_gib(a.cast_copy_bytes) : "") +
           (a.cache_bytes > 0 ? "; at the end of forward the K/V every layer returns (use_cache) " +
                                    format_gib(a.cache_bytes) + " beside the layer inputs and loss buffers"
                              : "") +
           " = " + format_gib(m.activations_bytes);
  }
  out.push_back({"activations_bytes", m.activations_bytes, aexp});
  if (w.task != Task::kInfer) {
    const bool in_backward = w.optimizer_in_backward && w.task == Task::kTrain && !w.cpu_offload;
    std::string gexp =
        "Gradients: " + billions(w.task == Task::kTrain ? p.trainable_parameters_per_gpu : p.adapter_parameters) +
        " trainable params" +
        (w.zero >= 2 && w.task == Task::kTrain && !w.fsdp_no_sync
             ? " / " + num(w.data_parallel()) + " (ZeRO-" + num(w.zero) + ")"
             : "");
    if (in_backward) {
      gexp = "Gradients: the optimizer steps in backward and frees each gradient, so only the largest parameter's (" +
             billions(largest_trained_parameter(p)) + " params) is live";
    } else if (w.cpu_offload && w.task == Task::kTrain) {
      gexp = "Gradients: offloaded to the host; one layer's unsharded gradient is live before its reduce-scatter";
    } else if (w.fsdp_mixed_units) {
      gexp =
          "Gradients: FSDP units hold the frozen base with the adapters, so the flat gradient covers every block "
          "parameter (16-bit)" +
          std::string(w.fsdp_no_sync ? ", unsharded under no_sync" : " / " + num(w.data_parallel()) + " GPUs");
    }
    if (w.fsdp_no_sync) gexp += "; held beside the next micro-batch's activations (FSDP no_sync)";
    out.push_back({"gradients_bytes", m.gradients_bytes, gexp + " = " + format_gib(m.gradients_bytes)});
    out.push_back(
        {"optimizer_bytes", m.optimizer_bytes,
         "Optimizer (" + std::string(optimizer_name(w.optimizer)) + ")" +
             (w.task == Task::kTrain && w.master_weights && w.weights != WeightFormat::kFp32 ? " + fp32 master weights"
                                                                                             : "") +
             (w.zero >= 1 ? ", sharded over " + num(w.data_parallel()) + " GPUs" : "") +
             (paged_optimizer(w.optimizer) ? " (states in paged unified memory, counted on the host)" : "") +
             (w.cpu_offload ? " (in host memory: FSDP CPU offload, the step runs on the CPU)" : "") + " = " +
             format_gib(m.optimizer_bytes)});
  }
  if (m.host_bytes > 0) {
    out.push_back({"host_bytes", m.host_bytes,
                   "Host memory, not in the GPU's total:" +
                       std::string(paged_optimizer(w.optimizer) ? " paged optimizer states (cudaMallocManaged)" : "") +
                       (w.cpu_offload ? " CPU-offloaded weights, gradients and optimizer states" : "") +
                       (w.activation_offload ? " offloaded activations" : "") + " = " + format_gib(m.host_bytes)});
  }
  if (w.task == Task::kLora || w.task == Task::kQlora) {
    out.push_back({"adapter_bytes", m.adapter_bytes,
                   "LoRA adapters: rank " + num(static_cast<double>(w.lora_rank)) + " x (in + out) per target x " +
                       num(static_cast<double>(md.layers)) + " layers = " + billions(p.adapter_parameters) +
                       " params = " + format_gib(m.adapter_bytes)});
  }
  out.push_back(
      {"runtime_overhead_bytes", m.runtime_overhead_bytes,
       "Runtime: CUDA context " + format_gib(m.cuda_context_bytes) + " + workspaces " + format_gib(m.workspace_bytes) +
           " + allocator slack " + format_gib(m.allocator_slack_bytes) +
           (p.load_transient_bytes > 0 && w.task != Task::kInfer
                ? " (kept reserved since loading: torchao 0.1 quantized a whole matrix, " +
                      format_gib(p.load_transient_bytes) + ")"
                : "") +
           (m.communication_bytes > 0 ? " + communication buffers " + format_gib(m.communication_bytes) : "") + " = " +
           format_gib(m.runtime_overhead_bytes)});
  std::string texp = "Peak per GPU";
  if (w.task == Task::kInfer && !kv_pool_at_startup(w.engine))
    texp += " (live set at prefill or at the last token, whichever is larger)";
  const bool one_gradient = w.cpu_offload || (w.optimizer_in_backward && w.task == Task::kTrain);
  if (w.task != Task::kInfer && one_gradient)
    texp += " (weights + optimizer + activations at the start of backward + the one live gradient + runtime)";
  else if (w.task != Task::kInfer)
    texp +=
        " (weights + optimizer + max(activations at the start of backward, gradients + optimizer-step temporaries) + "
        "runtime)";
  texp += " = " + format_gib(m.total_bytes);
  out.push_back({"total_bytes", m.total_bytes, texp});
  // Shown when loading peaks above the steady state: then it decides the verdict.
  if (m.load_peak_bytes > m.total_bytes) {
    out.push_back({"load_peak_bytes", m.load_peak_bytes,
                   "Load peak: CUDA context " + format_gib(m.cuda_context_bytes) + " + weights " +
                       format_gib(m.weights_bytes) + " + what the loader stages beside them (" +
                       (p.load_transient_bytes > 0 ? "torchao 0.1's NF4 quantization of the largest matrix, " +
                                                         format_gib(p.load_transient_bytes)
                        : w.quantize_on_load ? "the 16-bit checkpoint it quantizes from"
                                             : "one 16-bit matrix as bitsandbytes quantizes it") +
                       ") = " + format_gib(m.load_peak_bytes)});
  }
  return out;
}

}  // namespace gpuplan
