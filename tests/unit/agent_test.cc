// The node agent (issue #15, part 1): NVML read calls only (the whitelist), the fake backend's fixtures
// and scripted faults (a lost GPU, INSUFFICIENT_RESOURCES, a slow call, a new boot id, missing symbols),
// the loader over a stub libnvidia-ml.so.1 that lacks symbols, and the agent's loop against a real
// server on 127.0.0.1: enrol, inventory, heartbeats, a clean stop; SIGTERM ends `gpuplan agent`.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <httplib.h>

#include "agent/agent.h"
#include "agent/nvml_api.h"
#include "calibration_util.h"
#include "gpuplan/catalog.h"
#include "gpuplan/market.h"
#include "loopback_fixture.h"
#include "market/db.h"

namespace gpuplan::agent {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) {
  return "fake:" + std::string(GPUPLAN_SOURCE_DIR) + "/tests/data/nvml/" + name + ".json";
}

NodeInventory read(const std::string& spec) {
  auto b = open_nvml(spec);
  EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
  if (!b.ok()) return {};
  auto inv = (*b)->read();
  EXPECT_TRUE(inv.ok()) << (inv.ok() ? "" : inv.error().message);
  return inv.ok() ? *inv : NodeInventory{};
}

TEST(AgentNvml, TheWhitelistHoldsReadCallsOnly) {
  ASSERT_GE(nvml_whitelist().size(), 10u);
  for (std::string_view name : nvml_whitelist()) {
    EXPECT_EQ(name.substr(0, 4), "nvml") << name;
    for (std::string_view verb : {"Set", "Create", "Destroy", "Reset", "Clear", "Register", "Enable", "Disable",
                                  "Unbind", "Remove", "Modify", "Apply"}) {
      EXPECT_EQ(name.find(verb), std::string_view::npos) << name << " is not a read call (" << verb << ")";
    }
  }
}

TEST(AgentNvml, ProfileNamesAsNvidiaSmiPrintsThem) {
  nvml::GpuInstanceProfileInfo info{};
  info.slice_count = 1;
  info.memory_size_mb = 9728;
  EXPECT_EQ(nvml::profile_name(0, info), "1g.10gb");
  info.slice_count = 3;
  info.memory_size_mb = 40192;
  EXPECT_EQ(nvml::profile_name(2, info), "3g.40gb");
  info.slice_count = 1;
  info.memory_size_mb = 9728;
  EXPECT_EQ(nvml::profile_name(7, info), "1g.10gb+me");
}

TEST(AgentNvml, EightH100sAndAnA100WithTwo3gInstances) {
  NodeInventory h = read(fixture("h100x8"));
  ASSERT_EQ(h.gpus.size(), 8u);
  EXPECT_TRUE(h.features_off.empty());
  EXPECT_EQ(h.driver_version, "550.90.07");
  EXPECT_EQ(h.gpus[7].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h.gpus[7].pci_bus_id, "00000000:DB:00.0");
  EXPECT_EQ(h.gpus[7].memory_bytes, 85520809984);
  EXPECT_EQ(h.gpus[7].mig_mode, "disabled");
  NodeInventory a = read(fixture("a100-mig"));
  ASSERT_EQ(a.gpus.size(), 1u);
  EXPECT_EQ(a.gpus[0].mig_mode, "enabled");
  ASSERT_EQ(a.gpus[0].instances.size(), 2u);
  EXPECT_EQ(a.gpus[0].instances[0].profile, "3g.40gb");
  EXPECT_EQ(a.gpus[0].instances[0].start, 0);  // sorted by start
  EXPECT_EQ(a.gpus[0].instances[1].start, 4);
}

TEST(AgentNvml, ALostGpuIsLeftOutAndNamed) {
  NodeInventory inv = read(fixture("lost-gpu"));
  ASSERT_EQ(inv.gpus.size(), 3u);
  EXPECT_EQ(inv.lost_gpus, std::vector<std::string>{"2"});
  for (const GpuInfo& g : inv.gpus) EXPECT_NE(g.uuid, "GPU-11111111-0000-4000-8000-000000000002");
}

TEST(AgentNvml, FaultsTurnOneFeatureOffEachNeverTheAgent) {
  auto b = open_nvml(fixture("faults"));
  ASSERT_TRUE(b.ok()) << b.error().message;
  const std::string boot1 = (*b)->boot_id();
  auto inv = (*b)->read();
  ASSERT_TRUE(inv.ok()) << inv.error().message;
  // pci: the symbol is missing; driver_version: NOT_SUPPORTED; mig_instances: INSUFFICIENT_RESOURCES.
  EXPECT_EQ(inv->features_off, (std::vector<std::string>{"driver_version", "mig_instances", "pci"}));
  ASSERT_EQ(inv->gpus.size(), 2u);
  EXPECT_TRUE(inv->gpus[0].pci_bus_id.empty());
  EXPECT_EQ(inv->gpus[0].mig_mode, "enabled");
  EXPECT_TRUE(inv->gpus[0].instances.empty());
  EXPECT_EQ(inv->gpus[1].name, "NVIDIA A100-SXM4-80GB");  // the slow call still answers
  EXPECT_EQ((*b)->boot_id(), boot1);
  ASSERT_TRUE((*b)->read().ok());
  EXPECT_NE((*b)->boot_id(), boot1);  // the scripted reboot: a new boot id from the second read on
}

TEST(AgentNvml, TheLoaderOverAStubLibraryTurnsMissingSymbolsOff) {
  NodeInventory inv = read(std::string("nvml:") + GPUPLAN_NVML_STUB);
  ASSERT_EQ(inv.gpus.size(), 2u);
  EXPECT_EQ(inv.gpus[1].uuid, "GPU-stub-0001");
  EXPECT_EQ(inv.gpus[0].memory_bytes, 85899345920);
  EXPECT_TRUE(inv.gpus[0].mig_mode.empty());
  // No nvmlSystemGetDriverVersion, no nvmlDeviceGetPciInfo_v3; nvmlDeviceGetMigMode answers NOT_SUPPORTED.
  EXPECT_EQ(inv.features_off, (std::vector<std::string>{"driver_version", "mig", "pci"}));
  auto none = open_nvml("nvml:/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::kUnavailable);
  auto bad = open_nvml("cuda");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "nvml");
}

TEST(AgentNvml, SequenceNumbersOnlyGrow) {
  const int64_t a = next_seq(0);
  EXPECT_GT(a, 1'700'000'000'000);  // the wall clock in ms: a restarted agent reports newer
  EXPECT_EQ(next_seq(a + 1'000'000), a + 1'000'001);
}

// --- the loop against a real server ---------------------------------------------------------------------
class AgentLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::unique_temp_dir("agent");
    Status started = server_.start("sqlite", "agent-store");
    ASSERT_TRUE(started.ok()) << started.error().message;
    market::Market& m = *server_.market();
    auto root = m.init_platform();
    ASSERT_TRUE(root.ok());
    auto platform = m.authenticate(root->token);
    ASSERT_TRUE(platform.ok());
    provider_token_ = test::tenant_admin_token(m, *platform, "prov", market::TenantKind::kProvider);
  }
  void TearDown() override {
    server_.stop();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // POST /nodes with one A100 (uuid of the a100-mig fixture): the enrolment token.
  std::string add_node() {
    httplib::Client c("127.0.0.1", server_.port());
    httplib::Headers h{{"Authorization", "Bearer " + provider_token_}};
    const Json body{{"name", "node-1"},
                    {"region", "eu-west"},
                    {"gpus", Json::array({Json{{"target", "a100-80gb-sxm4"},
                                               {"uuid", "GPU-4f1c2d3e-aaaa-4bbb-8ccc-000000000000"},
                                               {"mig", "static"},
                                               {"layout", "3g.40gb,3g.40gb"}}})}};
    auto r = c.Post("/api/v1/nodes", h, body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 201) << r->body;
    return Json::parse(r->body).value("enrollment_token", std::string());
  }
  std::string url() const { return server_.url(); }

  fs::path dir_;  // the agent's token and bench files
  test::LoopbackServer server_;
  std::string provider_token_;
};

TEST_F(AgentLoop, EnrolsOnceSendsTheInventoryHeartbeatsAndStopsCleanly) {
  const std::string enrol = add_node();
  ASSERT_EQ(enrol.rfind("gpe_", 0), 0u) << enrol;
  AgentOptions o;
  o.server = url();
  o.enroll = enrol;
  o.token_file = (dir_ / "agent.token").string();
  o.once = true;
  o.nvml = fixture("a100-mig");
  std::atomic<bool> stop{false};
  std::ostringstream out;
  Status s = run_agent(o, stop, true, out);
  ASSERT_TRUE(s.ok()) << s.error().message << "\n" << out.str();
  EXPECT_EQ(fs::status(o.token_file).permissions() & fs::perms::group_all, fs::perms::none);
  const std::string text = out.str();
  const Json once = Json::parse(text.substr(text.find("{\n")), nullptr, false);
  ASSERT_FALSE(once.is_discarded()) << text;
  EXPECT_EQ(once["inventory"]["gpus"][0]["target"], "a100-80gb-sxm4");
  EXPECT_EQ(once["inventory"]["gpus"][0]["sellable"], true);
  EXPECT_EQ(once["heartbeat"]["heartbeat_seconds"], 10);

  // Again from the token file (the enrolment token is used up): the loop, stopped from another thread.
  o.enroll.clear();
  o.once = false;
  int64_t first_seq = -1, seq = -1;
  ASSERT_TRUE(market::with_tx(server_.market()->db(), market::TxMode::kRead, [&](market::Tx& tx) -> Status {
                GPUPLAN_TRY(rows, tx.query("SELECT seq FROM node_agents"));
                first_seq = rows.empty() ? -1 : rows[0].integer(0);
                return Status::Ok();
              }).ok());
  std::ostringstream loop_out;
  Status loop = Status::Ok();
  std::thread t([&] { loop = run_agent(o, stop, true, loop_out); });
  // Wait (bounded) for the loop's first heartbeat: node_agents.seq moves past the --once run's.
  for (int i = 0; i < 200 && seq <= first_seq; ++i) {
    Status r = market::with_tx(server_.market()->db(), market::TxMode::kRead, [&](market::Tx& tx) -> Status {
      GPUPLAN_TRY(rows, tx.query("SELECT seq FROM node_agents"));
      seq = rows.empty() ? -1 : rows[0].integer(0);
      return Status::Ok();
    });
    ASSERT_TRUE(r.ok());
    if (seq <= first_seq) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GT(seq, first_seq);
  stop.store(true);
  t.join();
  EXPECT_TRUE(loop.ok()) << (loop.ok() ? "" : loop.error().message);
  EXPECT_NE(loop_out.str().find("\"event\":\"stopped\""), std::string::npos) << loop_out.str();
}

// --bench-file (issue #16): after its first inventory the agent PUTs the calibration of its GPU; the
// market stores it and answers the measured figures. --bench quick without a bench built in is refused.
TEST_F(AgentLoop, ReportsABenchFileAfterTheFirstInventory) {
  const std::string enrol = add_node();
  auto ref = Catalog::embedded()->resolve("a100-80gb-sxm4");
  ASSERT_TRUE(ref.ok());
  calibration_testing::CalibrationTruth t;
  t.catalog_id = "a100-80gb-sxm4";
  t.uuid = "GPU-4f1c2d3e-aaaa-4bbb-8ccc-000000000000";
  t.driver = "550.54.15";
  const std::string file = (dir_ / "bench.json").string();
  std::ofstream(file) << calibration_testing::calibration_json(t, perf_device(Target::linked(*ref, 1))).dump();
  AgentOptions o;
  o.server = url();
  o.enroll = enrol;
  o.once = true;
  o.nvml = fixture("a100-mig");
  o.bench_files = {file};
  std::atomic<bool> stop{false};
  std::ostringstream out;
  Status s = run_agent(o, stop, true, out);
  ASSERT_TRUE(s.ok()) << s.error().message << "\n" << out.str();
  const std::string text = out.str();
  const Json once = Json::parse(text.substr(text.find("{\n")), nullptr, false);
  ASSERT_FALSE(once.is_discarded()) << text;
  ASSERT_EQ(once["bench"].size(), 1u) << text;
  EXPECT_EQ(once["bench"][0]["target"], "a100-80gb-sxm4") << text;
  EXPECT_EQ(once["bench"][0]["measured"]["method"], "gpuplan bench 1") << text;
  o.bench_files.clear();
  o.bench = "quick";
  std::ostringstream quick_out;
  Status quick = run_agent(o, stop, true, quick_out);
  ASSERT_FALSE(quick.ok());
  EXPECT_EQ(quick.error().field, "bench");
}

TEST_F(AgentLoop, ARefusedEnrolmentEndsTheAgentWithTheReason) {
  AgentOptions o;
  o.server = url();
  o.enroll = "gpe_n_nosuch_00";
  o.nvml = fixture("h100x8");
  std::atomic<bool> stop{false};
  std::ostringstream out;
  Status s = run_agent(o, stop, false, out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kUnauthenticated);
}

// `gpuplan agent` against a server that does not answer backs off; SIGTERM ends it with status 0.
TEST(AgentProcess, SigtermEndsTheBackoffLoopCleanly) {
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const std::string nvml = fixture("h100x8");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::execl(GPUPLAN_CLI_BINARY, "gpuplan", "agent", "--server", "http://127.0.0.1:1", "--enroll", "gpe_n_x_00",
            "--nvml", nvml.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  // Wait for its first "backoff" line: its signal handlers are in place by then.
  std::string seen;
  char buf[256];
  while (seen.find("backoff") == std::string::npos) {
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    seen.append(buf, static_cast<size_t>(n));
  }
  EXPECT_NE(seen.find("backoff"), std::string::npos) << seen;
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 100 && done == 0; ++i) {  // at most 10 s
    done = ::waitpid(pid, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (done == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ::close(out[0]);
    FAIL() << "gpuplan agent did not end on SIGTERM";
  }
  ::close(out[0]);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace gpuplan::agent
