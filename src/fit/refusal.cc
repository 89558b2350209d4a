// The refusal rules. Each rule names its source; docs/model.md, "Refusals", lists them in a table.
#include "gpuplan/refusal.h"

#include <string>

namespace gpuplan {

namespace {

// ---- compute capabilities (x 10) that the rules compare against --------------------------------

// bf16 tensor cores arrived with Ampere, sm_80 (NVIDIA A100 whitepaper); vLLM refuses bfloat16 below it
// ("Bfloat16 is only supported on GPUs with compute capability of at least 8.0", vllm/platforms/cuda.py).
constexpr int kBf16TensorCoreCapability = 80;
// fp8 tensor cores: Ada sm_89 and Hopper sm_90 (NVIDIA Ada and Hopper whitepapers; TensorRT-LLM support
// matrix lists FP8 for Ada and Hopper only; Transformer Engine fp8 needs sm_89+).
constexpr int kFp8TensorCoreCapability = 89;
// vLLM and TGI run fp8 checkpoints on Ampere as weight-only fp8 through the FP8 Marlin kernel (vLLM
// docs "Supported Hardware" for fp8 W8A16 via Marlin on sm_80+, Fp8Config.get_min_capability = 80).
constexpr int kFp8MarlinCapability = 80;
// AWQ kernels need Turing or later: vLLM AWQConfig.get_min_capability = 75; AutoAWQ README ("compute
// capability 7.5").
constexpr int kAwqCapability = 75;
// int8 weights x int8 activations need int8 tensor cores (mma.sync s8, Turing sm_75 and later; Volta has
// none): vLLM CompressedTensorsW8A8Int8.get_min_capability = 75; TensorRT-LLM's support matrix lists INT8
// SmoothQuant from Turing/Ampere; torchao's int8_dynamic_activation_int8_weight runs torch._int_mm (sm_75+).
constexpr int kW8A8Capability = 75;
// vLLM's INT8 W8A8 kernels stop at compute capability 10.1 (docs/features/quantization/int8.md: "INT8 is
// not supported on compute capability > 10.1 (e.g., RTX 6000 Blackwell)"; use fp8 there).
constexpr int kVllmW8A8MaxCapability = 101;

constexpr int kCapabilityVolta = 70;
constexpr int kCapabilityTuring = 75;
constexpr int kCapabilityAmpereGa100 = 80;
constexpr int kCapabilityAmpereGa10x = 86;
constexpr int kCapabilityAda = 89;
constexpr int kCapabilityHopper = 90;
constexpr int kCapabilityBlackwell = 100;

bool serving_engine(Engine e) {
  return e == Engine::kVllm || e == Engine::kTgi || e == Engine::kTensorrtLlm || e == Engine::kLlamaCpp;
}

bool engine_has_weights(Engine e, WeightFormat f) {
  // fp8 (a scaled 8-bit float, grouped with weight-only int8 in formats.h): every engine but llama.cpp,
  // whose GGUF types have no fp8; Megatron and PyTorch through Transformer Engine / torchao.
  if (f == WeightFormat::kFp8) return e != Engine::kLlamaCpp;
  // W8A8 (SmoothQuant): TensorRT-LLM (its SmoothQuant/int8 plugins), vLLM (compressed-tensors INT8 W8A8),
  // PyTorch and transformers through torchao (int8_dynamic_activation_int8_weight, transformers
  // TorchAoConfig). DeepSpeed-Inference, TGI, Megatron, llama.cpp and ExLlama have no W8A8 path.
  if (f == WeightFormat::kW8A8)
    return e == Engine::kTensorrtLlm || e == Engine::kVllm || e == Engine::kPytorch || e == Engine::kTransformers;
  const FormatFamily family = weight_format_info(f).family;
  switch (family) {
    case FormatFamily::kGguf:
      // GGUF quantized blocks: llama.cpp, and vLLM's GGUF loader (docs "GGUF", experimental).
      // transformers dequantizes a GGUF file to fp32/fp16 when loading it (from_pretrained(gguf_file=)).
      return e == Engine::kLlamaCpp || e == Engine::kVllm;
    case FormatFamily::kFloat:
      // fp32, bf16, fp16: every engine (llama.cpp's GGUF has F32, F16, BF16).
      return true;
    case FormatFamily::kWeightOnlyInt:
      // Weight-only int8: DeepSpeed-Inference, TensorRT-LLM int8_wo, vLLM W8A16 (compressed-tensors),
      // TGI EETQ, torchao int8_weight_only. llama.cpp has Q8_0 (a GGUF type) instead; Megatron has none.
      return e != Engine::kLlamaCpp && e != Engine::kMegatron;
    case FormatFamily::kGptq:
    case FormatFamily::kAwq:
      // GPTQ / AWQ checkpoints: transformers (AutoGPTQ/AutoAWQ), vLLM, TGI, TensorRT-LLM (int4_gptq,
      // int4_awq). DeepSpeed-Inference, Megatron and llama.cpp have no loader for them.
      return e != Engine::kDeepspeed && e != Engine::kMegatron && e != Engine::kLlamaCpp;
    case FormatFamily::kBitsAndBytes:
      // bitsandbytes: transformers (and DeepSpeed/PyTorch training through it), vLLM
      // (--quantization bitsandbytes), TGI (--quantize bitsandbytes*). TensorRT-LLM, Megatron and
      // llama.cpp have no bitsandbytes kernels.
      return e != Engine::kTensorrtLlm && e != Engine::kMegatron && e != Engine::kLlamaCpp;
  }
  return true;
}

bool engine_has_kv(Engine e, KvFormat kv) {
  switch (e) {
    case Engine::kVllm:
    case Engine::kTgi:
      // vLLM --kv-cache-dtype: auto, fp8, fp8_e4m3, fp8_e5m2; TGI --kv-cache-dtype: fp8_e4m3fn, fp8_e5m2.
      return kv != KvFormat::kInt8;
    case Engine::kLlamaCpp:
      // llama.cpp --cache-type-k/v: f32, f16, bf16, q8_0, q4_0, ... (no fp8).
      return kv != KvFormat::kFp8;
    default:
      return true;
  }
}

// A learned absolute position table (GPT-2, StarCoder, OPT, BERT): one row per position.
bool learned_positions(const Model& m) {
  for (const TensorGroup& g : m.tensors) {
    if (g.role == TensorRole::kPositionEmbedding && g.rows >= m.max_positions) return true;
  }
  return false;
}

std::string num(int64_t v) { return std::to_string(v); }

// Divisors of n up to `limit`, as "1, 2, 4, 8".
std::string divisors(int64_t n, int64_t limit) {
  std::string out;
  for (int64_t d = 1; d <= limit && d <= n; ++d) {
    if (n % d == 0) out += (out.empty() ? "" : ", ") + num(d);
  }
  return out;
}

// tp degrees worth listing in a message.
constexpr int64_t kListedTpDegrees = 64;

}  // namespace

std::string_view refusal_code_name(RefusalCode code) {
  switch (code) {
    case RefusalCode::kTpHeads:
      return "tp_heads";
    case RefusalCode::kTpKvHeads:
      return "tp_kv_heads";
    case RefusalCode::kPpLayers:
      return "pp_layers";
    case RefusalCode::kContext:
      return "context";
    case RefusalCode::kTaskEngine:
      return "task_engine";
    case RefusalCode::kWeightsEngine:
      return "weights_engine";
    case RefusalCode::kKvEngine:
      return "kv_engine";
    case RefusalCode::kMigParallel:
      return "mig_parallel";
    case RefusalCode::kMigCount:
      return "mig_count";
    case RefusalCode::kWeightsHardware:
      return "weights_hardware";
    case RefusalCode::kKvHardware:
      return "kv_hardware";
    case RefusalCode::kBf16Hardware:
      return "bf16_hardware";
  }
  return "refused";
}

int compute_capability(const Gpu& gpu) {
  const std::string& a = gpu.architecture;
  if (a == "volta") return kCapabilityVolta;
  if (a == "turing") return kCapabilityTuring;
  if (a == "ampere") return gpu.chip == "GA100" ? kCapabilityAmpereGa100 : kCapabilityAmpereGa10x;
  if (a == "ada") return kCapabilityAda;
  if (a == "hopper") return kCapabilityHopper;
  if (a == "blackwell") return kCapabilityBlackwell;
  return 0;
}

int64_t supported_context(const Model& m) { return m.kind == ModelKind::kCnn ? 0 : m.max_positions; }

std::optional<RefusalCode> parallel_refusal_code(const Model& m, Engine engine, int tp, int pp) {
  if (tp > 1) {
    // Tensor parallelism splits attention heads: a network without them (a CNN) has nothing to split.
    if (m.heads <= 0) return RefusalCode::kTpHeads;
    // vLLM ModelConfig.verify_with_parallel_config: num_attention_heads % tp == 0; TGI, TensorRT-LLM,
    // Megatron and DeepSpeed AutoTP shard heads the same way.
    if (m.heads % tp != 0) return RefusalCode::kTpHeads;
    if (m.kv_heads > 0) {
      // Megatron-Core divides num_query_groups by tp (divide() asserts it); vLLM replicates KV heads
      // when there are fewer than tp (QKVParallelLinear: tp % kv_heads == 0).
      const bool megatron = engine == Engine::kMegatron;
      const bool even = m.kv_heads % tp == 0;
      const bool replicated = !megatron && tp % m.kv_heads == 0;
      if (!even && !replicated) return RefusalCode::kTpKvHeads;
    }
  }
  // Every pipeline stage holds at least one layer (vLLM get_pp_indices, Megatron layers % pp).
  if (pp > 1 && pp > m.layers) return RefusalCode::kPpLayers;
  return std::nullopt;
}

std::optional<RefusalCode> refusal_code(const Workload& w) {
  if (!w.model) return std::nullopt;
  const Model& m = *w.model;
  // An engine without refusal rules of its own is refused by the rules it borrows (engine table).
  const Engine e = rules_engine(w.engine, w.task);
  if (auto p = parallel_refusal_code(m, e, w.tp, w.pp)) return p;
  const int64_t max_context = supported_context(m);
  // vLLM refuses a max_model_len beyond the derived one; a learned position table cannot be indexed
  // past its rows in any engine. RoPE and ALiBi models run longer elsewhere (TensorRT-LLM ran GPT-J at
  // 2048 + 2048 tokens, llm-foundry trains MPT-7B at 8192): engines warn, not refuse.
  if (max_context > 0 && w.context > max_context && (e == Engine::kVllm || learned_positions(m)))
    return RefusalCode::kContext;
  if (w.task != Task::kInfer && serving_engine(e)) return RefusalCode::kTaskEngine;
  // Training reads no GGUF file: llama.cpp and vLLM are inference engines, transformers dequantizes it.
  if (w.task != Task::kInfer && weight_format_info(w.weights).family == FormatFamily::kGguf)
    return RefusalCode::kWeightsEngine;
  if (!engine_has_weights(e, w.weights)) return RefusalCode::kWeightsEngine;
  if (w.task == Task::kInfer && m.kind == ModelKind::kDecoder && !engine_has_kv(e, w.kv_cache))
    return RefusalCode::kKvEngine;
  return std::nullopt;
}

std::optional<RefusalCode> refusal_code(const Workload& w, const Target& t) {
  if (auto c = refusal_code(w)) return c;
  if (t.ref.is_mig()) {
    // NVIDIA MIG user guide: CUDA IPC and peer-to-peer are not supported between MIG instances, so
    // NCCL cannot split one model over several instances.
    if (w.tp * w.pp > 1) return RefusalCode::kMigParallel;
    // Data-parallel training all-reduces gradients through NCCL, which does not run on MIG instances
    // (one rank per PCI device, no P2P: NVIDIA/nccl issue 1716, maintainer's answer). Inference
    // replicas are independent processes and run.
    if (w.task != Task::kInfer && t.count > 1) return RefusalCode::kMigParallel;
    if (t.ref.profile->max_count > 0 && t.count > t.ref.profile->max_count) return RefusalCode::kMigCount;
  }
  if (!t.ref.gpu) return std::nullopt;
  const int cc = compute_capability(*t.ref.gpu);
  if (cc == 0) return std::nullopt;
  const Engine e = rules_engine(w.engine, w.task);
  if (w.weights == WeightFormat::kBf16 && cc < kBf16TensorCoreCapability && e == Engine::kVllm)
    return RefusalCode::kBf16Hardware;
  if (w.weights == WeightFormat::kFp8 && cc < kFp8TensorCoreCapability) {
    const bool marlin = (e == Engine::kVllm || e == Engine::kTgi) && w.task == Task::kInfer;
    if (!marlin || cc < kFp8MarlinCapability) return RefusalCode::kWeightsHardware;
  }
  if (w.weights == WeightFormat::kInt4Awq && cc < kAwqCapability) return RefusalCode::kWeightsHardware;
  if (w.weights == WeightFormat::kW8A8 && (cc < kW8A8Capability || (e == Engine::kVllm && cc > kVllmW8A8MaxCapability)))
    return RefusalCode::kWeightsHardware;
  if (w.task == Task::kInfer && w.kv_cache == KvFormat::kFp8 && e == Engine::kTensorrtLlm &&
      cc < kFp8TensorCoreCapability)
    return RefusalCode::kKvHardware;
  return std::nullopt;
}

Refusal explain_refusal(RefusalCode code, const Workload& w, const Target* t) {
  const Model& m = *w.model;
  const Engine e = rules_engine(w.engine, w.task);  // the engine whose rules refused it
  const std::string engine(engine_name(e));
  const std::string weights(weight_format_info(w.weights).name);
  const std::string gpu = t ? t->id() : std::string("this GPU");
  const std::string cc = t && t->ref.gpu ? std::to_string(compute_capability(*t->ref.gpu) / 10) + "." +
                                               std::to_string(compute_capability(*t->ref.gpu) % 10)
                                         : std::string("?");
  Refusal r{code, "", ""};
  switch (code) {
    case RefusalCode::kTpHeads:
      r.field = "tp";
      if (m.heads <= 0) {
        r.message = "tp " + num(w.tp) + " splits attention heads, and " + m.id + " has none; run it with tp 1";
      } else {
        r.message = "tp " + num(w.tp) + " does not divide the " + num(m.heads) + " attention heads of " + m.id +
                    " (engines shard heads evenly: vLLM requires num_attention_heads % tp == 0); use tp " +
                    divisors(m.heads, kListedTpDegrees);
      }
      break;
    case RefusalCode::kTpKvHeads:
      r.field = "tp";
      r.message = "tp " + num(w.tp) + " and the " + num(m.kv_heads) + " KV heads of " + m.id +
                  (e == Engine::kMegatron
                       ? " do not divide (Megatron-Core needs num_query_groups % tp == 0); use tp " +
                             divisors(m.kv_heads, kListedTpDegrees)
                       : " divide neither way (vLLM needs kv_heads % tp == 0 or tp % kv_heads == 0, replicating "
                         "KV heads); use a tp that divides or is a multiple of " +
                             num(m.kv_heads));
      break;
    case RefusalCode::kPpLayers:
      r.field = "pp";
      r.message = "pp " + num(w.pp) + " is more pipeline stages than the " + num(m.layers) + " layers of " + m.id +
                  " (each stage holds at least one layer); use pp <= " + num(m.layers);
      break;
    case RefusalCode::kContext:
      r.field = "context";
      r.message = "context " + num(w.context) + " tokens is beyond the " + num(supported_context(m)) + " that " + m.id +
                  " supports (max_position_embeddings, rope_scaling included); " +
                  (learned_positions(m) ? std::string("its learned position table has no rows beyond it")
                                        : std::string("vLLM refuses it (max_model_len greater than the derived "
                                                      "max_model_len)")) +
                  "; give a context <= " + num(supported_context(m)) +
                  " or a config.json whose rope_scaling extends it";
      break;
    case RefusalCode::kTaskEngine:
      r.field = "engine";
      r.message = engine + " is an inference engine and does not train; for " + std::string(task_name(w.task)) +
                  " use --engine transformers, pytorch, deepspeed or megatron";
      break;
    case RefusalCode::kWeightsEngine: {
      r.field = "weights";
      const FormatFamily family = weight_format_info(w.weights).family;
      if (family == FormatFamily::kGguf && w.task != Task::kInfer) {
        r.message = weights +
                    " is a GGUF inference format; no engine trains on it (transformers dequantizes GGUF "
                    "to fp32/fp16 when loading); for " +
                    std::string(task_name(w.task)) + " use a bitsandbytes base (nf4-dq) or bf16";
      } else if (family == FormatFamily::kGguf) {
        r.message = weights + " is a GGUF format: llama.cpp (or vLLM's GGUF loader) runs it, " + engine +
                    " does not (transformers dequantizes GGUF to fp32/fp16 when loading: size that with --weights "
                    "fp16); use --engine llama.cpp";
      } else if (e == Engine::kLlamaCpp) {
        r.message = "llama.cpp runs GGUF files (f32, f16, bf16, q8_0, q6_k, q5_k_m, q4_k_m, q4_0); it has no " +
                    weights + " kernels; convert the model to a GGUF type";
      } else if (e == Engine::kMegatron) {
        r.message = "Megatron trains and runs fp32, bf16, fp16 and fp8 (Transformer Engine) weights, not " + weights +
                    "; use one of those or another engine";
      } else {
        r.message = engine + " has no kernels or loader for " + weights +
                    " weights (docs/model.md, \"Refusals\", lists which engine runs which format); use another "
                    "engine or format";
      }
      break;
    }
    case RefusalCode::kKvEngine:
      r.field = "kv_cache";
      r.message = engine + " has no " + std::string(kv_format_name(w.kv_cache)) + " KV cache (" +
                  (e == Engine::kLlamaCpp ? "llama.cpp --cache-type: f32, f16, bf16, q8_0, q4_0; use int8"
                                          : engine + " --kv-cache-dtype: auto (the model's dtype) or fp8") +
                  ")";
      break;
    case RefusalCode::kMigParallel:
      r.field = w.tp * w.pp > 1 ? "tp" : "gpu";
      r.message = (w.tp * w.pp > 1 ? "tp " + num(w.tp) + " x pp " + num(w.pp) + " across MIG instances of " + gpu
                                   : std::string(task_name(w.task)) + " data-parallel over " + num(t ? t->count : 0) +
                                         " MIG instances of " + gpu) +
                  ": MIG instances have no peer-to-peer path and NCCL does not run across them (NVIDIA MIG user "
                  "guide: CUDA IPC / peer-to-peer is not supported between MIG instances; NVIDIA/nccl issue 1716); "
                  "use one slice that holds the model, or whole GPUs";
      break;
    case RefusalCode::kMigCount: {
      r.field = "gpu";
      const MigProfile& p = *t->ref.profile;
      r.message = num(t->count) + " instances of " + p.name + ": one " + t->ref.gpu->name + " holds at most " +
                  num(p.max_count) + " (MIG table " + t->ref.mig_table->id + "); use x" + num(p.max_count) +
                  " or fewer, or a smaller profile";
      break;
    }
    case RefusalCode::kWeightsHardware:
      r.field = "weights";
      if (w.weights == WeightFormat::kInt4Awq) {
        r.message = "int4-awq kernels need compute capability 7.5 or newer (vLLM AWQConfig, AutoAWQ); " + gpu + " is " +
                    cc + "; use int4-gptq or fp16 weights";
      } else if (w.weights == WeightFormat::kW8A8) {
        r.message = compute_capability(*t->ref.gpu) > kVllmW8A8MaxCapability
                        ? "vLLM's INT8 W8A8 kernels do not run above compute capability 10.1 (vLLM INT8 docs); " + gpu +
                              " is " + cc + "; use fp8 weights"
                        : "w8a8 multiplies int8 activations by int8 weights on int8 tensor cores, which need "
                          "compute capability 7.5 or newer (vLLM CompressedTensorsW8A8Int8); " +
                              gpu + " is " + cc + "; use weight-only int8 or fp16 weights";
      } else {
        r.message = "fp8 weights on " + gpu + " (compute capability " + cc +
                    "): fp8 tensor cores exist on Ada (8.9) and Hopper (9.0) and later; " +
                    (compute_capability(*t->ref.gpu) >= kFp8MarlinCapability
                         ? engine +
                               " has no fp8 fallback here (vLLM and TGI run fp8 as weight-only FP8 Marlin on "
                               "Ampere: use --engine vllm)"
                         : std::string("vLLM's FP8 Marlin fallback needs 8.0")) +
                    (e == Engine::kTransformers
                         ? std::string("; transformers raises \"FP8 quantized models is only supported on GPUs with "
                                       "compute capability >= 8.9\" (recent versions dequantize to bf16 on load "
                                       "instead: size that with --weights bf16)")
                         : std::string()) +
                    "; or use int8 / fp16 weights";
      }
      break;
    case RefusalCode::kKvHardware:
      r.field = "kv_cache";
      r.message = "TensorRT-LLM's fp8 KV cache needs fp8 tensor cores (Ada 8.9, Hopper 9.0); " + gpu + " is " + cc +
                  "; use --kv-cache int8 or fp16";
      break;
    case RefusalCode::kBf16Hardware:
      r.field = "weights";
      r.message = "vLLM refuses bfloat16 on " + gpu + " (compute capability " + cc +
                  "; bf16 needs 8.0: \"Bfloat16 is only supported on GPUs with compute capability of at least "
                  "8.0\"); use --weights fp16 (vLLM --dtype half)";
      break;
  }
  return r;
}

std::optional<Refusal> refusal(const Workload& w, const Target& t) {
  auto c = refusal_code(w, t);
  if (!c) return std::nullopt;
  return explain_refusal(*c, w, &t);
}

std::optional<Refusal> refusal(const Workload& w) {
  auto c = refusal_code(w);
  if (!c) return std::nullopt;
  return explain_refusal(*c, w, nullptr);
}

}  // namespace gpuplan
