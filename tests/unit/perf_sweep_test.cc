// Every zoo model x weight format x task on GPUs of every generation and a MIG slice gives finite,
// positive figures through the perf command (no NaN, no infinity, no error beyond the documented ones)
// where it runs, and null figures with a reason where it does not (refusal.h, or out of memory).
#include <gtest/gtest.h>

#include <cmath>

#include "gpuplan/api.h"
#include "gpuplan/catalog.h"
#include "gpuplan/model.h"

namespace gpuplan {
namespace {

bool finite_positive(const Json& v) { return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0; }

TEST(PerfSweep, EveryZooModelFormatAndTaskGivesFiniteFigures) {
  Context ctx{Catalog::embedded()};
  const std::vector<std::string> gpus = {"a100-80gb-sxm4", "h100-80gb-sxm5x2",      "l4",
                                         "v100-16gb-sxm2", "a100-40gb-sxm4/1g.5gb", "rtx-4090"};
  int checked = 0, refused = 0;
  for (const auto& entry : zoo_entries()) {
    for (const char* weights : {"bf16", "fp8", "int4-awq", "nf4", "q4_k_m", "fp32"}) {
      for (const char* task : {"infer", "train", "qlora"}) {
        Json req{{"model", entry.id}, {"weights", weights}, {"task", task}, {"gpu", gpus}, {"batch", 4}};
        if (std::string(task) != "infer") req["context"] = 512;
        if (std::string(weights) == "q4_k_m") req["engine"] = "llama.cpp";
        auto r = run_command(ctx, "perf", req);
        if (!r) {
          // Documented refusals: training a quantized base, QLoRA on a 16-bit one.
          EXPECT_EQ(r.error().code, ErrorCode::kUsage)
              << entry.id << " " << weights << " " << task << ": " << r.error().message;
          continue;
        }
        for (const auto& t : (*r)["targets"]) {
          const std::string where = entry.id + " " + weights + " " + task + " on " + t["target"].get<std::string>();
          if (!t["fits"].get<bool>()) {
            // A target that does not run it (refused, or out of memory) gets no figures, and the reason.
            EXPECT_TRUE(t["reason"].is_string()) << where;
            EXPECT_TRUE(t.value("step_seconds", Json()).is_null() && t.value("tpot_seconds", Json()).is_null())
                << where;
            ++refused;
            continue;
          }
          if (t.contains("ttft_seconds")) {
            EXPECT_TRUE(finite_positive(t["ttft_seconds"])) << where;
            EXPECT_TRUE(finite_positive(t["tpot_seconds"])) << where;
            EXPECT_TRUE(finite_positive(t["decode_tokens_per_second"])) << where;
          }
          EXPECT_TRUE(finite_positive(t.value("step_seconds", Json())) ||
                      finite_positive(t.value("tpot_seconds", Json())))
              << where;
          if (t.contains("mfu")) {
            EXPECT_GT(t["mfu"].get<double>(), 0) << where;
            EXPECT_LT(t["mfu"].get<double>(), 1) << where;
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 500);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace gpuplan

namespace gpuplan {
namespace {

// Autocast trains an fp32 model with 16-bit matmuls: on a GPU whose bf16 rate is twice its TF32 rate
// (H100 SXM: 989 vs 494.7 dense TFLOPS) a compute-bound step takes about half as long as fp32 (TF32).
TEST(PerfAmp, AutocastComputesInSixteenBits) {
  Context ctx{Catalog::embedded()};
  auto step = [&](bool amp) {
    nlohmann::ordered_json req = {{"model", "llama-3.1-8b"}, {"task", "train"}, {"weights", "fp32"},
                                  {"context", 2048},         {"zero", 3},       {"gpu", "h100-80gb-sxm5x8"}};
    if (amp) req["amp"] = "bf16";
    auto r = run_command(ctx, "perf", req);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? (*r)["targets"][0]["step_seconds"].get<double>() : 0.0;
  };
  const double fp32 = step(false), amp = step(true);
  ASSERT_GT(amp, 0);
  EXPECT_GT(fp32 / amp, 1.6);
  EXPECT_LT(fp32 / amp, 2.2);
}

}  // namespace
}  // namespace gpuplan
