// Speed of the memory model: one workload on every catalog target (what a web page recomputes per
// keystroke), the whole `fit` request with its JSON, and a batch x context x format sweep.
#include <benchmark/benchmark.h>

#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/memory.h"

namespace gpuplan {
namespace {

std::vector<Target> all_targets(int count) {
  std::vector<Target> out;
  for (const auto& ref : Catalog::embedded()->all_targets(true)) out.push_back(Target{ref, count, Link::kPcie});
  return out;
}

Workload workload(nlohmann::ordered_json request) {
  auto w = parse_workload(request);
  if (!w) throw std::runtime_error(w.error().message);
  return *w;
}

// Fit of a prepared workload (Llama-3.1-70B, int4 AWQ, tp 1) on every GPU and MIG slice, with the
// largest batch and context (bisection) per target.
void BM_FitAllTargets(benchmark::State& state) {
  const auto targets = all_targets(1);
  const PreparedWorkload p =
      *prepare(workload({{"model", "llama-3.1-70b"}, {"weights", "int4-awq"}, {"context", 8192}}));
  for (auto _ : state) {
    for (const auto& t : targets) benchmark::DoNotOptimize(fit_target(p, t));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(targets.size()));
  state.counters["targets"] = static_cast<double>(targets.size());
}
BENCHMARK(BM_FitAllTargets);

// The same with the workload parsed and prepared each time (a keystroke changes it).
void BM_ParsePrepareFitAllTargets(benchmark::State& state) {
  const auto targets = all_targets(1);
  const nlohmann::ordered_json request = {{"model", "llama-3.1-70b"}, {"weights", "int4-awq"}, {"context", 8192}};
  for (auto _ : state) {
    const PreparedWorkload p = *prepare(workload(request));
    for (const auto& t : targets) benchmark::DoNotOptimize(fit_target(p, t));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(targets.size()));
}
BENCHMARK(BM_ParsePrepareFitAllTargets);

// The whole `fit` command as the server runs it: request JSON in, result JSON (with explanations) out.
void BM_FitCommandJson(benchmark::State& state) {
  Context ctx{Catalog::embedded()};
  const nlohmann::ordered_json request = {{"model", "llama-3.1-70b"}, {"weights", "int4-awq"}, {"context", 8192}};
  for (auto _ : state) {
    auto r = run_command(ctx, "fit", request);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_FitCommandJson)->Unit(benchmark::kMillisecond);

// One estimate (no bisection).
void BM_EstimateMemory(benchmark::State& state) {
  const PreparedWorkload p = *prepare(workload({{"model", "gemma-2-27b"}, {"context", 8192}, {"batch", 8}}));
  int64_t b = 1;
  for (auto _ : state) {
    benchmark::DoNotOptimize(estimate_memory(p, b, 8192));
    b = b % 64 + 1;
  }
}
BENCHMARK(BM_EstimateMemory);

// Sweep: 9 batch sizes x 9 contexts x every weight format, Llama-3.1-8B inference.
void BM_SweepBatchContextFormat(benchmark::State& state) {
  std::vector<PreparedWorkload> prepared;
  for (const auto& f : weight_formats()) {
    prepared.push_back(*prepare(workload({{"model", "llama-3.1-8b"}, {"weights", std::string(f.name)}})));
  }
  const int64_t batches[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  const int64_t contexts[] = {512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072};
  for (auto _ : state) {
    for (const auto& p : prepared) {
      for (int64_t b : batches) {
        for (int64_t c : contexts) benchmark::DoNotOptimize(estimate_memory(p, b, c));
      }
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(prepared.size() * 81));
}
BENCHMARK(BM_SweepBatchContextFormat);

}  // namespace
}  // namespace gpuplan
