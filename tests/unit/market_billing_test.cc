// Billing exactness with the injected clock: the price frozen at reservation (a later price change does
// not apply), per-second segments only while running (stop/start), minimum billable seconds, integer
// micro-units rounded up once per rental, and the credit limit crossed at start and by tick().
#include <gtest/gtest.h>

#include "core/decimal.h"
#include "market_fixture.h"

namespace gpuplan::market {
namespace {

// $3.60 an hour: exactly 1,000 micro-dollars a second, so expected charges read as seconds x 1000.
constexpr int64_t kPricePerHour = 3'600'000;

class MarketBilling : public testing::StoreTest {
 protected:
  MarketBilling() : StoreTest(/*world_in_setup=*/false) {}
  void init(MarketOptions options = {}) {
    ASSERT_TRUE(w.init(std::move(db_), std::move(options)));
    w.add_a100_node("n1", 8, MigPolicy::kDynamic);
  }
  int64_t charge(const Principal& p, const std::string& id) {
    auto u = w.market->rental_usage(p, id);
    EXPECT_TRUE(u.ok()) << (u.ok() ? "" : u.error().message);
    return u.ok() ? u->charge_micros : -1;
  }
};

TEST_P(MarketBilling, FrozenPricePerSecondSegmentsAndStopStart) {
  init();
  auto o = w.add_offer("a100-80gb-sxm4", 1, kPricePerHour, 60);
  auto r = w.market->rent(w.renter_a, RentRequest{o.id});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->price_micros_per_hour, kPricePerHour);
  EXPECT_EQ(charge(w.renter_a, r->id), 60'000);  // running 0 s: the minimum already applies
  w.clock->advance_ms(600'500);                  // 600.5 s: a started second counts -> 601 s
  EXPECT_EQ(charge(w.renter_a, r->id), 601'000);
  // The provider doubles the price: the running rental keeps its frozen price.
  ASSERT_TRUE(w.market->set_offer_price(w.provider, o.id, 2 * kPricePerHour).ok());
  auto stopped = w.market->stop_rental(w.renter_a, r->id);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(charge(w.renter_a, r->id), 601'000);
  w.clock->advance_seconds(3600);  // stopped: not billed
  EXPECT_EQ(charge(w.renter_a, r->id), 601'000);
  auto started = w.market->start_rental(w.renter_a, r->id);
  ASSERT_TRUE(started.ok()) << started.error().message;
  EXPECT_EQ(started->price_micros_per_hour, kPricePerHour);
  w.clock->advance_seconds(100);
  ASSERT_TRUE(w.market->delete_rental(w.renter_a, r->id).ok());
  w.clock->advance_seconds(1000);
  auto u = w.market->rental_usage(w.renter_a, r->id);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->billed_seconds, 701);
  EXPECT_EQ(u->charge_micros, 701'000);
  ASSERT_EQ(u->segments.size(), 2u);
  EXPECT_TRUE(u->segments[0].ended_at_ms.has_value());
  EXPECT_TRUE(u->segments[1].ended_at_ms.has_value());
  // A new rental pays the new price.
  auto r2 = w.market->rent(w.renter_a, RentRequest{o.id, 2});
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->price_micros_per_hour, 2 * 2 * kPricePerHour);
  w.clock->advance_seconds(10);
  EXPECT_EQ(charge(w.renter_a, r2->id), 60 * 4'000);  // 10 s run, 60 s minimum, $14.40/h
  // Tenant usage and provider earnings are the sums.
  auto tu = w.market->usage(w.renter_a);
  ASSERT_TRUE(tu.ok());
  EXPECT_EQ(tu->charge_micros, 701'000 + 240'000);
  auto e = w.market->earnings(w.provider);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->earnings_micros, 701'000 + 240'000);
}

TEST_P(MarketBilling, MinimumBillableSecondsAndRoundingUpOncePerRental) {
  init();
  auto o = w.add_offer("a100-80gb-sxm4/1g.10gb", 1, kPricePerHour, 600);
  auto r = w.market->rent(w.renter_a, RentRequest{o.id});
  ASSERT_TRUE(r.ok());
  w.clock->advance_seconds(10);
  ASSERT_TRUE(w.market->stop_rental(w.renter_a, r->id).ok());
  EXPECT_EQ(charge(w.renter_a, r->id), 600'000);  // 10 s billed as the 600 s minimum
  // One micro-dollar an hour for 1 s: 1/3600 micro, rounded up to 1 (the charge never rounds to free).
  auto cheap = w.add_offer("a100-80gb-sxm4/1g.10gb", 1, 1, 0);
  auto rc = w.market->rent(w.renter_b, RentRequest{cheap.id});
  ASSERT_TRUE(rc.ok());
  w.clock->advance_ms(1);
  EXPECT_EQ(charge(w.renter_b, rc->id), 1);
  // A rental that never ran costs nothing (manual hand-off below).
}

TEST_P(MarketBilling, CreditLimitIsCheckedAtRentAndStartAndByTick) {
  init();
  ASSERT_TRUE(w.market->set_credit_limit(w.platform, w.b_id, 5'000'000).ok());  // $5
  auto o = w.add_offer("a100-80gb-sxm4", 1, kPricePerHour);
  auto big = w.add_offer("a100-80gb-sxm4", 2, 4 * kPricePerHour);
  auto refused = w.market->rent(w.renter_b, RentRequest{big.id});  // one hour = $14.40 > $5
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kPaymentRequired);
  auto r = w.market->rent(w.renter_b, RentRequest{o.id});  // 0 + $3.60 <= $5
  ASSERT_TRUE(r.ok()) << r.error().message;
  w.clock->advance_seconds(1800);  // $1.80
  ASSERT_TRUE(w.market->stop_rental(w.renter_b, r->id).ok());
  auto again = w.market->start_rental(w.renter_b, r->id);  // $1.80 + $3.60 > $5
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kPaymentRequired);
  auto still = w.market->get_rental(w.renter_b, r->id);
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->state, RentalState::kStopped);  // unchanged: the refusal rolled back
  ASSERT_TRUE(w.market->set_credit_limit(w.platform, w.b_id, 10'000'000).ok());
  ASSERT_TRUE(w.market->start_rental(w.renter_b, r->id).ok());
  w.clock->advance_seconds(8199);  // $1.80 + $8.199 < $10
  auto t1 = w.market->tick();
  ASSERT_TRUE(t1.ok());
  EXPECT_EQ(*t1, 0);
  w.clock->advance_seconds(1);  // exactly $10.00: the limit is reached
  auto t2 = w.market->tick();
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(*t2, 1);
  auto after = w.market->get_rental(w.renter_b, r->id);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state, RentalState::kStopped);
  EXPECT_EQ(charge(w.renter_b, r->id), 10'000'000);
  w.clock->advance_seconds(3600);
  EXPECT_EQ(charge(w.renter_b, r->id), 10'000'000);
  // Unlimited again: A has no limit at all.
  auto ua = w.market->usage(w.renter_a);
  ASSERT_TRUE(ua.ok());
  EXPECT_FALSE(ua->credit_limit_micros.has_value());
}

TEST_P(MarketBilling, EndsAtTerminatesAndManualHandoffBillsFromRunning) {
  init(MarketOptions{Handoff::kManual, nullptr});
  auto o = w.add_offer("a100-80gb-sxm4", 1, kPricePerHour);
  const int64_t now = w.clock->now_ms();
  auto r = w.market->rent(w.renter_a, RentRequest{o.id, 1, now + 3'600'000, "", ""});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, RentalState::kReserved);
  w.clock->advance_seconds(100);
  EXPECT_EQ(charge(w.renter_a, r->id), 0);  // reserved: not billed
  auto a_cannot = w.market->mark_running(w.renter_a, r->id);
  ASSERT_FALSE(a_cannot.ok());
  EXPECT_EQ(a_cannot.error().code, ErrorCode::kNotFound);
  auto run = w.market->mark_running(w.provider, r->id, r->version);
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->state, RentalState::kRunning);
  w.clock->advance_seconds(3500);  // now + 3600 s: ends_at
  auto t = w.market->tick();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, 1);
  auto after = w.market->get_rental(w.renter_a, r->id);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state, RentalState::kTerminated);
  EXPECT_TRUE(after->placements.empty());
  EXPECT_EQ(charge(w.renter_a, r->id), 3'500'000);
  auto o2 = w.market->get_offer(o.id);
  ASSERT_TRUE(o2.ok());
  EXPECT_EQ(o2->available, 8);
}

INSTANTIATE_TEST_SUITE_P(Stores, MarketBilling, ::testing::ValuesIn(testing::kStoreKinds), testing::store_name);

TEST(MarketMoney, DecimalPricesConvertToMicrosExactly) {
  constexpr int64_t kMax = kMaxPriceMicrosPerHour;
  EXPECT_EQ(parse_micros("0.35", kMax), 350'000);
  EXPECT_EQ(parse_micros("2", kMax), 2'000'000);
  EXPECT_EQ(parse_micros("1.000001", kMax), 1'000'001);
  EXPECT_EQ(parse_micros("1e-6", kMax), 1);
  EXPECT_EQ(parse_micros("3.5E2", kMax), 350'000'000);
  EXPECT_EQ(parse_micros("0.0000001", kMax), std::nullopt);  // a tenth of a micro
  EXPECT_EQ(parse_micros("1.2500000", kMax), 1'250'000);     // trailing zeros are fine
  EXPECT_EQ(parse_micros("-1", kMax), std::nullopt);
  EXPECT_EQ(parse_micros("1e40", kMax), std::nullopt);
  EXPECT_EQ(parse_micros("0x10", kMax), std::nullopt);
  EXPECT_EQ(parse_micros("", kMax), std::nullopt);
  EXPECT_EQ(parse_micros("1000000", kMax), kMax);
  EXPECT_EQ(parse_micros("1000000.000001", kMax), std::nullopt);
  EXPECT_EQ(micros_from_double(0.35, kMax), 350'000);            // 0.34999999999999997 as a double
  EXPECT_EQ(micros_from_double(0.1 + 0.2, kMax), std::nullopt);  // 0.30000000000000004: not a whole micro
  EXPECT_EQ(micros_from_double(4.6, kMax), 4'600'000);
}

}  // namespace
}  // namespace gpuplan::market
