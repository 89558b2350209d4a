#include "gpuplan/workload.h"

#include <cctype>
#include <cmath>

#include "core/request.h"
#include "gpuplan/options.h"

namespace gpuplan {

namespace {

using Json = nlohmann::ordered_json;

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Result<uint32_t> parse_lora_targets(const Request& req) {
  GPUPLAN_TRY(names, req.words("lora_targets"));
  uint32_t mask = 0;
  for (auto n : names) {
    n = lower(n);
    if (n.size() > 5 && n.substr(n.size() - 5) == "_proj") n = n.substr(0, n.size() - 5);  // q_proj, down_proj
    auto bits = parse_word(*vocabulary("lora_targets"), n);
    if (!bits) return bits.error();
    mask |= static_cast<uint32_t>(*bits);
  }
  return mask;
}

}  // namespace

Result<EngineVersion> parse_engine_version(std::string_view text) {
  const auto bad = [&] {
    return usage_error("engine version '" + std::string(text) +
                           "' must be one to three numbers separated by '.' or '-' (a release such as vllm@0.6.3, "
                           "or a build date such as llama.cpp@2024-01-10), each at most " +
                           std::to_string(kEngineVersionPartMax),
                       "engine");
  };
  EngineVersion v;
  v.given = true;
  size_t i = text.size() > 1 && (text[0] == 'v' || text[0] == 'V') ? 1 : 0;  // "v0.6" reads as "0.6"
  while (true) {
    if (v.count == static_cast<int>(v.parts.size()) || i >= text.size()) return bad();
    long long part = 0;
    const size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && i - start < 6) {
      part = part * 10 + (text[i] - '0');
      ++i;
    }
    if (i == start || part > kEngineVersionPartMax) return bad();
    v.parts[static_cast<size_t>(v.count++)] = static_cast<int>(part);
    if (i == text.size()) return v;
    if (text[i] != '.' && text[i] != '-') return bad();
    if (v.count > 1 && text[i] != v.separator) return bad();  // one separator throughout
    v.separator = text[i++];
  }
}

std::string engine_version_text(const EngineVersion& v) {
  if (!v.given) return "";
  std::string s;
  for (int k = 0; k < v.count; ++k) {
    if (k > 0) s += v.separator;
    const std::string part = std::to_string(v.parts[static_cast<size_t>(k)]);
    // Dates keep their two-digit months and days (2024-01-10).
    s += (v.separator == '-' && k > 0 && part.size() < 2 ? "0" : "") + part;
  }
  return s;
}

int Workload::data_parallel() const { return std::max(1, gpus() / std::max(1, tp * pp)); }

const std::vector<std::string_view>& workload_keys() {
  // The workload group of data/options.yaml (its strings live as long as the process).
  static const std::vector<std::string_view> keys = [] {
    auto table = option_table();
    return table ? (*table)->group_keys("workload") : std::vector<std::string_view>{};
  }();
  return keys;
}

namespace {

// parse_workload's phases, in order: each reads its keys by their declaration (data/options.yaml).

// The model: an inline config.json, or a zoo id.
Status read_model(const Request& req, Workload& w) {
  GPUPLAN_TRY(model_id, req.text("model"));
  if (req.has("config")) {
    const Json& config = req.raw("config");
    if (!config.is_object()) return usage_error("'config' must be a config.json object", "config");
    GPUPLAN_TRY(m, parse_hf_config(config, model_id.empty() ? "config.json" : model_id));
    w.model = std::make_shared<const Model>(m);
    return Status::Ok();
  }
  if (model_id.empty())
    return usage_error("give --model: a zoo id (gpuplan fit --model llama-2-7b) or a config.json path", "model");
  GPUPLAN_TRY(m, zoo_model(model_id));
  w.model = std::shared_ptr<const Model>(m, [](const Model*) {});  // zoo models live for the process
  return Status::Ok();
}

// The task, then the formats, whose defaults depend on it.
Status read_task_and_formats(const Request& req, Workload& w) {
  GPUPLAN_TRY(task, req.text("task"));
  GPUPLAN_TRY(t, parse_task(task));
  w.task = t;
  // Defaults that depend on the task: QLoRA's base is NF4 with double quantization and gradient
  // checkpointing on (peft.prepare_model_for_kbit_training enables it).
  w.weights = w.task == Task::kQlora ? WeightFormat::kNf4Dq : WeightFormat::kBf16;
  w.checkpointing = w.task == Task::kQlora ? Checkpointing::kFull : Checkpointing::kNone;
  GPUPLAN_TRY(weights, req.text("weights"));
  if (!weights.empty()) {
    GPUPLAN_TRY(f, parse_weight_format(weights));
    w.weights = f;
  }
  // KV cache defaults to the compute dtype: the weights' 16-bit type, fp16 for quantized formats.
  w.kv_cache = w.weights == WeightFormat::kFp32   ? KvFormat::kFp32
               : w.weights == WeightFormat::kBf16 ? KvFormat::kBf16
                                                  : KvFormat::kFp16;
  GPUPLAN_TRY(kv, req.text("kv_cache"));
  if (!kv.empty()) {
    GPUPLAN_TRY(f, parse_kv_format(kv));
    w.kv_cache = f;
  }
  return Status::Ok();
}

// Batch and lengths. Training rows of the performance data say micro_batch and seq_len; they mean
// batch and context, and are read here only.
Status read_lengths(const Request& req, Workload& w) {
  GPUPLAN_TRY(micro, req.whole("micro_batch", 1));
  GPUPLAN_TRY(batch, req.whole("batch", micro));
  GPUPLAN_TRY(input, req.whole("input_tokens", 0));
  GPUPLAN_TRY(output, req.whole("output_tokens", 0));
  w.batch = batch;
  w.input_tokens = input;
  w.output_tokens = output;
  // Context: given, or prompt + generated, or 4096 capped at the model's positions.
  constexpr int64_t kDefaultContextTokens = 4096;  // a common serving window; the help says so
  int64_t default_context = input + output > 0 ? input + output : kDefaultContextTokens;
  if (input + output == 0 && w.model->max_positions > 0)
    default_context = std::min(default_context, w.model->max_positions);
  if (w.model->kind == ModelKind::kCnn) default_context = 1;
  GPUPLAN_TRY(seq_len, req.whole("seq_len", default_context));
  GPUPLAN_TRY(context, req.whole("context", seq_len));
  w.context = context;
  // Tokens in flight (batch x context): 2^32, 256x a vLLM server's 256 sequences of 64k tokens and 250x
  // the largest published training batches (16M tokens). Beyond it byte counts leave the range where a
  // double counts bytes exactly and the answer is no longer one.
  constexpr int64_t kMaxBatchTokens = int64_t{1} << 32;
  if (w.batch * w.context > kMaxBatchTokens) {
    return usage_error("batch x context = " + std::to_string(w.batch) + " x " + std::to_string(w.context) + " = " +
                           std::to_string(w.batch * w.context) + " tokens is over the bound of " +
                           std::to_string(kMaxBatchTokens) + " (2^32) tokens in flight; lower --batch or --context",
                       "batch");
  }
  return Status::Ok();
}

// Parallel degrees and the sizes of training and engine options.
Status read_layout(const Request& req, Workload& w) {
  GPUPLAN_TRY(tp, req.whole("tp"));
  GPUPLAN_TRY(pp, req.whole("pp"));
  GPUPLAN_TRY(count, req.whole("count"));
  GPUPLAN_TRY(zero, req.whole("zero"));
  GPUPLAN_TRY(rank, req.whole("lora_rank"));
  GPUPLAN_TRY(chunk, req.whole("max_num_batched_tokens"));
  GPUPLAN_TRY(group, req.whole("group_size"));
  w.tp = static_cast<int>(tp);
  w.pp = static_cast<int>(pp);
  w.count = static_cast<int>(count);
  w.zero = static_cast<int>(zero);
  w.lora_rank = rank;
  w.max_num_batched_tokens = chunk;
  w.group_size = static_cast<int>(group);
  if (w.count > 0 && w.count < w.tp * w.pp) {
    return usage_error("count " + std::to_string(w.count) + " is less than tp x pp = " + std::to_string(w.tp * w.pp),
                       "count");
  }
  return Status::Ok();
}

// The KV-cache format an engine gives a workload that names none: `compute_default` (the weights' 16-bit
// type), except TensorRT-LLM, which quantizes the KV cache with an FP8 build: trtllm-bench (0.17
// perf-overview.md: "If you specify FP8 quantization, the KV cache will automatically be set to FP8 as
// well!"; bench/build/tuning.py sizes the cache at the kv_cache_quant_algo's byte), the FP8 recipes of every
// release (0.5 `--enable_fp8 --fp8_kv_cache`, 0.9-0.11 `kv_cache_quant_algo: FP8`) and ModelOpt's FP8
// checkpoints. vLLM keeps `--kv-cache-dtype auto`, the model's 16-bit type, for an FP8 checkpoint.
KvFormat engine_default_kv_format(Engine e, WeightFormat weights, KvFormat compute_default) {
  if (e == Engine::kTensorrtLlm && weights == WeightFormat::kFp8) return KvFormat::kFp8;
  return compute_default;
}

// Optimizer, checkpointing, engine, LoRA targets and the engine's switches.
Status read_training_and_engine(const Request& req, Workload& w) {
  GPUPLAN_TRY(opt, req.text("optimizer"));
  GPUPLAN_TRY(optimizer, parse_optimizer(opt));
  w.optimizer = optimizer;
  GPUPLAN_TRY(ckpt, req.text("checkpointing"));
  if (!ckpt.empty()) {
    GPUPLAN_TRY(v, parse_checkpointing(ckpt));
    w.checkpointing = v;
  }
  GPUPLAN_TRY(engine, req.text("engine"));
  // NAME@VERSION: the name is a word of the engine vocabulary, the version a release or build date.
  const size_t at = engine.find('@');
  GPUPLAN_TRY(e, parse_engine(std::string_view(engine).substr(0, at)));
  w.engine = e;
  if (at != std::string::npos) {
    GPUPLAN_TRY(version, parse_engine_version(std::string_view(engine).substr(at + 1)));
    w.engine_version = version;
  }
  if (!req.has("kv_cache")) w.kv_cache = engine_default_kv_format(w.engine, w.weights, w.kv_cache);
  GPUPLAN_TRY(targets, parse_lora_targets(req));
  w.lora_targets = targets;
  GPUPLAN_TRY(flash, req.boolean("flash_attention"));
  GPUPLAN_TRY(master, req.boolean("master_weights"));
  GPUPLAN_TRY(in_backward, req.boolean("optimizer_in_backward"));
  GPUPLAN_TRY(cpu_offload, req.boolean("cpu_offload"));
  GPUPLAN_TRY(activation_offload, req.boolean("activation_offload"));
  GPUPLAN_TRY(use_cache, req.boolean("use_cache"));
  GPUPLAN_TRY(fsdp_no_sync, req.boolean("fsdp_no_sync"));
  GPUPLAN_TRY(fsdp_mixed_units, req.boolean("fsdp_mixed_units"));
  GPUPLAN_TRY(loss_chunks, req.whole("loss_chunks"));
  GPUPLAN_TRY(quantize_on_load, req.boolean("quantize_on_load"));
  GPUPLAN_TRY(util, req.real("gpu_memory_utilization"));
  GPUPLAN_TRY(dropout, req.real("lora_dropout"));
  w.flash_attention = flash;
  w.master_weights = master;
  w.optimizer_in_backward = in_backward;
  w.cpu_offload = cpu_offload;
  w.activation_offload = activation_offload;
  w.use_cache = use_cache;
  w.fsdp_no_sync = fsdp_no_sync;
  w.fsdp_mixed_units = fsdp_mixed_units;
  w.loss_chunks = static_cast<int>(loss_chunks);
  w.quantize_on_load = quantize_on_load;
  w.gpu_memory_utilization = util.value_or(w.gpu_memory_utilization);
  w.lora_dropout = dropout.value_or(0);
  GPUPLAN_TRY(amp, req.text("amp"));
  GPUPLAN_TRY(a, parse_amp(amp));
  w.amp = a;
  GPUPLAN_TRY(qlora_kernel, req.text("qlora_kernel"));
  w.qlora_torchao = qlora_kernel.empty() ? w.engine == Engine::kPytorch : qlora_kernel == "torchao";
  return Status::Ok();
}

// Combinations no engine runs, said with what to give instead.
Status check_combination(const Workload& w) {
  if (w.amp != Amp::kNone && (w.task == Task::kInfer || w.weights != WeightFormat::kFp32)) {
    return usage_error(
        "--amp trains an fp32 model with 16-bit autocast: give --weights fp32 and a training task "
        "(train, lora); for a model loaded in 16 bits leave --amp out",
        "amp");
  }
  if (w.task == Task::kInfer && (w.optimizer_in_backward || w.cpu_offload || w.activation_offload)) {
    return usage_error(
        "--optimizer-in-backward, --cpu-offload and --activation-offload are training settings; give a training "
        "task (train, lora, qlora) or leave them out",
        w.optimizer_in_backward ? "optimizer_in_backward"
        : w.cpu_offload         ? "cpu_offload"
                                : "activation_offload");
  }
  if (w.task == Task::kInfer && (w.use_cache || w.fsdp_no_sync || w.fsdp_mixed_units)) {
    return usage_error(
        "--use-cache, --fsdp-no-sync and --fsdp-mixed-units describe training runs; give a training task (train, "
        "lora, qlora) or leave them out",
        w.use_cache      ? "use_cache"
        : w.fsdp_no_sync ? "fsdp_no_sync"
                         : "fsdp_mixed_units");
  }
  if ((w.fsdp_no_sync || w.fsdp_mixed_units) && w.zero < 3) {
    return usage_error("--fsdp-no-sync and --fsdp-mixed-units are FSDP settings: give --zero 3 (FSDP full sharding)",
                       w.fsdp_no_sync ? "fsdp_no_sync" : "fsdp_mixed_units");
  }
  if (w.fsdp_mixed_units && w.task != Task::kLora) {
    return usage_error(
        "--fsdp-mixed-units is a LoRA setting (FSDP units holding the frozen 16-bit base and the adapters): give "
        "--task lora",
        "fsdp_mixed_units");
  }
  if (w.cpu_offload && w.zero < 3) {
    return usage_error("--cpu-offload is FSDP's CPUOffload of sharded parameters: give --zero 3 (FSDP full sharding)",
                       "cpu_offload");
  }
  if (w.task == Task::kQlora && !is_quantized(w.weights)) {
    return usage_error("QLoRA needs a quantized base (nf4, nf4-dq, fp4, int4-gptq, ...); got " +
                           std::string(weight_format_info(w.weights).name) + " (use --task lora for a 16-bit base)",
                       "weights");
  }
  if (w.task == Task::kTrain && is_quantized(w.weights) && w.weights != WeightFormat::kFp8) {
    return usage_error("full training needs fp32, bf16, fp16 or fp8 weights; a quantized base trains with --task qlora",
                       "weights");
  }
  return Status::Ok();
}

}  // namespace

Result<Workload> parse_workload(const Json& r) {
  const Request req(r);
  Workload w;
  GPUPLAN_CHECK(read_model(req, w));
  GPUPLAN_CHECK(read_task_and_formats(req, w));
  GPUPLAN_CHECK(read_lengths(req, w));
  GPUPLAN_CHECK(read_layout(req, w));
  GPUPLAN_CHECK(read_training_and_engine(req, w));
  GPUPLAN_CHECK(check_combination(w));
  return w;
}

Json workload_json(const Workload& w) {
  Json j;
  j["model"] = w.model ? w.model->id : "";
  j["task"] = task_name(w.task);
  j["weights"] = weight_format_info(w.weights).name;
  j["kv_cache"] = kv_format_name(w.kv_cache);
  j["batch"] = w.batch;
  j["context"] = w.context;
  if (w.input_tokens > 0) j["input_tokens"] = w.input_tokens;
  if (w.output_tokens > 0) j["output_tokens"] = w.output_tokens;
  j["tp"] = w.tp;
  j["pp"] = w.pp;
  j["count"] = w.gpus();
  j["engine"] = w.engine_version.given
                    ? std::string(engine_name(w.engine)) + "@" + engine_version_text(w.engine_version)
                    : std::string(engine_name(w.engine));
  if (w.task != Task::kInfer) {
    j["optimizer"] = optimizer_name(w.optimizer);
    j["zero"] = w.zero;
    j["checkpointing"] = checkpointing_name(w.checkpointing);
    if (w.optimizer_in_backward) j["optimizer_in_backward"] = true;
    if (w.cpu_offload) j["cpu_offload"] = true;
    if (w.activation_offload) j["activation_offload"] = true;
    if (w.use_cache) j["use_cache"] = true;
    if (w.fsdp_no_sync) j["fsdp_no_sync"] = true;
    if (w.fsdp_mixed_units) j["fsdp_mixed_units"] = true;
    if (w.loss_chunks > 0) j["loss_chunks"] = w.loss_chunks;
  }
  if (w.task == Task::kLora || w.task == Task::kQlora) {
    j["lora_rank"] = w.lora_rank;
    Json t = Json::array();
    for (const VocabEntry& e : lora_target_words()) {
      const auto bit = static_cast<uint32_t>(e.value);
      if (bit != kLoraAllLinear && (w.lora_targets & bit)) t.push_back(e.name);
    }
    j["lora_targets"] = t;
    if (w.lora_dropout > 0) j["lora_dropout"] = w.lora_dropout;
    if (w.task == Task::kQlora) j["qlora_kernel"] = w.qlora_torchao ? "torchao" : "bitsandbytes";
  }
  if (w.amp != Amp::kNone) j["amp"] = amp_name(w.amp);
  j["flash_attention"] = w.flash_attention;
  if (w.engine == Engine::kVllm) j["gpu_memory_utilization"] = w.gpu_memory_utilization;
  if (w.quantize_on_load) j["quantize_on_load"] = true;
  return j;
}

double activation_element_bytes(const Workload& w) {
  return w.weights == WeightFormat::kFp32 && w.amp == Amp::kNone ? 4 : 2;
}

double lora_parameters(const Model& m, uint32_t targets, int64_t rank) {
  if (m.kind == ModelKind::kCnn) return 0;
  double n = 0;
  for (const auto& t : m.tensors) {
    uint32_t bit = 0;
    switch (t.role) {
      case TensorRole::kAttnQ:
        bit = kLoraQ;
        break;
      case TensorRole::kAttnK:
        bit = kLoraK;
        break;
      case TensorRole::kAttnV:
        bit = kLoraV;
        break;
      case TensorRole::kAttnOut:
        bit = kLoraO;
        break;
      case TensorRole::kMlpGate:
        bit = kLoraGate;
        break;
      case TensorRole::kMlpUp:
        bit = kLoraUp;
        break;
      case TensorRole::kMlpDown:
        bit = kLoraDown;
        break;
      default:
        break;
    }
    if (!(targets & bit) || t.expert) continue;
    n += static_cast<double>(rank) * static_cast<double>(t.rows + t.cols) * static_cast<double>(t.count);
  }
  return n;
}

// `--split-mode layer`, llama.cpp's default since PR #4766 ("llama : ggml-backend integration", merged
// 2024-01-12, e7e4df0): each visible GPU holds a contiguous slice of the layers and their KV cache, and a
// pass runs the slices in turn (docs/multi-gpu.md, PR #22729: "Pipeline parallelism. Each GPU holds a
// contiguous slice of layers"), so a decode step is the sum of the GPUs' slices plus the hand-offs
// between them, not a tensor-parallel step. (Earlier builds split every matrix by rows: not modelled.)
constexpr EngineVersion kLlamaCppLayerSplitSince{{2024, 1, 12}, true, 3, '-'};
int layer_split(const Workload& w, int count, bool data_parallel, bool mig) {
  if (count <= 1 || w.tp > 1 || w.pp > 1 || data_parallel || mig) return 1;
  if (w.engine == Engine::kLlamaCpp) return version_before(w.engine_version, kLlamaCppLayerSplitSince) ? 1 : count;
  // transformers' from_pretrained(device_map="auto"), Accelerate's big-model inference ("auto" and
  // "balanced" split the model evenly over the visible GPUs; docs: concept_guides/big_model_inference):
  // each GPU holds a contiguous run of the layers, the embedding on the first and the head on the last,
  // and the forward pass runs them in turn (an AlignDevicesHook moves each block's inputs to its GPU).
  // exllama(v2)'s gpu_split and AutoAWQ's from_quantized(device_map=...) place layers the same way.
  const bool hf_loader =
      w.engine == Engine::kTransformers || w.engine == Engine::kExllama || w.engine == Engine::kAutoawq;
  return hf_loader && w.task == Task::kInfer ? count : 1;
}

}  // namespace gpuplan
