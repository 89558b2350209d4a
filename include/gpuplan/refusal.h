// Refusals: configurations that no engine can run, with the reason. One place for the rules, used by
// fit (through fit_target), perf and plan (through perf::MemoryCache), mig pack workloads and validate
// alike, so that no command gives a speed or a "fits" for a setup that cannot start. Each rule, its
// source and what the engine really does are listed in docs/model.md, "Refusals".
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gpuplan/target.h"
#include "gpuplan/workload.h"

namespace gpuplan {

enum class RefusalCode {
  kTpHeads,          // tp does not divide the attention heads (or tp > 1 on a network without them)
  kTpKvHeads,        // tp and the KV heads divide neither way (Megatron: KV heads must divide by tp)
  kPpLayers,         // more pipeline stages than layers
  kContext,          // context beyond the model's positions (rope_scaling included)
  kTaskEngine,       // training in an inference engine (vLLM, TGI, TensorRT-LLM, llama.cpp)
  kWeightsEngine,    // the engine has no kernels or loader for the weight format
  kKvEngine,         // the engine has no such KV-cache dtype
  kMigParallel,      // tensor or pipeline parallelism across MIG instances (no peer-to-peer path)
  kMigCount,         // more instances of a MIG profile than one GPU holds
  kWeightsHardware,  // the weight format needs tensor cores (or a kernel) this GPU does not have
  kKvHardware,       // the KV-cache dtype needs a GPU generation this one is not
  kBf16Hardware,     // bf16 on a GPU without bf16 tensor cores (Volta, Turing) in an engine that refuses it
};

// "tp_heads", "mig_parallel", ...: the code as results show it.
std::string_view refusal_code_name(RefusalCode code);

struct Refusal {
  RefusalCode code;
  std::string field;    // the request key to change ("tp", "gpu", "weights", ...)
  std::string message;  // what is wrong, the limit, the source, and what to do
};

// CUDA compute capability x 10 of a GPU (70 Volta, 80 A100, 86 GA102, 89 Ada, 90 Hopper, 100
// Blackwell), from its architecture and chip; 0 when the catalog's architecture is unknown.
int compute_capability(const Gpu& gpu);

// The rules that do not depend on the target (parallel layout against the model, context, format
// against the engine), then with a target (MIG, formats against the hardware). Neither allocates when
// nothing is refused, so fit_target may call it per target in a sweep. The rules are those of
// rules_engine(w.engine, w.task) (workload.h): an engine without rules of its own is refused, and
// explained, as the engine it borrows them from.
std::optional<RefusalCode> refusal_code(const Workload& w);
std::optional<RefusalCode> refusal_code(const Workload& w, const Target& t);
// Only the parallel-layout rules (tp against heads and KV heads, pp against layers), for a planner
// choosing a layout.
std::optional<RefusalCode> parallel_refusal_code(const Model& m, Engine engine, int tp, int pp);

// The field and message of a refusal (allocates; for results, not sweeps). `t` may be null for the
// target-independent codes.
Refusal explain_refusal(RefusalCode code, const Workload& w, const Target* t);

// refusal_code + explain_refusal.
std::optional<Refusal> refusal(const Workload& w, const Target& t);
std::optional<Refusal> refusal(const Workload& w);

// The context a model supports: max_position_embeddings as the model parser derived it (rope_scaling
// applied), or 0 when the model states none.
int64_t supported_context(const Model& m);

}  // namespace gpuplan
