// The market's view of live offers (Market::Impl::offer_view) answers exactly what a fresh recount
// answers, after every one of a run of random writes, made by two Markets over one store (two server
// processes on one database): each sees the other's writes through market_version. And the credit
// check's frozen charges of final rentals (final_charge_micros) add up to the same money as before.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "market_fixture.h"

namespace gpuplan::market {
namespace {

// A second handle on the store `kind` that the fixture just opened (a fresh, empty one).
struct SharedStore {
  std::unique_ptr<Db> first, second;
  std::string skip;
  std::filesystem::path dir;  // SQLite: its data directory
  std::string conninfo;       // PostgreSQL

  void open(const std::string& kind) {
    if (kind == "postgresql") {
      first = testing::make_store(kind, &skip);
      if (!first) return;
      conninfo = std::getenv("GPUPLAN_TEST_POSTGRES");
      auto db = open_postgresql(conninfo);
      ASSERT_TRUE(db.ok()) << db.error().message;
      second = std::move(*db);
      return;
    }
    dir = std::filesystem::temp_directory_path() / ("gpuplan-market-view-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    auto a = open_store(dir.string());
    ASSERT_TRUE(a.ok()) << a.error().message;
    auto b = open_store(dir.string());
    ASSERT_TRUE(b.ok()) << b.error().message;
    first = std::move(*a);
    second = std::move(*b);
  }
  // Yet another handle: a Market opened on it has no view yet, so it recounts from the tables.
  std::unique_ptr<Db> fresh() const {
    auto db = conninfo.empty() ? open_store(dir.string()) : open_postgresql(conninfo);
    EXPECT_TRUE(db.ok()) << (db.ok() ? "" : db.error().message);
    return db.ok() ? std::move(*db) : nullptr;
  }
  ~SharedStore() {
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
};

std::string describe(const std::vector<Offer>& offers) {
  std::string out;
  for (const Offer& o : offers) {
    out += o.id + " " + o.target + " active=" + std::to_string(o.active) +
           " price=" + std::to_string(o.price_micros_per_hour) + " available=" + std::to_string(o.available) + "\n";
  }
  return out;
}

class MarketView : public ::testing::TestWithParam<const char*> {};

TEST_P(MarketView, CachedOffersEqualAFreshRecountAfterRandomWritesFromTwoProcesses) {
  SharedStore store;
  ASSERT_NO_FATAL_FAILURE(store.open(GetParam()));
  if (!store.first) GTEST_SKIP() << store.skip;
  testing::World w;
  ASSERT_TRUE(w.init(std::move(store.first)));
  auto other = Market::open(std::move(store.second), w.clock);
  ASSERT_TRUE(other.ok()) << other.error().message;
  Market* markets[] = {w.market.get(), other->get()};

  std::mt19937 rng(20261201);  // fixed: the same run every time
  auto pick = [&](size_t n) { return static_cast<size_t>(std::uniform_int_distribution<size_t>(0, n - 1)(rng)); };
  std::vector<Node> nodes;
  std::vector<Offer> offers;
  std::vector<std::string> rentals;
  const MigPolicy policies[] = {MigPolicy::kNone, MigPolicy::kDynamic, MigPolicy::kStatic};
  for (int i = 0; i < 4; ++i) {
    const MigPolicy policy = policies[i % 3];
    nodes.push_back(w.add_a100_node("n" + std::to_string(i), 4, policy, Interconnect::kNvlink,
                                    policy == MigPolicy::kStatic ? "3g.40gb,2g.20gb,1g.10gb,1g.10gb" : ""));
  }
  for (const char* target : {"a100-80gb-sxm4", "a100-80gb-sxm4/1g.10gb", "a100-80gb-sxm4/3g.40gb"}) {
    offers.push_back(w.add_offer(target, 1, 1'000'000));
  }
  offers.push_back(w.add_offer("a100-80gb-sxm4", 2, 2'000'000));
  const OfferFilter all{"", "", "", true};
  // Both views built, so that a missed invalidation would show.
  ASSERT_TRUE(markets[0]->list_offers(all).ok());
  ASSERT_TRUE(markets[1]->list_offers(all).ok());

  constexpr int kSteps = 80;  // enough for every kind of write several times (seeded)
  int succeeded = 0;
  for (int step = 0; step < kSteps; ++step) {
    Market& m = *markets[pick(2)];
    const size_t op = pick(10);
    bool ok = false;
    if (op <= 2) {  // rent: the most common write
      const Offer& o = offers[pick(offers.size())];
      auto r = m.rent(w.renter_a, RentRequest{o.id, static_cast<int>(1 + pick(2))});
      if (r.ok()) rentals.push_back(r->id);
      ok = r.ok();
    } else if (op == 3 && !rentals.empty()) {
      ok = m.stop_rental(w.renter_a, rentals[pick(rentals.size())]).ok();
    } else if (op == 4 && !rentals.empty()) {
      ok = m.start_rental(w.renter_a, rentals[pick(rentals.size())]).ok();
    } else if (op == 5 && !rentals.empty()) {
      ok = m.delete_rental(w.renter_a, rentals[pick(rentals.size())]).ok();
    } else if (op == 6) {
      NodeSpec spec{"x" + std::to_string(step), "eu-west", Interconnect::kPcie, 32, 256, 1000, {}};
      const MigPolicy policy = policies[pick(3)];
      for (int g = 0; g < 2; ++g) {
        spec.gpus.push_back(GpuSpec{"a100-80gb-sxm4", "GPU-x" + std::to_string(step) + "-" + std::to_string(g), policy,
                                    policy == MigPolicy::kStatic ? "3g.40gb,3g.40gb" : ""});
      }
      auto n = m.add_node(w.provider, spec);
      if (n.ok()) nodes.push_back(*n);
      ok = n.ok();
    } else if (op == 7 && !nodes.empty()) {
      const Node& n = nodes[pick(nodes.size())];
      ok = pick(2) == 0 ? m.drain_node(w.provider, n.id).ok() : m.remove_node(w.provider, n.id).ok();
    } else if (op == 8) {
      const char* targets[] = {"a100-80gb-sxm4", "a100-80gb-sxm4/2g.20gb", "a100-80gb-sxm4/1g.10gb"};
      auto o = m.create_offer(w.provider, OfferSpec{targets[pick(3)], 1, "eu-west", 500'000, 0});
      if (o.ok()) offers.push_back(*o);
      ok = o.ok();
    } else if (op == 9) {
      const Offer& o = offers[pick(offers.size())];
      ok = pick(2) == 0 ? m.set_offer_price(w.provider, o.id, 100'000 + static_cast<int64_t>(pick(1000))).ok()
                        : m.delete_offer(w.provider, o.id).ok();
    }
    succeeded += ok ? 1 : 0;
    auto fresh_db = store.fresh();
    ASSERT_NE(fresh_db, nullptr);
    auto fresh = Market::open(std::move(fresh_db), w.clock);
    ASSERT_TRUE(fresh.ok()) << fresh.error().message;
    auto want = (*fresh)->list_offers(all);
    ASSERT_TRUE(want.ok()) << want.error().message;
    for (Market* seen : markets) {
      auto got = seen->list_offers(all);
      ASSERT_TRUE(got.ok()) << got.error().message;
      ASSERT_EQ(describe(*got), describe(*want)) << "after step " << step << " (op " << op << ")";
      for (const Offer& o : *want) {
        auto one = seen->get_offer(o.id);
        ASSERT_TRUE(one.ok()) << one.error().message;
        EXPECT_EQ(one->available, o.available) << o.id << " after step " << step;
      }
    }
  }
  EXPECT_GT(succeeded, kSteps / 3);  // the run did change the market, not only fail
}

// The credit check counts an ended rental's charge from final_charge_micros (frozen by the transition
// into terminated) and a rental without one (ended before migration 0002) from its segments.
TEST_P(MarketView, CreditCheckCountsFrozenAndUnfrozenChargesOfEndedRentals) {
  std::string skip;
  auto db = testing::make_store(GetParam(), &skip);
  if (!db) GTEST_SKIP() << skip;
  testing::World w;
  ASSERT_TRUE(w.init(std::move(db)));
  w.add_a100_node("n1", 2, MigPolicy::kNone);
  constexpr int64_t kPricePerHour = 3'600'000;  // $3.60: 1,000 micro-units a second
  auto o = w.add_offer("a100-80gb-sxm4", 1, kPricePerHour);
  ASSERT_TRUE(w.market->set_credit_limit(w.platform, w.a_id, 6'000'000).ok());  // $6
  auto r = w.market->rent(w.renter_a, RentRequest{o.id});
  ASSERT_TRUE(r.ok()) << r.error().message;
  w.clock->advance_seconds(2000);  // $2.00
  ASSERT_TRUE(w.market->delete_rental(w.renter_a, r->id).ok());
  int64_t frozen = -1;
  ASSERT_TRUE(with_tx(w.market->db(), TxMode::kRead, [&](Tx& tx) -> Status {
                auto rows =
                    tx.query("SELECT final_charge_micros FROM rentals WHERE id = ?1", std::vector<Value>{r->id});
                if (!rows) return rows.error();
                frozen = rows->empty() ? -1 : (*rows)[0].integer(0);
                return Status::Ok();
              }).ok());
  EXPECT_EQ(frozen, 2'000'000);
  // $2.00 + one hour $3.60 = $5.60 <= $6: allowed; then $2.00 + $0.50 + $3.60 > $6: refused.
  auto second = w.market->rent(w.renter_a, RentRequest{o.id});
  ASSERT_TRUE(second.ok()) << second.error().message;
  w.clock->advance_seconds(500);
  ASSERT_TRUE(w.market->delete_rental(w.renter_a, second->id).ok());
  auto refused = w.market->rent(w.renter_a, RentRequest{o.id});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kPaymentRequired);
  EXPECT_NE(refused.error().message.find("2.500000"), std::string::npos) << refused.error().message;
  // The same money when the charges were never frozen (rows from before migration 0002).
  ASSERT_TRUE(with_tx(w.market->db(), TxMode::kWrite, [&](Tx& tx) -> Status {
                auto n = tx.exec("UPDATE rentals SET final_charge_micros = NULL WHERE id = ?1",
                                 std::vector<Value>{second->id});
                return n ? Status::Ok() : Status(n.error());
              }).ok());
  auto again = w.market->rent(w.renter_a, RentRequest{o.id});
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("2.500000"), std::string::npos) << again.error().message;
}

// rent() places from the view when it is at the store's version (no scan) and from SQL otherwise: the
// same seeded run of rents and deletes in two markets, one listing offers before every call (its view
// is current, so its rents read the view) and one never listing, places every unit on the same GPU and
// slice.
TEST_P(MarketView, PlacementFromTheViewEqualsPlacementFromTheTables) {
  std::vector<std::string> runs[2];
  for (int listing = 0; listing < 2; ++listing) {
    std::string skip;
    auto db = testing::make_store(GetParam(), &skip);
    if (!db) GTEST_SKIP() << skip;
    testing::World w;
    ASSERT_TRUE(w.init(std::move(db)));
    const MigPolicy policies[] = {MigPolicy::kDynamic, MigPolicy::kNone, MigPolicy::kStatic};
    for (int i = 0; i < 6; ++i) {
      const MigPolicy policy = policies[i % 3];
      w.clock->advance_ms(1);  // nodes ordered by creation time in both markets (ids are random)
      w.add_a100_node("n" + std::to_string(i), 4, policy, i % 2 == 0 ? Interconnect::kNvlink : Interconnect::kPcie,
                      policy == MigPolicy::kStatic ? "3g.40gb,2g.20gb,1g.10gb,1g.10gb" : "");
    }
    std::vector<Offer> offers;
    for (const char* target :
         {"a100-80gb-sxm4", "a100-80gb-sxm4/1g.10gb", "a100-80gb-sxm4/2g.20gb", "a100-80gb-sxm4/3g.40gb"}) {
      offers.push_back(w.add_offer(target, 1, 1'000'000));
    }
    offers.push_back(w.add_offer("a100-80gb-sxm4", 2, 2'000'000));
    std::mt19937 rng(7);  // the same run in both markets
    auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
    std::vector<std::string> live;
    constexpr int kCalls = 60;  // enough to fill GPUs partly and free some again
    for (int call = 0; call < kCalls; ++call) {
      if (listing == 1) ASSERT_TRUE(w.market->list_offers().ok());
      if (!live.empty() && pick(3) == 0) {
        const size_t k = pick(live.size());
        ASSERT_TRUE(w.market->delete_rental(w.renter_a, live[k]).ok());
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        runs[listing].push_back("delete");
        continue;
      }
      const Offer& o = offers[pick(offers.size())];
      auto r = w.market->rent(w.renter_a, RentRequest{o.id, static_cast<int>(1 + pick(2))});
      std::string line = o.target + " x" + std::to_string(o.gpus) + ":";
      if (!r.ok()) {
        line += " " + r.error().message;
      } else {
        live.push_back(r->id);
        for (const Placement& p : r->placements) {
          line += " " + p.gpu_uuid + "/" + p.profile + "@" + std::to_string(p.start) + "+" + std::to_string(p.size);
        }
      }
      runs[listing].push_back(line);
    }
  }
  ASSERT_EQ(runs[0].size(), runs[1].size());
  for (size_t i = 0; i < runs[0].size(); ++i) EXPECT_EQ(runs[0][i], runs[1][i]) << "call " << i;
}

INSTANTIATE_TEST_SUITE_P(Stores, MarketView, ::testing::ValuesIn(testing::kStoreKinds), testing::store_name);

}  // namespace
}  // namespace gpuplan::market
