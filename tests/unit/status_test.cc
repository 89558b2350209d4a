#include "gpuplan/status.h"

#include <gtest/gtest.h>

namespace gpuplan {
TEST(Status, ExitCodesFollowTheContract) {
  EXPECT_EQ(exit_code(ErrorCode::kUsage), 2);
  EXPECT_EQ(exit_code(ErrorCode::kNotFound), 3);
  EXPECT_EQ(exit_code(ErrorCode::kAmbiguous), 3);
  EXPECT_EQ(exit_code(ErrorCode::kInvalidData), 4);
  EXPECT_EQ(exit_code(ErrorCode::kInvalidLayout), 5);
  EXPECT_EQ(http_status(ErrorCode::kUsage), 400);
  EXPECT_EQ(http_status(ErrorCode::kNotFound), 404);
}
TEST(Status, MarketCodesHaveTheirOwnExitAndHttpStatus) {
  EXPECT_EQ(http_status(ErrorCode::kUnauthenticated), 401);
  EXPECT_EQ(http_status(ErrorCode::kForbidden), 403);
  EXPECT_EQ(http_status(ErrorCode::kConflict), 409);
  EXPECT_EQ(http_status(ErrorCode::kPaymentRequired), 402);
  EXPECT_EQ(http_status(ErrorCode::kPreconditionFailed), 412);
  EXPECT_EQ(http_status(ErrorCode::kUnavailable), 503);
  EXPECT_EQ(exit_code(ErrorCode::kUnauthenticated), 8);
  EXPECT_EQ(exit_code(ErrorCode::kUnavailable), 13);
  EXPECT_STREQ(error_code_name(ErrorCode::kPaymentRequired), "payment_required");
}
TEST(Status, ResultHoldsValueOrError) {
  Result<int> a = 3;
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, 3);
  Result<int> b = usage_error("bad", "x");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().field, "x");
}
}  // namespace gpuplan
