// A Workload is what runs: a Model, a task, formats, batch and lengths, parallel degrees and an engine
// profile. One struct shared by fit, perf, mig and plan. Its JSON keys are the CLI long options with
// '-' as '_' (the workload group of data/options.yaml), so a request, a validation row's `workload:` and the command
// line all read the same way.
#pragma once

#include <algorithm>
#include <array>
#include <compare>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/formats.h"
#include "gpuplan/model.h"
#include "gpuplan/status.h"
#include "gpuplan/vocabulary.h"

namespace gpuplan {

// Every vocabulary below has ONE table of {value, name, aliases, help} (vocabulary.h); the tables are in
// src/fit/workload.cc.
enum class Task { kInfer, kTrain, kLora, kQlora };
// kPagedAdamw / kPagedAdamw8bit: bitsandbytes' paged optimizers, whose states live in CUDA unified memory
// (cudaMallocManaged) that the driver pages to the host under pressure.
enum class Optimizer { kAdamw, kAdamw8bit, kSgd, kPagedAdamw, kPagedAdamw8bit };
enum class Checkpointing { kNone, kSelective, kFull };
// Engines: what each runtime allocates besides the model (memory.h), what it refuses (refusal.h) and how
// many kernels and how much host work a step costs (perf.h). An engine the memory model or the refusal
// rules have no profile for borrows another's: the engine table says which (engine_profiles), and
// nothing else decides it. kAuto: a tuned serving engine (vLLM's rules) for inference, PyTorch-like
// (transformers' rules) for training, sized with the transformers memory profile.
enum class Engine {
  kTransformers,
  kPytorch,
  kVllm,
  kTgi,
  kDeepspeed,
  kLlamaCpp,
  kMegatron,
  kTensorrtLlm,
  kExllama,
  kTorchCompile,  // compiled PyTorch: torch.compile reduce-overhead + static KV cache (gpt-fast, torchchat)
  kAutoawq,       // AutoAWQ with fused modules: transformers' loader, its own attention and preallocated KV cache
  kSglang,        // SGLang's runtime: token-granular KV pool in mem_fraction_static of the GPU, CUDA graphs
  kAuto
};
// A version of an engine, `--engine NAME@VERSION`: up to three numbers separated by '.' or '-', a release
// (vllm@0.6.3, tensorrt-llm@0.5) or a build date (llama.cpp@2024-01-10; a month alone, 2024-05, means its
// start). Unset: the engine's current release. The performance model keeps per-version differences where a
// source documents them (src/perf/constants.h, docs/model.md "Engine versions").
struct EngineVersion {
  std::array<int, 3> parts{};  // missing parts are 0
  bool given = false;
  int count = 0;         // parts written (1-3), to print the version back as given
  char separator = '.';  // '.' or '-', as written
  // Ordered by parts only.
  friend constexpr auto operator<=>(const EngineVersion& a, const EngineVersion& b) { return a.parts <=> b.parts; }
  friend constexpr bool operator==(const EngineVersion& a, const EngineVersion& b) { return a.parts == b.parts; }
};
// True when `v` was named and is older than `since` (the first version with a change).
constexpr bool version_before(const EngineVersion& v, const EngineVersion& since) { return v.given && v < since; }
// "2024-01-10" / "0.6.3"; the parts given, at most three numbers of at most kEngineVersionPartMax each.
inline constexpr int kEngineVersionPartMax = 99999;
Result<EngineVersion> parse_engine_version(std::string_view text);
std::string engine_version_text(const EngineVersion& v);

// Automatic mixed precision over fp32 weights (Workload::amp).
enum class Amp { kNone, kBf16, kFp16 };

std::string_view task_name(Task t);
std::string_view optimizer_name(Optimizer o);
std::string_view checkpointing_name(Checkpointing c);
std::string_view engine_name(Engine e);
std::string_view amp_name(Amp a);

// Canonical names or aliases (vocabulary.h: case-insensitive, '_' as '-'); unknown words are usage
// errors naming the request key and listing the canonical names.
Result<Task> parse_task(std::string_view name);
Result<Optimizer> parse_optimizer(std::string_view name);
Result<Checkpointing> parse_checkpointing(std::string_view name);
Result<Engine> parse_engine(std::string_view name);
Result<Amp> parse_amp(std::string_view name);

// The profiles an engine is modelled with: its own, or the one it borrows (a column of the engine table).
struct EngineProfiles {
  Engine memory;          // memory profile it is sized with (memory.h)
  Engine serving_rules;   // refusal rules of inference (refusal.h)
  Engine training_rules;  // refusal rules of training
};
const EngineProfiles& engine_profiles(Engine e);
// The engine whose memory profile sizes `e`, and whose refusal rules apply to `e` running `task`. A
// profile engine maps to itself.
Engine memory_engine(Engine e);
Engine rules_engine(Engine e, Task task);

// LoRA target modules as a bit set.
enum LoraTarget : uint32_t {
  kLoraQ = 1u << 0,
  kLoraK = 1u << 1,
  kLoraV = 1u << 2,
  kLoraO = 1u << 3,
  kLoraGate = 1u << 4,
  kLoraUp = 1u << 5,
  kLoraDown = 1u << 6,
};
inline constexpr uint32_t kLoraAllLinear = 0x7f;

struct Workload {
  std::shared_ptr<const Model> model;
  Task task = Task::kInfer;
  WeightFormat weights = WeightFormat::kBf16;
  KvFormat kv_cache = KvFormat::kBf16;
  int64_t batch = 1;          // sequences (inference) or micro-batch (training) per data-parallel rank
  int64_t context = 4096;     // tokens per sequence: prompt + generated (training: sequence length)
  int64_t input_tokens = 0;   // prompt tokens; 0 = the whole context is the prompt
  int64_t output_tokens = 0;  // generated tokens
  int tp = 1;
  int pp = 1;
  int count = 0;  // GPUs per target; 0 = tp x pp. Data-parallel ranks = count / (tp x pp).
  Optimizer optimizer = Optimizer::kAdamw;
  int zero = 0;  // ZeRO stage / FSDP: 0 none, 1 optimizer, 2 + gradients, 3 + weights
  Checkpointing checkpointing = Checkpointing::kNone;
  int64_t lora_rank = 16;
  double lora_dropout = 0;                  // PEFT's default 0: nn.Identity, no copies
  uint32_t lora_targets = kLoraQ | kLoraV;  // PEFT's default for Llama-style models
  Engine engine = Engine::kTransformers;
  EngineVersion engine_version;  // `--engine NAME@VERSION`; unset = the current release
  // Automatic mixed precision (torch.autocast, HF Trainer bf16=True / fp16=True) over fp32 weights:
  // matmuls run in 16 bits on cast copies of the weights; weights, gradients and optimizer stay fp32.
  Amp amp = Amp::kNone;
  bool flash_attention = true;          // SDPA/flash kernels: no seq x seq score matrix
  double gpu_memory_utilization = 0.9;  // vLLM's share of the GPU
  int64_t max_num_batched_tokens = 0;   // vLLM prefill chunk; 0 = engine default
  int group_size = 0;                   // GPTQ/AWQ group size; 0 = 128
  bool master_weights = true;           // fp32 master copy under 16-bit mixed precision
  // torchtune optimizer_in_bwd (PyTorch "optimizer step in backward" tutorial): each parameter's optimizer
  // step runs in a post-accumulate-grad hook and frees its gradient at once.
  bool optimizer_in_backward = false;
  // FSDP CPUOffload(offload_params=True) (torchtune fsdp_cpu_offload): the sharded weights, gradients and
  // optimizer states live in host memory; the GPU holds the layers FSDP gathers and the activations.
  bool cpu_offload = false;
  // Activation offloading (torchtune enable_activation_offloading, with checkpointing): the checkpointed
  // layer inputs are copied to host memory in forward and back in backward.
  bool activation_offload = false;
  // transformers' use_cache=True kept in training (the config's default; only transformers' own gradient
  // checkpointing turns it off) under a checkpoint wrapper that is not transformers' own (FSDP's
  // apply_activation_checkpointing, llama-recipes before Sept 2023): every layer's K and V are held until
  // the forward pass returns.
  bool use_cache = false;
  // FSDP1 gradient accumulation inside no_sync (Lightning Fabric no_backward_sync in Lit-GPT's finetune
  // scripts): the units' gradients stay unsharded between micro-batches, beside the next one's activations.
  bool fsdp_no_sync = false;
  // LoRA under FSDP1 with use_orig_params and one unit per block holding the frozen base and the adapters
  // (Lit-GPT's FSDPStrategy(auto_wrap_policy={Block})): each unit's gradient covers all its parameters.
  bool fsdp_mixed_units = false;
  // The training loss over this many chunks of the sequence's logits (torchtune CEWithChunkedOutputLoss:
  // 8); 1 = the whole logits at once (torch.nn.CrossEntropyLoss, transformers); 0 = the engine's default.
  int loss_chunks = 0;
  // The checkpoint is 16-bit and the engine quantizes it to `weights` on the GPU while loading (vLLM
  // --quantization fp8 on a bf16 model, TensorRT-LLM's quantize step): a load-time peak (memory.h).
  bool quantize_on_load = false;
  // QLoRA's 4-bit base is torchao's NF4Tensor (torchtune), not bitsandbytes' Linear4bit (qlora_kernel;
  // default: torchao for engine pytorch). Only bitsandbytes keeps each base linear's input for backward.
  bool qlora_torchao = false;

  int data_parallel() const;
  int gpus() const { return count > 0 ? count : tp * pp; }
  int64_t prompt_tokens() const { return input_tokens > 0 ? std::min(input_tokens, context) : context; }
};

// The request keys a workload takes (model, config, task, weights, kv_cache, batch, context, ...): the
// workload group of data/options.yaml, where each is declared with its type, range, default and help.
const std::vector<std::string_view>& workload_keys();

// Builds a workload from a request (JSON keyed by CLI long options). `model` is a zoo id; `config`,
// when present, is a config.json inline (the CLI reads a path and passes its JSON). Keys outside
// workload_keys() are ignored here: the command checks its own key list.
Result<Workload> parse_workload(const nlohmann::ordered_json& request);

// Bytes of a saved activation element: the weights' dtype (4 for fp32, else 16-bit), except that
// autocast (`amp`) computes in 16 bits over fp32 weights.
double activation_element_bytes(const Workload& w);

// LoRA adapter parameters: rank x (inputs + outputs) of every targeted matrix outside MoE experts
// (PEFT LoraLayer); 0 for CNNs. Used by the memory model and the performance model alike.
double lora_parameters(const Model& model, uint32_t targets, int64_t rank);

// The workload as a request object (the inverse of parse_workload, for results and validation).
nlohmann::ordered_json workload_json(const Workload& w);

// An inference over `count` GPUs with no tp or pp given that an engine runs as a layer split: `count`
// pipeline stages run in turn, one slice of the layers and of their KV cache per GPU. llama.cpp's default
// `--split-mode layer`, and transformers' device_map="auto" (exllama's gpu_split, AutoAWQ's device_map
// alike). 1 for one GPU, another engine, a llama.cpp build before the layer split, when replicas were
// asked for (`data_parallel`), or on MIG slices (a process sees one: several slices are replicas). The one
// rule that fit, perf and plan read (src/fit/workload.cc gives its sources).
int layer_split(const Workload& w, int count, bool data_parallel = false, bool mig = false);

}  // namespace gpuplan
