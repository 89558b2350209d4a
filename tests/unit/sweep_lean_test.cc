// The lean sweep (InferenceSweepLean::at, SweepPoint::at_lean): the latency a sweep reads within
// kInferenceLeanTolerance of predict_inference's, and the memory verdict bit for bit the per-configuration
// path's, across models with and without sliding windows, MoE (the generic path), GPUs with and without
// wave quantization and CUDA-core GEMVs, a MIG slice, formats, engines (eager attention), tensor and
// pipeline parallelism, batches and prompt lengths, in sweep order and out of it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "gpuplan/catalog.h"
#include "gpuplan/formats.h"
#include "gpuplan/memory.h"
#include "gpuplan/model.h"
#include "gpuplan/perf.h"
#include "gpuplan/sweep.h"

namespace gpuplan {
namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// |lean - exact| <= kInferenceLeanTolerance x |exact|, both finite; the largest ratio seen is kept.
void expect_close(double lean, double exact, double& worst, const std::string& where, const char* field) {
  ASSERT_TRUE(std::isfinite(lean) && std::isfinite(exact)) << where << " " << field << ": " << lean << " " << exact;
  const double relative = exact == 0 ? std::abs(lean) : std::abs(lean - exact) / std::abs(exact);
  worst = std::max(worst, relative);
  EXPECT_LE(relative, kInferenceLeanTolerance) << where << " " << field << ": " << lean << " vs " << exact;
}

void expect_close(const InferenceLean& lean, const InferencePerf& exact, double& worst, const std::string& where) {
  expect_close(lean.ttft_seconds, exact.ttft_seconds, worst, where, "ttft");
  expect_close(lean.tpot_seconds, exact.tpot_seconds, worst, where, "tpot");
  expect_close(lean.total_seconds, exact.total_seconds, worst, where, "total");
  expect_close(lean.throughput_tokens_per_second, exact.throughput_tokens_per_second, worst, where, "throughput");
}

TEST(SweepLean, InferenceWithinToleranceOfPredictInference) {
  auto cat = Catalog::embedded();
  const PerfEfficiency eff = default_efficiency();
  int checked = 0, differing = 0;
  double worst = 0;
  for (const char* model_id : {"llama-3.1-8b", "mixtral-8x7b", "gemma-2-27b", "llama-3.1-70b", "llama-2-7b"}) {
    const Model& m = *zoo_model(model_id).value();
    const PerfArch a = perf_arch(m);
    for (const char* gpu : {"h100-80gb-sxm5", "a100-80gb-sxm4", "l4", "v100-16gb-sxm2", "a100-40gb-sxm4/1g.5gb"}) {
      for (int tp : {1, 2, 8}) {
        auto ref = cat->resolve(gpu);
        ASSERT_TRUE(ref.ok()) << gpu;
        if (ref->is_mig() && tp > 1) continue;
        const PerfDevice d = perf_device(Target::linked(*ref, tp));
        for (WeightFormat f : {WeightFormat::kBf16, WeightFormat::kFp8, WeightFormat::kInt4Awq}) {
          for (Engine e : {Engine::kVllm, Engine::kTransformers}) {
            for (int pp : {1, 2}) {
              for (bool flash : {true, false}) {
                Workload w;
                w.engine = e;
                w.tp = tp;
                w.pp = pp;
                w.flash_attention = flash;
                w.output_tokens = 200;
                w.context = 40000;
                PerfRun run;
                run.weights = perf_weights(f, m, d, e);
                InferenceSweepLean lean_sweep(a, d, w, run, eff);
                // Sweep order (prompt lengths of one batch in a row), then out of order (cache misses).
                for (int pass = 0; pass < 2; ++pass) {
                  for (int64_t b : {1, 3, 64, 256}) {
                    for (int64_t n : {1, 2, 100, 2048, 4096, 5000, 32768}) {
                      const int64_t batch = pass == 0 ? b : (n % 7) + 1;
                      Workload one = w;
                      one.batch = batch;
                      one.input_tokens = n;
                      const std::string where = std::string(model_id) + " " + gpu + " tp " + std::to_string(tp) +
                                                " pp " + std::to_string(pp) + (flash ? " flash" : " eager") +
                                                " batch " + std::to_string(batch) + " prompt " + std::to_string(n);
                      const InferenceLean lean = lean_sweep.at(batch, n);
                      const InferencePerf exact = predict_inference(a, d, one, run, eff);
                      expect_close(lean, exact, worst, where);
                      differing += same_bits(lean.ttft_seconds, exact.ttft_seconds) ? 0 : 1;
                      ++checked;
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 20000);
  // The rewrite is exercised: some answers differ in their last bits (and all lie within the tolerance).
  EXPECT_GT(differing, 0);
  std::printf("lean vs exact: %d configurations, %d with other last bits, worst relative %.3g\n", checked, differing,
              worst);
}

// The per-configuration path a sweep replaces: the configuration's own workload prepared, fitted on
// the target (refusals included) and predicted.
SweepAnswer answer_slowly(const Workload& base, const Target& t, const PerfRun& run, const PerfEfficiency& eff,
                          int64_t batch, int64_t prompt) {
  Workload w = base;
  w.batch = batch;
  w.input_tokens = prompt;
  w.context = prompt + w.output_tokens;
  SweepAnswer a;
  auto prepared = prepare(w);
  EXPECT_TRUE(prepared.ok()) << prepared.error().message;
  if (!prepared) return a;
  const TargetFit fit = fit_target(*prepared, t);
  a.refusal = fit.refusal;
  a.fits = fit.fits;
  a.total_bytes = fit.total_bytes;
  a.headroom_bytes = fit.headroom_bytes;
  a.perf = predict_inference(perf_arch(*w.model), perf_device(t), w, run, eff);
  return a;
}

TEST(SweepLean, PointEqualsThePerConfigurationPathsVerdictAndLatency) {
  auto cat = Catalog::embedded();
  const PerfEfficiency eff = default_efficiency();
  int checked = 0, fitting = 0, refused = 0;
  double worst = 0;
  for (const char* model_id : {"llama-3.1-8b", "llama-2-7b", "mixtral-8x7b", "gemma-2-27b", "llama-3.1-70b"}) {
    const Model& m = *zoo_model(model_id).value();
    for (const char* gpu : {"h100-80gb-sxm5", "a100-80gb-sxm4", "l4", "v100-16gb-sxm2", "a100-40gb-sxm4/1g.5gb"}) {
      for (int tp : {1, 2, 8}) {
        auto ref = cat->resolve(gpu);
        ASSERT_TRUE(ref.ok()) << gpu;
        const Target t = Target::linked(*ref, tp);  // MIG with tp > 1: refused (kMigParallel)
        const PerfDevice d = perf_device(t);
        for (WeightFormat f : {WeightFormat::kBf16, WeightFormat::kFp8, WeightFormat::kInt4Awq}) {
          for (Engine e : {Engine::kVllm, Engine::kTransformers}) {
            Workload w;
            w.model = std::shared_ptr<const Model>(&m, [](const Model*) {});  // the zoo outlives the test
            w.engine = e;
            w.weights = f;
            w.tp = tp;
            w.count = tp;
            w.output_tokens = 128;
            PerfRun run;
            run.weights = perf_weights(f, m, d, e);
            auto point = SweepPoint::make(w, t, run, eff);
            ASSERT_TRUE(point.ok()) << point.error().message;
            for (int64_t b : {1, 7, 64, 256}) {
              for (int64_t n : {1, 500, 3968, 4000, 8064, 32768}) {
                const std::string where = std::string(model_id) + " " + gpu + " tp " + std::to_string(tp) + " " +
                                          std::string(weight_format_info(f).name) + " " + std::string(engine_name(e)) +
                                          " batch " + std::to_string(b) + " prompt " + std::to_string(n);
                const SweepLean lean = point->at_lean(b, n);
                const SweepAnswer slow = answer_slowly(w, t, run, eff, b, n);
                EXPECT_EQ(lean.refusal, slow.refusal) << where;
                EXPECT_EQ(lean.fits, slow.fits) << where;
                EXPECT_TRUE(same_bits(lean.total_bytes, slow.total_bytes)) << where;
                EXPECT_TRUE(same_bits(lean.headroom_bytes, slow.headroom_bytes)) << where;
                expect_close(lean.perf, slow.perf, worst, where);
                ++checked;
                fitting += slow.fits ? 1 : 0;
                refused += slow.refusal ? 1 : 0;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 10000);
  EXPECT_GT(fitting, 1000);
  EXPECT_GT(refused, 1000);
}

}  // namespace
}  // namespace gpuplan
