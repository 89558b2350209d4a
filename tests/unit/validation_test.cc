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
    EXPECT_NEAR((*r)["summary"]["median_error_percent"].get<double>(), expected, 0.005)
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
  const auto& s = (*r)["summary"];
  EXPECT_EQ(v->rows, (*r)["rows"]);
  EXPECT_EQ(v->comparable, s["comparable_rows"].get<int>());
  EXPECT_EQ(v->predicted, s["numeric_rows"].get<int>());
  EXPECT_EQ(v->within_25, s["within_25_percent"].get<int>());
  EXPECT_EQ(v->median_abs_error_percent, s["median_error_percent"].get<double>());
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
