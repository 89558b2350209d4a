// The one validation loop (src/validate/validation.h): one median, used by the `validate` command and
// by the perf accuracy test alike (issue #12: the command took the upper middle value of an even count).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gpuplan/api.h"
#include "gpuplan/catalog.h"
#include "validate/perf_rows.h"
#include "validate/validation.h"

namespace gpuplan {
namespace {

TEST(Validation, MedianIsTheMeanOfTheTwoMiddleValuesOfAnEvenCount) {
  EXPECT_EQ(validate::median({}), 0.0);
  EXPECT_EQ(validate::median({7}), 7.0);
  EXPECT_EQ(validate::median({3, 1, 2}), 2.0);
  EXPECT_EQ(validate::median({4, 1, 3, 2}), 2.5);  // the upper middle value would be 3
}

// The command's summary per kind is the median of that kind's absolute errors, by the one definition.
TEST(Validation, CommandSummaryUsesTheOneMedian) {
  Context ctx{Catalog::embedded()};
  for (const char* kind : {"memory", "perf"}) {
    auto r = run_command(ctx, "validate", Json{{"kind", kind}});
    ASSERT_TRUE(r.ok()) << r.error().message;
    std::vector<double> errs;
    for (const auto& row : (*r)["rows"]) {
      if (row["comparable"].get<bool>() && row["error_percent"].is_number())
        errs.push_back(std::fabs(row["error_percent"].get<double>()));
    }
    ASSERT_FALSE(errs.empty()) << kind;
    std::sort(errs.begin(), errs.end());
    const size_t n = errs.size();
    const double expected = n % 2 ? errs[n / 2] : (errs[n / 2 - 1] + errs[n / 2]) / 2;
    // The summary rounds to 2 decimals: at most half a unit of the last one apart (and a rounding ulp).
    EXPECT_NEAR((*r)["summary"]["median_error_percent"].get<double>(), expected, 0.005 + 1e-9)
        << kind << " (" << n << " rows)";
  }
}

// The perf accuracy test and the command read the same loop: same rows, same counts, same median.
TEST(Validation, PerfValidationIsTheCommandsPerfKind) {
  Context ctx{Catalog::embedded()};
  auto r = run_command(ctx, "validate", Json{{"kind", "perf"}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto v = validate::validate_perf(*ctx.catalog);
  ASSERT_TRUE(v.ok()) << v.error().message;
  const auto& s = (*r)["summary_by_design"]["used"];
  EXPECT_EQ(v->rows, (*r)["rows"]);
  EXPECT_EQ(v->comparable, s["comparable_rows"].get<int>());
  EXPECT_EQ(v->predicted, s["numeric_rows"].get<int>());
  EXPECT_EQ(v->within_25, s["within_25_percent"].get<int>());
  EXPECT_EQ(v->median_abs_error_percent, s["median_error_percent"].get<double>());
}

// Compared rows as run_validation writes them (only the fields the summaries read).
Json fixture_row(const std::string& id, const std::string& kind, const std::string& group, const std::string& design,
                 double error_percent) {
  return Json{{"id", id},
              {"kind", "perf"},
              {"metric_kind", kind},
              {"source_group", group},
              {"design", design},
              {"comparable", true},
              {"status", "predicted"},
              {"error_percent", error_percent},
              {"log_error", std::log(1 / (1 + error_percent / 100))}};
}

// Issue #17: per metric kind and source group, used and held-out rows apart, each with its own median
// and shares; a verdict counts right or wrong in its group.
TEST(Validation, GroupsSplitUsedFromHeldOutWithTheirOwnMedians) {
  Json rows = Json::array();
  rows.push_back(fixture_row("a", "decode", "vllm-project/vllm", "used", 4));
  rows.push_back(fixture_row("b", "decode", "vllm-project/vllm", "used", -8));
  rows.push_back(fixture_row("c", "decode", "vllm-project/vllm", "used", 30));
  rows.push_back(fixture_row("d", "decode", "pytorch-labs/gpt-fast", "held_out", -50));
  rows.push_back(fixture_row("e", "decode", "pytorch-labs/gpt-fast", "held_out", 20));
  rows.push_back(fixture_row("f", "training", "pytorch/torchtune", "held_out", 5));
  Json not_comparable = fixture_row("g", "decode", "pytorch-labs/gpt-fast", "held_out", 400);
  not_comparable["comparable"] = false;
  rows.push_back(not_comparable);
  Json verdict{{"id", "h"},
               {"kind", "memory"},
               {"metric_kind", "verdict"},
               {"source_group", "pytorch/torchtune"},
               {"design", "held_out"},
               {"comparable", true},
               {"status", "predicted"},
               {"error_percent", nullptr},
               {"verdict_right", false}};
  rows.push_back(verdict);
  const Json g = validate::group_summaries(rows);
  const Json& used = g["summary_by_design"]["used"];
  EXPECT_EQ(used["numeric_rows"], 3);
  EXPECT_DOUBLE_EQ(used["median_error_percent"].get<double>(), 8.0);
  const Json& held = g["summary_by_design"]["held_out"];
  EXPECT_EQ(held["numeric_rows"], 3);
  EXPECT_DOUBLE_EQ(held["median_error_percent"].get<double>(), 20.0);
  EXPECT_EQ(held["verdicts_wrong"], 1);
  // Source-weighted: gpt-fast's 50 and 20 weigh 1/2 each, torchtune's 5 weighs 1; half the weight (1)
  // is reached exactly at 5, so the median is between 5 and 20.
  EXPECT_EQ(held["source_groups"], 2);
  EXPECT_DOUBLE_EQ(held["source_weighted_median_error_percent"].get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(used["source_weighted_median_error_percent"].get<double>(), 8.0);  // one group: the median
  // Memory and speed apart: every fixture row but the verdict is perf.
  EXPECT_EQ(g["summary_by_kind_and_design"]["perf"]["held_out"]["numeric_rows"], 3);
  EXPECT_EQ(g["summary_by_kind_and_design"]["memory"]["held_out"]["verdict_rows"], 1);
  // decode used, decode held-out, training held-out, verdict held-out: in the order they appear.
  const Json& kinds = g["by_metric_kind"];
  ASSERT_EQ(kinds.size(), 4u) << kinds.dump();
  EXPECT_EQ(kinds[0]["metric_kind"], "decode");
  EXPECT_EQ(kinds[0]["design"], "used");
  EXPECT_DOUBLE_EQ(kinds[0]["within_10_percent_share"].get<double>(), 0.6667);
  EXPECT_EQ(kinds[1]["design"], "held_out");
  EXPECT_EQ(kinds[1]["rows"], 3);  // the not-comparable row is listed, not counted
  EXPECT_EQ(kinds[1]["numeric_rows"], 2);
  EXPECT_DOUBLE_EQ(kinds[1]["median_error_percent"].get<double>(), 35.0);
  EXPECT_DOUBLE_EQ(kinds[1]["within_25_percent_share"].get<double>(), 0.5);
  EXPECT_EQ(kinds[3]["metric_kind"], "verdict");
  EXPECT_EQ(kinds[3]["verdicts_right"], 0);
  const Json& groups = g["by_source_group"];
  ASSERT_EQ(groups.size(), 4u) << groups.dump();
  EXPECT_EQ(groups[0]["source_group"], "vllm-project/vllm");
  EXPECT_EQ(groups[0]["numeric_rows"], 3);
  EXPECT_EQ(groups[1]["source_group"], "pytorch-labs/gpt-fast");
  EXPECT_EQ(groups[2]["source_group"], "pytorch/torchtune");
  EXPECT_EQ(groups[2]["metric_kind"], "training");
  EXPECT_EQ(groups[3]["verdict_rows"], 1);
}

// A band is the wider of two 80th percentiles of |ln(measured / predicted)| (issue #17, session 6): over
// the used rows, and over all comparable rows, held-out ones included. The used rows' is a floor.
TEST(Validation, BandsAreTheWiderOfUsedAndAllRows) {
  Json rows = Json::array();
  const double errors[] = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10};
  for (int i = 0; i < 10; ++i) rows.push_back(fixture_row("u" + std::to_string(i), "decode", "x", "used", errors[i]));
  {
    // Used rows alone: the 8th of 10 sorted |ln(1 / (1 + e))|, e = -8 %: ln(1 / 0.92) = 0.08338, rounded up.
    const Json bands = validate::calibrate_bands(rows);
    ASSERT_EQ(bands.size(), 1u);
    EXPECT_EQ(bands[0]["rows"], 10);
    EXPECT_NEAR(bands[0]["log_half_width"].get<double>(), 0.0835, 1.5e-4);
    EXPECT_LE(bands[0]["low"].get<double>(), std::exp(-0.0834));
    EXPECT_GE(bands[0]["high"].get<double>(), std::exp(0.0834));
  }
  {
    // A held-out row far off widens the band: the 9th of 11, e = 9 %: ln(1.09) = 0.08618, rounded up.
    Json with = rows;
    with.push_back(fixture_row("h", "decode", "y", "held_out", 300));
    const Json bands = validate::calibrate_bands(with);
    ASSERT_EQ(bands.size(), 1u);
    EXPECT_EQ(bands[0]["rows"], 11);
    EXPECT_NEAR(bands[0]["log_half_width"].get<double>(), 0.0863, 1.5e-4);
  }
  {
    // Held-out rows closer than the used ones never narrow it below the used rows' percentile.
    Json with = rows;
    for (int i = 0; i < 10; ++i) with.push_back(fixture_row("h" + std::to_string(i), "decode", "y", "held_out", 0));
    const Json bands = validate::calibrate_bands(with);
    ASSERT_EQ(bands.size(), 1u);
    EXPECT_NEAR(bands[0]["log_half_width"].get<double>(), 0.0835, 1.5e-4);
  }
}

TEST(Validation, SourceGroupIsTheRepositoryOrSite) {
  EXPECT_EQ(validate::source_group("https://github.com/vllm-project/vllm/issues/123"), "vllm-project/vllm");
  EXPECT_EQ(validate::source_group("https://github.com/NVIDIA/TensorRT-LLM/blob/v0.9.0/docs/x.md"),
            "nvidia/tensorrt-llm");
  EXPECT_EQ(validate::source_group("https://github.com/ggerganov/llama.cpp/pull/1"), "ggml-org/llama.cpp");
  EXPECT_EQ(validate::source_group("https://arxiv.org/abs/2305.14314"), "arxiv.org/abs/2305.14314");
  EXPECT_EQ(validate::source_group("https://huggingface.co/blog/bloom-inference-pytorch-scripts"),
            "huggingface.co/blog/bloom-inference-pytorch-scripts");
  EXPECT_EQ(validate::source_group("https://www.databricks.com/blog/llm-inference"), "databricks.com");
  EXPECT_EQ(validate::source_group(""), "unknown");
}

// Every row of the shipped files says its design; held-out rows say what they test and when.
TEST(Validation, EveryRowHasADesign) {
  Context ctx{Catalog::embedded()};
  auto r = run_command(ctx, "validate", Json::object());
  ASSERT_TRUE(r.ok()) << r.error().message;
  for (const auto& row : (*r)["rows"]) {
    const std::string d = row["design"].get<std::string>();
    EXPECT_TRUE(d == "used" || d == "held_out") << row["id"];
    if (d == "held_out") {
      EXPECT_TRUE(row.contains("held_out_for")) << row["id"];
      EXPECT_TRUE(row.contains("collected")) << row["id"];
    }
  }
}

TEST(Validation, UnknownKindNamesTheKinds) {
  Context ctx{Catalog::embedded()};
  auto r = run_command(ctx, "validate", Json{{"kind", "power"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().field, "kind");
  EXPECT_NE(r.error().message.find("memory, perf"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace gpuplan
