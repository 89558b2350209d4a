// Dynamic MIG in the node agent (issue #15): only a node whose MIG policy is dynamic looks up the write
// calls (nvml_write_whitelist); then the agent creates the GPU instances the heartbeat's desired rentals
// name, destroys those no rental wants, and reports a rental whose instance it could not create
// ("Insufficient Resources") in the next heartbeat, never crashing. Fixtures: tests/data/nvml/a100-dynamic*.json.
#include <gtest/gtest.h>

#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "agent/agent.h"
#include "agent/nvml_api.h"

namespace gpuplan::agent {
namespace {

const std::string kGpu0 = "GPU-7e2d1c0b-dddd-4eee-8fff-000000000001";

std::string fixture(const std::string& name) {
  return "fake:" + std::string(GPUPLAN_SOURCE_DIR) + "/tests/data/nvml/" + name + ".json";
}

std::set<std::string> write_names() { return {nvml_write_whitelist().begin(), nvml_write_whitelist().end()}; }

std::vector<std::pair<std::string, int>> instances(NvmlBackend& b, size_t gpu = 0) {
  auto inv = b.read();
  EXPECT_TRUE(inv.ok());
  std::vector<std::pair<std::string, int>> out;
  if (!inv.ok() || inv->gpus.size() <= gpu) return out;
  for (const GpuInstance& i : inv->gpus[gpu].instances) out.emplace_back(i.profile, i.start);
  return out;
}

TEST(AgentMigDynamic, TheWriteWhitelistIsSeparateFromTheReadOne) {
  const std::set<std::string> reads(nvml_whitelist().begin(), nvml_whitelist().end());
  ASSERT_EQ(nvml_write_whitelist().size(), 7u);
  for (std::string_view w : nvml_write_whitelist()) {
    EXPECT_EQ(w.substr(0, 4), "nvml") << w;
    EXPECT_FALSE(reads.count(std::string(w))) << w << " is in the read whitelist";
  }
  for (const char* call : {"nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlGpuInstanceCreateComputeInstance",
                           "nvmlComputeInstanceDestroy", "nvmlGpuInstanceDestroy"}) {
    EXPECT_TRUE(write_names().count(call)) << call;
  }
}

TEST(AgentMigDynamic, ReadOnlyPolicyLooksUpNoWriteSymbol) {
  // The dlopen loader over the stub library: every symbol it asks dlsym for is recorded.
  auto ro = open_nvml(std::string("nvml:") + GPUPLAN_NVML_STUB);
  ASSERT_TRUE(ro.ok()) << ro.error().message;
  const std::vector<std::string> asked = (*ro)->looked_up();
  // The agent's loader asks for its own read calls (the read whitelist also holds the bench's sensors,
  // which src/bench/nvml_sensors.cc looks up): each one whitelisted, none a write.
  const std::set<std::string> reads(nvml_whitelist().begin(), nvml_whitelist().end());
  EXPECT_FALSE(asked.empty());
  for (const std::string& name : asked) {
    EXPECT_TRUE(reads.count(name)) << name << " looked up but not in the read whitelist";
    EXPECT_FALSE(write_names().count(name)) << name << " looked up read-only";
  }
  auto refused = (*ro)->create_instance(InstanceRef{"GPU-stub-0000", "1g.10gb", 0});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kForbidden);

  // Dynamic: the write calls are looked up too; the stub lacks them, so creating is unavailable (not a crash).
  auto dyn = open_nvml(std::string("nvml:") + GPUPLAN_NVML_STUB, MigWrites::kDynamic);
  ASSERT_TRUE(dyn.ok());
  const std::vector<std::string> asked_dyn = (*dyn)->looked_up();
  for (const std::string& w : write_names()) {
    EXPECT_NE(std::find(asked_dyn.begin(), asked_dyn.end(), w), asked_dyn.end()) << w;
  }
  auto missing = (*dyn)->create_instance(InstanceRef{"GPU-stub-0000", "1g.10gb", 0});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kUnavailable);

  // The fake follows the same rule, and read-only changes nothing.
  auto fake = open_nvml(fixture("a100-dynamic"));
  ASSERT_TRUE(fake.ok());
  for (const std::string& name : (*fake)->looked_up()) EXPECT_FALSE(write_names().count(name)) << name;
  EXPECT_FALSE((*fake)->destroy_instance(InstanceRef{kGpu0, "3g.40gb", 0}).ok());
  EXPECT_EQ(instances(**fake), (std::vector<std::pair<std::string, int>>{{"3g.40gb", 0}}));
  auto inv = (*fake)->read();
  ASSERT_TRUE(inv.ok());
  const MigReconcile rec = reconcile_mig(**fake, *inv, {DesiredInstance{"r_1", 1, InstanceRef{kGpu0, "1g.10gb", 6}}});
  EXPECT_EQ(rec.created, 0);  // refused: the fake's state is unchanged
  EXPECT_EQ(instances(**fake), (std::vector<std::pair<std::string, int>>{{"3g.40gb", 0}}));
}

TEST(AgentMigDynamic, CreatesWhatTheServerPlacedAndDestroysTheRest) {
  auto b = open_nvml(fixture("a100-dynamic"), MigWrites::kDynamic);
  ASSERT_TRUE(b.ok()) << b.error().message;
  auto inv = (*b)->read();
  ASSERT_TRUE(inv.ok());
  // The 3g.40gb at 0 is no rental's: destroyed first, so the 1g.10gb at 0 fits; the 3g.40gb at 4 is new.
  // A whole-GPU rental (no profile) creates nothing.
  const std::vector<DesiredInstance> desired = {
      {"r_a", 2, InstanceRef{kGpu0, "3g.40gb", 4}},
      {"r_b", 1, InstanceRef{kGpu0, "1g.10gb", 0}},
      {"r_c", 1, InstanceRef{"GPU-7e2d1c0b-dddd-4eee-8fff-000000000002", "", 0}},
  };
  MigReconcile rec = reconcile_mig(**b, *inv, desired);
  EXPECT_EQ(rec.destroyed, 1);
  EXPECT_EQ(rec.created, 2);
  EXPECT_TRUE(rec.failures.empty()) << rec.failures[0].message;
  EXPECT_TRUE(rec.errors.empty());
  EXPECT_EQ(instances(**b), (std::vector<std::pair<std::string, int>>{{"1g.10gb", 0}, {"3g.40gb", 4}}));
  // Idempotent: the same desired list against the new inventory changes nothing.
  inv = (*b)->read();
  ASSERT_TRUE(inv.ok());
  rec = reconcile_mig(**b, *inv, desired);
  EXPECT_EQ(rec.created + rec.destroyed, 0);
}

TEST(AgentMigDynamic, TakenSlicesAndBadPlacementsAreReportedPerRental) {
  auto b = open_nvml(fixture("a100-dynamic"), MigWrites::kDynamic);
  ASSERT_TRUE(b.ok());
  auto inv = (*b)->read();
  ASSERT_TRUE(inv.ok());
  // r_keep keeps the 3g.40gb at 0; r_overlap wants slice 1, inside it; r_bad a start 3g.40gb never has.
  const std::vector<DesiredInstance> desired = {
      {"r_keep", 1, InstanceRef{kGpu0, "3g.40gb", 0}},
      {"r_overlap", 1, InstanceRef{kGpu0, "1g.10gb", 1}},
      {"r_bad", 1, InstanceRef{kGpu0, "3g.40gb", 2}},
      {"r_ok", 1, InstanceRef{kGpu0, "2g.20gb", 4}},
  };
  const MigReconcile rec = reconcile_mig(**b, *inv, desired);
  ASSERT_EQ(rec.failures.size(), 2u);
  EXPECT_EQ(rec.failures[0].rental_id, "r_overlap");
  EXPECT_EQ(rec.failures[0].code, "insufficient_resources");
  EXPECT_NE(rec.failures[0].message.find("insufficient_resources"), std::string::npos);
  EXPECT_EQ(rec.failures[1].rental_id, "r_bad");
  EXPECT_EQ(rec.failures[1].code, "invalid_placement");
  EXPECT_EQ(rec.created, 1);
  EXPECT_EQ(instances(**b), (std::vector<std::pair<std::string, int>>{{"3g.40gb", 0}, {"2g.20gb", 4}}));
}

// The agent's loop against a small loopback server whose heartbeat answers the node's MIG policy
// `node_policy` and names a rental whose instance the scripted INSUFFICIENT_RESOURCES makes impossible.
struct LoopResult {
  std::vector<Json> beats;
  std::string log;
  Status result = Status::Ok();
};
LoopResult run_against(const std::string& node_policy) {
  LoopResult out;
  httplib::Server server;
  std::mutex mu;
  server.Put("/api/v1/agent/inventory", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"node_id":"n_1","seq":1,"gpus":[],"resumed":0,"lost":0,"ended":0})", "application/json");
  });
  server.Post("/api/v1/agent/heartbeat", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    out.beats.push_back(Json::parse(req.body, nullptr, false));
    const Json answer{{"desired", Json::array({Json{{"rental_id", "r_fail"},
                                                    {"generation", 5},
                                                    {"state", "running"},
                                                    {"gpu_uuid", kGpu0},
                                                    {"profile", "3g.40gb"},
                                                    {"placement", 4}}})},
                      {"heartbeat_seconds", 1},
                      {"ignored", Json::array()},
                      {"mig_policy", node_policy}};
    res.set_content(answer.dump(), "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  if (port <= 0) {
    ADD_FAILURE() << "no port";
    return out;
  }
  std::thread serve([&] { server.listen_after_bind(); });

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("gpuplan-migdyn-" + std::to_string(::getpid()) + "-" + node_policy);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "token") << "gpa_test\n";
  AgentOptions o;
  o.server = "http://127.0.0.1:" + std::to_string(port);
  o.token_file = (dir / "token").string();
  o.nvml = fixture("a100-dynamic-full");
  o.mig_writes = MigWrites::kDynamic;
  std::atomic<bool> stop{false};
  std::ostringstream log;
  std::thread agent([&] { out.result = run_agent(o, stop, true, log); });
  constexpr auto kPatience = std::chrono::seconds(20);  // a deadline for a hung agent, not a timing assert
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (std::chrono::steady_clock::now() < until) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (out.beats.size() >= 3) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop.store(true);
  agent.join();
  server.stop();
  serve.join();
  std::filesystem::remove_all(dir);
  out.log = log.str();
  return out;
}

// The node's policy is dynamic: the next heartbeat reports the failure in `failed` and does not echo it
// as running, and the agent keeps going.
TEST(AgentMigDynamic, TheNextHeartbeatReportsTheFailure) {
  const LoopResult r = run_against("dynamic");
  EXPECT_TRUE(r.result.ok()) << r.result.error().message;
  ASSERT_GE(r.beats.size(), 2u) << r.log;
  EXPECT_FALSE(r.beats[0].contains("failed"));
  ASSERT_TRUE(r.beats[1].contains("failed")) << r.beats[1].dump();
  EXPECT_EQ(r.beats[1]["failed"][0]["rental_id"], "r_fail");
  EXPECT_EQ(r.beats[1]["failed"][0]["generation"], 5);
  EXPECT_EQ(r.beats[1]["failed"][0]["code"], "insufficient_resources");
  EXPECT_TRUE(r.beats[1]["running"].empty()) << r.beats[1].dump();
  EXPECT_NE(r.log.find("mig_failed"), std::string::npos);
}

// The agent runs --mig-policy dynamic but the node's policy on the server is static: the agent writes
// nothing (no create was tried, so nothing failed) and says why once.
TEST(AgentMigDynamic, AStaticNodePolicyOnTheServerKeepsTheAgentReadOnly) {
  const LoopResult r = run_against("static");
  EXPECT_TRUE(r.result.ok()) << r.result.error().message;
  ASSERT_GE(r.beats.size(), 2u) << r.log;
  EXPECT_FALSE(r.beats[1].contains("failed")) << r.beats[1].dump();
  EXPECT_EQ(r.log.find("mig_failed"), std::string::npos) << r.log;
  EXPECT_EQ(r.log.find("mig_changed"), std::string::npos) << r.log;
  const size_t said = r.log.find("mig_policy_static");
  ASSERT_NE(said, std::string::npos) << r.log;
  EXPECT_EQ(r.log.find("mig_policy_static", said + 1), std::string::npos) << "said once";
}

}  // namespace
}  // namespace gpuplan::agent
