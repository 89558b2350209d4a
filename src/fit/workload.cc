#include "gpuplan/workload.h"

#include <cctype>
#include <cmath>

#include "core/decimal.h"

namespace gpuplan {

namespace {

using Json = nlohmann::ordered_json;

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const Json* field(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return nullptr;
  return &j.at(key);
}

Result<std::string> get_string(const Json& j, const char* key) {
  const Json* v = field(j, key);
  if (!v) return std::string();
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number()) return v->dump();
  return usage_error(std::string("'") + key + "' must be a string", key);
}

Result<int64_t> get_int(const Json& j, const char* key, int64_t fallback, int64_t min, int64_t max) {
  const Json* v = field(j, key);
  if (!v) return fallback;
  double d = 0;
  if (v->is_number()) {
    d = v->get<double>();
  } else if (v->is_string()) {
    // Decimal text only: strtod would also read "0x10", "inf" and "nan".
    const std::string s = v->get<std::string>();
    const auto parsed = parse_decimal(s);
    if (!parsed) return usage_error(std::string("'") + key + "' must be a whole number, got '" + s + "'", key);
    d = *parsed;
  } else {
    return usage_error(std::string("'") + key + "' must be a whole number", key);
  }
  if (!std::isfinite(d) || d != std::floor(d))
    return usage_error(std::string("'") + key + "' must be a whole number", key);
  if (d < static_cast<double>(min) || d > static_cast<double>(max)) {
    return usage_error(
        std::string("'") + key + "' must be between " + std::to_string(min) + " and " + std::to_string(max), key);
  }
  return static_cast<int64_t>(d);
}

Result<double> get_double(const Json& j, const char* key, double fallback) {
  const Json* v = field(j, key);
  if (!v) return fallback;
  if (v->is_number() && std::isfinite(v->get<double>())) return v->get<double>();
  if (v->is_string()) {
    if (const auto d = parse_decimal(v->get<std::string>())) return *d;
  }
  return usage_error(std::string("'") + key + "' must be a finite decimal number", key);
}

Result<bool> get_bool(const Json& j, const char* key, bool fallback) {
  const Json* v = field(j, key);
  if (!v) return fallback;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_string()) {
    const std::string s = lower(v->get<std::string>());
    if (s == "true" || s == "1" || s == "yes") return true;
    if (s == "false" || s == "0" || s == "no") return false;
  }
  return usage_error(std::string("'") + key + "' must be true or false", key);
}

Result<uint32_t> parse_lora_targets(const Json& j) {
  const Json* v = field(j, "lora_targets");
  if (!v) return static_cast<uint32_t>(kLoraQ | kLoraV);
  std::vector<std::string> names;
  auto split = [&](const std::string& s) {
    size_t start = 0;
    while (start <= s.size()) {
      size_t comma = s.find(',', start);
      if (comma == std::string::npos) comma = s.size();
      if (comma > start) names.push_back(s.substr(start, comma - start));
      start = comma + 1;
    }
  };
  if (v->is_string()) {
    split(v->get<std::string>());
  } else if (v->is_array()) {
    for (const auto& item : *v) {
      if (!item.is_string()) return usage_error("'lora_targets' must be a list of module names", "lora_targets");
      split(item.get<std::string>());
    }
  } else {
    return usage_error("'lora_targets' must be a list like q,k,v,o,gate,up,down", "lora_targets");
  }
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

int Workload::data_parallel() const { return std::max(1, gpus() / std::max(1, tp * pp)); }

const std::vector<std::string_view>& workload_keys() {
  static const std::vector<std::string_view> keys = {"model",
                                                     "config",
                                                     "task",
                                                     "weights",
                                                     "kv_cache",
                                                     "batch",
                                                     "context",
                                                     "input_tokens",
                                                     "output_tokens",
                                                     "tp",
                                                     "pp",
                                                     "count",
                                                     "optimizer",
                                                     "zero",
                                                     "checkpointing",
                                                     "lora_rank",
                                                     "lora_targets",
                                                     "engine",
                                                     "flash_attention",
                                                     "gpu_memory_utilization",
                                                     "max_num_batched_tokens",
                                                     "group_size",
                                                     "master_weights",
                                                     "amp",
                                                     "lora_dropout"};
  return keys;
}

Result<Workload> parse_workload(const Json& r) {
  Workload w;
  // The model: an inline config.json, or a zoo id.
  auto model_id = get_string(r, "model");
  if (!model_id) return model_id.error();
  if (const Json* config = field(r, "config")) {
    if (!config->is_object()) return usage_error("'config' must be a config.json object", "config");
    auto m = parse_hf_config(*config, model_id->empty() ? "config.json" : *model_id);
    if (!m) return m.error();
    w.model = std::make_shared<const Model>(std::move(m).value());
  } else {
    if (model_id->empty())
      return usage_error("give --model: a zoo id (gpuplan fit --model llama-2-7b) or a config.json path", "model");
    auto m = zoo_model(*model_id);
    if (!m) return m.error();
    w.model = std::shared_ptr<const Model>(*m, [](const Model*) {});  // zoo models live for the process
  }

  auto task = get_string(r, "task");
  if (!task) return task.error();
  if (!task->empty()) {
    auto t = parse_task(*task);
    if (!t) return t.error();
    w.task = *t;
  }
  // Defaults that depend on the task: QLoRA's base is NF4 with double quantization and gradient
  // checkpointing on (peft.prepare_model_for_kbit_training enables it).
  w.weights = w.task == Task::kQlora ? WeightFormat::kNf4Dq : WeightFormat::kBf16;
  w.checkpointing = w.task == Task::kQlora ? Checkpointing::kFull : Checkpointing::kNone;

  auto weights = get_string(r, "weights");
  if (!weights) return weights.error();
  if (!weights->empty()) {
    auto f = parse_weight_format(*weights);
    if (!f) return f.error();
    w.weights = *f;
  }
  // KV cache defaults to the compute dtype: the weights' 16-bit type, fp16 for quantized formats.
  w.kv_cache = w.weights == WeightFormat::kFp32   ? KvFormat::kFp32
               : w.weights == WeightFormat::kBf16 ? KvFormat::kBf16
                                                  : KvFormat::kFp16;
  auto kv = get_string(r, "kv_cache");
  if (!kv) return kv.error();
  if (!kv->empty()) {
    auto f = parse_kv_format(*kv);
    if (!f) return f.error();
    w.kv_cache = *f;
  }

  constexpr int64_t kMaxTokens = int64_t{1} << 24;
  // Training rows of the performance data say micro_batch and seq_len; they mean batch and context.
  auto micro = get_int(r, "micro_batch", 1, 1, 1 << 20);
  if (!micro) return micro.error();
  auto batch = get_int(r, "batch", *micro, 1, 1 << 20);
  auto input = get_int(r, "input_tokens", 0, 0, kMaxTokens);
  auto output = get_int(r, "output_tokens", 0, 0, kMaxTokens);
  if (!batch) return batch.error();
  if (!input) return input.error();
  if (!output) return output.error();
  w.batch = *batch;
  w.input_tokens = *input;
  w.output_tokens = *output;
  // Context: given, or prompt + generated, or 4096 capped at the model's positions.
  int64_t default_context = *input + *output > 0 ? *input + *output : 4096;
  if (*input + *output == 0 && w.model->max_positions > 0)
    default_context = std::min(default_context, w.model->max_positions);
  if (w.model->kind == ModelKind::kCnn) default_context = 1;
  auto seq_len = get_int(r, "seq_len", default_context, 1, kMaxTokens);
  if (!seq_len) return seq_len.error();
  auto context = get_int(r, "context", *seq_len, 1, kMaxTokens);
  if (!context) return context.error();
  w.context = *context;
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

  auto tp = get_int(r, "tp", 1, 1, 1024);
  auto pp = get_int(r, "pp", 1, 1, 1024);
  auto count = get_int(r, "count", 0, 0, 65536);
  auto zero = get_int(r, "zero", 0, 0, 3);
  auto rank = get_int(r, "lora_rank", 16, 1, 65536);
  auto chunk = get_int(r, "max_num_batched_tokens", 0, 0, kMaxTokens);
  auto group = get_int(r, "group_size", 0, 0, 1 << 16);
  if (!tp) return tp.error();
  if (!pp) return pp.error();
  if (!count) return count.error();
  if (!zero) return zero.error();
  if (!rank) return rank.error();
  if (!chunk) return chunk.error();
  if (!group) return group.error();
  w.tp = static_cast<int>(*tp);
  w.pp = static_cast<int>(*pp);
  w.count = static_cast<int>(*count);
  w.zero = static_cast<int>(*zero);
  w.lora_rank = *rank;
  w.max_num_batched_tokens = *chunk;
  w.group_size = static_cast<int>(*group);
  if (w.count > 0 && w.count < w.tp * w.pp) {
    return usage_error("count " + std::to_string(w.count) + " is less than tp x pp = " + std::to_string(w.tp * w.pp),
                       "count");
  }

  auto opt = get_string(r, "optimizer");
  if (!opt) return opt.error();
  if (!opt->empty()) {
    auto v = parse_optimizer(*opt);
    if (!v) return v.error();
    w.optimizer = *v;
  }
  auto ckpt = get_string(r, "checkpointing");
  if (!ckpt) return ckpt.error();
  if (!ckpt->empty()) {
    auto v = parse_checkpointing(*ckpt);
    if (!v) return v.error();
    w.checkpointing = *v;
  }
  auto engine = get_string(r, "engine");
  if (!engine) return engine.error();
  if (!engine->empty()) {
    auto v = parse_engine(*engine);
    if (!v) return v.error();
    w.engine = *v;
  }
  auto targets = parse_lora_targets(r);
  if (!targets) return targets.error();
  w.lora_targets = *targets;
  auto flash = get_bool(r, "flash_attention", true);
  auto master = get_bool(r, "master_weights", true);
  auto util = get_double(r, "gpu_memory_utilization", 0.9);
  if (!flash) return flash.error();
  if (!master) return master.error();
  if (!util) return util.error();
  if (*util <= 0 || *util > 1)
    return usage_error("'gpu_memory_utilization' must be in (0, 1]", "gpu_memory_utilization");
  w.flash_attention = *flash;
  w.master_weights = *master;
  w.gpu_memory_utilization = *util;
  auto dropout = get_double(r, "lora_dropout", 0.0);
  if (!dropout) return dropout.error();
  if (*dropout < 0 || *dropout >= 1) return usage_error("'lora_dropout' must be in [0, 1)", "lora_dropout");
  w.lora_dropout = *dropout;
  auto amp = get_string(r, "amp");
  if (!amp) return amp.error();
  if (!amp->empty()) {
    auto v = parse_amp(*amp);
    if (!v) return v.error();
    w.amp = *v;
  }
  if (w.amp != Amp::kNone && (w.task == Task::kInfer || w.weights != WeightFormat::kFp32)) {
    return usage_error(
        "--amp trains an fp32 model with 16-bit autocast: give --weights fp32 and a training task "
        "(train, lora); for a model loaded in 16 bits leave --amp out",
        "amp");
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
  j["engine"] = engine_name(w.engine);
  if (w.task != Task::kInfer) {
    j["optimizer"] = optimizer_name(w.optimizer);
    j["zero"] = w.zero;
    j["checkpointing"] = checkpointing_name(w.checkpointing);
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
  }
  if (w.amp != Amp::kNone) j["amp"] = amp_name(w.amp);
  j["flash_attention"] = w.flash_attention;
  if (w.engine == Engine::kVllm) j["gpu_memory_utilization"] = w.gpu_memory_utilization;
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

}  // namespace gpuplan
