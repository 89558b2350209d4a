// Speed of the performance model: one prediction, and a sweep over targets x batch x context x format x
// parallel degrees. Results are recorded in docs/model.md ("Speed of the model").
#include <benchmark/benchmark.h>

#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/catalog.h"
#include "gpuplan/formats.h"
#include "gpuplan/model.h"
#include "gpuplan/perf.h"
#include "perf/perf_request.h"

namespace gpuplan {
namespace {

const Model& bench_model(const char* id) { return *zoo_model(id).value(); }

Target bench_target(const char* name, int count = 1) {
  return Target::linked(Catalog::embedded()->resolve(name).value(), count);
}

void BM_PerfInferenceOne(benchmark::State& state) {
  const Model& m = bench_model("llama-3.1-8b");
  const PerfArch a = perf_arch(m);
  const PerfDevice d = perf_device(bench_target("h100-80gb-sxm5"));
  Workload w;
  w.engine = Engine::kVllm;
  w.batch = 16;
  w.input_tokens = 1024;
  w.output_tokens = 256;
  w.context = 1024 + 256;
  PerfRun run;
  run.weights = perf_weights(WeightFormat::kBf16, m, d, w.engine);
  const PerfEfficiency eff = default_efficiency();
  for (auto _ : state) {
    benchmark::DoNotOptimize(w.batch);
    InferencePerf p = predict_inference(a, d, w, run, eff);
    benchmark::DoNotOptimize(p);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PerfInferenceOne);

void BM_PerfTrainingOne(benchmark::State& state) {
  const Model& m = bench_model("llama-2-70b");
  const PerfArch a = perf_arch(m);
  const PerfDevice d = perf_device(bench_target("h100-80gb-sxm5", 64));
  Workload w;
  w.task = Task::kTrain;
  w.engine = Engine::kMegatron;
  w.tp = 8;
  w.pp = 4;
  w.batch = 1;
  w.context = 4096;
  w.checkpointing = Checkpointing::kSelective;
  PerfRun run;
  run.weights = perf_weights(WeightFormat::kBf16, m, d, w.engine);
  run.dp = 2;
  run.global_batch = 256;
  const PerfEfficiency eff = default_efficiency();
  for (auto _ : state) {
    benchmark::DoNotOptimize(w.batch);
    TrainPerf t = predict_training(a, d, w, run, eff);
    benchmark::DoNotOptimize(t);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PerfTrainingOne);

void BM_PerfServingOne(benchmark::State& state) {
  const Model& m = bench_model("llama-3.1-8b");
  const PerfArch a = perf_arch(m);
  const PerfDevice d = perf_device(bench_target("h100-80gb-sxm5"));
  Workload w;
  w.engine = Engine::kVllm;
  w.input_tokens = 1024;
  w.output_tokens = 256;
  w.context = 1024 + 256;
  PerfRun run;
  run.weights = perf_weights(WeightFormat::kFp8, m, d, w.engine);
  const PerfEfficiency eff = default_efficiency();
  for (auto _ : state) {
    benchmark::DoNotOptimize(w.batch);
    ServingPerf s = predict_serving(a, d, w, run, eff, 256, 10);
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PerfServingOne);

// Every catalog target (GPUs and MIG slices) x tp {1,2,4,8} x format {bf16, fp8, int4-awq} x batch
// {1,8,64,256} x context {512, 2048, 8192, 32768}: devices and formats resolved once per target (as a
// planner does), then one prediction per configuration.
void BM_PerfSweep(benchmark::State& state) {
  const Model& m = bench_model("llama-3.1-70b");
  const PerfArch a = perf_arch(m);
  const PerfEfficiency eff = default_efficiency();
  struct Point {
    PerfDevice device;
    Workload base;  // no model pointer: the perf model reads the arch
    PerfRun run;
  };
  std::vector<Point> points;
  for (const auto& ref : Catalog::embedded()->all_targets(true)) {
    for (int tp : {1, 2, 4, 8}) {
      if (ref.is_mig() && tp > 1) continue;
      const PerfDevice d = perf_device(Target::linked(ref, tp));
      for (WeightFormat f : {WeightFormat::kBf16, WeightFormat::kFp8, WeightFormat::kInt4Awq}) {
        Workload w;
        w.engine = Engine::kVllm;
        w.tp = tp;
        w.output_tokens = 256;
        w.context = 32768 + 256;  // the prompt is input_tokens (the sweep's context) below
        PerfRun run;
        run.weights = perf_weights(f, m, d, w.engine);
        points.push_back({d, w, run});
      }
    }
  }
  const int64_t batches[] = {1, 8, 64, 256};
  const int64_t contexts[] = {512, 2048, 8192, 32768};
  int64_t configs = 0;
  for (auto _ : state) {
    double sum = 0;
    for (const auto& p : points) {
      Workload w = p.base;
      for (int64_t b : batches) {
        w.batch = b;
        for (int64_t c : contexts) {
          w.input_tokens = c;
          sum += predict_inference(a, p.device, w, p.run, eff).tpot_seconds;
          ++configs;
        }
      }
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(configs);
  state.counters["configs_per_sweep"] = static_cast<double>(points.size() * 16);
}
BENCHMARK(BM_PerfSweep)->Unit(benchmark::kMillisecond);

// The whole request path: `perf` over every catalog target, JSON in and out (what the server and the
// web page call).
void BM_PerfCommandAllTargets(benchmark::State& state) {
  Context ctx{Catalog::embedded()};
  const Json request{
      {"model", "llama-3.1-8b"}, {"engine", "vllm"}, {"batch", 8}, {"input_tokens", 1024}, {"output_tokens", 256}};
  for (auto _ : state) {
    auto r = run_command(ctx, "perf", request);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PerfCommandAllTargets)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpuplan
