// Benches on request (issue #16) and the heartbeat's failures (issue #15), end to end over 127.0.0.1 on
// each store kind: the provider asks (POST /nodes/{id}/bench), the heartbeat answer carries the request,
// the agent (the fake NVML backend, a runner standing in for `gpuplan bench --quick` as the CLI hands it
// one) runs it once and answers with PUT /agent/bench naming the request; a second answer to the same
// request and an answer to a request never made are 409 stale. A heartbeat's `failed` for the rental's
// current generation fails it over HTTP.
#include <httplib.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/agent.h"
#include "calibration_util.h"
#include "gpuplan/catalog.h"
#include "gpuplan/market.h"
#include "loopback_fixture.h"
#include "market/db.h"

namespace gpuplan::agent {
namespace {

namespace fs = std::filesystem;

const std::string kGpu = "GPU-4f1c2d3e-aaaa-4bbb-8ccc-000000000000";  // the a100-mig fixture's A100

std::string fixture(const std::string& name) {
  return "fake:" + std::string(GPUPLAN_SOURCE_DIR) + "/tests/data/nvml/" + name + ".json";
}

using Answer = test::LoopbackAnswer;

class AgentBenchRequest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (test::store_unavailable(GetParam())) GTEST_SKIP() << "GPUPLAN_TEST_POSTGRES is not set";
    dir_ = test::unique_temp_dir("bench-request");
    Status started = server_.start(GetParam(), "bench-request-store");
    ASSERT_TRUE(started.ok()) << started.error().message;
    market::Market& m = *server_.market();
    auto root = m.init_platform();
    ASSERT_TRUE(root.ok());
    auto platform = m.authenticate(root->token);
    ASSERT_TRUE(platform.ok());
    provider_token_ = test::tenant_admin_token(m, *platform, "prov", market::TenantKind::kProvider);
    other_provider_token_ = test::tenant_admin_token(m, *platform, "prov2", market::TenantKind::kProvider);
    renter_token_ = test::tenant_admin_token(m, *platform, "rent", market::TenantKind::kRenter);
  }
  void TearDown() override {
    server_.stop();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  Answer call(const std::string& method, const std::string& path, const std::string& token,
              const Json* body = nullptr) {
    return test::loopback_call(server_.port(), method, path, token, body);
  }
  // POST /nodes with the a100-mig fixture's A100, MIG static with two 3g.40gb: the node id and its
  // enrolment token.
  std::pair<std::string, std::string> add_node() {
    const Json body{
        {"name", "node-1"},
        {"region", "eu-west"},
        {"gpus",
         Json::array(
             {Json{{"target", "a100-80gb-sxm4"}, {"uuid", kGpu}, {"mig", "static"}, {"layout", "3g.40gb,3g.40gb"}}})}};
    Answer a = call("POST", "/nodes", provider_token_, &body);
    EXPECT_EQ(a.status, 201) << a.body.dump();
    return {a.body.value("id", std::string()), a.body.value("enrollment_token", std::string())};
  }
  std::string calibration() const {
    auto ref = Catalog::embedded()->resolve("a100-80gb-sxm4");
    EXPECT_TRUE(ref.ok());
    calibration_testing::CalibrationTruth t;
    t.catalog_id = "a100-80gb-sxm4";
    t.uuid = kGpu;
    t.driver = "550.54.15";
    return calibration_testing::calibration_json(t, perf_device(Target::linked(*ref, 1))).dump();
  }
  // One `gpuplan agent --once` round with the token file (enrolling the first time): its --once output.
  Json agent_once(const std::string& enroll) {
    AgentOptions o;
    o.server = server_.url();
    o.enroll = enroll;
    o.token_file = (dir_ / "agent.token").string();
    o.once = true;
    o.nvml = fixture("a100-mig");
    o.bench_runner = [this]() -> Result<std::vector<std::string>> {
      ++runs_;
      return std::vector<std::string>{calibration()};
    };
    std::atomic<bool> stop{false};
    std::ostringstream out;
    Status s = run_agent(o, stop, true, out);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message) << "\n" << out.str();
    const std::string text = out.str();
    const size_t at = text.find("{\n");
    EXPECT_NE(at, std::string::npos) << text;
    return at == std::string::npos ? Json::object() : Json::parse(text.substr(at), nullptr, false);
  }
  std::string agent_token() const {
    std::ifstream in(dir_ / "agent.token");
    std::string t;
    std::getline(in, t);
    return t;
  }

  fs::path dir_;  // the agent's token file
  test::LoopbackServer server_;
  std::string provider_token_, other_provider_token_, renter_token_;
  int runs_ = 0;  // calls of the bench runner
};

TEST_P(AgentBenchRequest, TheProviderAsksTheAgentBenchesOnceAndAnswersAreFenced) {
  const auto [node, enroll] = add_node();
  ASSERT_FALSE(node.empty());
  // Enrolment, inventory, heartbeat: nothing asked, nothing run (the agent's --bench is off).
  Json first = agent_once(enroll);
  EXPECT_EQ(first["heartbeat"]["bench_request"], 0) << first.dump();
  EXPECT_FALSE(first.contains("bench_request")) << first.dump();
  EXPECT_EQ(runs_, 0);
  // Only the node's provider asks: another provider and a renter get 404 (not 403: no node of theirs).
  EXPECT_EQ(call("POST", "/nodes/" + node + "/bench", other_provider_token_).status, 404);
  EXPECT_EQ(call("POST", "/nodes/" + node + "/bench", renter_token_).status, 404);
  EXPECT_EQ(call("POST", "/nodes/" + node + "/bench", agent_token()).status, 403);
  EXPECT_EQ(call("POST", "/nodes/nosuch/bench", provider_token_).status, 404);
  Answer asked = call("POST", "/nodes/" + node + "/bench", provider_token_);
  ASSERT_EQ(asked.status, 200) << asked.body.dump();
  EXPECT_EQ(asked.body["bench_request"], 1);
  EXPECT_EQ(asked.body["node_id"], node);
  // The next round runs the bench once and answers request 1.
  Json second = agent_once("");
  EXPECT_EQ(second["heartbeat"]["bench_request"], 1) << second.dump();
  EXPECT_EQ(runs_, 1);
  ASSERT_TRUE(second["bench_request"].is_array()) << second.dump();
  ASSERT_EQ(second["bench_request"].size(), 1u) << second.dump();
  EXPECT_EQ(second["bench_request"][0]["bench_request"], 1) << second.dump();
  EXPECT_EQ(second["bench_request"][0]["target"], "a100-80gb-sxm4") << second.dump();
  // Answered: the next heartbeat carries no request and the agent runs nothing.
  Json third = agent_once("");
  EXPECT_EQ(third["heartbeat"]["bench_request"], 0) << third.dump();
  EXPECT_EQ(runs_, 1);
  // Fenced: the same request answered again (a duplicate), and a request never made, are 409 stale.
  const Json dup{{"gpu_uuid", kGpu}, {"calibration", calibration()}, {"bench_request", 1}};
  Answer again = call("PUT", "/agent/bench", agent_token(), &dup);
  EXPECT_EQ(again.status, 409) << again.body.dump();
  EXPECT_EQ(again.body["error"]["code"], "stale") << again.body.dump();
  const Json future{{"gpu_uuid", kGpu}, {"calibration", calibration()}, {"bench_request", 9}};
  Answer never = call("PUT", "/agent/bench", agent_token(), &future);
  EXPECT_EQ(never.status, 409) << never.body.dump();
  EXPECT_EQ(never.body["error"]["field"], "bench_request") << never.body.dump();
  // A second request is carried again, and an unrequested bench (at enrolment) does not answer it.
  ASSERT_EQ(call("POST", "/nodes/" + node + "/bench", provider_token_).body["bench_request"], 2);
  const Json plain{{"gpu_uuid", kGpu}, {"calibration", calibration()}};
  EXPECT_EQ(call("PUT", "/agent/bench", agent_token(), &plain).status, 200);
  Json fourth = agent_once("");
  EXPECT_EQ(fourth["heartbeat"]["bench_request"], 2) << fourth.dump();
  EXPECT_EQ(runs_, 2);
}

// The heartbeat's `failed` over HTTP: the server fails the rental at its current generation (the body
// was `open:` and ignored before; the rental stayed running).
TEST_P(AgentBenchRequest, AHeartbeatsFailedFailsTheRentalOverHttp) {
  const auto [node, enroll] = add_node();
  ASSERT_FALSE(node.empty());
  (void)agent_once(enroll);  // enrolled, inventory sent
  const Json offer{{"target", "a100-80gb-sxm4/3g.40gb"}, {"region", "eu-west"}, {"price_per_hour", 1.0}};
  Answer o = call("POST", "/offers", provider_token_, &offer);
  ASSERT_EQ(o.status, 201) << o.body.dump();
  const Json rent{{"offer", o.body["id"]}};
  Answer r = call("POST", "/rentals", renter_token_, &rent);
  ASSERT_EQ(r.status, 201) << r.body.dump();
  const std::string rental = r.body["id"];
  const int64_t generation = r.body["version"];
  int64_t seq = agent::next_seq(0) + 1000;
  auto beat = [&](int64_t gen) {
    const Json hb{{"seq", ++seq},
                  {"boot_id", "5c2f9e10-7b44-4d1a-8e6f-a100mig-boot1"},
                  {"running", Json::array()},
                  {"failed", Json::array({Json{{"rental_id", rental},
                                               {"generation", gen},
                                               {"code", "insufficient_resources"},
                                               {"message",
                                                "nvmlDeviceCreateGpuInstanceWithPlacement: Insufficient "
                                                "Resources"}}})}};
    return call("POST", "/agent/heartbeat", agent_token(), &hb);
  };
  Answer older = beat(generation - 1);
  ASSERT_EQ(older.status, 200) << older.body.dump();
  EXPECT_FALSE(older.body.contains("failed")) << older.body.dump();
  EXPECT_EQ(call("GET", "/rentals/" + rental, renter_token_).body["state"], "running");
  Answer now = beat(generation);
  ASSERT_EQ(now.status, 200) << now.body.dump();
  ASSERT_TRUE(now.body.contains("failed")) << now.body.dump();
  EXPECT_EQ(now.body["failed"][0], rental);
  EXPECT_TRUE(now.body["desired"].empty()) << now.body.dump();
  const Json after = call("GET", "/rentals/" + rental, renter_token_).body;
  EXPECT_EQ(after["state"], "failed") << after.dump();
  EXPECT_NE(after.dump().find("Insufficient Resources"), std::string::npos) << after.dump();
}

INSTANTIATE_TEST_SUITE_P(Stores, AgentBenchRequest, ::testing::Values("sqlite", "postgresql"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace gpuplan::agent
