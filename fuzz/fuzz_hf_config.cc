// Fuzzes a user's config.json: bytes -> JSON -> parse_hf_config -> prepare + estimate_memory +
// fit_target for one GPU -> the `fit` and `perf` commands with the config inline (as `--config FILE`
// and the API's "config" pass it). A divide by zero (num_attention_heads: 0) is a UBSan crash; a NaN or
// an infinity in an accepted answer is an oracle crash (fuzz_util.h).
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "gpuplan/memory.h"
#include "gpuplan/model.h"
#include "gpuplan/workload.h"

namespace {

using gpuplan::Json;
namespace fz = gpuplan::fuzz;

// Workload options the input's size selects (the bytes stay a plain config.json, so real files are
// seeds): inference, serving with vLLM on a MIG slice, full training, QLoRA on two GPUs.
Json variant(size_t size) {
  switch (size % 4) {
    case 0:
      return Json{{"gpu", "h100-80gb-sxm5"}, {"context", 4096}};
    case 1:
      return Json{{"gpu", "a100-80gb-sxm4/3g.40gb"}, {"engine", "vllm"}, {"weights", "int4-awq"}};
    case 2:
      return Json{{"gpu", "a100-80gb-sxm4"}, {"task", "train"}, {"batch", 4}, {"context", 2048}};
    default:
      return Json{{"gpu", "h100-80gb-sxm5x2"}, {"task", "qlora"}, {"context", 1024}};
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fz::as_text(data, size);
  Json config = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) return 0;

  // The library calls one by one, so a crash's stack names the stage.
  auto model = gpuplan::parse_hf_config(config, "fuzz");
  if (!model) return 0;  // the commands would stop at the same error (parse_workload parses it first)
  {
    Json wreq{{"model", "fuzz"}, {"config", config}};
    auto w = gpuplan::parse_workload(wreq);
    if (w) {
      auto p = gpuplan::prepare(*w);
      if (p) {
        const gpuplan::MemoryBreakdown m = gpuplan::estimate_memory(*p);
        fz::require_finite(m.total_bytes, "estimate_memory", "total_bytes");
        auto ref = fz::catalog().resolve("h100-80gb-sxm5");
        if (ref) {
          const gpuplan::Target t = gpuplan::Target::linked(*ref, 1);
          const gpuplan::TargetFit f = gpuplan::fit_target(*p, t);
          fz::require_finite(f.total_bytes, "fit_target", "total_bytes");
          fz::require_finite(f.headroom_bytes, "fit_target", "headroom_bytes");
        }
      }
    }
  }

  // The commands, as the CLI and the server run them.
  Json req = variant(size);
  req["model"] = "fuzz";
  req["config"] = config;
  for (const char* command : {"fit", "perf"}) {
    fz::Deadline deadline;
    auto r = gpuplan::run_command(fz::context(), command, req);
    if (r) fz::require_finite(*r, command);
  }
  return 0;
}
