// Speed of the performance model: one prediction, and a sweep over targets x batch x context x format x
// parallel degrees. Results are recorded in docs/model.md ("Speed of the model").
#include <benchmark/benchmark.h>

#include <iterator>
#include <memory>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/catalog.h"
#include "gpuplan/formats.h"
#include "gpuplan/memory.h"
#include "gpuplan/model.h"
#include "gpuplan/perf.h"
#include "gpuplan/sweep.h"
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
  state.counters["configs_per_second"] = benchmark::Counter(static_cast<double>(configs), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PerfSweep)->Unit(benchmark::kMillisecond);

// The sweep's axes: every catalog target (GPUs and MIG slices) x tp {1,2,4,8} x format {bf16, fp8,
// int4-awq} x batch {1,8,64,256} x context (prompt tokens) {512, 2048, 8192, 32768}, 256 generated.
constexpr int kSweepTp[] = {1, 2, 4, 8};
constexpr WeightFormat kSweepFormats[] = {WeightFormat::kBf16, WeightFormat::kFp8, WeightFormat::kInt4Awq};
constexpr int64_t kSweepBatches[] = {1, 8, 64, 256};
constexpr int64_t kSweepContexts[] = {512, 2048, 8192, 32768};
constexpr int64_t kSweepOutputTokens = 256;

// One SweepPoint (gpuplan/sweep.h) per (target, tp, format) of the sweep: the prepared memory workload,
// the refusal rules, the engine's share of the target and the latency model's constants, resolved once.
struct BenchPoints {
  std::vector<SweepPoint> points;
  std::vector<InferenceSweep> latency;  // the latency half alone (BM_PerfSweepPrepared)
};

BenchPoints sweep_points(const char* model_id) {
  const Model& m = bench_model(model_id);
  const PerfArch a = perf_arch(m);
  const PerfEfficiency eff = default_efficiency();
  BenchPoints out;
  for (const auto& ref : Catalog::embedded()->all_targets(true)) {
    for (int tp : kSweepTp) {
      if (ref.is_mig() && tp > 1) continue;
      const Target target = Target::linked(ref, tp);
      const PerfDevice d = perf_device(target);
      for (WeightFormat f : kSweepFormats) {
        Workload w;
        w.model = std::shared_ptr<const Model>(&m, [](const Model*) {});  // the zoo outlives the bench
        w.engine = Engine::kVllm;
        w.weights = f;
        w.tp = tp;
        w.count = tp;
        w.output_tokens = kSweepOutputTokens;
        w.context = kSweepContexts[std::size(kSweepContexts) - 1] + kSweepOutputTokens;
        PerfRun run;
        run.weights = perf_weights(f, m, d, w.engine);
        auto point = SweepPoint::make(w, target, run, eff);
        if (!point) continue;
        out.points.push_back(std::move(*point));
        out.latency.emplace_back(a, d, w, run, eff);
      }
    }
  }
  return out;
}

// Both sweeps' loop: `answer(point, batch, prompt)` over every point x batch x prompt of the 70B sweep.
template <class Answer>
void run_fit_and_latency_sweep(benchmark::State& state, Answer answer) {
  BenchPoints sweep = sweep_points("llama-3.1-70b");
  int64_t configs = 0, fits = 0;
  for (auto _ : state) {
    double sum = 0;
    for (auto& p : sweep.points) {
      for (int64_t b : kSweepBatches) {
        for (int64_t c : kSweepContexts) {
          const auto a = answer(p, b, c);
          sum += a.perf.tpot_seconds + a.perf.ttft_seconds + a.headroom_bytes;
          fits += a.fits ? 1 : 0;
          ++configs;
        }
      }
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(configs);
  state.counters["configs_per_sweep"] = static_cast<double>(sweep.points.size() * 16);
  state.counters["fits_per_sweep"] = static_cast<double>(fits) / static_cast<double>(state.iterations());
  state.counters["configs_per_second"] = benchmark::Counter(static_cast<double>(configs), benchmark::Counter::kIsRate);
}

// The headline sweep (issue #19: "memory verdict + latency for one model over targets x batch x context
// x format x parallel degrees"): per configuration SweepPoint::at, the memory verdict (refusal, fit,
// bytes and headroom at that batch and context) and the latency (TTFT, TPOT, throughputs) bit for bit
// as the per-configuration path answers them. Reports configurations per second on one core.
void BM_SweepFitAndLatency(benchmark::State& state) {
  run_fit_and_latency_sweep(state, [](SweepPoint& p, int64_t b, int64_t c) { return p.at(b, c); });
}
BENCHMARK(BM_SweepFitAndLatency)->Unit(benchmark::kMillisecond);

// The same sweep as a planner reads it (issue #19's measure: memory verdict + latency): per configuration
// SweepPoint::at_lean, the memory verdict bit for bit (refusal, fit, bytes, headroom) and TTFT, TPOT,
// total seconds and throughput within kInferenceLeanTolerance of the per-configuration path, without
// the secondary rates and bounds BM_SweepFitAndLatency's at() also fills.
void BM_SweepFitAndLatencyLean(benchmark::State& state) {
  run_fit_and_latency_sweep(state, [](SweepPoint& p, int64_t b, int64_t c) { return p.at_lean(b, c); });
}
BENCHMARK(BM_SweepFitAndLatencyLean)->Unit(benchmark::kMillisecond);

// The latency half alone, through InferenceSweep (BM_PerfSweep calls predict_inference per configuration).
void BM_PerfSweepPrepared(benchmark::State& state) {
  BenchPoints sweep = sweep_points("llama-3.1-70b");
  int64_t configs = 0;
  for (auto _ : state) {
    double sum = 0;
    for (auto& p : sweep.latency) {
      for (int64_t b : kSweepBatches) {
        for (int64_t c : kSweepContexts) {
          sum += p.at(b, c).tpot_seconds;
          ++configs;
        }
      }
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(configs);
  state.counters["configs_per_second"] = benchmark::Counter(static_cast<double>(configs), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PerfSweepPrepared)->Unit(benchmark::kMillisecond);

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
