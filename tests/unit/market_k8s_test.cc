// The Kubernetes hand-off target (issue #15; docs/market.md, "Hand-off to Kubernetes"). No API server
// runs here, so kubectl is tests/fake_kubectl.py, which keeps objects as files and answers like kubectl
// (exit codes, "(NotFound)"):
// - kubectl's answers are parsed defensively (a phase, `apply -o name`, a token, a server URL);
// - on SQLite and PostgreSQL: reserve -> the outbox applies the manifests -> the Pod is "Running" -> the
//   rental runs; a second pass creates nothing; access gives the namespace, the Pod, the API server and a
//   one-hour token of the namespace's ServiceAccount; stop deletes the Pod by its labels and the quota
//   drops to what the tenant still runs; a Pod that ends before it ran fails the rental;
// - SIGKILL at each outbox step: the Pod is created exactly once (the fake counts creations).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gpuplan/handoff.h"
#include "gpuplan/k8s.h"
#include "gpuplan/market.h"
#include "market_fixture.h"

namespace gpuplan::market {
namespace {

namespace fs = std::filesystem;
using handoff::ExternalState;
using handoff::ProcessResult;

constexpr const char* kMigTarget = "a100-80gb-sxm4/3g.40gb";

std::string fake_kubectl() { return std::string(GPUPLAN_SOURCE_DIR) + "/tests/fake_kubectl.py"; }

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int count_lines(const fs::path& p, const std::string& line) {
  std::ifstream in(p);
  std::string l;
  int n = 0;
  while (std::getline(in, l)) n += l == line ? 1 : 0;
  return n;
}

// A cluster of files: the fake's state directory and a kubeconfig file it checks exists.
struct FakeCluster {
  fs::path dir;
  FakeCluster() {
    static int counter = 0;
    dir = fs::temp_directory_path() / ("gpuplan-k8s-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "kubeconfig") << "apiVersion: v1\nkind: Config\n";
    ::setenv("FAKE_KUBECTL_DIR", dir.c_str(), 1);
  }
  ~FakeCluster() { fs::remove_all(dir); }
  std::shared_ptr<handoff::HandoffTarget> target() const {
    handoff::KubernetesTargetOptions o;
    o.kubectl.kubectl = fake_kubectl();
    o.kubectl.kubeconfig = (dir / "kubeconfig").string();
    o.kubectl.context = "test";
    return std::shared_ptr<handoff::HandoffTarget>(handoff::make_kubernetes_target(o));
  }
  fs::path object(const std::string& ns, const std::string& kind, const std::string& name) const {
    return dir / "objects" / ns / kind / (name + ".json");
  }
};

NodeSpec k8s_node_spec(const std::string& name) {
  NodeSpec spec;
  spec.name = name;
  spec.region = "eu-west";
  spec.interconnect = Interconnect::kNvlink;
  spec.vcpus = 64;
  spec.ram_gb = 512;
  spec.disk_gb = 2000;
  spec.scheduler = Scheduler::kKubernetes;
  spec.gpus.push_back(GpuSpec{"a100-80gb-sxm4", "GPU-" + name + "-0", MigPolicy::kStatic, "3g.40gb@0,3g.40gb@4"});
  return spec;
}

TEST(KubectlAnswers, AreParsedDefensively) {
  auto running = handoff::parse_pod_phase(ProcessResult{0, "Running", "", false});
  ASSERT_TRUE(running.ok());
  EXPECT_TRUE(running->found);
  EXPECT_EQ(running->state, ExternalState::kRunning);
  EXPECT_EQ(handoff::parse_pod_phase(ProcessResult{0, "Pending\n", "", false})->state, ExternalState::kPending);
  EXPECT_EQ(handoff::parse_pod_phase(ProcessResult{0, "", "", false})->state, ExternalState::kPending);
  EXPECT_EQ(handoff::parse_pod_phase(ProcessResult{0, "Failed", "", false})->state, ExternalState::kGone);
  EXPECT_EQ(handoff::parse_pod_phase(ProcessResult{0, "Succeeded", "", false})->state, ExternalState::kGone);
  auto missing =
      handoff::parse_pod_phase(ProcessResult{1, "", "Error from server (NotFound): pods \"p\" not found\n", false});
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->found);
  EXPECT_EQ(missing->state, ExternalState::kGone);
  // Anything else is an error (retried), never a state guessed from text.
  auto down = handoff::parse_pod_phase(ProcessResult{1, "", "The connection to the server was refused", false});
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.error().code, ErrorCode::kUnavailable);
  EXPECT_FALSE(handoff::parse_pod_phase(ProcessResult{0, "Runnin\x01g", "", false}).ok());

  EXPECT_TRUE(handoff::check_applied("namespace/gpuplan-t1\npod/gpuplan-rab-g3\n", "gpuplan-rab-g3").ok());
  EXPECT_TRUE(handoff::check_applied("pod/gpuplan-rab-g3 serverside-applied\n", "gpuplan-rab-g3").ok());
  EXPECT_FALSE(handoff::check_applied("pod/gpuplan-rab-g30\n", "gpuplan-rab-g3").ok());
  EXPECT_FALSE(handoff::check_applied("", "gpuplan-rab-g3").ok());

  EXPECT_EQ(*handoff::parse_token("aaa.bbb.ccc\n"), "aaa.bbb.ccc");
  for (const char* bad : {"", "aaa.bbb", "aaa..ccc", ".a.b", "a b.c.d", "a.b.c\"", "a.b.c.d"}) {
    EXPECT_FALSE(handoff::parse_token(bad).ok()) << bad;
  }
  EXPECT_FALSE(handoff::parse_token(std::string(handoff::kMaxTokenBytes, 'a') + ".b.c").ok());
  EXPECT_EQ(*handoff::parse_server_url("https://10.0.0.1:6443"), "https://10.0.0.1:6443");
  for (const char* bad : {"", "10.0.0.1:6443", "https://", "https://a b", "file:///etc/passwd"}) {
    EXPECT_FALSE(handoff::parse_server_url(bad).ok()) << bad;
  }
}

class MarketK8s : public testing::StoreTest {
 protected:
  MarketK8s() : StoreTest(false) {}
  void SetUp() override {
    StoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    MarketOptions o;
    o.targets.push_back(cluster_.target());
    ASSERT_TRUE(w.init(std::move(db_), o));
    auto node = w.market->add_node(w.provider, k8s_node_spec("k1"));
    ASSERT_TRUE(node.ok()) << node.error().message;
    offer_ = w.add_offer(kMigTarget, 1, 630'000);
  }
  Rental rent() {
    auto r = w.market->rent(w.renter_a, RentRequest{offer_.id, 1, {}, "", ""});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : Rental{};
  }
  RentalState state(const std::string& id) { return w.market->get_rental(w.renter_a, id)->state; }
  std::string ns() const {
    auto n = handoff::tenant_namespace(w.renter_a.tenant_id);
    return n ? *n : "";
  }
  std::string pod(const Rental& r, int64_t generation) const {
    auto n = handoff::rental_object_name(r.id, generation);
    return n ? *n : "";
  }
  Json quota() const { return Json::parse(read_file(cluster_.object(ns(), "ResourceQuota", "gpuplan-quota"))); }
  FakeCluster cluster_;
  Offer offer_;
};

TEST_P(MarketK8s, ReserveDeliversAPodThatRunsAndStopDeletesIt) {
  Rental r = rent();
  EXPECT_EQ(r.state, RentalState::kReserved);
  const std::string name = pod(r, r.version);
  auto rep = w.market->deliver_outbox();
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  EXPECT_EQ(rep->delivered, 1);
  EXPECT_EQ(rep->running, 1);  // the fake's Pod is Running: the status pass moves the rental on
  EXPECT_EQ(state(r.id), RentalState::kRunning);
  const fs::path pod_file = cluster_.object(ns(), "Pod", name);
  ASSERT_TRUE(fs::exists(pod_file)) << pod_file;
  const Json pod_json = Json::parse(read_file(pod_file));
  EXPECT_EQ(pod_json["spec"]["nodeSelector"]["kubernetes.io/hostname"], "k1");
  EXPECT_EQ(pod_json["metadata"]["labels"]["gpuplan.io/rental"], r.id);
  EXPECT_EQ(pod_json["spec"]["containers"][0]["image"], std::string(handoff::kDefaultImage));
  EXPECT_EQ(quota()["spec"]["hard"]["requests.nvidia.com/mig-3g.40gb"], "1");
  for (const char* kind : {"ServiceAccount", "Role", "RoleBinding"}) {
    EXPECT_TRUE(fs::exists(cluster_.object(ns(), kind, "gpuplan-renter"))) << kind;
  }
  // A second pass hands nothing again; the Pod was created once.
  ASSERT_TRUE(w.market->deliver_outbox().ok());
  EXPECT_EQ(count_lines(cluster_.dir / "created", name), 1);
  const std::string calls = read_file(cluster_.dir / "calls");
  EXPECT_NE(calls.find("--context test get pod " + name + " -n " + ns() + " -o jsonpath={.status.phase}"),
            std::string::npos)
      << calls;

  // Access: namespace, Pod, the kubeconfig's server and a token of the namespace's ServiceAccount.
  auto a = w.market->rental_access(w.renter_a, r.id);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->access.kind, "kubernetes");
  EXPECT_EQ(a->access.kube_namespace, ns());
  EXPECT_EQ(a->access.pod, name);
  EXPECT_EQ(a->access.server, "https://127.0.0.1:6443");
  EXPECT_EQ(a->access.token.substr(0, 3), "eyJ");
  EXPECT_EQ(a->access.token_expires_in_seconds, handoff::kAccessTokenSeconds);
  EXPECT_EQ(a->access.command, "kubectl --server=https://127.0.0.1:6443 --token=\"$GPUPLAN_K8S_TOKEN\" -n " + ns() +
                                   " exec -it " + name + " -- sh");
  EXPECT_NE(read_file(cluster_.dir / "calls").find("create token gpuplan-renter -n " + ns() + " --duration=1h"),
            std::string::npos);
  EXPECT_FALSE(w.market->rental_access(w.renter_b, r.id).ok()) << "another tenant's rental";

  // Stop: the Pod is deleted by its labels; the quota counts what the tenant still runs (nothing).
  ASSERT_TRUE(w.market->stop_rental(w.renter_a, r.id).ok());
  rep = w.market->deliver_outbox();
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  EXPECT_EQ(rep->delivered, 1);
  EXPECT_FALSE(fs::exists(pod_file));
  EXPECT_EQ(quota()["spec"]["hard"]["requests.nvidia.com/mig-3g.40gb"], "0");
  EXPECT_NE(read_file(cluster_.dir / "calls")
                .find("delete pod -l gpuplan.io/rental=" + r.id + ",gpuplan.io/generation=" +
                      std::to_string(r.version) + " -n " + ns() + " --ignore-not-found --wait=false"),
            std::string::npos);
  // A stopped rental gets no token.
  a = w.market->rental_access(w.renter_a, r.id);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->access.token.empty());
}

TEST_P(MarketK8s, QuotaCountsTheTenantsLiveRentals) {
  Rental a = rent();
  Rental b = rent();
  ASSERT_TRUE(w.market->deliver_outbox().ok());
  ASSERT_TRUE(w.market->deliver_outbox().ok());
  EXPECT_EQ(state(a.id), RentalState::kRunning);
  EXPECT_EQ(state(b.id), RentalState::kRunning);
  EXPECT_EQ(quota()["spec"]["hard"]["requests.nvidia.com/mig-3g.40gb"], "2");
  ASSERT_TRUE(w.market->stop_rental(w.renter_a, a.id).ok());
  ASSERT_TRUE(w.market->deliver_outbox().ok());
  EXPECT_EQ(quota()["spec"]["hard"]["requests.nvidia.com/mig-3g.40gb"], "1");
  EXPECT_TRUE(fs::exists(cluster_.object(ns(), "Pod", pod(b, b.version))));
}

TEST_P(MarketK8s, APodThatEndsBeforeItRunsFailsTheRental) {
  std::ofstream(cluster_.dir / "phase") << "Pending";
  Rental r = rent();
  ASSERT_TRUE(w.market->deliver_outbox().ok());
  EXPECT_EQ(state(r.id), RentalState::kStarting);
  ASSERT_TRUE(w.market->deliver_outbox().ok());
  EXPECT_EQ(state(r.id), RentalState::kStarting) << "still Pending";
  // The Pod goes away (evicted, deleted by hand): NotFound is gone, the rental failed.
  fs::remove(cluster_.object(ns(), "Pod", pod(r, r.version)));
  ASSERT_TRUE(w.market->deliver_outbox().ok());
  EXPECT_EQ(state(r.id), RentalState::kFailed);
}

TEST_P(MarketK8s, KubectlFailuresAreRetriedNotLost) {
  std::ofstream(cluster_.dir / "fail") << "The connection to the server 127.0.0.1:6443 was refused";
  Rental r = rent();
  auto rep = w.market->deliver_outbox();
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->retried, 1);
  auto rows = w.market->outbox_rows(w.platform, r.id);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_NE((*rows)[0].last_error.find("was refused"), std::string::npos) << (*rows)[0].last_error;
  fs::remove(cluster_.dir / "fail");
  w.clock->advance_ms(kOutboxMaxBackoffMs);
  ASSERT_TRUE(w.market->deliver_outbox().ok());
  EXPECT_EQ(state(r.id), RentalState::kRunning);
}

INSTANTIATE_TEST_SUITE_P(Stores, MarketK8s, ::testing::ValuesIn(testing::kStoreKinds), testing::store_name);

// --- SIGKILL at each outbox step, the file-backed fake counting Pod creations (as market_outbox_test.cc)
TEST(MarketK8sCrash, KilledAtEachStepCreatesThePodExactlyOnce) {
  for (const char* fp :
       {"after_commit", "outbox_before_deliver", "outbox_after_deliver", "outbox_before_mark_commit"}) {
    SCOPED_TRACE(fp);
    FakeCluster cluster;
    const fs::path data = cluster.dir / "store";
    auto open = [&] {
      auto db = open_store(data.string());
      return db ? std::move(*db) : nullptr;
    };
    testing::World w;
    {
      MarketOptions o;
      o.targets.push_back(cluster.target());
      ASSERT_TRUE(w.init(open(), o));
    }
    ASSERT_TRUE(w.market->add_node(w.provider, k8s_node_spec("k1")).ok());
    const Offer offer = w.add_offer(kMigTarget, 1, 630'000);
    const int64_t t0 = w.clock->now_ms();
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::setenv("GPUPLAN_FAILPOINT", fp, 1);
      MarketOptions o;
      o.targets.push_back(cluster.target());
      auto m = Market::open(open(), std::make_shared<ManualClock>(t0), o);
      if (!m) ::_exit(3);
      auto r = (*m)->rent(w.renter_a, RentRequest{offer.id, 1, {}, "crash-key", ""});
      if (!r) ::_exit(4);
      (void)(*m)->deliver_outbox();
      ::_exit(0);  // the failpoint did not fire
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
    auto r = w.market->rent(w.renter_a, RentRequest{offer.id, 1, {}, "crash-key", ""});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->replayed);
    w.clock->advance_ms(MarketOptions{}.outbox_lease_ms + 1);
    for (int pass = 0; pass < 2; ++pass) ASSERT_TRUE(w.market->deliver_outbox().ok());
    const std::string name = *handoff::rental_object_name(r->id, r->version);
    EXPECT_EQ(count_lines(cluster.dir / "created", name), 1) << "created exactly once";
    EXPECT_EQ(w.market->get_rental(w.renter_a, r->id)->state, RentalState::kRunning);
  }
}

}  // namespace
}  // namespace gpuplan::market
