// The market over real HTTP on 127.0.0.1, on SQLite and (under scripts/with-postgres.sh) PostgreSQL:
// - tenant isolation on every market operation that web/openapi.json documents (a new endpoint is
//   covered without a new test): tenant B on tenant A's ids gets 404, no token 401, a viewer's writes 403;
// - 64 concurrent clients x 50 random reserve/stop/start/delete calls: no 5xx but 503, no (GPU, slice)
//   held twice by an independent recount from the placements, every GPU's layout passes mig check, and
//   the 201s equal the rentals in the store; eight 1g.10gb requests at once on one A100-80GB: seven 201s;
// - crashes: `gpuplan serve --data-dir` and `--database postgresql://...` SIGKILLed at each failpoint
//   (GPUPLAN_FAILPOINT) and at a random instant under load, then restarted: every 201'd rental exists, no
//   claim is orphaned, at most one open usage segment a rental, on SQLite PRAGMA integrity_check ok; on
//   PostgreSQL also `pg_ctl stop -m immediate` under load.
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "calibration_util.h"
#include "gpuplan/catalog.h"
#include "gpuplan/market.h"
#include "loopback_fixture.h"
#include "market/db.h"
#include "market_pg_test_util.h"
#include "server/server.h"

namespace gpuplan::server {
namespace {

namespace fs = std::filesystem;
using market::TxMode;

using Answer = test::LoopbackAnswer;
using test::unique_temp_dir;

Answer call(int port, const std::string& method, const std::string& path, const std::string& token,
            const Json* body = nullptr, const std::string& if_match = {}) {
  return test::loopback_call(port, method, path, token, body, if_match);
}

// The world every test starts from, made through the API: a platform admin, two providers and two
// renters (each with an admin and a viewer), provider A's node of `gpus` A100-80GB (dynamic MIG) and its
// offers, and one running rental of renter A.
struct World {
  std::string admin;
  struct Tenant {
    std::string id, admin_user, token, viewer_token, token_id;
  };
  Tenant prov_a, prov_b, rent_a, rent_b;
  std::string node_a, offer_slice_a, offer_gpu_a, offer_3g_a, rental_a;
  std::string agent_a;  // node_a's agent token (issue #15): enrolled with the token POST /nodes gave
};

Result<World::Tenant> make_tenant(int port, const std::string& admin, const std::string& name,
                                  const std::string& kind) {
  const Json t{{"name", name}, {"kind", kind}};
  Answer a = call(port, "POST", "/tenants", admin, &t);
  if (a.status != 201) return Error{ErrorCode::kInternal, "POST /tenants: " + a.body.dump(), ""};
  World::Tenant out;
  out.id = a.body["id"];
  for (const char* role : {"admin", "viewer"}) {
    const Json u{{"name", std::string(role) + "-of-" + name}, {"role", role}};
    Answer ua = call(port, "POST", "/tenants/" + out.id + "/users", admin, &u);
    if (ua.status != 201) return Error{ErrorCode::kInternal, "POST users: " + ua.body.dump(), ""};
    const Json tk{{"user_id", ua.body["id"]}};
    Answer ta = call(port, "POST", "/tokens", admin, &tk);
    if (ta.status != 201) return Error{ErrorCode::kInternal, "POST /tokens: " + ta.body.dump(), ""};
    if (std::string(role) == "admin") {
      out.admin_user = ua.body["id"];
      out.token = ta.body["token"];
      out.token_id = ta.body["id"];
    } else {
      out.viewer_token = ta.body["token"];
    }
  }
  return out;
}

Json node_body(const std::string& name, int gpus, const std::string& uuid_prefix) {
  Json g = Json::array();
  for (int i = 0; i < gpus; ++i) {
    g.push_back(Json{{"target", "a100-80gb-sxm4"}, {"uuid", uuid_prefix + std::to_string(i)}, {"mig", "dynamic"}});
  }
  return Json{{"name", name}, {"region", "eu-west"}, {"interconnect", "nvlink"},
              {"vcpus", 64},  {"ram_gb", 512},       {"disk_gb", 2000},
              {"gpus", g}};
}

Result<std::string> make_offer(int port, const std::string& token, const std::string& target, int gpus = 1) {
  const Json o{{"target", target}, {"region", "eu-west"}, {"price_per_hour", 0.35}, {"gpus", gpus}};
  Answer a = call(port, "POST", "/offers", token, &o);
  if (a.status != 201) return Error{ErrorCode::kInternal, "POST /offers: " + a.body.dump(), ""};
  return a.body["id"].get<std::string>();
}

Result<World> make_world(int port, const std::string& admin, int gpus, const std::string& uuid_prefix = "GPU-A-") {
  World w;
  w.admin = admin;
  GPUPLAN_TRY(pa, make_tenant(port, admin, "prov-a", "provider"));
  GPUPLAN_TRY(pb, make_tenant(port, admin, "prov-b", "provider"));
  GPUPLAN_TRY(ra, make_tenant(port, admin, "rent-a", "renter"));
  GPUPLAN_TRY(rb, make_tenant(port, admin, "rent-b", "renter"));
  w.prov_a = pa;
  w.prov_b = pb;
  w.rent_a = ra;
  w.rent_b = rb;
  const Json n = node_body("node-a", gpus, uuid_prefix);
  Answer na = call(port, "POST", "/nodes", w.prov_a.token, &n);
  if (na.status != 201) return Error{ErrorCode::kInternal, "POST /nodes: " + na.body.dump(), ""};
  w.node_a = na.body["id"];
  const Json enrol{{"enrollment_token", na.body["enrollment_token"]}, {"boot_id", "boot-a"}};
  Answer ea = call(port, "POST", "/agent/enroll", "", &enrol);
  if (ea.status != 201) return Error{ErrorCode::kInternal, "POST /agent/enroll: " + ea.body.dump(), ""};
  w.agent_a = ea.body["agent_token"];
  GPUPLAN_TRY(slice, make_offer(port, w.prov_a.token, "a100-80gb-sxm4/1g.10gb"));
  GPUPLAN_TRY(whole, make_offer(port, w.prov_a.token, "a100-80gb-sxm4"));
  GPUPLAN_TRY(three, make_offer(port, w.prov_a.token, "a100-80gb-sxm4/3g.40gb"));
  w.offer_slice_a = slice;
  w.offer_gpu_a = whole;
  w.offer_3g_a = three;
  const Json r{{"offer", w.offer_slice_a}, {"count", 1}, {"idempotency_key", "world"}};
  Answer ra_ = call(port, "POST", "/rentals", w.rent_a.token, &r);
  if (ra_.status != 201) return Error{ErrorCode::kInternal, "POST /rentals: " + ra_.body.dump(), ""};
  w.rental_a = ra_.body["id"];
  return w;
}

// --- an in-process server over a store of either engine ------------------------------------------------------
class MarketLoopback : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (test::store_unavailable(GetParam())) GTEST_SKIP() << "GPUPLAN_TEST_POSTGRES is not set";
    Status started = server_.start(GetParam(), "market-loopback");
    ASSERT_TRUE(started.ok()) << started.error().message;
    auto token = server_.market()->init_platform();
    ASSERT_TRUE(token.ok()) << token.error().message;
    admin_ = token->token;
    port_ = server_.port();
  }
  void TearDown() override { server_.stop(); }
  // A second, independent connection to the same store (the recounts read it, not the Market).
  std::unique_ptr<market::Db> raw_store() const {
    auto db = server_.open_raw_store();
    EXPECT_TRUE(db.ok());
    return db.ok() ? std::move(*db) : nullptr;
  }

  test::LoopbackServer server_;
  std::string admin_;
  int port_ = 0;
};

Json openapi() {
  std::ifstream in(std::string(GPUPLAN_SOURCE_DIR) + "/web/openapi.json");
  std::stringstream s;
  s << in.rdbuf();
  return Json::parse(s.str());
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The documented bodies of an operation: its `example` and every one of its `examples` (POST /rentals
// has {offer} and {plan}), or one empty body.
std::vector<Json> example_bodies(const Json& op) {
  if (!op.contains("requestBody")) return {Json::object()};
  const Json& c = op["requestBody"]["content"]["application/json"];
  std::vector<Json> out;
  if (c.contains("example")) out.push_back(c["example"]);
  if (c.contains("examples")) {
    for (const auto& e : c["examples"]) out.push_back(e["value"]);
  }
  if (out.empty()) out.push_back(Json::object());
  return out;
}

TEST_P(MarketLoopback, EveryDocumentedOperationIsolatesTenantsAndNeedsATokenAndARole) {
  auto w = make_world(port_, admin_, 2);
  ASSERT_TRUE(w.ok()) << w.error().message;
  const Json doc = openapi();
  int walked = 0, with_id = 0, with_agent = 0, plan_bodies = 0;
  for (auto it = doc["paths"].begin(); it != doc["paths"].end(); ++it) {
    const std::string path = it.key();
    const std::string root =
        path.substr(1, path.find('/', 1) == std::string::npos ? std::string::npos : path.find('/', 1) - 1);
    for (auto op = it.value().begin(); op != it.value().end(); ++op) {
      if (!op.value().value("x-gpuplan-market", false)) continue;
      ++walked;
      const std::string method = upper(op.key());
      const bool needs_token = op.value().contains("security");
      const bool provider_side = root == "nodes" || root == "offers" || root == "provider";
      // A's object of the kind the path names, and the B (and A viewer) that may not touch it.
      std::string a_id = root == "tenants"  ? w->rent_a.id
                         : root == "tokens" ? w->rent_a.token_id
                         : root == "nodes"  ? w->node_a
                         : root == "offers" ? w->offer_slice_a
                                            : w->rental_a;
      std::string concrete = path;
      const bool has_id = path.find("{id}") != std::string::npos;
      if (has_id) concrete.replace(concrete.find("{id}"), 4, a_id);
      // The documented example, with A's real ids where it names one (a body that names nothing real would
      // be refused for that before the role is looked at).
      for (Json body : example_bodies(op.value())) {
        const World::Tenant& a_side = provider_side ? w->prov_a : w->rent_a;
        if (body.contains("user_id")) body["user_id"] = a_side.admin_user;
        if (body.contains("offer")) body["offer"] = w->offer_slice_a;
        const std::string where = method + " " + path + (body.contains("plan") ? " {plan}" : "");
        plan_bodies += body.contains("plan") ? 1 : 0;

        if (needs_token) {
          Answer none = call(port_, method, concrete, "", &body);
          if (op.value().value("operationId", "") == "market_create_offer") {
            // Without a token POST /offers is the offers-file command (offers.list): it creates nothing.
            EXPECT_TRUE(none.status >= 400 && none.status < 500) << where << ": " << none.body.dump();
          } else {
            EXPECT_EQ(none.status, 401) << where << ": " << none.body.dump();
          }
          Answer bad = call(port_, method, concrete, "gpl_nosuch_0000", &body);
          EXPECT_EQ(bad.status, 401) << where << " (unknown token): " << bad.body.dump();
          Answer bad_agent = call(port_, method, concrete, "gpa_nosuch_0000", &body);
          EXPECT_EQ(bad_agent.status, 401) << where << " (unknown agent token): " << bad_agent.body.dump();
          if (root == "agent") {
            // The agent's endpoints take the agent's token only: a user's (even the node's provider admin's) is 403.
            Answer user = call(port_, method, concrete, w->prov_a.token, &body);
            EXPECT_EQ(user.status, 403) << where << " with a user's token: " << user.body.dump();
          } else {
            // The agent's token opens /agent/* only: every other documented operation is 403 with it.
            Answer agent = call(port_, method, concrete, w->agent_a, &body, "\"1\"");
            EXPECT_EQ(agent.status, 403) << where << " with node A's agent token: " << agent.body.dump();
            ++with_agent;
          }
        }
        if (has_id) {
          ++with_id;
          const World::Tenant& b = provider_side ? w->prov_b : w->rent_b;
          Answer other = call(port_, method, concrete, b.token, &body, "\"1\"");
          EXPECT_EQ(other.status, 404) << where << " as tenant B on A's " << a_id << ": " << other.body.dump();
        }
        if (needs_token && method != "GET") {
          const World::Tenant& a = provider_side ? w->prov_a : w->rent_a;
          Answer viewer = call(port_, method, concrete, a.viewer_token, &body);
          EXPECT_EQ(viewer.status, 403) << where << " as A's viewer: " << viewer.body.dump();
        }
      }
    }
  }
  EXPECT_GE(walked, 20);
  EXPECT_GE(with_id, 10);  // GET /rentals/{id}/access (issue #15) is the tenth
  EXPECT_GE(with_agent, 18);
  EXPECT_GE(plan_bodies, 1) << "POST /rentals {plan} (plan then rent) is documented and walked";
  // Nothing of A's changed under B's calls.
  Answer r = call(port_, "GET", "/rentals/" + w->rental_a, w->rent_a.token);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["state"], "running");
  Answer n = call(port_, "GET", "/nodes", w->prov_a.token);
  ASSERT_EQ(n.status, 200);
  EXPECT_EQ(n.body["nodes"].size(), 1u);
  // The public read needs no token and marks market rows.
  Answer offers = call(port_, "GET", "/offers?source=market", "");
  ASSERT_EQ(offers.status, 200) << offers.body.dump();
  ASSERT_FALSE(offers.body["offers"].empty());
  EXPECT_EQ(offers.body["offers"][0]["source"], "market");
}

// The agent's protocol over HTTP (issue #15): enrol once, PUT the inventory, heartbeat; an older seq is 409
// `stale`, a heartbeat of another boot 409 `inventory_required`; another node's agent sees nothing of A's.
TEST_P(MarketLoopback, AgentEnrolsReportsAndIsFencedOverHttp) {
  auto w = make_world(port_, admin_, 1);
  ASSERT_TRUE(w.ok()) << w.error().message;
  const Json inv{{"seq", 1},
                 {"boot_id", "boot-a"},
                 {"driver_version", "550.54.15"},
                 {"gpus", Json::array({Json{{"uuid", "GPU-A-0"},
                                            {"name", "NVIDIA A100-SXM4-80GB"},
                                            {"pci_bus_id", "00000000:17:00.0"},
                                            {"memory_bytes", 85899345920},
                                            {"mig_mode", "enabled"},
                                            {"instances", Json::array()}}})}};
  Answer put = call(port_, "PUT", "/agent/inventory", w->agent_a, &inv);
  ASSERT_EQ(put.status, 200) << put.body.dump();
  EXPECT_EQ(put.body["node_id"], w->node_a);
  EXPECT_EQ(put.body["gpus"][0]["target"], "a100-80gb-sxm4");
  EXPECT_EQ(put.body["gpus"][0]["sellable"], true);
  const Json hb{{"seq", 2}, {"boot_id", "boot-a"}, {"running", Json::array()}};
  Answer beat = call(port_, "POST", "/agent/heartbeat", w->agent_a, &hb);
  ASSERT_EQ(beat.status, 200) << beat.body.dump();
  EXPECT_EQ(beat.body["heartbeat_seconds"], 10);
  ASSERT_EQ(beat.body["desired"].size(), 1u);
  EXPECT_EQ(beat.body["desired"][0]["rental_id"], w->rental_a);
  EXPECT_EQ(beat.body["desired"][0]["profile"], "1g.10gb");
  const int64_t generation = beat.body["desired"][0]["generation"];
  Answer old = call(port_, "POST", "/agent/heartbeat", w->agent_a, &inv);  // seq 1 < 2
  EXPECT_EQ(old.status, 409) << old.body.dump();
  EXPECT_EQ(old.body["error"]["code"], "stale");
  const Json old_gen{{"seq", 3},
                     {"boot_id", "boot-a"},
                     {"running", Json::array({Json{{"rental_id", w->rental_a}, {"generation", generation - 1}}})}};
  Answer fenced = call(port_, "POST", "/agent/heartbeat", w->agent_a, &old_gen);
  EXPECT_EQ(fenced.status, 409) << fenced.body.dump();
  EXPECT_EQ(fenced.body["error"]["code"], "stale");
  EXPECT_EQ(fenced.body["desired"].size(), 1u);
  const Json reboot{{"seq", 4}, {"boot_id", "boot-b"}, {"running", Json::array()}};
  Answer rb = call(port_, "POST", "/agent/heartbeat", w->agent_a, &reboot);
  EXPECT_EQ(rb.status, 409) << rb.body.dump();
  EXPECT_EQ(rb.body["error"]["code"], "inventory_required");
  // Strict bodies: "1" is not a seq.
  const Json bad{{"seq", "5"}, {"boot_id", "boot-a"}};
  Answer typed = call(port_, "POST", "/agent/heartbeat", w->agent_a, &bad);
  EXPECT_EQ(typed.status, 400) << typed.body.dump();
  EXPECT_EQ(typed.body["error"]["field"], "seq");
  // The enrolment token was single use; a fresh one comes from POST /nodes/{id}/enrollment.
  Answer fresh = call(port_, "POST", "/nodes/" + w->node_a + "/enrollment", w->prov_a.token);
  ASSERT_EQ(fresh.status, 201) << fresh.body.dump();
  const Json enrol_b{{"enrollment_token", "gpe_" + w->node_a + "_00"}, {"boot_id", "x"}};
  EXPECT_EQ(call(port_, "POST", "/agent/enroll", "", &enrol_b).status, 401);
  // Provider B's node and agent: B's agent gets nothing of A's rental, and 403 on A's node.
  const Json nb = node_body("node-b", 1, "GPU-B-");
  Answer nba = call(port_, "POST", "/nodes", w->prov_b.token, &nb);
  ASSERT_EQ(nba.status, 201) << nba.body.dump();
  const Json enrol_other{{"enrollment_token", nba.body["enrollment_token"]}, {"boot_id", "boot-b"}};
  Answer eb = call(port_, "POST", "/agent/enroll", "", &enrol_other);
  ASSERT_EQ(eb.status, 201) << eb.body.dump();
  const std::string agent_b = eb.body["agent_token"];
  EXPECT_EQ(call(port_, "POST", "/nodes/" + w->node_a + "/drain", agent_b).status, 403);
  const Json inv_b{{"seq", 1}, {"boot_id", "boot-b"}, {"gpus", Json::array()}};
  ASSERT_EQ(call(port_, "PUT", "/agent/inventory", agent_b, &inv_b).status, 200);
  const Json hb_b{{"seq", 2},
                  {"boot_id", "boot-b"},
                  {"running", Json::array({Json{{"rental_id", w->rental_a}, {"generation", generation}}})}};
  Answer other = call(port_, "POST", "/agent/heartbeat", agent_b, &hb_b);
  ASSERT_EQ(other.status, 200) << other.body.dump();
  EXPECT_TRUE(other.body["desired"].empty());
  EXPECT_EQ(other.body["ignored"], Json::array({w->rental_a}));
}

// Measured figures (issue #16): node A's agent PUTs the bench of its GPU; the live offers of that GPU (the
// market's list and offers.list's) carry `measured`, the MIG offers of it do not (no bench of a slice);
// another node's agent gets 404 on A's GPU, and a user's token 403.
TEST_P(MarketLoopback, AgentBenchPutsMeasuredFiguresOnTheOffers) {
  auto w = make_world(port_, admin_, 1);
  ASSERT_TRUE(w.ok()) << w.error().message;
  const Json inv{{"seq", 1},
                 {"boot_id", "boot-a"},
                 {"driver_version", "550.54.15"},
                 {"gpus", Json::array({Json{{"uuid", "GPU-A-0"},
                                            {"name", "NVIDIA A100-SXM4-80GB"},
                                            {"pci_bus_id", "00000000:17:00.0"},
                                            {"memory_bytes", 85899345920},
                                            {"mig_mode", "enabled"},
                                            {"instances", Json::array()}}})}};
  ASSERT_EQ(call(port_, "PUT", "/agent/inventory", w->agent_a, &inv).status, 200);
  auto ref = Catalog::embedded()->resolve("a100-80gb-sxm4");
  ASSERT_TRUE(ref.ok());
  calibration_testing::CalibrationTruth t;
  t.catalog_id = "a100-80gb-sxm4";
  t.uuid = "GPU-A-0";
  t.pcie_gen = 4;
  t.pcie_width = 16;
  t.curves = {calibration_testing::TruthCurve{Precision::kBf16, 0.9, 80}};
  const Json body{
      {"gpu_uuid", "GPU-A-0"},
      {"calibration", calibration_testing::calibration_json(t, perf_device(Target::linked(*ref, 1))).dump()}};
  EXPECT_EQ(call(port_, "PUT", "/agent/bench", w->prov_a.token, &body).status, 403);
  Answer put = call(port_, "PUT", "/agent/bench", w->agent_a, &body);
  ASSERT_EQ(put.status, 200) << put.body.dump();
  EXPECT_EQ(put.body["target"], "a100-80gb-sxm4");
  ASSERT_EQ(put.body["warnings"].size(), 1u) << put.body.dump();  // the file's driver is not the inventory's
  EXPECT_NE(put.body["warnings"][0].get<std::string>().find("550.54.15"), std::string::npos);
  EXPECT_EQ(put.body["measured"]["method"], "gpuplan bench 1");
  EXPECT_EQ(put.body["measured"]["pcie_gen"], 4);
  for (const std::string path : {"/offers?source=market", "/offers"}) {
    Answer offers = call(port_, "GET", path, "");
    ASSERT_EQ(offers.status, 200) << offers.body.dump();
    int seen = 0;
    for (const auto& o : offers.body["offers"]) {
      if (o["source"] != "market") continue;
      const std::string id = o.contains("id") ? o["id"].get<std::string>() : std::string();
      if (id == w->offer_gpu_a) {
        ++seen;
        ASSERT_TRUE(o["measured"].is_object()) << path << ": " << o.dump();
        EXPECT_NEAR(o["measured"]["ratio_to_datasheet"].get<double>(), 0.887, 0.01) << path;
        EXPECT_EQ(o["measured"]["gpus_measured"], 1) << path;
      } else if (id == w->offer_slice_a) {
        ++seen;
        EXPECT_TRUE(o["measured"].is_null()) << path << ": " << o.dump();
      }
    }
    // offers.list leaves the whole-GPU offer out (its GPU holds the 1g.10gb rental: unavailable).
    EXPECT_EQ(seen, path == "/offers" ? 1 : 2) << path << ": " << offers.body.dump();
  }
  // Provider B's node and agent: 404 on A's GPU.
  const Json nb = node_body("node-b", 1, "GPU-B-");
  Answer nba = call(port_, "POST", "/nodes", w->prov_b.token, &nb);
  ASSERT_EQ(nba.status, 201) << nba.body.dump();
  const Json enrol_other{{"enrollment_token", nba.body["enrollment_token"]}, {"boot_id", "boot-b"}};
  Answer eb = call(port_, "POST", "/agent/enroll", "", &enrol_other);
  ASSERT_EQ(eb.status, 201) << eb.body.dump();
  Answer foreign = call(port_, "PUT", "/agent/bench", eb.body["agent_token"].get<std::string>(), &body);
  EXPECT_EQ(foreign.status, 404) << foreign.body.dump();
  EXPECT_EQ(foreign.body["error"]["field"], "gpu_uuid");
  // A body that is not a bench: 400 naming the field.
  const Json no_file{{"gpu_uuid", "GPU-A-0"}};
  Answer missing = call(port_, "PUT", "/agent/bench", w->agent_a, &no_file);
  EXPECT_EQ(missing.status, 400) << missing.body.dump();
  EXPECT_EQ(missing.body["error"]["field"], "calibration");
}

TEST_P(MarketLoopback, BodiesAsTheIssueGivesThemAndIfMatch) {
  auto w = make_world(port_, admin_, 1);
  ASSERT_TRUE(w.ok()) << w.error().message;
  Answer r = call(port_, "GET", "/rentals/" + w->rental_a, w->rent_a.token);
  ASSERT_EQ(r.status, 200);
  for (const char* key : {"id", "state", "version", "price_per_hour", "placements"}) EXPECT_TRUE(r.body.contains(key));
  ASSERT_EQ(r.body["placements"].size(), 1u);
  EXPECT_EQ(r.body["placements"][0]["profile"], "1g.10gb");
  const int64_t v = r.body["version"];
  Answer stale = call(port_, "POST", "/rentals/" + w->rental_a + "/stop", w->rent_a.token, nullptr,
                      "\"" + std::to_string(v + 7) + "\"");
  EXPECT_EQ(stale.status, 412) << stale.body.dump();
  Answer bad = call(port_, "POST", "/rentals/" + w->rental_a + "/stop", w->rent_a.token, nullptr, "not-a-version");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["field"], "If-Match");
  Answer stop = call(port_, "POST", "/rentals/" + w->rental_a + "/stop", w->rent_a.token, nullptr,
                     "\"" + std::to_string(v) + "\"");
  EXPECT_EQ(stop.status, 200) << stop.body.dump();
  EXPECT_EQ(stop.body["state"], "stopped");
  // The same idempotency key gives the same rental (200, not a second 201).
  const Json again{{"offer", w->offer_slice_a}, {"count", 1}, {"idempotency_key", "world"}};
  Answer replay = call(port_, "POST", "/rentals", w->rent_a.token, &again);
  EXPECT_EQ(replay.status, 200) << replay.body.dump();
  EXPECT_EQ(replay.body["id"], w->rental_a);
  // A whole GPU: profile null, start 0.
  const Json whole{{"offer", w->offer_gpu_a}};
  Answer g = call(port_, "POST", "/rentals", w->rent_a.token, &whole);
  ASSERT_EQ(g.status, 201) << g.body.dump();
  EXPECT_TRUE(g.body["placements"][0]["profile"].is_null());
  EXPECT_EQ(g.body["placements"][0]["start"], 0);
  // The last GPU is taken: 409 with a reason.
  Answer none = call(port_, "POST", "/rentals", w->rent_a.token, &whole);
  EXPECT_EQ(none.status, 409) << none.body.dump();
  // Bad bodies name their field.
  const Json price{{"target", "a100-80gb-sxm4"}, {"region", "x"}, {"price_per_hour", -1}};
  Answer neg = call(port_, "POST", "/offers", w->prov_a.token, &price);
  EXPECT_EQ(neg.status, 400);
  EXPECT_EQ(neg.body["error"]["field"], "price_per_hour");
}

// Eight 1g.10gb requests at once on one A100-80GB: seven fit (the MIG table's limit), the eighth is 409.
TEST_P(MarketLoopback, EightSlicesAtOnceOnOneGpuGiveSeven) {
  auto w = make_world(port_, admin_, 1);
  ASSERT_TRUE(w.ok()) << w.error().message;
  // The world's rental holds one 1g.10gb already: delete it first.
  ASSERT_EQ(call(port_, "DELETE", "/rentals/" + w->rental_a, w->rent_a.token).status, 200);
  std::atomic<int> created{0}, conflicts{0}, other{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) {
    ts.emplace_back([&] {
      const Json b{{"offer", w->offer_slice_a}};
      Answer a = call(port_, "POST", "/rentals", w->rent_a.token, &b);
      (a.status == 201 ? created : a.status == 409 ? conflicts : other).fetch_add(1);
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(created.load(), 7);
  EXPECT_EQ(conflicts.load(), 1);
  EXPECT_EQ(other.load(), 0);
}

// The independent recount: from the live rentals' placements, no (GPU, slice) twice, claims equal to
// placements, every GPU's layout valid (mig check); returns the rentals in the store.
int64_t recount(market::Db& db, const Context& ctx) {
  int64_t rentals = 0;
  Status s = market::with_tx(db, TxMode::kRead, [&](market::Tx& tx) -> Status {
    GPUPLAN_TRY(n, tx.query("SELECT COUNT(*) FROM rentals"));
    rentals = n[0].integer(0);
    GPUPLAN_TRY(rows, tx.query("SELECT p.gpu_id, p.profile, p.start_slice, p.size_slices, r.state, g.catalog_id "
                               "FROM rental_placements p JOIN rentals r ON r.id = p.rental_id "
                               "JOIN gpus g ON g.id = p.gpu_id ORDER BY p.gpu_id, p.start_slice"));
    std::set<std::pair<std::string, int64_t>> held;
    std::map<std::string, std::pair<std::string, std::string>> layout;  // gpu -> (catalog id, layout)
    for (const auto& r : rows) {
      const std::string state = r.text(4);
      if (state == "stopped" || state == "terminated" || state == "failed") {
        ADD_FAILURE() << "a " << state << " rental still has placements on " << r.text(0);
      }
      for (int64_t k = r.integer(2); k < r.integer(2) + r.integer(3); ++k) {
        EXPECT_TRUE(held.insert({r.text(0), k}).second) << "slice " << k << " of " << r.text(0) << " held twice";
      }
      if (!r.is_null(1)) {
        auto& l = layout[r.text(0)];
        l.first = r.text(5);
        l.second += (l.second.empty() ? "" : ",") + r.text(1) + "@" + std::to_string(r.integer(2));
      }
    }
    GPUPLAN_TRY(claims, tx.query("SELECT gpu_id, mem_slice FROM slice_claims"));
    std::set<std::pair<std::string, int64_t>> claimed;
    for (const auto& c : claims) claimed.insert({c.text(0), c.integer(1)});
    EXPECT_EQ(claimed, held) << "claims differ from the live rentals' placements";
    for (const auto& [gpu, l] : layout) {
      auto check = run_command(ctx, "mig.check", Json{{"gpu", l.first}, {"layout", l.second}});
      EXPECT_TRUE(check.ok() && (*check)["valid"] == true) << gpu << " " << l.second;
    }
    GPUPLAN_TRY(open, tx.query("SELECT rental_id, COUNT(*) FROM usage_segments WHERE ended_at IS NULL "
                               "GROUP BY rental_id HAVING COUNT(*) > 1"));
    EXPECT_TRUE(open.empty()) << "a rental with two open usage segments";
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.error().message;
  return rentals;
}

// 64 clients x 50 random reserve/stop/start/delete calls on 2 nodes of 8 A100-80GB (dynamic MIG).
TEST_P(MarketLoopback, SixtyFourClientsNeverDoubleBook) {
  auto w = make_world(port_, admin_, 8);
  ASSERT_TRUE(w.ok()) << w.error().message;
  const Json n2 = node_body("node-a2", 8, "GPU-A2-");
  ASSERT_EQ(call(port_, "POST", "/nodes", w->prov_a.token, &n2).status, 201);
  auto two = make_offer(port_, w->prov_a.token, "a100-80gb-sxm4", 2);
  ASSERT_TRUE(two.ok()) << two.error().message;
  const std::vector<std::string> offers = {w->offer_slice_a, w->offer_3g_a, w->offer_gpu_a, *two};
  constexpr int kClients = 64;
  constexpr int kCallsEach = 50;
  std::atomic<int> created{1};  // the world's rental
  std::atomic<int> bad{0}, unavailable{0};
  std::mutex mu;
  std::map<int, int> statuses;
  std::vector<std::thread> ts;
  for (int c = 0; c < kClients; ++c) {
    ts.emplace_back([&, c] {
      std::mt19937 rng(static_cast<unsigned>(c) * 7919U + 1);
      std::vector<std::string> mine;
      for (int i = 0; i < kCallsEach; ++i) {
        const int dice = static_cast<int>(rng() % 100);
        Answer a;
        if (mine.empty() || dice < 50) {
          const Json b{{"offer", offers[rng() % offers.size()]}};
          a = call(port_, "POST", "/rentals", w->rent_a.token, &b);
          if (a.status == 201) {
            created.fetch_add(1);
            mine.push_back(a.body["id"]);
          }
        } else {
          const std::string id = mine[rng() % mine.size()];
          const std::string path = "/rentals/" + id;
          a = dice < 70   ? call(port_, "POST", path + "/stop", w->rent_a.token)
              : dice < 85 ? call(port_, "POST", path + "/start", w->rent_a.token)
                          : call(port_, "DELETE", path, w->rent_a.token);
        }
        if (a.status == 503) unavailable.fetch_add(1);
        if (a.status == 0 || (a.status >= 500 && a.status != 503)) bad.fetch_add(1);
        std::lock_guard lock(mu);
        ++statuses[a.status];
      }
    });
  }
  for (auto& t : ts) t.join();
  std::string seen;
  for (const auto& [s, k] : statuses) seen += std::to_string(s) + ":" + std::to_string(k) + " ";
  EXPECT_EQ(bad.load(), 0) << seen;
  auto db = raw_store();
  ASSERT_TRUE(db);
  EXPECT_EQ(recount(*db, server_.context()), created.load()) << seen;
  std::cout << "[ market load ] " << GetParam() << ": " << kClients << " clients x " << kCallsEach << " calls: " << seen
            << "(201s " << created.load() << ", 503s " << unavailable.load() << ")\n";
}

// Plan then rent over HTTP (issue #14): 8 clients at once POST /rentals {"plan": Llama-3-8B at 2 req/s on
// 3g.40gb slices}; each rents all of its plan or nothing. The rentals made never exceed the slices that were
// free, every other answer is a 409 with `replan`, and the recount finds no slice held twice.
TEST_P(MarketLoopback, PlanThenRentFromEightClientsAtOnceNeverDoubleBooks) {
  auto w = make_world(port_, admin_, 1);
  ASSERT_TRUE(w.ok()) << w.error().message;
  Answer offers = call(port_, "GET", "/offers?source=market", "");
  ASSERT_EQ(offers.status, 200);
  int64_t free_slices = 0;
  for (const auto& o : offers.body["offers"]) {
    if (o["id"] == w->offer_3g_a) free_slices = o["available"];
  }
  ASSERT_GE(free_slices, 1) << offers.body.dump();
  const Json body{{"plan", Json{{"model", "llama-3-8b"}, {"rate", 2}, {"gpu", {"a100-80gb-sxm4/3g.40gb"}}}}};
  constexpr int kClients = 8;
  std::atomic<int> rented{0}, conflicts{0}, other{0};
  std::vector<std::thread> ts;
  for (int c = 0; c < kClients; ++c) {
    ts.emplace_back([&, c] {
      Answer a = call(port_, "POST", "/rentals", c % 2 == 0 ? w->rent_a.token : w->rent_b.token, &body);
      if (a.status == 201) {
        EXPECT_EQ(a.body["plan"]["offer"], w->offer_3g_a) << a.body.dump();
        EXPECT_EQ(a.body["rentals"].size(), a.body["plan"]["instances"].get<size_t>()) << a.body.dump();
        rented.fetch_add(static_cast<int>(a.body["rentals"].size()));
      } else if (a.status == 409) {
        EXPECT_EQ(a.body["replan"], "/api/v1/plan") << a.body.dump();
        conflicts.fetch_add(1);
      } else {
        other.fetch_add(1);
        ADD_FAILURE() << a.status << " " << a.body.dump();
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_GE(rented.load(), 1);
  EXPECT_LE(rented.load(), free_slices);
  EXPECT_GE(conflicts.load(), 1);
  EXPECT_EQ(other.load(), 0);
  auto db = raw_store();
  ASSERT_TRUE(db);
  EXPECT_EQ(recount(*db, server_.context()), 1 + rented.load());  // the world's rental and the plans'
}

INSTANTIATE_TEST_SUITE_P(Engines, MarketLoopback, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

// --- crash tests: the real binary, SIGKILLed ---------------------------------------------------------------------
// Where the spawned `gpuplan serve` keeps the market: a data directory (SQLite) or a postgresql:// URI.
struct Store {
  std::string flag;   // "--data-dir" or "--database"
  std::string where;  // the directory or the URI
  bool sqlite() const { return flag == "--data-dir"; }
};

pid_t spawn_server(const Store& store, int port, const std::string& failpoint) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (failpoint.empty()) {
      ::unsetenv("GPUPLAN_FAILPOINT");
    } else {
      ::setenv("GPUPLAN_FAILPOINT", failpoint.c_str(), 1);
    }
    const std::string p = std::to_string(port);
    std::freopen("/dev/null", "w", stderr);
    std::freopen("/dev/null", "w", stdout);
    ::execl(GPUPLAN_CLI_BINARY, GPUPLAN_CLI_BINARY, "serve", store.flag.c_str(), store.where.c_str(), "--port",
            p.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

bool wait_healthy(int port, pid_t pid) {
  for (int i = 0; i < 300; ++i) {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(0, 200000);
    if (auto r = c.Get("/api/v1/health"); r && r->status == 200) return true;
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

void kill_server(pid_t pid) {
  ::kill(pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
}

int free_port() {
  // Bind port 0 through a throwaway server to learn a free port (the child binds it right after).
  Options o;
  o.port = 0;
  Context ctx{Catalog::embedded()};
  Server s(make_router(ctx, o));
  auto p = s.bind();
  return p.ok() ? *p : 18000 + (::getpid() % 1000);
}

std::string init_token(const Store& store) {
  // Single quotes around the URI: its '&'s would end the command in the shell.
  const std::string cmd =
      std::string(GPUPLAN_CLI_BINARY) + " admin init " + store.flag + " '" + store.where + "' --json";
  FILE* f = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[512];
  while (f && std::fgets(buf, sizeof buf, f)) out += buf;
  if (f) ::pclose(f);
  try {
    return Json::parse(out)["token"];
  } catch (...) {
    return {};
  }
}

void check_after_crash(const Store& store, const std::set<std::string>& got_201) {
  auto db = market::open_store(store.where);
  ASSERT_TRUE(db.ok()) << db.error().message;
  Context ctx{Catalog::embedded()};
  recount(**db, ctx);
  Status s = market::with_tx(**db, TxMode::kRead, [&](market::Tx& tx) -> Status {
    for (const auto& id : got_201) {
      const market::Value v[] = {id};
      GPUPLAN_TRY(r, tx.query("SELECT id FROM rentals WHERE id = ?1", v));
      EXPECT_EQ(r.size(), 1u) << "rental " << id << " got a 201 but is gone";
    }
    GPUPLAN_TRY(orphans, tx.query("SELECT COUNT(*) FROM slice_claims c LEFT JOIN rentals r ON r.id = c.rental_id "
                                  "WHERE r.id IS NULL OR r.state IN ('stopped', 'terminated', 'failed')"));
    EXPECT_EQ(orphans[0].integer(0), 0) << "orphaned claims";
    if (store.sqlite()) {
      GPUPLAN_TRY(ok, tx.query("PRAGMA integrity_check"));
      EXPECT_EQ(ok[0].text(0), "ok");
    }
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.error().message;
}

// The server SIGKILLed at each failpoint (a rental in flight), then at a random instant under load; after
// each kill the store (reopened independently) has every 201'd rental, no orphaned claim, at most one
// open usage segment a rental (recount), and on SQLite a clean integrity_check.
void crash_at_every_failpoint_and_under_load(const Store& store) {
  const std::string admin = init_token(store);
  ASSERT_FALSE(admin.empty()) << "gpuplan admin init failed";
  const int port = free_port();
  pid_t pid = spawn_server(store, port, "");
  ASSERT_TRUE(wait_healthy(port, pid));
  auto w = make_world(port, admin, 8);
  ASSERT_TRUE(w.ok()) << w.error().message;
  std::set<std::string> got_201 = {w->rental_a};
  for (int i = 0; i < 3; ++i) {
    const Json b{{"offer", w->offer_slice_a}};
    Answer a = call(port, "POST", "/rentals", w->rent_a.token, &b);
    ASSERT_EQ(a.status, 201) << a.body.dump();
    got_201.insert(a.body["id"].get<std::string>());
  }
  kill_server(pid);
  for (const std::string fp : {"after_claims", "before_commit", "after_commit"}) {
    pid = spawn_server(store, port, fp);
    ASSERT_TRUE(wait_healthy(port, pid)) << fp;
    const Json b{{"offer", w->offer_slice_a}, {"idempotency_key", "crash-" + fp}};
    Answer a = call(port, "POST", "/rentals", w->rent_a.token, &b);
    EXPECT_EQ(a.status, 0) << fp << ": the failpoint did not kill the server: " << a.body.dump();
    kill_server(pid);
    check_after_crash(store, got_201);
    // Restarted clean, the client's retry with the same key gets the one rental (201, or 200 when it
    // was committed before the kill).
    pid = spawn_server(store, port, "");
    ASSERT_TRUE(wait_healthy(port, pid));
    Answer retry = call(port, "POST", "/rentals", w->rent_a.token, &b);
    EXPECT_TRUE(retry.status == 201 || retry.status == 200) << fp << ": " << retry.body.dump();
    if (fp != "after_commit") EXPECT_EQ(retry.status, 201) << fp << ": nothing was committed before the kill";
    if (retry.status == 201 || retry.status == 200) got_201.insert(retry.body["id"].get<std::string>());
    kill_server(pid);
  }
  // A random instant under load: 8 clients renting and stopping, SIGKILL after 150-450 ms.
  pid = spawn_server(store, port, "");
  ASSERT_TRUE(wait_healthy(port, pid));
  std::mutex mu;
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  for (int c = 0; c < 8; ++c) {
    ts.emplace_back([&, c] {
      for (int i = 0; !stop.load() && i < 200; ++i) {
        const Json b{{"offer", (i + c) % 2 ? w->offer_slice_a : w->offer_3g_a}};
        Answer a = call(port, "POST", "/rentals", w->rent_a.token, &b);
        if (a.status == 201) {
          std::lock_guard lock(mu);
          got_201.insert(a.body["id"].get<std::string>());
          if (i % 3 == 0) (void)call(port, "DELETE", "/rentals/" + a.body["id"].get<std::string>(), w->rent_a.token);
        }
        if (a.status == 0) return;
      }
    });
  }
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  std::this_thread::sleep_for(std::chrono::milliseconds(150 + rng() % 300));
  kill_server(pid);
  stop = true;
  for (auto& t : ts) t.join();
  check_after_crash(store, got_201);
  std::cout << "[ market crash ] " << (store.sqlite() ? "sqlite" : "postgresql") << ": 3 failpoints and a kill under "
            << "load, " << got_201.size() << " rentals with a 201 all kept\n";
}

TEST(MarketCrash, KilledAtEveryFailpointAndUnderLoadLosesNothing) {
  const Store store{"--data-dir", unique_temp_dir("market-crash")};
  crash_at_every_failpoint_and_under_load(store);
  std::error_code ec;
  fs::remove_all(store.where, ec);
}

// The same kills with `gpuplan serve --database postgresql://...` (a fresh schema of the throwaway server).
TEST(MarketCrash, PostgresqlKilledAtEveryFailpointAndUnderLoadLosesNothing) {
  if (market::test::pg_conninfo().empty()) GTEST_SKIP() << "GPUPLAN_TEST_POSTGRES is not set";
  auto uri = market::test::fresh_pg_schema_uri();
  ASSERT_TRUE(uri.ok()) << uri.error().message;
  crash_at_every_failpoint_and_under_load(Store{"--database", *uri});
}

// PostgreSQL stopped with `pg_ctl -m immediate` (a crash of the database server) under load, then
// started again: every 201'd rental is there and the market answers again.
TEST(MarketCrash, PostgresqlImmediateStopUnderLoadLosesNothing) {
  if (market::test::pg_conninfo().empty() || !std::getenv("GPUPLAN_TEST_PGDATA")) {
    GTEST_SKIP() << "needs scripts/with-postgres.sh (GPUPLAN_TEST_POSTGRES, GPUPLAN_TEST_PGDATA)";
  }
  auto conninfo = market::test::fresh_pg_schema();
  ASSERT_TRUE(conninfo.ok()) << conninfo.error().message;
  auto db = market::open_postgresql(*conninfo);
  ASSERT_TRUE(db.ok());
  auto m = market::Market::open(std::move(*db));
  ASSERT_TRUE(m.ok()) << m.error().message;
  std::shared_ptr<market::Market> mk(std::move(*m));
  auto admin = mk->init_platform();
  ASSERT_TRUE(admin.ok());
  Context ctx{Catalog::embedded()};
  Options o;
  o.port = 0;
  o.market = mk;
  Server server(make_router(ctx, o));
  auto port = server.bind();
  ASSERT_TRUE(port.ok());
  std::thread run([&] { server.run(); });
  auto w = make_world(*port, admin->token, 8);
  ASSERT_TRUE(w.ok()) << w.error().message;
  std::set<std::string> got_201 = {w->rental_a};
  std::mutex mu;
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::string> bad_seen;
  std::vector<std::thread> ts;
  for (int c = 0; c < 8; ++c) {
    ts.emplace_back([&] {
      for (int i = 0; !stop.load() && i < 400; ++i) {
        const Json b{{"offer", w->offer_slice_a}};
        Answer a = call(*port, "POST", "/rentals", w->rent_a.token, &b);
        if (a.status == 201) {
          std::lock_guard lock(mu);
          got_201.insert(a.body["id"].get<std::string>());
          (void)call(*port, "DELETE", "/rentals/" + a.body["id"].get<std::string>(), w->rent_a.token);
        } else if (a.status == 0 || (a.status >= 500 && a.status != 503)) {
          bad.fetch_add(1);
          std::lock_guard lock(mu);
          if (bad_seen.size() < 4) bad_seen.push_back(std::to_string(a.status) + " " + a.body.dump());
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string ctl = std::string(GPUPLAN_SOURCE_DIR) + "/scripts/with-postgres.sh --ctl ";
  ASSERT_EQ(std::system((ctl + "stop-immediate").c_str()), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // requests meanwhile: 503, never 500
  ASSERT_EQ(std::system((ctl + "start").c_str()), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  for (auto& t : ts) t.join();
  std::string seen;
  for (const auto& b : bad_seen) seen += "\n  " + b;
  EXPECT_EQ(bad.load(), 0) << "a 5xx other than 503, or no answer, while PostgreSQL was down:" << seen;
  // The market answers again after the restart, and kept every 201.
  const Json b{{"offer", w->offer_slice_a}};
  Answer after = call(*port, "POST", "/rentals", w->rent_a.token, &b);
  EXPECT_EQ(after.status, 201) << after.body.dump();
  auto raw = market::open_postgresql(*conninfo);
  ASSERT_TRUE(raw.ok());
  Status s = market::with_tx(**raw, TxMode::kRead, [&](market::Tx& tx) -> Status {
    for (const auto& id : got_201) {
      const market::Value v[] = {id};
      GPUPLAN_TRY(r, tx.query("SELECT id FROM rentals WHERE id = ?1", v));
      EXPECT_EQ(r.size(), 1u) << "rental " << id << " got a 201 but is gone";
    }
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.error().message;
  recount(**raw, ctx);
  server.stop();
  run.join();
}

}  // namespace
}  // namespace gpuplan::server
