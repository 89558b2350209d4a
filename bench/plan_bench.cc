// Planner speed: a plan over the shipped snapshot (through the request path, as the CLI and the
// server run it), and the search over a synthetic market of 100,000 offers.
#include <benchmark/benchmark.h>

#include <random>

#include "gpuplan/api.h"
#include "gpuplan/plan.h"
#include "plan/plan_model.h"

namespace {

using gpuplan::Json;

// Runs the plan command on `req` each iteration and reports configurations evaluated per second.
void run_plan(benchmark::State& state, const Json& req) {
  gpuplan::Context ctx{gpuplan::Catalog::embedded()};
  long long configs = 0;
  for (auto _ : state) {
    auto r = gpuplan::run_command(ctx, "plan", req);
    configs += r->at("configurations").get<long long>();
    benchmark::DoNotOptimize(r);
  }
  state.counters["configs_per_s"] = benchmark::Counter(static_cast<double>(configs), benchmark::Counter::kIsRate);
}

void BM_PlanServeSnapshot(benchmark::State& state) {
  const Json req = {{"model", "llama-2-13b"}, {"weights", "bf16"},    {"engine", "vllm"}, {"rate", 5},
                    {"input_tokens", 512},    {"output_tokens", 256}, {"tpot_slo", 0.05}, {"now", "2026-11-30"}};
  run_plan(state, req);
}
BENCHMARK(BM_PlanServeSnapshot)->Unit(benchmark::kMillisecond);

void BM_PlanTrainSnapshot(benchmark::State& state) {
  const Json req = {{"model", "llama-2-7b"},   {"task", "lora"},      {"batch", 4},        {"context", 2048},
                    {"checkpointing", "full"}, {"train_tokens", 1e9}, {"deadline", "30h"}, {"now", "2026-11-30"}};
  run_plan(state, req);
}
BENCHMARK(BM_PlanTrainSnapshot)->Unit(benchmark::kMillisecond);

// 100,000 offers over every catalog GPU: 1, 2, 4 or 8 GPUs per instance, random prices.
std::vector<gpuplan::Offer> synthetic_market(size_t n) {
  auto catalog = gpuplan::Catalog::embedded();
  const auto targets = catalog->all_targets(false);
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> price(0.2, 5.0);
  std::vector<gpuplan::Offer> offers(n);
  for (size_t i = 0; i < n; ++i) {
    auto& o = offers[i];
    o.provider = "p" + std::to_string(i % 50);
    o.region = "r" + std::to_string(i % 7);
    o.name = "o" + std::to_string(i);
    o.target = targets[i % targets.size()];
    o.gpus = 1 << (i % 4);
    o.interconnect = o.gpus > 1 ? gpuplan::Link::kNvlink : gpuplan::Link::kPcie;
    o.price_hour = price(rng) * o.gpus;
    o.currency = "USD";
  }
  return offers;
}

void BM_PlanServeSyntheticMarket(benchmark::State& state) {
  const auto offers = synthetic_market(static_cast<size_t>(state.range(0)));
  std::vector<const gpuplan::Offer*> ptrs;
  for (const auto& o : offers) ptrs.push_back(&o);
  auto setup = gpuplan::perf::parse_perf_setup(Json{{"model", "llama-2-13b"},
                                                    {"weights", "bf16"},
                                                    {"engine", "vllm"},
                                                    {"input_tokens", 512},
                                                    {"output_tokens", 256}});
  gpuplan::ServeGoal goal{5, 512, 256, std::nullopt, 0.05};
  long long configs = 0;
  for (auto _ : state) {
    gpuplan::WorkloadPlanModel model(*setup);  // a fresh model: no cache carried between plans
    auto r = gpuplan::plan_serving(model, ptrs, goal, gpuplan::PlanOptions{});
    configs += r.configurations;
    benchmark::DoNotOptimize(r);
  }
  state.counters["configs_per_s"] = benchmark::Counter(static_cast<double>(configs), benchmark::Counter::kIsRate);
  state.counters["offers"] = static_cast<double>(offers.size());
}
BENCHMARK(BM_PlanServeSyntheticMarket)->Arg(100000)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
