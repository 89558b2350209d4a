// The vocabularies of a workload (vocabulary.h): engines (with the profiles each borrows), tasks,
// optimizers, checkpointing and amp, each ONE table; the generic parse / name / list over any of them.
// Weight and KV-cache formats have their tables in formats.cc.
#include "gpuplan/vocabulary.h"

#include <array>
#include <cctype>

#include "gpuplan/formats.h"
#include "gpuplan/workload.h"

namespace gpuplan {

namespace {

template <typename E>
constexpr int v(E e) {
  return static_cast<int>(e);
}

// The engine table: name, other spellings, what it is, and the profiles it is modelled with. An engine
// with no memory profile or no refusal rules of its own names the engine it borrows them from HERE, and
// nowhere else. Every engine has its own performance profile (perf/constants.h kEnginePerfTable: kernels per layer,
// host work).
struct EngineRow {
  std::string_view name;
  std::string_view aliases;
  std::string_view help;
  EngineProfiles profiles;  // memory, serving rules, training rules
  Engine engine;            // last: beside the profiles' three enums, no padding
};
using E = Engine;
constexpr EngineRow kEngineTable[] = {
    {"transformers",
     "hf huggingface accelerate",
     "Hugging Face transformers: generate(), Trainer/TRL + PEFT, Accelerate",
     {E::kTransformers, E::kTransformers, E::kTransformers},
     E::kTransformers},
    {"pytorch",
     "torchtune",
     "plain PyTorch loops (torchtune, FSDP scripts)",
     {E::kPytorch, E::kPytorch, E::kPytorch},
     E::kPytorch},
    {"vllm",
     "",
     "vLLM: paged KV cache in gpu_memory_utilization of the GPU, CUDA graphs",
     {E::kVllm, E::kVllm, E::kVllm},
     E::kVllm},
    {"tgi", "", "Hugging Face Text Generation Inference", {E::kTgi, E::kTgi, E::kTgi}, E::kTgi},
    {"deepspeed",
     "",
     "DeepSpeed: ZeRO training, DeepSpeed-Inference",
     {E::kDeepspeed, E::kDeepspeed, E::kDeepspeed},
     E::kDeepspeed},
    {"llama.cpp",
     "llamacpp llama-cpp ollama",
     "llama.cpp and what embeds it (Ollama): GGUF formats",
     {E::kLlamaCpp, E::kLlamaCpp, E::kLlamaCpp},
     E::kLlamaCpp},
    {"megatron", "", "Megatron-LM / Megatron-Core training", {E::kMegatron, E::kMegatron, E::kMegatron}, E::kMegatron},
    {"tensorrt-llm",
     "trt-llm trtllm",
     "NVIDIA TensorRT-LLM",
     {E::kTensorrtLlm, E::kTensorrtLlm, E::kTensorrtLlm},
     E::kTensorrtLlm},
    // ExLlama loads GPTQ/EXL2 checkpoints as transformers does: its memory and refusal rules.
    {"exllama",
     "exllamav2 exl2",
     "ExLlamaV2 GPTQ/EXL2 inference; memory and rules of transformers",
     {E::kTransformers, E::kTransformers, E::kTransformers},
     E::kExllama},
    // Compiled PyTorch decodes from a static KV cache as plain PyTorch allocates it: PyTorch's memory and rules.
    {"torch-compile",
     "gpt-fast torchchat compiled",
     "compiled PyTorch: torch.compile mode reduce-overhead (the decode step as one CUDA graph, fused "
     "element-wise kernels), static KV cache: gpt-fast, torchchat, transformers' static cache; memory and rules "
     "of pytorch",
     {E::kPytorch, E::kPytorch, E::kPytorch},
     E::kTorchCompile},
    // AutoAWQ's fused modules (from_quantized(fuse_layers=True), awq/modules/fused) run inside a transformers
    // model: its loader and rules, plus their own attention and a KV cache allocated at load (memory.cc).
    {"autoawq",
     "awq auto-awq",
     "AutoAWQ with fused modules: KV cache of batch x context allocated at load, its own attention; otherwise "
     "memory and rules of transformers",
     {E::kTransformers, E::kTransformers, E::kTransformers},
     E::kAutoawq},
    // SGLang sizes its KV pool from mem_fraction_static (memory.cc) and refuses what vLLM refuses: the same
    // kernels (FlashInfer / FA3, Marlin, fp8) and formats, a paged (token-granular) KV cache, no training.
    {"sglang",
     "sgl sglang-runtime",
     "SGLang: KV pool in mem_fraction_static of the GPU (0.88 at tp 1 before 0.4.7), CUDA graphs, overlapped "
     "scheduler from 0.4; vLLM's refusal rules",
     {E::kSglang, E::kVllm, E::kVllm},
     E::kSglang},
    // "auto": the perf model's tuned engine. Inference runs as a tuned serving engine (vLLM's refusal
    // rules, max_num_seqs), training as PyTorch; both are sized with the transformers memory profile.
    {"auto",
     "",
     "a tuned engine: vLLM's rules for inference, transformers' for training; transformers memory profile",
     {E::kTransformers, E::kVllm, E::kTransformers},
     E::kAuto},
};

template <size_t N>
constexpr std::array<VocabEntry, N> engine_words(const EngineRow (&rows)[N]) {
  std::array<VocabEntry, N> w{};
  for (size_t i = 0; i < N; ++i) w[i] = {v(rows[i].engine), rows[i].name, rows[i].aliases, rows[i].help};
  return w;
}
constexpr auto kEngineWords = engine_words(kEngineTable);

// The rows are in enum order, so that a profile is one index away.
constexpr bool engine_table_in_enum_order() {
  for (size_t i = 0; i < std::size(kEngineTable); ++i) {
    if (v(kEngineTable[i].engine) != static_cast<int>(i)) return false;
  }
  return v(Engine::kAuto) + 1 == static_cast<int>(std::size(kEngineTable));
}
static_assert(engine_table_in_enum_order(), "kEngineTable lists every Engine, in enum order");

constexpr VocabEntry kTaskWords[] = {
    {v(Task::kInfer), "infer", "", "inference: generation, or one forward pass (encoders, CNNs)"},
    {v(Task::kTrain), "train", "", "full training: every weight trained"},
    {v(Task::kLora), "lora", "", "LoRA fine-tuning of a frozen base (PEFT)"},
    {v(Task::kQlora), "qlora", "", "QLoRA: LoRA over a 4-bit base (nf4-dq, checkpointing on, by default)"},
};
constexpr VocabEntry kOptimizerWords[] = {
    {v(Optimizer::kAdamw), "adamw", "adam adamw-torch adamw-torch-fused fused-adamw",
     "AdamW, two fp32 moments per trained weight"},
    {v(Optimizer::kAdamw8bit), "adamw-8bit", "adamw8bit adam8bit adamw-bnb-8bit",
     "bitsandbytes 8-bit AdamW (AdamW8bit)"},
    {v(Optimizer::kSgd), "sgd", "", "SGD with a momentum buffer"},
    {v(Optimizer::kPagedAdamw), "paged-adamw", "pagedadamw paged-adamw-32bit pagedadamw32bit",
     "bitsandbytes PagedAdamW: 32-bit states in paged (unified) memory"},
    {v(Optimizer::kPagedAdamw8bit), "paged-adamw-8bit", "pagedadamw8bit",
     "bitsandbytes PagedAdamW8bit: 8-bit states in paged (unified) memory"},
};
constexpr VocabEntry kCheckpointingWords[] = {
    {v(Checkpointing::kNone), "none", "", "keep every activation for backward"},
    {v(Checkpointing::kSelective), "selective", "",
     "recompute attention's activations (Korthikanti et al. 2022, Megatron selective recompute)"},
    {v(Checkpointing::kFull), "full", "", "keep each layer's input, recompute the layer in backward"},
};
constexpr VocabEntry kAmpWords[] = {
    {v(Amp::kNone), "none", "", "no autocast"},
    {v(Amp::kBf16), "bf16", "", "torch.autocast bf16 over fp32 weights (Trainer bf16=True)"},
    {v(Amp::kFp16), "fp16", "", "torch.autocast fp16 over fp32 weights (Trainer fp16=True)"},
};

// LoRA target modules (a bit set, Workload::lora_targets): PEFT's names, Mixtral's w1/w2/w3 and "all"
// (PEFT target_modules="all-linear"). The reader also drops a "_proj" suffix (q_proj, down_proj).
constexpr VocabEntry kLoraTargetWords[] = {
    {kLoraQ, "q", "", "query projection"},
    {kLoraK, "k", "", "key projection"},
    {kLoraV, "v", "", "value projection"},
    {kLoraO, "o", "output out", "attention output projection"},
    {kLoraGate, "gate", "w1", "MLP gate projection"},
    {kLoraUp, "up", "w3", "MLP up projection"},
    {kLoraDown, "down", "w2", "MLP down projection"},
    {static_cast<int>(kLoraAllLinear), "all", "all-linear", "every linear layer above"},
};

// Lower case, '_' read as '-': "Tensorrt_LLM" and "tensorrt-llm" are one word.
std::string normalized(std::string_view s) {
  std::string out(s);
  for (auto& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (c == '_') c = '-';
  }
  return out;
}

bool is_spelling(std::string_view candidate, const std::string& norm) { return normalized(candidate) == norm; }

template <typename T>
T as(int value) {
  return static_cast<T>(value);
}

}  // namespace

std::span<const VocabEntry> engines() { return kEngineWords; }
std::span<const VocabEntry> tasks() { return kTaskWords; }
std::span<const VocabEntry> optimizers() { return kOptimizerWords; }
std::span<const VocabEntry> checkpointings() { return kCheckpointingWords; }
std::span<const VocabEntry> amps() { return kAmpWords; }
std::span<const VocabEntry> lora_target_words() { return kLoraTargetWords; }

std::span<const Vocabulary> vocabularies() {
  static const std::array<Vocabulary, 8> kAll = {{
      {"engine", "engine", "engines", engines()},
      {"task", "task", "tasks", tasks()},
      {"optimizer", "optimizer", "optimizers", optimizers()},
      {"checkpointing", "checkpointing", "checkpointing", checkpointings()},
      {"amp", "amp", "amp", amps()},
      {"weights", "weight format", "formats", weight_format_words()},
      {"kv_cache", "KV-cache format", "formats", kv_formats()},
      {"lora_targets", "LoRA target", "targets", lora_target_words()},
  }};
  return kAll;
}

const Vocabulary* vocabulary(std::string_view key) {
  for (const auto& voc : vocabularies()) {
    if (voc.key == key) return &voc;
  }
  return nullptr;
}

Result<int> parse_word(const Vocabulary& voc, std::string_view text) {
  const std::string norm = normalized(text);
  for (const auto& e : voc.entries) {
    if (is_spelling(e.name, norm)) return e.value;
  }
  for (const auto& e : voc.entries) {
    for (std::string_view alias : word_aliases(e)) {
      if (is_spelling(alias, norm)) return e.value;
    }
  }
  return usage_error("unknown " + std::string(voc.what) + " '" + std::string(text) + "'; " + std::string(voc.plural) +
                         ": " + word_list(voc.entries),
                     std::string(voc.key));
}

std::string_view word_name(std::span<const VocabEntry> entries, int value) {
  for (const auto& e : entries) {
    if (e.value == value) return e.name;
  }
  return "?";
}

std::vector<std::string_view> word_aliases(const VocabEntry& e) {
  std::vector<std::string_view> out;
  std::string_view rest = e.aliases;
  while (!rest.empty()) {
    const size_t space = rest.find(' ');
    if (space != 0) out.push_back(rest.substr(0, space));
    rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
  }
  return out;
}

std::string word_list(std::span<const VocabEntry> entries, std::string_view separator) {
  std::string list;
  for (const auto& e : entries) {
    if (!list.empty()) list += separator;
    list += e.name;
  }
  return list;
}

std::string_view task_name(Task t) { return word_name(tasks(), v(t)); }
std::string_view optimizer_name(Optimizer o) { return word_name(optimizers(), v(o)); }
std::string_view checkpointing_name(Checkpointing c) { return word_name(checkpointings(), v(c)); }
std::string_view engine_name(Engine e) { return word_name(engines(), v(e)); }
std::string_view amp_name(Amp a) { return word_name(amps(), v(a)); }

Result<Task> parse_task(std::string_view name) {
  GPUPLAN_TRY(t, parse_word(*vocabulary("task"), name));
  return as<Task>(t);
}
Result<Optimizer> parse_optimizer(std::string_view name) {
  GPUPLAN_TRY(o, parse_word(*vocabulary("optimizer"), name));
  return as<Optimizer>(o);
}
Result<Checkpointing> parse_checkpointing(std::string_view name) {
  GPUPLAN_TRY(c, parse_word(*vocabulary("checkpointing"), name));
  return as<Checkpointing>(c);
}
Result<Engine> parse_engine(std::string_view name) {
  GPUPLAN_TRY(e, parse_word(*vocabulary("engine"), name));
  return as<Engine>(e);
}
Result<Amp> parse_amp(std::string_view name) {
  GPUPLAN_TRY(a, parse_word(*vocabulary("amp"), name));
  return as<Amp>(a);
}

const EngineProfiles& engine_profiles(Engine e) {
  const auto i = static_cast<size_t>(e);
  return kEngineTable[i < std::size(kEngineTable) ? i : 0].profiles;
}
Engine memory_engine(Engine e) { return engine_profiles(e).memory; }
Engine rules_engine(Engine e, Task task) {
  return task == Task::kInfer ? engine_profiles(e).serving_rules : engine_profiles(e).training_rules;
}

}  // namespace gpuplan
