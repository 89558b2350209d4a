// Offers from files and from the market are one concept (issue #13): the pure commands take a snapshot
// of the market's live offers as the request's `market` rows (source "market", id, live `available`,
// demo), list them beside the files, and plan and compare over both; plan never uses a sold-out market
// offer nor plans more instances than it has free. A server with a store passes the snapshot itself.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "gpuplan/api.h"
#include "gpuplan/market.h"
#include "market/db.h"
#include "server/server.h"

namespace gpuplan {
namespace {

namespace fs = std::filesystem;

Json market_row(const std::string& id, const std::string& target, double price, int available, bool demo = false,
                int gpus = 1) {
  return Json{{"id", id},
              {"provider", demo ? "demo-provider" : "acme"},
              {"region", "eu"},
              {"target", target},
              {"gpus", gpus},
              {"price_per_hour", price},
              {"available", available},
              {"demo", demo}};
}

const Context& ctx() {
  static const Context c{Catalog::embedded()};
  return c;
}

const Json* find_offer(const Json& offers, const std::string& id) {
  for (const auto& o : offers) {
    if (o["offer"] == id) return &o;
  }
  return nullptr;
}

TEST(OffersMarket, MarketRowsAreListedBesideTheFilesWithSourceIdAvailableAndDemo) {
  const Json market{{"offers", Json::array({market_row("off_1", "a100-80gb-sxm4/1g.10gb", 0.35, 7, true),
                                            market_row("off_2", "h100-80gb-pcie", 2.49, 0)})}};
  auto all = run_command(ctx(), "offers.list", Json{{"now", "2026-11-30"}, {"market", market}, {"all", true}});
  ASSERT_TRUE(all.ok()) << all.error().message;
  const Json* slice = find_offer((*all)["offers"], "off_1");
  ASSERT_NE(slice, nullptr) << (*all)["offers"].dump();
  EXPECT_EQ((*slice)["source"], "market");
  EXPECT_EQ((*slice)["id"], "off_1");
  EXPECT_EQ((*slice)["available"], 7);
  EXPECT_EQ((*slice)["demo"], true);
  EXPECT_EQ((*slice)["target"], "a100-80gb-sxm4/1g.10gb");
  EXPECT_EQ((*slice)["price_per_hour"], 0.35);
  EXPECT_EQ((*slice)["stale"], false);  // live: no capture date to age
  size_t files = 0;
  for (const auto& o : (*all)["offers"]) files += o["source"] != "market";
  EXPECT_GE(files, 60u) << "the shipped snapshot is listed beside the market";
  // A sold-out market offer is not usable: rejected "unavailable", like a file row saying so.
  bool sold_out_rejected = false;
  for (const auto& r : (*all)["rejected"]) sold_out_rejected |= r["offer"] == "off_2" && r["reason"] == "unavailable";
  EXPECT_TRUE(sold_out_rejected) << (*all)["rejected"].dump();

  auto files_only =
      run_command(ctx(), "offers.list", Json{{"now", "2026-11-30"}, {"market", market}, {"source", "files"}});
  ASSERT_TRUE(files_only.ok()) << files_only.error().message;
  EXPECT_EQ(find_offer((*files_only)["offers"], "off_1"), nullptr);
  auto market_only =
      run_command(ctx(), "offers.list", Json{{"now", "2026-11-30"}, {"market", market}, {"source", "market"}});
  ASSERT_TRUE(market_only.ok()) << market_only.error().message;
  ASSERT_EQ((*market_only)["offers"].size(), 1u);
  EXPECT_EQ((*market_only)["offers"][0]["offer"], "off_1");
  auto bad_source = run_command(ctx(), "offers.list", Json{{"source", "both"}});
  ASSERT_FALSE(bad_source.ok());
  EXPECT_EQ(bad_source.error().field, "source");
}

TEST(OffersMarket, AMalformedMarketRowIsSkippedWithTheKeyNamedAndTooManyAreALimit) {
  Json rows =
      Json::array({market_row("off_1", "a100-80gb-sxm4", 1.9, 1), market_row("off_2", "no-such-gpu", 1, 1),
                   Json{{"id", "off_3"}, {"provider", "p"}, {"target", "a40"}, {"price_per_hour", 1}},
                   market_row("off_4", "a40", -1, 1), "not an object", market_row("off_6", "a40", 1, 1, false, 0)});
  auto r = run_command(ctx(), "offers.list",
                       Json{{"now", "2026-11-30"}, {"market", Json{{"offers", rows}}}, {"source", "market"}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)["offers"].size(), 1u);
  ASSERT_EQ((*r)["skipped"].size(), 5u) << (*r)["skipped"].dump();
  EXPECT_EQ((*r)["skipped"][0]["file"], "market");
  EXPECT_EQ((*r)["skipped"][0]["line"], 2);
  EXPECT_NE((*r)["skipped"][0]["reason"].get<std::string>().find("no-such-gpu"), std::string::npos);
  EXPECT_NE((*r)["skipped"][1]["reason"].get<std::string>().find("'available'"), std::string::npos);
  EXPECT_NE((*r)["skipped"][2]["reason"].get<std::string>().find("'price_per_hour'"), std::string::npos);
  EXPECT_NE((*r)["skipped"][4]["reason"].get<std::string>().find("'gpus' is outside [1, 16]"), std::string::npos)
      << (*r)["skipped"][4].dump();

  auto not_a_list = run_command(ctx(), "offers.list", Json{{"market", Json::array()}});
  ASSERT_FALSE(not_a_list.ok());
  EXPECT_EQ(not_a_list.error().field, "market");
  Json many = Json::array();
  for (int i = 0; i < 10'001; ++i) many.push_back(1);
  auto too_many = run_command(ctx(), "offers.list", Json{{"market", Json{{"offers", many}}}});
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.error().code, ErrorCode::kLimit);
  EXPECT_EQ(too_many.error().field, "market");
}

// A serving plan of llama-2-7b at a rate one A100-80GB cannot carry alone, over market offers only.
Json serve_plan(const Json& rows, double rate) {
  return Json{{"model", "llama-2-7b"},
              {"rate", rate},
              {"gpu", {"a100-80gb-sxm4"}},
              {"source", "market"},
              {"now", "2026-11-30"},
              {"market", Json{{"offers", rows}}},
              {"top", 50}};
}

TEST(OffersMarket, PlanNeverUsesASoldOutMarketOfferNorMoreInstancesThanAreFree) {
  // The cheapest offer is sold out; the next has 2 free instances; the dearest has plenty.
  const Json rows =
      Json::array({market_row("sold_out", "a100-80gb-sxm4", 0.10, 0), market_row("two_free", "a100-80gb-sxm4", 0.20, 2),
                   market_row("plenty", "a100-80gb-sxm4", 5.00, 64)});
  for (const double rate : {0.5, 20.0, 60.0}) {
    auto r = run_command(ctx(), "plan", serve_plan(rows, rate));
    ASSERT_TRUE(r.ok()) << r.error().message;
    for (const auto& key : {"plans", "pareto"}) {
      for (const auto& p : (*r)[key]) {
        EXPECT_NE(p["offer"], "sold_out") << "rate " << rate << ": " << p.dump();
        if (p["offer"] == "two_free") EXPECT_LE(p["instances"].get<int>(), 2) << "rate " << rate << ": " << p.dump();
      }
    }
    bool sold_out_rejected = false;
    for (const auto& j : (*r)["rejected"]) sold_out_rejected |= j["offer"] == "sold_out";
    EXPECT_TRUE(sold_out_rejected) << "rate " << rate;
  }
  // At a low rate the cheapest free market offer wins, named by its market id.
  auto low = run_command(ctx(), "plan", serve_plan(rows, 0.5));
  ASSERT_TRUE(low.ok());
  ASSERT_TRUE((*low)["best"].is_object()) << low->dump();
  EXPECT_EQ((*low)["best"]["offer"], "two_free");
  // At a rate that needs more than two instances, two_free is rejected for its live count.
  auto high = run_command(ctx(), "plan", serve_plan(rows, 60.0));
  ASSERT_TRUE(high.ok());
  bool count_reason = false;
  for (const auto& j : (*high)["rejected"]) {
    count_reason |=
        j["offer"] == "two_free" && j["reason"].get<std::string>().find("only 2 available") != std::string::npos;
  }
  EXPECT_TRUE(count_reason) << (*high)["rejected"].dump();
}

TEST(OffersMarket, CompareSeesTheCheapestUsableMarketOffer) {
  const Json rows = Json::array({market_row("cheap_sold_out", "a40", 0.01, 0), market_row("cheap", "a40", 0.02, 3)});
  auto r =
      run_command(ctx(), "compare",
                  Json{{"gpu", {"a40"}}, {"now", "2026-11-30"}, {"market", Json{{"offers", rows}}}, {"spot", false}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)["targets"][0]["value"]["offer"], "cheap") << r->dump();
}

TEST(OffersMarket, EveryMarketPlanNamesTheOfferItWouldRentAndItsAvailableCount) {
  const Json rows =
      Json::array({market_row("off_a", "a100-80gb-sxm4", 1.90, 3), market_row("off_b", "a100-80gb-sxm4", 2.10, 5)});
  auto r = run_command(ctx(), "plan", serve_plan(rows, 0.5));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_GE((*r)["plans"].size(), 2u) << r->dump();
  for (const auto& p : (*r)["plans"]) {
    ASSERT_EQ(p["source"], "market") << p.dump();
    EXPECT_TRUE(p["offer"] == "off_a" || p["offer"] == "off_b") << p.dump();
    EXPECT_EQ(p["available"], p["offer"] == "off_a" ? 3 : 5) << p.dump();
  }
  EXPECT_EQ((*r)["best"]["offer"], "off_a");
}

// The demo-like inventory: A100-80GB whole at $1.90/h, its 3g.40gb slice at a third of that, its 1g.10gb
// slice, an H100 PCIe. Llama-3-8B (16 GB of BF16 weights) at 2 requests/s fits a 3g.40gb and one slice
// carries the rate, so the slice at a third of the price is the cheapest plan; a 1g.10gb cannot hold it.
TEST(OffersMarket, AThreeGFortyGbSliceAtAThirdOfTheA100PriceWinsForLlama3At2RequestsPerSecond) {
  const Json rows = Json::array({market_row("whole", "a100-80gb-sxm4", 1.90, 8, true),
                                 market_row("slice3g", "a100-80gb-sxm4/3g.40gb", 0.63, 16, true),
                                 market_row("slice1g", "a100-80gb-sxm4/1g.10gb", 0.35, 56, true),
                                 market_row("h100", "h100-80gb-pcie", 2.49, 2, true)});
  const Json request{{"model", "llama-3-8b"}, {"rate", 2}, {"source", "market"},
                     {"now", "2026-11-30"},   {"top", 50}, {"market", Json{{"offers", rows}}}};
  auto r = run_command(ctx(), "plan", request);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE((*r)["best"].is_object()) << r->dump();
  EXPECT_EQ((*r)["best"]["offer"], "slice3g") << (*r)["best"].dump();
  EXPECT_EQ((*r)["best"]["target"], "a100-80gb-sxm4/3g.40gb");
  EXPECT_EQ((*r)["best"]["instances"], 1) << (*r)["best"].dump();
  EXPECT_TRUE((*r)["best"]["meets_goal"].get<bool>());
  EXPECT_GE((*r)["best"]["capacity_requests_per_second"].get<double>(), 2.0);
  bool whole_is_dearer = false;
  for (const auto& p : (*r)["plans"]) {
    if (p["offer"] == "whole") {
      whole_is_dearer = p["cost_per_hour"].get<double>() > (*r)["best"]["cost_per_hour"].get<double>();
    }
  }
  EXPECT_TRUE(whole_is_dearer) << (*r)["plans"].dump();
  bool one_g_rejected = false;
  for (const auto& j : (*r)["rejected"]) one_g_rejected |= j["offer"] == "slice1g";
  EXPECT_TRUE(one_g_rejected) << (*r)["rejected"].dump();
}

// The catalog's availability from market rows (what a server with a store passes): per region the units
// free now (a provider's offers share its GPUs: the most any of them has; providers add up), the lowest
// price per GPU-hour, each MIG profile of a GPU, and a sold-out target's last time available.
TEST(OffersMarket, CatalogSaysWhatIsAvailableNowPerRegionAndProfile) {
  auto row = [](const std::string& id, const std::string& provider, const std::string& region,
                const std::string& target, int gpus, int64_t micros, int available) {
    return Json{{"id", id},
                {"provider", provider},
                {"region", region},
                {"target", target},
                {"gpus", gpus},
                {"price_per_hour", static_cast<double>(micros) / 1e6},
                {"price_micros_per_hour", micros},
                {"available", available}};
  };
  const Json market{
      {"offers", Json::array({row("o1", "acme", "eu", "a100-80gb-sxm4", 1, 1'900'000, 6),
                              row("o2", "acme", "eu", "a100-80gb-sxm4", 2, 3'600'000, 3),
                              row("o3", "bravo", "eu", "a100-80gb-sxm4", 1, 2'000'000, 2),
                              row("o4", "bravo", "us", "a100-80gb-sxm4", 1, 2'200'000, 1),
                              row("o5", "acme", "eu", "a100-80gb-sxm4/3g.40gb", 1, 630'000, 4),
                              row("o6", "acme", "eu", "h100-80gb-pcie", 1, 2'490'000, 0)})},
      {"last_available",
       Json::array({Json{{"target", "h100-80gb-pcie"}, {"region", "eu"}, {"at_ms", 1'767'225'600'000}}})}};
  auto show = run_command(ctx(), "catalog.show", Json{{"gpu", "a100-80gb-sxm4"}, {"market", market}});
  ASSERT_TRUE(show.ok()) << show.error().message;
  const Json& now = (*show)["available_now"];
  ASSERT_EQ(now.size(), 2u) << show->dump();
  EXPECT_EQ(now[0]["region"], "eu");
  EXPECT_EQ(now[0]["count"], 8) << "acme: max(6, 3x2) = 6, bravo 2";
  EXPECT_EQ(now[0]["lowest_price_micros_per_hour"], 1'800'000) << "the 2-GPU unit at $3.60/h is $1.80 a GPU";
  EXPECT_EQ(now[0]["lowest_price_per_hour"], 1.8);
  EXPECT_EQ(now[1]["region"], "us");
  EXPECT_EQ(now[1]["count"], 1);
  EXPECT_FALSE(show->contains("last_available_at"));
  const Json& mig = (*show)["available_now_mig"];
  ASSERT_EQ(mig["3g.40gb"].size(), 1u) << show->dump();
  EXPECT_EQ(mig["3g.40gb"][0]["count"], 4);
  EXPECT_EQ(mig["3g.40gb"][0]["lowest_price_micros_per_hour"], 630'000);
  EXPECT_TRUE(mig["1g.10gb"].empty());
  // A profile shown on its own; a sold-out GPU: [] and when it was last available.
  auto profile = run_command(ctx(), "catalog.show", Json{{"gpu", "a100-80gb-sxm4/3g.40gb"}, {"market", market}});
  ASSERT_TRUE(profile.ok()) << profile.error().message;
  EXPECT_EQ((*profile)["available_now"][0]["count"], 4);
  auto h100 = run_command(ctx(), "catalog.show", Json{{"gpu", "h100-80gb-pcie"}, {"market", market}});
  ASSERT_TRUE(h100.ok());
  EXPECT_TRUE((*h100)["available_now"].empty());
  EXPECT_EQ((*h100)["last_available_at"], "2026-01-01T00:00:00Z");
  // catalog.list: every row gets it; a target the market never had: [] and null.
  auto list = run_command(ctx(), "catalog.list", Json{{"market", market}, {"include_mig", true}});
  ASSERT_TRUE(list.ok()) << list.error().message;
  bool saw_a100 = false, saw_never = false;
  for (const auto& g : (*list)["gpus"]) {
    ASSERT_TRUE(g.contains("available_now")) << g.dump();
    if (g["id"] == "a100-80gb-sxm4") saw_a100 = g["available_now"][0]["count"] == 8;
    if (g["id"] == "a40") saw_never = g["available_now"].empty() && g["last_available_at"].is_null();
  }
  EXPECT_TRUE(saw_a100);
  EXPECT_TRUE(saw_never);
  // Without a market the answer has none of it (the goldens stay as they are).
  auto plain = run_command(ctx(), "catalog.show", Json{{"gpu", "a100-80gb-sxm4"}});
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->contains("available_now"));
  EXPECT_FALSE(plain->contains("available_now_mig"));
  auto bad = run_command(ctx(), "catalog.list", Json{{"market", Json::array()}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "market");
}

// --- a server with a store passes the market's snapshot ---------------------------------------------------
class OffersMarketServer : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> n{0};
    dir_ = (fs::temp_directory_path() /
            ("gpuplan-offers-market-" + std::to_string(::getpid()) + "-" + std::to_string(n.fetch_add(1))))
               .string();
    fs::create_directories(dir_);
    auto db = market::open_store(dir_);
    ASSERT_TRUE(db.ok()) << db.error().message;
    auto m = market::Market::open(std::move(*db));
    ASSERT_TRUE(m.ok()) << m.error().message;
    market_ = std::shared_ptr<market::Market>(std::move(*m));
    auto admin_token = market_->init_platform();
    ASSERT_TRUE(admin_token.ok());
    auto admin = market_->authenticate(admin_token->token);
    ASSERT_TRUE(admin.ok());
    auto tenant = market_->create_tenant(*admin, "demo-provider", market::TenantKind::kProvider);
    ASSERT_TRUE(tenant.ok()) << tenant.error().message;
    auto user = market_->create_user(*admin, tenant->id, "ops", market::Role::kAdmin);
    ASSERT_TRUE(user.ok());
    auto token = market_->create_token(*admin, user->id);
    ASSERT_TRUE(token.ok());
    auto provider = market_->authenticate(token->token);
    ASSERT_TRUE(provider.ok());
    admin_ = *admin;
    for (const char* name : {"renter-a", "renter-b"}) {
      auto renter = market_->create_tenant(*admin, name, market::TenantKind::kRenter);
      ASSERT_TRUE(renter.ok()) << renter.error().message;
      auto ru = market_->create_user(*admin, renter->id, "dev", market::Role::kAdmin);
      ASSERT_TRUE(ru.ok());
      auto rt = market_->create_token(*admin, ru->id);
      ASSERT_TRUE(rt.ok());
      renter_tokens_.push_back(rt->token);
      auto viewer = market_->create_user(*admin, renter->id, "watcher", market::Role::kViewer);
      ASSERT_TRUE(viewer.ok());
      auto vt = market_->create_token(*admin, viewer->id);
      ASSERT_TRUE(vt.ok());
      viewer_tokens_.push_back(vt->token);
    }
    provider_ = *provider;
    market::NodeSpec node{"n1", "demo-eu", market::Interconnect::kNvlink, 64, 512, 2000, {}};
    node.gpus.push_back({"a100-80gb-sxm4", "GPU-OM-0", market::MigPolicy::kDynamic, ""});
    ASSERT_TRUE(market_->add_node(*provider, node).ok());
    auto slice = market_->create_offer(*provider, {"a100-80gb-sxm4/1g.10gb", 1, "demo-eu", 350'000, 0});
    ASSERT_TRUE(slice.ok()) << slice.error().message;
    slice_id_ = slice->id;
    auto whole = market_->create_offer(*provider, {"a100-80gb-sxm4", 1, "demo-eu", 10'000, 0});
    ASSERT_TRUE(whole.ok()) << whole.error().message;
    whole_id_ = whole->id;
    ctx_ = std::make_unique<Context>(Context{Catalog::embedded()});
    server::Options o;
    o.threads = 2;
    o.market = market_;
    router_ = std::make_unique<server::Router>(server::make_router(*ctx_, o));
  }
  void TearDown() override {
    router_.reset();
    market_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  server::HttpResponse get(const std::string& path, std::vector<std::pair<std::string, std::string>> query = {}) const {
    server::HttpRequest r;
    r.method = "GET";
    r.path = path;
    r.query = std::move(query);
    r.host = "127.0.0.1:8080";
    return router_->handle(r);
  }
  server::HttpResponse post(const std::string& path, const Json& body, const std::string& token = {}) const {
    server::HttpRequest r;
    r.method = "POST";
    r.path = path;
    r.body = body.dump();
    r.content_type = "application/json";
    r.host = "127.0.0.1:8080";
    if (!token.empty()) r.authorization = "Bearer " + token;
    return router_->handle(r);
  }

  std::string dir_, slice_id_, whole_id_;
  market::Principal admin_, provider_;
  std::vector<std::string> renter_tokens_, viewer_tokens_;
  std::shared_ptr<market::Market> market_;
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<server::Router> router_;
};

TEST_F(OffersMarketServer, GetOffersListsTheFilesAndTheMarketAndEachSourceAlone) {
  auto all = get("/api/v1/offers", {{"now", "2026-11-30"}});
  ASSERT_EQ(all.status, 200) << all.body;
  const Json a = Json::parse(all.body);
  const Json* slice = find_offer(a["offers"], slice_id_);
  ASSERT_NE(slice, nullptr) << all.body;
  EXPECT_EQ((*slice)["source"], "market");
  EXPECT_EQ((*slice)["available"], 7);  // seven 1g.10gb on one free A100-80GB
  EXPECT_EQ((*slice)["demo"], true);
  EXPECT_EQ((*slice)["provider"], "demo-provider");
  EXPECT_GE(a["offers"].size(), 60u);

  const Json files = Json::parse(get("/api/v1/offers", {{"now", "2026-11-30"}, {"source", "files"}}).body);
  EXPECT_EQ(find_offer(files["offers"], slice_id_), nullptr);
  EXPECT_GE(files["offers"].size(), 60u);

  // ?source=market: the market's own answer, with the keys (compatible with before).
  auto m = get("/api/v1/offers", {{"source", "market"}});
  ASSERT_EQ(m.status, 200) << m.body;
  const Json mk = Json::parse(m.body);
  ASSERT_EQ(mk["offers"].size(), 2u);
  for (const auto& o : mk["offers"]) {
    for (const char* key :
         {"id", "provider", "region", "target", "gpus", "price_per_hour", "available", "source", "demo"})
      EXPECT_TRUE(o.contains(key)) << key << " in " << o.dump();
  }
}

TEST_F(OffersMarketServer, PlanOnTheServerSeesTheMarketAndItsLiveCount) {
  // The whole A100 at $0.01/h is the cheapest anywhere: the plan picks it, named by its market id.
  auto r = post("/api/v1/plan",
                Json{{"model", "llama-2-7b"}, {"rate", 0.5}, {"gpu", {"a100-80gb-sxm4"}}, {"now", "2026-11-30"}});
  ASSERT_EQ(r.status, 200) << r.body;
  const Json plan = Json::parse(r.body);
  ASSERT_TRUE(plan["best"].is_object()) << r.body;
  EXPECT_EQ(plan["best"]["offer"], whole_id_);
  EXPECT_EQ(plan["best"]["instances"], 1);
  // A rate that needs two A100s cannot use the market's one free GPU.
  auto two = post(
      "/api/v1/plan",
      Json{{"model", "llama-2-7b"}, {"rate", 60}, {"gpu", {"a100-80gb-sxm4"}}, {"now", "2026-11-30"}, {"top", 50}});
  ASSERT_EQ(two.status, 200) << two.body;
  const Json p2 = Json::parse(two.body);
  for (const auto& key : {"plans", "pareto"}) {
    for (const auto& p : p2[key]) {
      if (p["offer"] == whole_id_) EXPECT_LE(p["instances"].get<int>(), 1) << p.dump();
    }
  }
  // source=files: the server passes no market rows.
  auto files = post("/api/v1/plan", Json{{"model", "llama-2-7b"},
                                         {"rate", 0.5},
                                         {"gpu", {"a100-80gb-sxm4"}},
                                         {"now", "2026-11-30"},
                                         {"source", "files"}});
  ASSERT_EQ(files.status, 200) << files.body;
  EXPECT_NE(Json::parse(files.body)["best"]["offer"], whole_id_);
}

// A plan the fixture's market answers with its whole A100 ($0.01/h, one free).
Json whole_gpu_plan() {
  return Json{{"model", "llama-2-7b"}, {"rate", 0.5}, {"gpu", {"a100-80gb-sxm4"}}, {"now", "2026-11-30"}};
}

TEST_F(OffersMarketServer, PlanThenRentRentsTheRecommendedOptionAndThenSaysItSoldOut) {
  auto r = post("/api/v1/rentals", Json{{"plan", whole_gpu_plan()}, {"idempotency_key", "p1"}}, renter_tokens_[0]);
  ASSERT_EQ(r.status, 201) << r.body;
  const Json a = Json::parse(r.body);
  EXPECT_EQ(a["plan"]["offer"], whole_id_);
  EXPECT_EQ(a["plan"]["available"], 1);
  ASSERT_EQ(a["rentals"].size(), 1u) << r.body;
  EXPECT_EQ(a["rentals"][0]["offer"], whole_id_);
  EXPECT_EQ(a["rentals"][0]["state"], "running");
  // The same key: the same rentals (200).
  auto replay = post("/api/v1/rentals", Json{{"plan", whole_gpu_plan()}, {"idempotency_key", "p1"}}, renter_tokens_[0]);
  EXPECT_EQ(replay.status, 200) << replay.body;
  EXPECT_EQ(Json::parse(replay.body)["rentals"][0]["id"], a["rentals"][0]["id"]);
  EXPECT_EQ(Json::parse(replay.body)["rentals"].size(), 1u);
  // Now nothing of the market meets the plan: 409, nothing rented, a fresh plan one call away.
  auto again = post("/api/v1/rentals", Json{{"plan", whole_gpu_plan()}}, renter_tokens_[1]);
  ASSERT_EQ(again.status, 409) << again.body;
  const Json e = Json::parse(again.body);
  EXPECT_EQ(e["error"]["code"], "conflict");
  EXPECT_EQ(e["replan"], "/api/v1/plan");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("plan again"), std::string::npos) << again.body;
  // Errors of the plan name their key under plan; a viewer may not rent; files cannot be rented.
  auto no_model = post("/api/v1/rentals", Json{{"plan", Json{{"rate", 1}}}}, renter_tokens_[1]);
  EXPECT_EQ(no_model.status, 400) << no_model.body;
  EXPECT_EQ(Json::parse(no_model.body)["error"]["field"], "plan.model") << no_model.body;
  Json files = whole_gpu_plan();
  files["source"] = "files";
  auto from_files = post("/api/v1/rentals", Json{{"plan", files}}, renter_tokens_[1]);
  EXPECT_EQ(from_files.status, 400) << from_files.body;
  EXPECT_EQ(Json::parse(from_files.body)["error"]["field"], "plan.source");
  auto viewer = post("/api/v1/rentals", Json{{"plan", whole_gpu_plan()}}, viewer_tokens_[1]);
  EXPECT_EQ(viewer.status, 403) << viewer.body;
  auto both = post("/api/v1/rentals", Json{{"plan", whole_gpu_plan()}, {"offer", whole_id_}}, renter_tokens_[1]);
  EXPECT_EQ(both.status, 400) << both.body;
  auto not_object = post("/api/v1/rentals", Json{{"plan", "llama"}}, renter_tokens_[1]);
  EXPECT_EQ(not_object.status, 400) << not_object.body;
}

TEST_F(OffersMarketServer, TwoClientsPlanThenRentTheLastGpuExactlyOneWinsTheOther409s) {
  for (int round = 0; round < 4; ++round) {
    std::vector<server::HttpResponse> answers(2);
    std::vector<std::thread> ts;
    for (size_t t = 0; t < 2; ++t) {
      ts.emplace_back([&, t] {
        answers[t] = post("/api/v1/rentals", Json{{"plan", whole_gpu_plan()}}, renter_tokens_[t]);
      });
    }
    for (auto& t : ts) t.join();
    int created = 0, conflicts = 0;
    std::string winner_token, rental;
    for (size_t t = 0; t < 2; ++t) {
      if (answers[t].status == 201) {
        ++created;
        winner_token = renter_tokens_[t];
        rental = Json::parse(answers[t].body)["rentals"][0]["id"];
      } else if (answers[t].status == 409) {
        ++conflicts;
        EXPECT_EQ(Json::parse(answers[t].body)["replan"], "/api/v1/plan") << answers[t].body;
      }
    }
    ASSERT_EQ(created, 1) << answers[0].body << " / " << answers[1].body;
    ASSERT_EQ(conflicts, 1);
    auto p = market_->authenticate(winner_token);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(market_->delete_rental(*p, rental).ok());
  }
}

TEST_F(OffersMarketServer, TheCatalogSaysWhatIsAvailableNowAndWhenItLastWas) {
  auto a100 = get("/api/v1/gpus/a100-80gb-sxm4");
  ASSERT_EQ(a100.status, 200) << a100.body;
  const Json g = Json::parse(a100.body);
  ASSERT_EQ(g["available_now"].size(), 1u) << a100.body;
  EXPECT_EQ(g["available_now"][0]["region"], "demo-eu");
  EXPECT_EQ(g["available_now"][0]["count"], 1);
  EXPECT_EQ(g["available_now"][0]["lowest_price_micros_per_hour"], 10'000);
  EXPECT_EQ(g["available_now_mig"]["1g.10gb"][0]["count"], 7);
  EXPECT_EQ(g["available_now_mig"]["1g.10gb"][0]["lowest_price_per_hour"], 0.35);
  // Rent the GPU whole: the GPU and its slices are sold out, and say when they were last available.
  auto r = post("/api/v1/rentals", Json{{"offer", whole_id_}}, renter_tokens_[0]);
  ASSERT_EQ(r.status, 201) << r.body;
  const Json sold = Json::parse(get("/api/v1/gpus/a100-80gb-sxm4").body);
  EXPECT_TRUE(sold["available_now"].empty()) << sold.dump();
  ASSERT_TRUE(sold["last_available_at"].is_string()) << sold.dump();
  EXPECT_EQ(sold["last_available_at"].get<std::string>().size(), 20u) << sold["last_available_at"];
  const Json slice = Json::parse(get("/api/v1/gpus/a100-80gb-sxm4/1g.10gb").body);
  EXPECT_TRUE(slice["available_now"].empty());
  EXPECT_TRUE(slice["last_available_at"].is_string()) << slice.dump();
  // The list: every GPU row says it; one the market never sold: [] and null.
  auto list = get("/api/v1/gpus");
  ASSERT_EQ(list.status, 200);
  bool h100_never = false;
  std::string h100_row;
  const Json gpus = Json::parse(list.body)["gpus"];
  for (const auto& row : gpus) {
    ASSERT_TRUE(row.contains("available_now")) << row.dump();
    if (row["id"] != "h100-80gb-pcie") continue;
    h100_row = row.dump();
    h100_never = row["available_now"].empty() && row["last_available_at"].is_null();
  }
  EXPECT_TRUE(h100_never) << h100_row;
}

// The output of a shell command (stdout and stderr), for the CLI against a loopback server.
std::string run_cli(const std::string& args) {
  const std::string cmd = std::string(GPUPLAN_CLI_BINARY) + " " + args + " 2>&1";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

TEST_F(OffersMarketServer, TheCliListsBothWithSourceAndAvailableColumns) {
  server::Options o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.threads = 2;
  o.market = market_;
  server::Server http(server::make_router(*ctx_, o));
  auto port = http.bind();
  ASSERT_TRUE(port.ok()) << port.error().message;
  std::thread t([&http] { http.run(); });
  const std::string url = "http://127.0.0.1:" + std::to_string(*port);
  const std::string all = run_cli("offers list --server " + url + " --now 2026-11-30");
  const std::string market_only =
      run_cli("offers list --server " + url + " --source market --gpu a100-80gb-sxm4/1g.10gb");
  const std::string json = run_cli("--json offers list --server " + url + " --source files --gpu a40 --now 2026-11-30");
  http.stop();
  t.join();
  const std::string header = all.substr(0, all.find('\n'));
  EXPECT_NE(header.find("source"), std::string::npos) << all;
  EXPECT_NE(header.find("available"), std::string::npos) << all;
  // The 1g.10gb row: its market id, source market, seven free, marked demo data; file rows beside it.
  const size_t row = all.find(slice_id_);
  ASSERT_NE(row, std::string::npos) << all;
  const std::string line = all.substr(row, all.find('\n', row) - row);
  EXPECT_NE(line.find("market"), std::string::npos) << line;
  EXPECT_NE(line.find(" 7 "), std::string::npos) << line;
  EXPECT_NE(line.find("demo data"), std::string::npos) << line;
  EXPECT_NE(all.find("  file  "), std::string::npos) << all;
  EXPECT_NE(all.find("2 live from the market"), std::string::npos) << all;
  // --source market --gpu: the market's rows only, filtered.
  EXPECT_NE(market_only.find(slice_id_), std::string::npos) << market_only;
  EXPECT_EQ(market_only.find(whole_id_), std::string::npos) << market_only;
  EXPECT_EQ(market_only.find("  file  "), std::string::npos) << market_only;
  // --json --source files: offers.list's answer, no market row.
  const Json j = Json::parse(json, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json;
  ASSERT_FALSE(j["offers"].empty()) << json;
  for (const auto& r : j["offers"]) EXPECT_NE(r["source"], "market") << r.dump();
}

TEST_F(OffersMarketServer, TheCliPlansRentsAndShowsTheCatalogThroughTheServer) {
  server::Options o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.threads = 2;
  o.market = market_;
  server::Server http(server::make_router(*ctx_, o));
  auto port = http.bind();
  ASSERT_TRUE(port.ok()) << port.error().message;
  std::thread t([&http] { http.run(); });
  const std::string url = "http://127.0.0.1:" + std::to_string(*port);
  const std::string goal = " --model llama-2-7b --rate 0.5 --gpu a100-80gb-sxm4 --now 2026-11-30";
  const std::string local = run_cli("plan" + goal);
  const std::string remote = run_cli("plan --server " + url + goal);
  const std::string shown = run_cli("catalog show a100-80gb-sxm4 --server " + url);
  const std::string listed = run_cli("catalog list --server " + url);
  const std::string rented = run_cli("rent --plan --server " + url + " --token " + renter_tokens_[0] + goal);
  const std::string sold_out = run_cli("rent --plan --server " + url + " --token " + renter_tokens_[1] + goal);
  const std::string after = run_cli("catalog show a100-80gb-sxm4 --server " + url);
  http.stop();
  t.join();
  // Without --server the plan never sees the market; with it, the market's whole A100 is recommended.
  EXPECT_EQ(local.find(whole_id_), std::string::npos) << local;
  EXPECT_NE(remote.find("Recommended: " + whole_id_), std::string::npos) << remote;
  EXPECT_NE(shown.find("Available now"), std::string::npos) << shown;
  EXPECT_NE(shown.find("demo-eu 1 from 0.01/h"), std::string::npos) << shown;
  EXPECT_NE(shown.find("1g.10gb: demo-eu 7 from 0.35/h"), std::string::npos) << shown;
  EXPECT_NE(listed.find("available_now"), std::string::npos) << listed;
  EXPECT_NE(listed.find("not available now"), std::string::npos) << listed;
  EXPECT_NE(rented.find("Rented the recommended plan: " + whole_id_), std::string::npos) << rented;
  EXPECT_NE(rented.find("whole GPU"), std::string::npos) << rented;
  EXPECT_NE(sold_out.find("plan again"), std::string::npos) << sold_out;
  EXPECT_NE(after.find("not available now (last "), std::string::npos) << after;
}

}  // namespace
}  // namespace gpuplan
