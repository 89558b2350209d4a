// Plan then rent (issue #14), the store's side: Market::rent_many places every rental of a plan in ONE
// transaction, all or nothing (a TP 2 unit with one GPU free rents nothing, and neither does a plan whose
// second replica finds nothing); the credit limit applies to the sum; concurrent all-or-nothing rents never
// double-book; and every placement records when its targets were last available (migration 0003), which
// the catalog's `last_available_at` reads. On SQLite always, on PostgreSQL with GPUPLAN_TEST_POSTGRES.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "market_fixture.h"

namespace gpuplan::market {
namespace {

class MarketPlanRent : public testing::StoreTest {
 protected:
  int64_t available(const std::string& offer) {
    auto o = w.market->get_offer(offer);
    EXPECT_TRUE(o.ok());
    return o.ok() ? o->available : -1;
  }
  size_t live_rentals(const Principal& p) {
    auto rs = w.market->list_rentals(p);
    EXPECT_TRUE(rs.ok());
    size_t n = 0;
    if (rs.ok()) {
      for (const auto& r : *rs) n += is_live(r.state) ? 1 : 0;
    }
    return n;
  }
  // Every (GPU, memory slice) in at most one live placement, and the claims exactly those.
  void expect_no_double_booking() {
    Status s = with_tx(w.market->db(), TxMode::kRead, [&](Tx& tx) -> Status {
      auto ps = tx.query(
          "SELECT p.gpu_id, p.start_slice, p.size_slices FROM rental_placements p JOIN rentals r ON r.id = "
          "p.rental_id WHERE r.state IN ('reserved', 'running')");
      if (!ps) return ps.error();
      std::set<std::pair<std::string, int64_t>> held;
      for (const Row& r : *ps) {
        for (int64_t sl = r.integer(1); sl < r.integer(1) + r.integer(2); ++sl) {
          EXPECT_TRUE(held.emplace(r.text(0), sl).second) << "slice " << sl << " of " << r.text(0) << " held twice";
        }
      }
      auto claims = tx.query("SELECT COUNT(*) FROM slice_claims");
      if (!claims) return claims.error();
      EXPECT_EQ(static_cast<size_t>((*claims)[0].integer(0)), held.size()) << "claims differ from the placements";
      return Status::Ok();
    });
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
};

TEST_P(MarketPlanRent, AllOrNothingATp2UnitWithOneFreeGpuRentsNothing) {
  w.add_a100_node("n1", 2, MigPolicy::kNone);
  const Offer one = w.add_offer("a100-80gb-sxm4", 1, 1'900'000);
  const Offer two = w.add_offer("a100-80gb-sxm4", 2, 3'800'000);
  // B holds one GPU of the node: the 2-GPU unit (TP 2 on one node) cannot be placed.
  ASSERT_TRUE(w.market->rent(w.renter_b, RentRequest{one.id}).ok());
  EXPECT_EQ(available(two.id), 0);
  auto tp2 = w.market->rent_many(w.renter_a, {RentRequest{two.id}});
  ASSERT_FALSE(tp2.ok());
  EXPECT_EQ(tp2.error().code, ErrorCode::kConflict) << tp2.error().message;
  EXPECT_NE(tp2.error().message.find("none was made"), std::string::npos) << tp2.error().message;
  EXPECT_EQ(live_rentals(w.renter_a), 0u);

  // Two replicas of one GPU with one GPU free: the first would fit, the second not; neither is made.
  EXPECT_EQ(available(one.id), 1);
  auto replicas = w.market->rent_many(w.renter_a, {RentRequest{one.id}, RentRequest{one.id}});
  ASSERT_FALSE(replicas.ok());
  EXPECT_EQ(replicas.error().code, ErrorCode::kConflict);
  EXPECT_NE(replicas.error().message.find("rental 2 of 2"), std::string::npos) << replicas.error().message;
  EXPECT_EQ(live_rentals(w.renter_a), 0u);
  EXPECT_EQ(available(one.id), 1) << "the first replica's GPU was given back with the rest";
  expect_no_double_booking();

  // With both GPUs free, the TP 2 unit is one rental on both GPUs of the node.
  auto rs = w.market->list_rentals(w.renter_b);
  ASSERT_TRUE(rs.ok());
  ASSERT_TRUE(w.market->delete_rental(w.renter_b, rs->front().id).ok());
  auto ok = w.market->rent_many(w.renter_a, {RentRequest{two.id}});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].placements.size(), 2u);
  EXPECT_EQ((*ok)[0].placements[0].node_id, (*ok)[0].placements[1].node_id);
  expect_no_double_booking();
}

TEST_P(MarketPlanRent, ReplicasAreOneRentalEachInOneTransactionAndReplayWithTheirKeys) {
  w.add_a100_node("n1", 1, MigPolicy::kDynamic);
  const Offer slice = w.add_offer("a100-80gb-sxm4/3g.40gb", 1, 630'000);
  EXPECT_EQ(available(slice.id), 2);
  std::vector<RentRequest> two = {RentRequest{slice.id, 1, {}, "plan-k/1"}, RentRequest{slice.id, 1, {}, "plan-k/2"}};
  auto r = w.market->rent_many(w.renter_a, two);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  EXPECT_NE((*r)[0].placements[0].start, (*r)[1].placements[0].start) << "the view did not hide the first claim";
  EXPECT_FALSE((*r)[0].replayed);
  EXPECT_EQ(available(slice.id), 0);
  auto again = w.market->rent_many(w.renter_a, two);
  ASSERT_TRUE(again.ok()) << again.error().message;
  ASSERT_EQ(again->size(), 2u);
  EXPECT_TRUE((*again)[0].replayed && (*again)[1].replayed);
  EXPECT_EQ((*again)[0].id, (*r)[0].id);
  EXPECT_EQ((*again)[1].id, (*r)[1].id);
  expect_no_double_booking();
  // Rights are checked first: a viewer's all-or-nothing rent is 403, a provider cannot rent.
  auto viewer = w.market->rent_many(w.viewer_a, {RentRequest{slice.id}});
  ASSERT_FALSE(viewer.ok());
  EXPECT_EQ(viewer.error().code, ErrorCode::kForbidden);
  auto empty = w.market->rent_many(w.renter_a, {});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, ErrorCode::kUsage);
  std::vector<RentRequest> too_many(kMaxRentManyRentals + 1, RentRequest{slice.id});
  auto over = w.market->rent_many(w.renter_a, too_many);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code, ErrorCode::kLimit);
}

TEST_P(MarketPlanRent, TheCreditLimitAppliesToTheSum) {
  w.add_a100_node("n1", 4, MigPolicy::kNone);
  const Offer one = w.add_offer("a100-80gb-sxm4", 1, 1'000'000);  // $1/h: the lookahead is $1 a rental
  ASSERT_TRUE(w.market->set_credit_limit(w.platform, w.a_id, 2'500'000).ok());
  // Three rentals need $3 of lookahead: over $2.50, so none is made (each alone would pass).
  auto three = w.market->rent_many(w.renter_a, {RentRequest{one.id}, RentRequest{one.id}, RentRequest{one.id}});
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.error().code, ErrorCode::kPaymentRequired) << three.error().message;
  EXPECT_EQ(live_rentals(w.renter_a), 0u);
  EXPECT_EQ(available(one.id), 4);
  auto two = w.market->rent_many(w.renter_a, {RentRequest{one.id}, RentRequest{one.id}});
  ASSERT_TRUE(two.ok()) << two.error().message;
  EXPECT_EQ(live_rentals(w.renter_a), 2u);
}

TEST_P(MarketPlanRent, ConcurrentAllOrNothingRentsNeverDoubleBook) {
  w.add_a100_node("n1", 2, MigPolicy::kDynamic);
  const Offer slice = w.add_offer("a100-80gb-sxm4/3g.40gb", 1, 630'000);  // 2 per GPU: 4 in all
  const Offer whole = w.add_offer("a100-80gb-sxm4", 1, 1'900'000);
  constexpr int kThreads = 8;
  std::atomic<int> made{0}, refused{0}, other{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      const Principal& p = t % 2 == 0 ? w.renter_a : w.renter_b;
      // Even threads want two slices, odd ones a slice and a whole GPU: at most a few can all succeed.
      std::vector<RentRequest> want = {RentRequest{slice.id}, RentRequest{t % 2 == 0 ? slice.id : whole.id}};
      auto r = w.market->rent_many(p, want);
      if (r.ok()) {
        EXPECT_EQ(r->size(), 2u);
        ++made;
      } else if (r.error().code == ErrorCode::kConflict) {
        ++refused;
      } else {
        ++other;
        ADD_FAILURE() << r.error().message;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(made + refused, kThreads);
  EXPECT_EQ(other.load(), 0);
  EXPECT_GE(made.load(), 1);
  // Every made request holds both of its rentals; nothing half-made is left.
  EXPECT_EQ(live_rentals(w.renter_a) + live_rentals(w.renter_b), static_cast<size_t>(2 * made.load()));
  expect_no_double_booking();
}

TEST_P(MarketPlanRent, APlacementRecordsWhenItsTargetsWereLastAvailable) {
  w.add_a100_node("n1", 1, MigPolicy::kDynamic);
  const Offer whole = w.add_offer("a100-80gb-sxm4", 1, 1'900'000);
  const Offer slice = w.add_offer("a100-80gb-sxm4/3g.40gb", 1, 630'000);
  auto none = w.market->last_available();
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_TRUE(none->empty());
  const int64_t t0 = w.clock->now_ms();
  // Renting the whole GPU sells out both targets: each was available just before.
  auto r = w.market->rent(w.renter_a, RentRequest{whole.id});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(available(slice.id), 0);
  auto seen = w.market->last_available();
  ASSERT_TRUE(seen.ok()) << seen.error().message;
  std::map<std::string, int64_t> at;
  for (const auto& s : *seen) {
    EXPECT_EQ(s.region, "eu-west");
    at[s.target] = s.at_ms;
  }
  EXPECT_EQ(at["a100-80gb-sxm4"], t0);
  EXPECT_EQ(at["a100-80gb-sxm4/3g.40gb"], t0);
  // Later: the GPU comes back, a slice is rented (both were free then), the time moves.
  w.clock->advance_seconds(600);
  ASSERT_TRUE(w.market->delete_rental(w.renter_a, r->id).ok());
  ASSERT_TRUE(w.market->rent(w.renter_a, RentRequest{slice.id}).ok());
  auto later = w.market->last_available();
  ASSERT_TRUE(later.ok());
  for (const auto& s : *later) EXPECT_EQ(s.at_ms, t0 + 600'000) << s.target;
  // A refused rent (nothing free) records nothing new: its transaction rolled back.
  ASSERT_TRUE(w.market->rent(w.renter_a, RentRequest{slice.id}).ok());  // the second 3g.40gb: sold out now
  w.clock->advance_seconds(60);
  auto refused = w.market->rent(w.renter_b, RentRequest{slice.id});
  ASSERT_FALSE(refused.ok());
  auto after = w.market->last_available();
  ASSERT_TRUE(after.ok());
  for (const auto& s : *after) {
    if (s.target == "a100-80gb-sxm4/3g.40gb") EXPECT_EQ(s.at_ms, t0 + 600'000);
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, MarketPlanRent, ::testing::ValuesIn(testing::kStoreKinds), testing::store_name);

}  // namespace
}  // namespace gpuplan::market
