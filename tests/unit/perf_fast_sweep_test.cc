// The sweep path: InferenceSweep::at equals predict_inference bit for bit (every field, across models
// with and without sliding windows, MoE, GPUs of several generations, a MIG slice, formats, tensor
// parallelism, batches and prompt lengths, in sweep order and out of it); SweepPoint::at equals the
// per-configuration path (prepare + fit_target + predict_inference of that configuration's workload)
// in every field, refusals and contexts beyond the model's included; and the inner loop of a memory +
// latency sweep does not allocate (counted by this binary's operator new).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "gpuplan/catalog.h"
#include "gpuplan/formats.h"
#include "gpuplan/memory.h"
#include "gpuplan/model.h"
#include "gpuplan/perf.h"
#include "gpuplan/sweep.h"

namespace {
// Allocations made on a thread while it counts them (only the test below turns counting on).
thread_local bool counting = false;
std::atomic<long> counted_allocations{0};
}  // namespace

// The replaceable global allocation functions, counting while `counting` is set. Not under ASan: its
// runtime owns operator new and delete (and checks that they match) for the whole test binary, and a
// partial replacement here would pair its nothrow new with this delete; the count is a Release check.
#if !defined(__SANITIZE_ADDRESS__)
#define GPUPLAN_COUNTS_ALLOCATIONS 1
void* operator new(std::size_t size) {
  if (counting) counted_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return ::operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  if (counting) counted_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept { return ::operator new(size, tag); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#endif

namespace gpuplan {
namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void expect_identical(const InferencePerf& a, const InferencePerf& b, const std::string& where) {
  EXPECT_TRUE(same_bits(a.ttft_seconds, b.ttft_seconds)) << where;
  EXPECT_TRUE(same_bits(a.tpot_seconds, b.tpot_seconds)) << where;
  EXPECT_TRUE(same_bits(a.decode_tokens_per_second, b.decode_tokens_per_second)) << where;
  EXPECT_TRUE(same_bits(a.batch_decode_tokens_per_second, b.batch_decode_tokens_per_second)) << where;
  EXPECT_TRUE(same_bits(a.prefill_tokens_per_second, b.prefill_tokens_per_second)) << where;
  EXPECT_TRUE(same_bits(a.total_seconds, b.total_seconds)) << where;
  EXPECT_TRUE(same_bits(a.throughput_tokens_per_second, b.throughput_tokens_per_second)) << where;
  EXPECT_EQ(a.prefill_bound, b.prefill_bound) << where;
  EXPECT_EQ(a.decode_bound, b.decode_bound) << where;
  EXPECT_EQ(a.bound, b.bound) << where;
}

TEST(InferenceSweep, EqualsPredictInferenceBitForBit) {
  auto cat = Catalog::embedded();
  const PerfEfficiency eff = default_efficiency();
  int checked = 0;
  for (const char* model_id : {"llama-3.1-8b", "mixtral-8x7b", "gemma-2-27b", "llama-3.1-70b"}) {
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
            Workload w;
            w.engine = e;
            w.tp = tp;
            w.output_tokens = 200;
            w.context = 40000;
            PerfRun run;
            run.weights = perf_weights(f, m, d, e);
            InferenceSweep sweep(a, d, w, run, eff);
            // Sweep order (prompt lengths of one batch in a row), then out of order (cache misses).
            for (int pass = 0; pass < 2; ++pass) {
              for (int64_t b : {1, 3, 64, 256}) {
                for (int64_t n : {1, 100, 2048, 32768}) {
                  const int64_t batch = pass == 0 ? b : (n % 7) + 1;
                  Workload one = w;
                  one.batch = batch;
                  one.input_tokens = n;
                  const std::string where = std::string(model_id) + " " + gpu + " tp " + std::to_string(tp) +
                                            " batch " + std::to_string(batch) + " prompt " + std::to_string(n);
                  expect_identical(sweep.at(batch, n), predict_inference(a, d, one, run, eff), where);
                  ++checked;
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 5000);
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

TEST(SweepPoint, EqualsThePerConfigurationPathInEveryField) {
  auto cat = Catalog::embedded();
  const PerfEfficiency eff = default_efficiency();
  int checked = 0, fitting = 0, refused = 0, beyond_context = 0;
  // llama-2-7b: 4,096 positions (prompts beyond them are refused by vLLM); mixtral: MoE (the latency
  // model's generic path); gemma-2: sliding windows; transformers: the memory model's generic path.
  for (const char* model_id : {"llama-3.1-8b", "llama-2-7b", "mixtral-8x7b", "gemma-2-27b", "llama-3.1-70b"}) {
    auto zoo = zoo_model(model_id);
    ASSERT_TRUE(zoo.ok()) << model_id;
    const Model& m = **zoo;
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
              for (int64_t n :
                   {1, 500, 3968, 4000, 8064, 32768}) {  // 3968, 8064: context = 4096, 8192 (the models' own)
                const std::string where = std::string(model_id) + " " + gpu + " tp " + std::to_string(tp) + " " +
                                          std::string(weight_format_info(f).name) + " " + std::string(engine_name(e)) +
                                          " batch " + std::to_string(b) + " prompt " + std::to_string(n);
                const SweepAnswer fast = point->at(b, n);
                const SweepAnswer slow = answer_slowly(w, t, run, eff, b, n);
                EXPECT_EQ(fast.refusal, slow.refusal) << where;
                EXPECT_EQ(fast.fits, slow.fits) << where;
                EXPECT_TRUE(same_bits(fast.total_bytes, slow.total_bytes)) << where;
                EXPECT_TRUE(same_bits(fast.headroom_bytes, slow.headroom_bytes)) << where;
                expect_identical(fast.perf, slow.perf, where);
                ++checked;
                fitting += slow.fits ? 1 : 0;
                refused += slow.refusal ? 1 : 0;
                beyond_context += slow.refusal == RefusalCode::kContext ? 1 : 0;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 10000);
  // The grid holds every kind of answer.
  EXPECT_GT(fitting, 1000);
  EXPECT_GT(refused, 1000);
  EXPECT_GT(beyond_context, 100);
}

TEST(InferenceSweep, MemoryAndLatencyInnerLoopDoesNotAllocate) {
#if !defined(GPUPLAN_COUNTS_ALLOCATIONS)
  GTEST_SKIP() << "allocations are counted by the Release test binary's operator new (not under ASan)";
#endif
  const Model& m = *zoo_model("llama-3.1-70b").value();
  const PerfArch a = perf_arch(m);
  const Target t = Target::linked(Catalog::embedded()->resolve("h100-80gb-sxm5").value(), 4);
  const PerfDevice d = perf_device(t);
  Workload w;
  w.model = std::shared_ptr<const Model>(&m, [](const Model*) {});  // the zoo outlives the test
  w.engine = Engine::kVllm;
  w.weights = WeightFormat::kFp8;
  w.tp = 4;
  w.count = 4;
  w.output_tokens = 256;
  w.context = 32768 + 256;
  auto prepared = prepare(w);
  ASSERT_TRUE(prepared.ok()) << prepared.error().message;
  PerfRun run;
  run.weights = perf_weights(w.weights, m, d, w.engine);
  InferenceSweep sweep(a, d, w, run, default_efficiency());
  double sum = 0;
  counted_allocations = 0;
  counting = true;
  for (int64_t b : {1, 8, 64, 256}) {
    for (int64_t c : {512, 2048, 8192, 32768}) {
      sum += estimate_memory(*prepared, b, c + 256, t.link).total_bytes;
      sum += sweep.at(b, c).tpot_seconds;
    }
  }
  counting = false;
  EXPECT_EQ(counted_allocations.load(), 0);
  EXPECT_GT(sum, 0);
  auto point = SweepPoint::make(w, t, run, default_efficiency());
  ASSERT_TRUE(point.ok()) << point.error().message;
  counted_allocations = 0;
  counting = true;
  for (int64_t b : {1, 8, 64, 256}) {
    for (int64_t c : {512, 2048, 8192, 32768}) sum += point->at(b, c).perf.tpot_seconds;
  }
  for (int64_t b : {1, 8, 64, 256}) {
    for (int64_t c : {512, 2048, 8192, 32768}) sum += point->at_lean(b, c).perf.tpot_seconds;
  }
  counting = false;
  EXPECT_EQ(counted_allocations.load(), 0);
}

}  // namespace
}  // namespace gpuplan
