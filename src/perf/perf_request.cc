#include "perf/perf_request.h"

#include <algorithm>
#include <cmath>

#include "core/request.h"
#include "gpuplan/formats.h"
#include "gpuplan/options.h"

namespace gpuplan::perf {

const std::vector<std::string_view>& perf_request_keys() {
  // The workload and perf groups of data/options.yaml, and the targets (gpu).
  static const std::vector<std::string_view> keys = [] {
    std::vector<std::string_view> k;
    if (auto table = option_table()) {
      k = (*table)->group_keys("workload");
      for (auto extra : (*table)->group_keys("perf")) k.push_back(extra);
    }
    k.push_back("gpu");
    return k;
  }();
  return keys;
}

namespace {

PerfTask perf_task(Task t) {
  switch (t) {
    case Task::kInfer:
      return PerfTask::kInfer;
    case Task::kTrain:
      return PerfTask::kTrain;
    case Task::kLora:
      return PerfTask::kLora;
    case Task::kQlora:
      return PerfTask::kQlora;
  }
  return PerfTask::kInfer;
}

PerfRecompute perf_recompute(Checkpointing c) {
  switch (c) {
    case Checkpointing::kNone:
      return PerfRecompute::kNone;
    case Checkpointing::kSelective:
      return PerfRecompute::kSelective;
    case Checkpointing::kFull:
      return PerfRecompute::kFull;
  }
  return PerfRecompute::kNone;
}

PerfEngine perf_engine(Engine e) {
  switch (e) {
    case Engine::kTransformers:
      return PerfEngine::kTransformers;
    case Engine::kPytorch:
      return PerfEngine::kPytorch;
    case Engine::kVllm:
      return PerfEngine::kVllm;
    case Engine::kTgi:
      return PerfEngine::kTgi;
    case Engine::kDeepspeed:
      return PerfEngine::kDeepspeed;
    case Engine::kLlamaCpp:
      return PerfEngine::kLlamaCpp;
    case Engine::kMegatron:
      return PerfEngine::kMegatron;
    case Engine::kTensorrtLlm:
      return PerfEngine::kTensorrtLlm;
  }
  return PerfEngine::kTransformers;
}

}  // namespace

Result<PerfSetup> parse_perf_setup(const Json& request) {
  Request req(request);
  PerfSetup s;
  // The fit reading of the workload, after the spellings validation rows use.
  Json fit_req = Json::object();
  for (auto it = request.begin(); it != request.end(); ++it) {
    if (std::find(workload_keys().begin(), workload_keys().end(), it.key()) != workload_keys().end()) {
      fit_req[it.key()] = it.value();
    }
  }
  GPUPLAN_TRY(task_text, req.string("task"));
  const bool infer = task_text.empty() || task_text == "infer";
  if (req.has("checkpointing") && req.raw("checkpointing").is_boolean()) {
    fit_req["checkpointing"] = req.raw("checkpointing").get<bool>() ? "full" : "none";
  }
  if (fit_req.contains("weights") && fit_req["weights"] == "tf32") fit_req["weights"] = "fp32";  // TF32 matmuls
  // Engines the memory model has no profile for run with its plain-PyTorch profile.
  GPUPLAN_TRY(engine_text, req.string("engine"));
  GPUPLAN_TRY(engine, parse_perf_engine(engine_text));
  if (engine == PerfEngine::kExllama || engine == PerfEngine::kAuto) fit_req.erase("engine");
  // Inference lengths: output defaults to 128 tokens; the prompt fills the context, or 512 tokens.
  s.lengths_given = req.has("input_tokens") || req.has("output_tokens");
  // The perf defaults the help of input_tokens and output_tokens states (data/options.yaml).
  constexpr long long kDefaultInputTokens = 512;
  constexpr long long kDefaultOutputTokens = 128;
  GPUPLAN_TRY(context, req.whole("context", 0));
  GPUPLAN_TRY(output, req.whole("output_tokens", infer ? kDefaultOutputTokens : 0));
  GPUPLAN_TRY(input,
              req.whole("input_tokens", context > 0 ? std::max<long long>(1, context - output) : kDefaultInputTokens));
  if (infer) {
    fit_req["input_tokens"] = std::max<long long>(1, input);
    fit_req["output_tokens"] = output;
    fit_req["context"] = std::max<long long>(1, input) + output;
  }
  GPUPLAN_TRY(w, parse_workload(fit_req));
  s.workload = w;
  s.arch = perf_arch(*w.model);
  PerfWorkload& p = s.perf;
  p.task = perf_task(w.task);
  p.engine = engine_text.empty() ? perf_engine(w.engine) : engine;
  p.activation_bytes = activation_element_bytes(w);
  p.kv_bytes = kv_bytes_per_element(w.kv_cache);
  p.batch = w.batch;
  p.micro_batch = w.batch;
  p.input_tokens = std::max<int64_t>(1, w.prompt_tokens());
  p.output_tokens = std::max<int64_t>(1, infer ? w.output_tokens : 1);
  p.seq_len = w.context;
  p.tp = w.tp;
  p.pp = w.pp;
  p.zero = w.zero;
  p.checkpointing = perf_recompute(w.checkpointing);
  p.flash_attention = w.flash_attention;
  if (w.task == Task::kLora || w.task == Task::kQlora) {
    p.trainable_parameters = lora_parameters(*w.model, w.lora_targets, w.lora_rank);
  }
  GPUPLAN_TRY(dp, req.whole("dp"));
  p.dp = static_cast<int>(dp);  // 0: count / (tp x pp), set per target
  GPUPLAN_TRY(fsdp, req.boolean("fsdp"));
  p.fsdp = fsdp;
  GPUPLAN_TRY(graphs, req.boolean("cuda_graphs", p.engine != PerfEngine::kTransformers));
  p.cuda_graphs = graphs;
  s.batch_given = req.has("batch") || req.has("micro_batch");
  GPUPLAN_TRY(global, req.whole("global_batch"));
  p.global_batch = global;
  GPUPLAN_TRY(rate, req.real("rate"));
  s.rate = rate.value_or(0);
  GPUPLAN_TRY(train_tokens, req.real("train_tokens"));
  s.train_tokens = train_tokens.value_or(0);
  GPUPLAN_TRY(eff_text, req.text("efficiency"));
  GPUPLAN_TRY(eff, parse_efficiency(eff_text, default_efficiency()));
  s.efficiency = eff;
  return s;
}

PerfWorkload workload_for(const PerfSetup& s, const PerfDevice& device, int count) {
  PerfWorkload w = s.perf;
  // Autocast computes the matmuls in 16 bits on cast copies of the fp32 weights.
  const WeightFormat compute_format = s.workload.amp == Amp::kBf16   ? WeightFormat::kBf16
                                      : s.workload.amp == Amp::kFp16 ? WeightFormat::kFp16
                                                                     : s.workload.weights;
  w.weights = perf_weights(compute_format, *s.workload.model, device, w.engine);
  if (w.dp <= 0) w.dp = std::max(1, count / std::max(1, w.tp * w.pp));
  return w;
}

// Sequences a serving engine schedules at once, whatever memory allows: vLLM's max_num_seqs defaults to
// 256 (vllm/engine/arg_utils.py, EngineArgs.max_num_seqs); TGI's router batches up to its token budget
// (max_batch_total_tokens, sized from memory) and TensorRT-LLM's trtllm-bench sizes max_batch_size from
// memory (up to 8192 with CUDA graphs), so neither is capped here.
constexpr int64_t kVllmMaxNumSeqs = 256;

Engine rules_engine(const PerfSetup& s) {
  if (s.perf.engine == PerfEngine::kAuto && s.workload.task == Task::kInfer) return Engine::kVllm;
  return s.workload.engine;
}

Result<MemoryVerdict> MemoryCache::verdict(const Target& t) {
  const int count = std::max(t.count, s_.workload.tp * s_.workload.pp);
  auto prepared = [&](std::map<int, PreparedWorkload>& cache, bool serving) -> Result<const PreparedWorkload*> {
    if (auto it = cache.find(count); it != cache.end()) return &it->second;
    Workload w = s_.workload;
    w.count = count;
    if (serving) {
      // In flight, sequences are half-way through their output on average.
      w.context = s_.perf.input_tokens + std::max<int64_t>(1, s_.perf.output_tokens / 2);
      w.input_tokens = std::min(w.input_tokens, w.context);
    }
    auto p = prepare(w);
    if (!p) return p.error();
    return &cache.emplace(count, std::move(p).value()).first->second;
  };
  MemoryVerdict v;
  GPUPLAN_TRY(base, prepared(fit_, false));
  Target tc = t;
  tc.count = count;
  const Engine engine = rules_engine(s_);
  const TargetFit f = fit_target(*base, tc, engine);
  v.fits = f.fits;
  v.total_bytes = f.total_bytes;
  v.capacity_bytes = f.capacity_bytes;
  v.limit_bytes = f.limit_bytes;
  if (f.refusal) {
    Workload as = s_.workload;
    as.engine = engine;
    as.count = count;
    v.refusal = explain_refusal(*f.refusal, as, &tc);
    return v;
  }
  if (s_.workload.task == Task::kInfer && s_.workload.model->kind != ModelKind::kCnn) {
    GPUPLAN_TRY(serve, prepared(serving_, true));
    const TargetFit sf = fit_target(*serve, tc, engine);
    const double mean_tokens =
        static_cast<double>(s_.perf.input_tokens) + static_cast<double>(s_.perf.output_tokens) / 2;
    v.serving_max_batch = sf.kv_pool_tokens > 0
                              ? static_cast<int64_t>(std::floor(static_cast<double>(sf.kv_pool_tokens) / mean_tokens))
                              : sf.max_batch;
    if (s_.perf.engine == PerfEngine::kVllm || s_.perf.engine == PerfEngine::kAuto) {
      v.serving_max_batch = std::min(v.serving_max_batch, kVllmMaxNumSeqs);
    }
  }
  return v;
}

}  // namespace gpuplan::perf
