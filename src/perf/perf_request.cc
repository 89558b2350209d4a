#include "perf/perf_request.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "api/request.h"
#include "gpuplan/formats.h"

namespace gpuplan::perf {

const std::vector<std::string_view>& perf_request_keys() {
  static const std::vector<std::string_view> keys = {
      // the workload options of `gpuplan fit`
      "model", "config", "task", "weights", "kv_cache", "batch", "context", "gpu", "count", "tp", "pp", "optimizer",
      "zero", "checkpointing", "lora_rank", "lora_targets", "engine", "flash_attention", "gpu_memory_utilization",
      "max_num_batched_tokens", "group_size", "master_weights",
      // performance options
      "input_tokens", "output_tokens", "rate", "train_tokens", "efficiency", "dp", "micro_batch", "global_batch",
      "seq_len", "fsdp", "cuda_graphs"};
  return keys;
}

namespace {

Result<PerfTask> parse_task(const std::string& s) {
  if (s.empty() || s == "infer" || s == "inference") return PerfTask::kInfer;
  if (s == "train" || s == "training") return PerfTask::kTrain;
  if (s == "lora") return PerfTask::kLora;
  if (s == "qlora") return PerfTask::kQlora;
  return usage_error("unknown task '" + s + "'; use infer, train, lora or qlora", "task");
}

Result<PerfRecompute> parse_checkpointing(const api::Request& req) {
  if (!req.has("checkpointing")) return PerfRecompute::kNone;
  const Json& v = req.raw("checkpointing");
  if (v.is_boolean()) return v.get<bool>() ? PerfRecompute::kFull : PerfRecompute::kNone;
  const std::string s = v.is_string() ? v.get<std::string>() : "";
  if (s == "none" || s == "false") return PerfRecompute::kNone;
  if (s == "selective") return PerfRecompute::kSelective;
  if (s == "full" || s == "true") return PerfRecompute::kFull;
  return usage_error("checkpointing must be none, selective or full", "checkpointing");
}

#define GP_TRY(var, expr)               \
  auto var##_r = (expr);                \
  if (!var##_r) return var##_r.error(); \
  const auto var = *var##_r

}  // namespace

Result<PerfSetup> parse_perf_setup(const Json& request) {
  api::Request req(request);
  PerfSetup s;
  // Model: a zoo id, or a config.json given inline.
  GP_TRY(model_id, req.string("model"));
  if (req.has("config")) {
    auto m = parse_hf_config(req.raw("config"), model_id.empty() ? "config" : model_id);
    if (!m) return m.error();
    static thread_local std::vector<std::unique_ptr<Model>> owned;  // keeps inline models alive per thread
    owned.push_back(std::make_unique<Model>(std::move(*m)));
    if (owned.size() > 64) owned.erase(owned.begin());
    s.model = owned.back().get();
  } else {
    if (model_id.empty()) return usage_error("give --model (a zoo id such as llama-2-7b) or --config", "model");
    auto m = zoo_model(model_id);
    if (!m) return m.error();
    s.model = *m;
  }
  s.arch = perf_arch(*s.model);
  PerfWorkload& w = s.workload;
  GP_TRY(task, req.string("task"));
  GP_TRY(ptask, parse_task(task));
  w.task = ptask;
  GP_TRY(weights, req.string("weights", "bf16"));
  std::string wname = weights;
  if (wname == "tf32") wname = "fp32";  // fp32 weights, matmuls on TF32 tensor cores
  GP_TRY(wf, parse_weight_format(wname));
  s.weights = wf;
  const bool fp32 = wf == WeightFormat::kFp32;
  w.activation_bytes = fp32 ? 4.0 : 2.0;
  GP_TRY(kv, req.string("kv_cache", ""));
  if (kv.empty()) {
    w.kv_bytes = fp32 ? 4.0 : 2.0;
  } else {
    GP_TRY(kf, parse_kv_format(kv));
    w.kv_bytes = kv_bytes_per_element(kf);
  }
  GP_TRY(engine, req.string("engine", ""));
  GP_TRY(pe, parse_perf_engine(engine));
  w.engine = pe;
  if (w.engine == PerfEngine::kAuto && w.task != PerfTask::kInfer) w.engine = PerfEngine::kPytorch;
  GP_TRY(tp, req.integer("tp", 1, 1, 4096));
  GP_TRY(pp, req.integer("pp", 1, 1, 4096));
  GP_TRY(count, req.integer("count", 0, 0, 1 << 20));
  GP_TRY(dp, req.integer("dp", 0, 0, 1 << 20));
  w.tp = static_cast<int>(tp);
  w.pp = static_cast<int>(pp);
  s.count = static_cast<int>(count);
  if (dp > 0) {
    w.dp = static_cast<int>(dp);
  } else {
    w.dp = count > 0 ? std::max<int>(1, static_cast<int>(count / (tp * pp))) : 1;
  }
  GP_TRY(zero, req.integer("zero", 0, 0, 3));
  w.zero = static_cast<int>(zero);
  GP_TRY(fsdp, req.flag("fsdp", false));
  w.fsdp = fsdp;
  GP_TRY(ckpt, parse_checkpointing(req));
  w.checkpointing = ckpt;
  GP_TRY(flash, req.flag("flash_attention", true));
  w.flash_attention = flash;
  GP_TRY(graphs, req.flag("cuda_graphs", w.engine != PerfEngine::kTransformers));
  w.cuda_graphs = graphs;
  // Lengths. Inference: prompt + generated = context. Training: sequence length = context.
  GP_TRY(context, req.integer("context", 0, 0, 1 << 24));
  GP_TRY(output, req.integer("output_tokens", 128, 0, 1 << 24));
  GP_TRY(input, req.integer("input_tokens", context > 0 ? std::max<long long>(1, context - output) : 512, 0, 1 << 24));
  w.input_tokens = std::max<long long>(1, input);
  w.output_tokens = std::max<long long>(1, output);
  GP_TRY(seq, req.integer("seq_len", context > 0 ? context : 2048, 1, 1 << 24));
  w.seq_len = seq;
  s.batch_given = req.has("batch") || req.has("micro_batch");
  GP_TRY(batch, req.integer("batch", 1, 1, 1 << 24));
  GP_TRY(micro, req.integer("micro_batch", batch, 1, 1 << 24));
  w.batch = batch;
  w.micro_batch = micro;
  GP_TRY(global, req.integer("global_batch", 0, 0, 1LL << 40));
  w.global_batch = global;
  GP_TRY(rate, req.number("rate", 0));
  if (rate < 0) return usage_error("rate must be >= 0 requests per second", "rate");
  s.rate = rate;
  GP_TRY(train_tokens, req.number("train_tokens", 0));
  if (train_tokens < 0) return usage_error("train_tokens must be >= 0", "train_tokens");
  s.train_tokens = train_tokens;
  GP_TRY(eff_text, req.string("efficiency", ""));
  GP_TRY(eff, parse_efficiency(eff_text, default_efficiency()));
  s.efficiency = eff;
  return s;
}

Target make_target(const TargetRef& ref, int count) {
  Target t{ref, std::max(1, count), Link::kPcie};
  const Gpu& g = *ref.gpu;
  const bool sxm = g.form_factor.rfind("sxm", 0) == 0;
  if (!ref.is_mig() && g.number("nvlink_gbps", 0) > 0 && (sxm || t.count <= 2)) t.link = Link::kNvlink;
  return t;
}

PerfWorkload workload_for(const PerfSetup& s, const PerfDevice& device) {
  PerfWorkload w = s.workload;
  w.weights = perf_weights(s.weights, *s.model, device, w.engine);
  return w;
}

// Reserve of a serving engine besides weights and KV: CUDA context, activations of one prefill chunk,
// workspaces (about 1.5 GiB on a 7B model in vLLM's startup log "model weights ... KV cache ...").
constexpr double kServingReserveBytes = 1.5 * 1024.0 * 1024.0 * 1024.0;
// Share of the GPU a serving engine takes (vLLM gpu_memory_utilization default 0.9).
constexpr double kServingUtilization = 0.9;

int64_t estimate_max_batch(const PerfSetup& s, const PerfWorkload& w, const Target& t) {
  if (s.arch.cnn) return 0;
  const double shards = std::max(1, w.tp) * std::max(1, w.pp);
  const WeightBytes wb = model_weight_bytes(*s.model, s.weights);
  const double free_bytes =
      t.memory_total_bytes() * kServingUtilization - wb.total_bytes / shards - kServingReserveBytes;
  // Paged KV (vLLM, TensorRT-LLM in-flight batching): sequences in flight are on average half-way through
  // their output, so the pool holds pool / (input + output / 2) of them.
  const double tokens = static_cast<double>(w.input_tokens) + static_cast<double>(w.output_tokens) / 2.0;
  const double per_seq = s.model->kv_elements(static_cast<int64_t>(tokens)) * w.kv_bytes / shards;
  if (free_bytes <= 0 || per_seq <= 0) return 0;
  return static_cast<int64_t>(std::floor(free_bytes / per_seq));
}

}  // namespace gpuplan::perf
