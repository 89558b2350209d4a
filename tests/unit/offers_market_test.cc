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
  server::HttpResponse post(const std::string& path, const Json& body) const {
    server::HttpRequest r;
    r.method = "POST";
    r.path = path;
    r.body = body.dump();
    r.content_type = "application/json";
    r.host = "127.0.0.1:8080";
    return router_->handle(r);
  }

  std::string dir_, slice_id_, whole_id_;
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

}  // namespace
}  // namespace gpuplan
