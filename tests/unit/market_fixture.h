// Shared set-up of the market's tests: a store FACTORY (SQLite always; PostgreSQL when the environment
// gives GPUPLAN_TEST_POSTGRES=<conninfo>, else the case is skipped with a message), and a small world of
// tenants, users and tokens authenticated through the real path.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "gpuplan/market.h"
#include "market/db.h"

namespace gpuplan::market::testing {

// The store kinds every store test runs on.
inline const char* const kStoreKinds[] = {"sqlite", "postgresql"};

// A fresh, empty store of `kind`; skips (nullptr + *skip set) when PostgreSQL is not configured.
inline std::unique_ptr<Db> make_store(const std::string& kind, std::string* skip) {
  if (kind == "postgresql") {
    const char* conninfo = std::getenv("GPUPLAN_TEST_POSTGRES");
    if (conninfo == nullptr || *conninfo == '\0') {
      *skip = "GPUPLAN_TEST_POSTGRES is unset: the PostgreSQL run of this test is skipped (make test sets it)";
      return nullptr;
    }
    auto db = open_postgresql(conninfo);
    if (!db) {
      *skip = "PostgreSQL unavailable: " + db.error().message;
      return nullptr;
    }
    // A clean schema per test: drop every table the migrations create.
    Status s = with_tx(**db, TxMode::kWrite, [](Tx& tx) -> Status {
      for (const char* t : {"outbox", "gpu_bench", "node_agents", "usage_segments", "rental_events", "slice_claims",
                            "rental_placements", "rentals", "templates", "offers", "gpus", "nodes", "api_tokens",
                            "users", "tenants", "market_version", "target_last_available", "schema_migrations"}) {
        auto r = tx.exec(std::string("DROP TABLE IF EXISTS ") + t + " CASCADE");
        if (!r) return r.error();
      }
      return Status::Ok();
    });
    if (!s) {
      *skip = "cannot reset the PostgreSQL schema: " + s.error().message;
      return nullptr;
    }
    return std::move(*db);
  }
  // tmpfs when there is one: synchronous=FULL's fsyncs stay cheap on a loaded machine (the semantics the
  // tests check do not depend on the disk).
  static std::atomic<int> counter{0};
  const std::filesystem::path base =
      std::filesystem::exists("/dev/shm") ? std::filesystem::path("/dev/shm") : std::filesystem::temp_directory_path();
  const auto dir = base / ("gpuplan-market-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  auto db = open_store(dir.string());
  if (!db) {
    ADD_FAILURE() << db.error().message;
    return nullptr;
  }
  return std::move(*db);
}

inline std::string store_name(const ::testing::TestParamInfo<const char*>& info) { return info.param; }

// Tenants and principals: platform admin, one provider (admin), renters A and B (admins), a viewer of A.
struct World {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::unique_ptr<Market> market;
  Principal platform, provider, renter_a, renter_b, viewer_a;
  std::string provider_id, a_id, b_id;

  Principal login(const IssuedToken& t) {
    auto p = market->authenticate("Bearer " + t.token);
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
    return p.ok() ? *p : Principal{};
  }
  Principal add_tenant(const std::string& name, TenantKind kind, std::string* id, Role role = Role::kAdmin) {
    auto t = market->create_tenant(platform, name, kind);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
    *id = t->id;
    auto u = market->create_user(platform, t->id, name + "-user", role);
    EXPECT_TRUE(u.ok()) << (u.ok() ? "" : u.error().message);
    auto tok = market->create_token(platform, u->id);
    EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.error().message);
    return login(*tok);
  }
  bool init(std::unique_ptr<Db> db, MarketOptions options = {}) {
    auto m = Market::open(std::move(db), clock, std::move(options));
    if (!m) {
      ADD_FAILURE() << m.error().message;
      return false;
    }
    market = std::move(*m);
    auto root = market->init_platform();
    if (!root) {
      ADD_FAILURE() << root.error().message;
      return false;
    }
    platform = login(*root);
    provider = add_tenant("prov", TenantKind::kProvider, &provider_id);
    renter_a = add_tenant("acme", TenantKind::kRenter, &a_id);
    renter_b = add_tenant("bravo", TenantKind::kRenter, &b_id);
    auto v = market->create_user(renter_a, a_id, "vic", Role::kViewer);
    EXPECT_TRUE(v.ok()) << (v.ok() ? "" : v.error().message);
    auto vt = market->create_token(renter_a, v->id);
    EXPECT_TRUE(vt.ok()) << (vt.ok() ? "" : vt.error().message);
    viewer_a = login(*vt);
    return true;
  }
  // A node of `n` A100-80GB SXM4 with `policy`.
  Node add_a100_node(const std::string& name, int n, MigPolicy policy, Interconnect ic = Interconnect::kNvlink,
                     const std::string& layout = {}) {
    NodeSpec spec;
    spec.name = name;
    spec.region = "eu-west";
    spec.interconnect = ic;
    spec.vcpus = 64;
    spec.ram_gb = 512;
    spec.disk_gb = 2000;
    for (int i = 0; i < n; ++i) {
      spec.gpus.push_back(GpuSpec{"a100-80gb-sxm4", "GPU-" + name + "-" + std::to_string(i), policy, layout});
    }
    auto node = market->add_node(provider, spec);
    EXPECT_TRUE(node.ok()) << (node.ok() ? "" : node.error().message);
    return node.ok() ? *node : Node{};
  }
  Offer add_offer(const std::string& target, int gpus, int64_t price, int64_t min_billable = 0) {
    auto o = market->create_offer(provider, OfferSpec{target, gpus, "eu-west", price, min_billable});
    EXPECT_TRUE(o.ok()) << (o.ok() ? "" : o.error().message);
    return o.ok() ? *o : Offer{};
  }
};

// A test run once per store kind (INSTANTIATE_TEST_SUITE_P(Stores, X, ValuesIn(kStoreKinds), store_name)):
// SetUp opens a fresh store of GetParam()'s kind, or skips the case when that kind is not configured, and
// builds the World on it; a test that wants its own MarketOptions passes world_in_setup = false and calls
// w.init(std::move(db_), options) itself.
class StoreTest : public ::testing::TestWithParam<const char*> {
 protected:
  explicit StoreTest(bool world_in_setup = true) : world_in_setup_(world_in_setup) {}
  void SetUp() override {
    std::string skip;
    db_ = make_store(GetParam(), &skip);
    if (!db_) {
      if (!skip.empty()) GTEST_SKIP() << skip;
      FAIL() << "no store";
    }
    if (world_in_setup_) ASSERT_TRUE(w.init(std::move(db_)));
  }
  std::unique_ptr<Db> db_;  // the fresh store, until w.init takes it
  World w;

 private:
  bool world_in_setup_;
};

}  // namespace gpuplan::market::testing
