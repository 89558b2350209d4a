#include "validate/memory_rows.h"

#include <limits>

#include "fit/caching_allocator.h"
#include "gpuplan/memory.h"
#include "gpuplan/refusal.h"
#include "gpuplan/target.h"
#include "gpuplan/workload.h"

namespace gpuplan::validate {

RowPrediction predict_memory_row(const Catalog& catalog, const Json& row) {
  RowPrediction p;
  const std::string metric = row.value("metric", "");
  Json request = row.contains("workload") ? row["workload"] : Json::object();
  std::string gpu;
  if (request.contains("gpu")) {
    gpu = request["gpu"].is_string() ? request["gpu"].get<std::string>() : "";
    request.erase("gpu");
  }
  auto w = parse_workload(request);
  if (!w) {
    p.note = "workload: " + w.error().message;
    return p;
  }
  auto prepared = prepare(*w);
  if (!prepared) {
    p.note = prepared.error().message;
    return p;
  }
  if (!gpu.empty()) {
    // A row the refusal rules reject did not run what it says, or a rule is wrong: skip it, with why.
    if (auto ref = catalog.resolve(gpu)) {
      if (auto r = refusal(*w, Target::linked(*ref, w->gpus())); r && metric != "fits") {
        p.note = "refused: " + r->message;
        return p;
      }
    }
  }
  const MemoryBreakdown m = estimate_memory(*prepared);
  if (metric == "weights_bytes") {
    p.ok = true;
    p.value = m.weights_bytes;
    return p;
  }
  // vLLM fills its share of the GPU with the KV pool, so what it holds depends on the GPU.
  const bool vllm_holds = w->engine == Engine::kVllm &&
                          (metric == "kv_cache_bytes" || metric == "total_bytes" || metric == "reserved_bytes");
  // Engines that size a KV pool from a share of the GPU (fit_target): vLLM, SGLang, TensorRT-LLM's executor.
  const bool sizes_pool =
      w->engine == Engine::kVllm || w->engine == Engine::kSglang || w->engine == Engine::kTensorrtLlm;
  const bool needs_target = metric == "fits" || metric == "max_context" || metric == "max_batch" ||
                            metric == "kv_cache_tokens" || vllm_holds || (metric == "kv_cache_bytes" && sizes_pool);
  TargetFit f;
  if (needs_target) {
    if (gpu.empty()) {
      p.note = "no gpu given";
      return p;
    }
    auto ref = catalog.resolve(gpu);
    if (!ref) {
      p.note = "gpu: " + ref.error().message;
      return p;
    }
    const Target t = Target::linked(*ref, w->gpus());
    f = fit_target(*prepared, t);
  }
  p.ok = true;
  const std::string means = row.value("means", "");
  const bool nvidia_smi = means.find("nvidia-smi") != std::string::npos;
  const double outside_torch = m.cuda_context_bytes + m.communication_bytes;  // what nvidia-smi sees beyond torch
  if (vllm_holds && metric != "kv_cache_bytes") {
    // The pool takes what the budget leaves: PyTorch holds weights + pool + the profile's cached
    // activations; nvidia-smi adds the CUDA context and communication buffers.
    const double torch_held = f.kv_pool_bytes + (m.total_bytes - m.kv_cache_bytes) - outside_torch;
    p.value = metric == "total_bytes" ? torch_held - m.allocator_slack_bytes
                                      : (nvidia_smi ? torch_held + outside_torch : torch_held);
  } else if (metric == "total_bytes") {
    // optimum's benchmark_gptq.py reports PyTorch's peak allocated memory plus nvidia-smi's peak less
    // PyTorch's peak reserved (tests/benchmark/benchmark_gptq.py, benchmark_memory): the memory outside
    // PyTorch (CUDA context, communication buffers) rides on top of the allocated peak.
    const bool plus_outside = means.find("plus the memory outside PyTorch") != std::string::npos;
    p.value = m.allocated_bytes() + (plus_outside ? outside_torch : 0.0);
  } else if (metric == "reserved_bytes" && generate_reserve_applies(*prepared)) {
    // transformers' generate(): the weights and workspaces, plus what PyTorch's caching allocator reserves over
    // the call (caching_allocator.h), its peak for torch.cuda.max_memory_reserved and for nvidia-smi watched
    // during the run, what it still holds when the call returns for an NVML reading taken right after it.
    double limit = std::numeric_limits<double>::infinity();
    if (!gpu.empty()) {
      if (auto ref = catalog.resolve(gpu)) {
        limit = capacity_bytes(Target::linked(*ref, w->gpus())) - outside_torch - m.weights_bytes - m.workspace_bytes;
      }
    }
    const GenerateReserve g = generate_reserve(*prepared, limit);
    const bool read_after = nvidia_smi && means.find("right after") != std::string::npos;
    const double torch_reserved = m.weights_bytes + m.workspace_bytes + (read_after ? g.end_bytes : g.peak_bytes);
    p.value = nvidia_smi ? torch_reserved + outside_torch : torch_reserved;
  } else if (metric == "reserved_bytes") {
    // nvidia-smi's "used" also holds the CUDA context and communication buffers.
    p.value = nvidia_smi ? m.total_bytes : m.reserved_bytes();
  } else if (metric == "kv_cache_bytes") {
    p.value = sizes_pool ? f.kv_pool_bytes : m.kv_cache_bytes;
  } else if (metric == "kv_cache_tokens") {
    p.value = static_cast<double>(f.kv_pool_tokens);
  } else if (metric == "max_context") {
    p.value = static_cast<double>(f.max_context);
  } else if (metric == "max_batch") {
    p.value = static_cast<double>(f.max_batch);
  } else if (metric == "fits") {
    p.value = f.fits ? 1 : 0;
  } else {
    p.ok = false;
    p.note = "metric '" + metric + "' is not a memory metric";
  }
  return p;
}

}  // namespace gpuplan::validate
