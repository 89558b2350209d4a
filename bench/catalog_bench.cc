// Catalog costs: loading the embedded data (once per process; compiled at build time, or parsed from
// its YAML) and resolving names (once per request).
#include <benchmark/benchmark.h>

#include "gpuplan/api.h"
#include "gpuplan/catalog.h"

namespace {

// The embedded catalog as every process loads it: from the image compiled at build time.
void BM_CatalogLoad(benchmark::State& state) {
  for (auto _ : state) {
    auto c = gpuplan::Catalog::load();
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_CatalogLoad)->Unit(benchmark::kMicrosecond);

// The same from the embedded YAML (what every process paid before the compiled catalog; what a
// --catalog folder still costs per file).
void BM_CatalogLoadYaml(benchmark::State& state) {
  for (auto _ : state) {
    auto c = gpuplan::Catalog::load({}, gpuplan::EmbeddedForm::kYaml);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_CatalogLoadYaml)->Unit(benchmark::kMillisecond);

void BM_ResolveAlias(benchmark::State& state) {
  auto c = gpuplan::Catalog::embedded();
  for (auto _ : state) benchmark::DoNotOptimize(c->resolve("NVIDIA A100-SXM4-40GB"));
}
BENCHMARK(BM_ResolveAlias);

void BM_ResolveMigProfile(benchmark::State& state) {
  auto c = gpuplan::Catalog::embedded();
  for (auto _ : state) benchmark::DoNotOptimize(c->resolve("h100-80gb-sxm5/3g.40gb"));
}
BENCHMARK(BM_ResolveMigProfile);

void BM_CompareCommand(benchmark::State& state) {
  gpuplan::Context ctx{gpuplan::Catalog::embedded()};
  const gpuplan::Json req = {{"gpu", {"a100-40gb-sxm4", "a100-80gb-sxm4", "a40"}}};
  for (auto _ : state) benchmark::DoNotOptimize(gpuplan::run_command(ctx, "compare", req));
}
BENCHMARK(BM_CompareCommand)->Unit(benchmark::kMicrosecond);

}  // namespace
