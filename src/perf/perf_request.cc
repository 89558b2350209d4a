#include "perf/perf_request.h"

#include <algorithm>
#include <cmath>

#include "core/request.h"
#include "gpuplan/formats.h"
#include "gpuplan/options.h"
#include "perf/constants.h"

namespace gpuplan::perf {

const std::vector<std::string_view>& perf_request_keys() {
  // The workload and perf groups of data/options.yaml, and the targets (gpu).
  static const std::vector<std::string_view> keys = [] {
    std::vector<std::string_view> k;
    if (auto table = option_table()) {
      k = (*table)->group_keys("workload");
      for (auto extra : (*table)->group_keys("perf")) k.push_back(extra);
    }
    k.emplace_back("gpu");
    return k;
  }();
  return keys;
}

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
  // Any spelling of the task the vocabulary reads; an unknown one is parse_workload's error below.
  const auto task = parse_task(task_text);
  const bool infer = task_text.empty() || (task && *task == Task::kInfer);
  if (req.has("checkpointing") && req.raw("checkpointing").is_boolean()) {
    fit_req["checkpointing"] = req.raw("checkpointing").get<bool>() ? "full" : "none";
  }
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
  PerfRun& p = s.run;
  p.activation_bytes = activation_element_bytes(w);
  p.kv_bytes = kv_bytes_per_element(w.kv_cache);
  if (w.task == Task::kLora || w.task == Task::kQlora) {
    p.trainable_parameters = lora_parameters(*w.model, w.lora_targets, w.lora_rank);
  }
  GPUPLAN_TRY(dp, req.whole("dp"));
  p.dp = static_cast<int>(dp);  // 0: count / (tp x pp), set per target
  GPUPLAN_TRY(fsdp, req.boolean("fsdp"));
  p.fsdp = fsdp;
  GPUPLAN_TRY(vp, req.whole("vp", 1));
  p.vp = static_cast<int>(vp);
  // CUDA graphs by default where the engine (at its version) replays decode steps as graphs.
  const bool graphs_default =
      engine_perf(w.engine).cuda_graphs &&
      !(w.engine == Engine::kLlamaCpp && version_before(w.engine_version, kLlamaCppCudaGraphsSince));
  GPUPLAN_TRY(graphs, req.boolean("cuda_graphs", graphs_default));
  p.cuda_graphs = graphs;
  if (w.engine == Engine::kLlamaCpp) {
    // llama.cpp's 16-bit cuBLAS matmuls (constants.h, "llama.cpp prompt processing").
    p.fp16_accumulate = true;
    p.cublas_convert_bytes = kLlamaCppCublasConvertBytesPerElement;
    p.fp16_cublas_above_rows = kLlamaCppFp16CublasAboveRows;
    // Flash attention as the request says (-fa), else the build's default: off before PR #15434.
    const bool flash = req.has("flash_attention") ? w.flash_attention
                                                  : !version_before(w.engine_version, kLlamaCppFlashAttnDefaultSince);
    if (!flash) {
      p.kq_gemm_bytes = kLlamaCppKqGemmBytesPerScore;
      p.kq_pass_bytes = kLlamaCppKqPassBytesPerScore;
    }
  }
  GPUPLAN_TRY(channels_last, req.boolean("channels_last", true));
  p.channels_last = channels_last;
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

PerfRun run_for(const PerfSetup& s, const PerfDevice& device, int count) {
  PerfRun w = s.run;
  // Autocast computes the matmuls in 16 bits on cast copies of the fp32 weights.
  const WeightFormat compute_format = s.workload.amp == Amp::kBf16   ? WeightFormat::kBf16
                                      : s.workload.amp == Amp::kFp16 ? WeightFormat::kFp16
                                                                     : s.workload.weights;
  w.weights = perf_weights(compute_format, *s.workload.model, device, s.workload.engine);
  if (s.workload.engine == Engine::kLlamaCpp) {
    // ggml-cuda's choice for quantized matrices (constants.h, "llama.cpp kernels"): MMQ, or dequantize to
    // fp16 + cuBLAS above a row count, by build and by the GPU's tensor cores.
    const bool fp16_tensor_cores = device.peak(Precision::kFp16) > 0 || device.peak(Precision::kBf16) > 0;
    const bool int8_mma = device.peak(Precision::kInt8) > 0;
    if (weight_format_info(s.workload.weights).family == FormatFamily::kGguf && fp16_tensor_cores) {
      if (version_before(s.workload.engine_version, kLlamaCppMmqDefaultSince)) {
        w.cublas_above_rows = kLlamaCppCublasAboveRowsOld;
      } else if (!int8_mma) {
        w.cublas_above_rows = kLlamaCppCublasAboveRowsDp4a;
      }
    }
    w.prefill_chunk_tokens = kLlamaCppUbatchTokens;
    w.matvec_max_rows = w.weights.dequantize ? kLlamaCppMmvqMaxRows : kLlamaCppFp16CublasAboveRows;
    w.matvec_bytes_per_sm_second = kLlamaCppMatVecBytesPerSmSecond;
  }
  w.layer_split = layer_split(s.workload, count, s.run.dp > 0, device.mig);
  if (w.layer_split > 1) {
    w.dp = 1;
    if (s.workload.engine != Engine::kLlamaCpp) {
      // device_map="auto": the hook moves the hidden states in the model's dtype.
      w.handoff_element_bytes = w.activation_bytes;
    } else {
      w.handoff_element_bytes = kLlamaCppHandoffBytesPerElement;
      if (!version_before(s.workload.engine_version, kLlamaCppPipelineSince)) {
        w.pipeline_copies = kLlamaCppSchedMaxCopies;
        w.pipeline_call_tokens = kLlamaCppPipelineCallTokens;
      }
    }
  }
  const double linears =
      kAttentionLinears + (s.arch.gated_mlp ? kGatedMlpLinears : kPlainMlpLinears);  // transformers' modules
  if (s.workload.task == Task::kInfer && !s.arch.cnn && s.workload.engine != Engine::kLlamaCpp) {
    // bitsandbytes in inference (constants.h, "bitsandbytes"): 4-bit dequantizes to a 16-bit copy above
    // one row; LLM.int8 decomposes every call. (QLoRA training has its own dequantize cost.)
    switch (s.workload.weights) {
      case WeightFormat::kNf4:
      case WeightFormat::kNf4Dq:
      case WeightFormat::kFp4:
      case WeightFormat::kFp4Dq:
        w.cublas_above_rows = kBnb4bitGemvMaxRows;
        w.linears_per_layer = linears;
        break;
      case WeightFormat::kLlmInt8:
        w.extra_kernels_per_layer = linears * kLlmInt8ExtraKernelsPerLinear;
        break;
      default:
        break;
    }
  }
  // Compiled PyTorch runs int4 weight-only linears with tinygemm (gpt-fast quantize.py
  // WeightOnlyInt4Linear, torchao int4 weight-only's tensor-core tiled layout): constants.h, "tinygemm".
  if (s.workload.task == Task::kInfer && s.workload.engine == Engine::kTorchCompile &&
      (s.workload.weights == WeightFormat::kInt4Gptq || s.workload.weights == WeightFormat::kInt4Awq)) {
    w.tinygemm = true;
  }
  if (w.dp <= 0) w.dp = std::max(1, count / std::max(1, s.workload.tp * s.workload.pp));
  return w;
}

// Sequences a serving engine schedules at once, whatever memory allows: vLLM's max_num_seqs defaults to
// 256, and from 0.9 to 1024 on GPUs of 70 GiB or more but the A100 (constants.h, "engine versions");
// TGI's router batches up to its token budget (max_batch_total_tokens, sized from memory), uncapped here;
// TensorRT-LLM's trtllm-bench sizes max_batch_size from memory, capped at 4096 / pp (tuning.py). "auto"
// inference keeps vLLM's long-standing 256.
namespace {
// KV tokens a serving engine holds per sequence in flight: a scheduler that allocates blocks as tokens come
// and preempts (vLLM, TGI) holds the prompt and, on average, half the output; TensorRT-LLM's
// guaranteed_no_evict capacity scheduler reserves the prompt and the whole output at admission (constants.h,
// kTensorrtLlmBenchMaxBatch's comment).
double serving_tokens_per_sequence(const Workload& w) {
  const double input = static_cast<double>(perf_input_tokens(w));
  const double output = static_cast<double>(perf_output_tokens(w));
  return w.engine == Engine::kTensorrtLlm ? input + output : input + output / 2;
}

int64_t vllm_max_num_seqs(const Workload& w, const Target& t) {
  if (w.engine != Engine::kVllm || version_before(w.engine_version, kVllmLargeGpuDefaultsSince)) {
    return kVllmMaxNumSeqs;
  }
  const bool a100 = t.id().find("a100") != std::string::npos;
  return t.memory_total_bytes() >= kVllmLargeGpuMinBytes && !a100 ? kVllmMaxNumSeqsLargeGpu : kVllmMaxNumSeqs;
}
}  // namespace

Result<MemoryVerdict> MemoryCache::verdict(const Target& t) {
  const int count = std::max(t.count, s_.workload.tp * s_.workload.pp);
  auto prepared = [&](std::map<int, PreparedWorkload>& cache, bool serving) -> Result<const PreparedWorkload*> {
    const int key = 2 * count + (t.ref.is_mig() ? 1 : 0);  // MIG slices are replicas, not a split
    if (auto it = cache.find(key); it != cache.end()) return &it->second;
    Workload w = s_.workload;
    w.count = count;
    // A layer split holds a slice of the layers (and of the KV cache) per GPU, as pipeline stages.
    const int stages = layer_split(s_.workload, count, s_.run.dp > 0, t.ref.is_mig());
    if (stages > 1) w.pp = stages;
    if (serving) {
      // In flight, sequences are half-way through their output on average; TensorRT-LLM's scheduler
      // reserves the whole output (serving_tokens_per_sequence).
      const int64_t output = perf_output_tokens(s_.workload);
      w.context = perf_input_tokens(s_.workload) +
                  (s_.workload.engine == Engine::kTensorrtLlm ? output : std::max<int64_t>(1, output / 2));
      w.input_tokens = std::min(w.input_tokens, w.context);
    }
    auto p = prepare(w);
    if (!p) return p.error();
    return &cache.emplace(key, std::move(p).value()).first->second;
  };
  MemoryVerdict v;
  GPUPLAN_TRY(base, prepared(fit_, false));
  Target tc = t;
  tc.count = count;
  const TargetFit f = fit_target(*base, tc);
  v.fits = f.fits;
  v.total_bytes = f.total_bytes;
  v.capacity_bytes = f.capacity_bytes;
  v.limit_bytes = f.limit_bytes;
  if (f.refusal) {
    v.refusal = explain_refusal(*f.refusal, *base, &tc);
    return v;
  }
  if (s_.workload.task == Task::kInfer && s_.workload.model->kind != ModelKind::kCnn) {
    GPUPLAN_TRY(serve, prepared(serving_, true));
    const TargetFit sf = fit_target(*serve, tc);
    const double mean_tokens = serving_tokens_per_sequence(s_.workload);
    // vLLM's and SGLang's pools; TensorRT-LLM's (memory.cc) is not read here: its sequences in flight stay the
    // largest batch that fits, as the speed rows were calibrated.
    v.serving_max_batch = sf.kv_pool_tokens > 0 && kv_pool_at_startup(s_.workload.engine)
                              ? static_cast<int64_t>(std::floor(static_cast<double>(sf.kv_pool_tokens) / mean_tokens))
                              : sf.max_batch;
    if (s_.workload.engine == Engine::kSglang) {  // its request pool (constants.h kSglangMaxRunningRequests)
      v.serving_max_batch = std::min(v.serving_max_batch, kSglangMaxRunningRequests);
    } else if (serve->rules_engine == Engine::kVllm) {  // vLLM, and "auto" inference
      v.serving_max_batch = std::min(v.serving_max_batch, vllm_max_num_seqs(s_.workload, tc));
    }
    if (s_.workload.engine == Engine::kTensorrtLlm) {  // trtllm-bench's max batch (constants.h)
      v.serving_max_batch =
          std::min(v.serving_max_batch, kTensorrtLlmBenchMaxBatch / std::max<int64_t>(1, s_.workload.pp));
    }
  }
  return v;
}

}  // namespace gpuplan::perf
