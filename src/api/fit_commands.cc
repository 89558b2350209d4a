// `fit`: will a workload fit, on which targets, with what headroom, largest batch and context.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "api/commands.h"
#include "api/fit_common.h"
#include "core/request.h"
#include "gpuplan/cancel.h"
#include "gpuplan/memory.h"

namespace gpuplan::api {

namespace {

Json bytes_json(double b) { return static_cast<long long>(std::llround(b)); }

}  // namespace

Result<std::vector<Target>> fit_targets(const Catalog& catalog, const Json& request, int default_count) {
  std::vector<Target> out;
  Request req(request);
  auto names = req.strings("gpu");
  if (!names) return names.error();
  // Targets one fit or perf request names: each costs a fit (and a perf sweep); the whole catalog
  // with MIG slices is about 60, so 256 leaves room for NAMExN variants.
  constexpr size_t kMaxGpuTargets = 256;
  if (names->size() > kMaxGpuTargets) {
    return limit_error("at most " + std::to_string(kMaxGpuTargets) + " targets in 'gpu', got " +
                           std::to_string(names->size()) + " (limit kMaxGpuTargets); omit 'gpu' for every target",
                       "gpu");
  }
  if (names->empty()) {
    for (const auto& ref : catalog.all_targets(true)) out.push_back(Target::linked(ref, default_count));
    return out;
  }
  for (const auto& name : *names) {
    auto ref = catalog.resolve(name);
    int count = default_count;
    if (!ref) {
      // "a100-80gb-sxm4x4": N devices of a target.
      const size_t x = name.find_last_of("xX");
      if (x != std::string::npos && x + 1 < name.size() &&
          name.find_first_not_of("0123456789", x + 1) == std::string::npos) {
        auto base = catalog.resolve(name.substr(0, x));
        if (base) {
          // Devices of one target: 1 to 1024, the largest plan (PlanOptions::max_gpus) and the largest
          // tensor/pipeline degree a workload takes. Read digit by digit: stoi throws past 2^31.
          constexpr long long kMaxDevices = 1024;
          long long n = 0;
          for (size_t i = x + 1; i < name.size() && n <= kMaxDevices; ++i) n = n * 10 + (name[i] - '0');
          if (n < 1 || n > kMaxDevices) {
            return usage_error(
                "'" + name + "': the device count after 'x' must be from 1 to " + std::to_string(kMaxDevices), "gpu");
          }
          ref = base;
          count = static_cast<int>(n);
        }
      }
    }
    if (!ref) return ref.error();
    out.push_back(Target::linked(*ref, count));
  }
  return out;
}

std::string out_of_memory_reason(double total_bytes, double limit_bytes) {
  return "does not fit: needs " + format_gib(total_bytes) + " per GPU, " + format_gib(limit_bytes) + " usable";
}

Json model_json(const Model& m) {
  return Json{{"id", m.id},
              {"architecture", m.architecture},
              {"parameters", m.parameters},
              {"active_parameters", m.active_parameters}};
}

Json memory_json(const MemoryBreakdown& m) {
  Json j{{"weights_bytes", bytes_json(m.weights_bytes)},
         {"kv_cache_bytes", bytes_json(m.kv_cache_bytes)},
         {"activations_bytes", bytes_json(m.activations_bytes)},
         {"gradients_bytes", bytes_json(m.gradients_bytes)},
         {"optimizer_bytes", bytes_json(m.optimizer_bytes)},
         {"adapter_bytes", bytes_json(m.adapter_bytes)},
         {"runtime_overhead_bytes", bytes_json(m.runtime_overhead_bytes)},
         {"total_bytes", bytes_json(m.total_bytes)}};
  // Present when loading peaks above the steady state (memory.h): then the verdict reads it.
  if (m.load_peak_bytes > m.total_bytes) j["load_peak_bytes"] = bytes_json(m.load_peak_bytes);
  return j;
}

namespace {

Result<Json> fit(const Context& ctx, const Json& body) {
  GPUPLAN_CHECK(Request(body, "fit").check_keys());
  auto w = parse_workload(body);
  if (!w) return w.error();
  auto targets = fit_targets(*ctx.catalog, body, w->gpus());
  if (!targets) return targets.error();

  // One prepared workload per device count (the count sets data-parallel sharding and buffers) and kind
  // (MIG slices are replicas where whole GPUs would hold a layer split).
  std::map<int, PreparedWorkload> prepared;
  auto prepared_for = [&](int count, bool mig) -> Result<const PreparedWorkload*> {
    const int key = 2 * count + (mig ? 1 : 0);
    if (auto it = prepared.find(key); it != prepared.end()) return &it->second;
    Workload wc = *w;
    wc.count = count;
    // A layer split (llama.cpp, device_map="auto"): the GPUs hold slices of the layers, not replicas.
    if (const int stages = layer_split(wc, count, false, mig); stages > 1) wc.pp = stages;
    if (wc.count < wc.tp * wc.pp) {
      return usage_error("a target of " + std::to_string(count) +
                             " GPUs cannot hold tp x pp = " + std::to_string(wc.tp * wc.pp) +
                             "; give --gpu NAMExN with N >= " + std::to_string(wc.tp * wc.pp),
                         "gpu");
    }
    auto p = prepare(wc);
    if (!p) return p.error();
    return &prepared.emplace(key, std::move(p).value()).first->second;
  };
  // The breakdown shown above the table is for the targets' device count when they agree (--gpu NAMExN).
  int base_count = w->gpus();
  if (!targets->empty() && std::all_of(targets->begin(), targets->end(),
                                       [&](const Target& t) { return t.count == targets->front().count; })) {
    base_count = targets->front().count;
  }
  w->count = base_count;
  auto base = prepared_for(base_count, !targets->empty() && targets->front().ref.is_mig());
  if (!base) return base.error();
  // With one kind of target (count and link), the breakdown includes what the link adds.
  const bool one_kind = !targets->empty() && std::all_of(targets->begin(), targets->end(), [&](const Target& t) {
    return t.count == base_count && t.link == targets->front().link;
  });
  const MemoryBreakdown memory = estimate_memory(**base, -1, -1, one_kind ? targets->front().link : Link::kPcie);

  Json result;
  result["model"] = model_json(*w->model);
  result["workload"] = workload_json(*w);
  result["memory"] = memory_json(memory);
  Json lines = Json::array();
  for (const auto& l : explain_memory(**base, memory)) {
    lines.push_back(Json{{"key", l.key}, {"bytes", bytes_json(l.bytes)}, {"explain", l.explain}});
  }
  result["explain"] = std::move(lines);
  Json tj = Json::array();
  for (const auto& t : *targets) {
    if (cancel_requested()) return cancelled_error();
    auto p = prepared_for(t.count, t.ref.is_mig());
    if (!p) return p.error();
    const TargetFit f = fit_target(**p, t);
    Json row{{"target", t.id()},
             {"name", t.name()},
             {"count", t.count},
             {"fits", f.fits},
             {"capacity_bytes", bytes_json(f.capacity_bytes)},
             {"total_bytes", bytes_json(f.total_bytes)},
             {"headroom_bytes", bytes_json(f.headroom_bytes)},
             {"max_batch", f.max_batch},
             {"max_context", f.max_context}};
    if (kv_pool_at_startup(w->engine)) {
      row["limit_bytes"] = bytes_json(f.limit_bytes);
      row["kv_pool_bytes"] = bytes_json(f.kv_pool_bytes);
      row["kv_pool_tokens"] = f.kv_pool_tokens;
    }
    if (f.refusal) {
      const Refusal r = explain_refusal(*f.refusal, **p, &t);
      row["refusal"] = refusal_code_name(r.code);
      row["reason"] = r.message;
    } else if (!f.fits && f.headroom_bytes >= 0) {
      // The steady state fits; loading does not (memory.h, load_peak_bytes).
      row["load_peak_bytes"] = bytes_json(f.memory.load_peak_bytes);
      row["reason"] = "does not load: needs " + format_gib(f.memory.load_peak_bytes) + " per GPU while loading, " +
                      format_gib(f.capacity_bytes) + " on the GPU (the weights and what the loader stages beside them)";
    } else if (!f.fits) {
      row["reason"] = out_of_memory_reason(f.total_bytes, f.limit_bytes);
    }
    tj.push_back(std::move(row));
  }
  result["targets"] = std::move(tj);
  return result;
}

}  // namespace

void register_fit_commands(CommandTable& table) {
  table.push_back(
      Command{"fit", "Will a workload fit? Memory per GPU, verdict, headroom, largest batch and context", fit});
}

}  // namespace gpuplan::api
