// The hand-off outbox (issue #15, part 2; docs/market.md, "The outbox"), on SQLite and PostgreSQL:
// - a rental on a Slurm-managed node gets its apply row in the reservation's transaction and stays
//   reserved until the worker delivered it; a manual node runs at once and writes no row;
// - delivery is idempotent (a second pass hands nothing again), stop and delete go the same way, a
//   start is a new generation (a new name);
// - a failing apply backs off and fails its rental after kMaxApplyAttempts, freeing its slice;
// - SIGKILL at each step (after the rental's commit, before the target is called, after it answered,
//   before the mark commits): after a restart the target holds the name exactly once and the rental runs;
// - GET /rentals/{id}/access: the job and its srun line, or the node's SSH endpoint; another tenant's: 404.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gpuplan/handoff.h"
#include "gpuplan/market.h"
#include "market_fixture.h"

namespace gpuplan::market {
namespace {

using testing::kStoreKinds;
using testing::store_name;

constexpr const char* kMigTarget = "a100-80gb-sxm4/3g.40gb";

int count_lines(const std::string& path, const std::string& line) {
  std::ifstream in(path);
  std::string l;
  int n = 0;
  while (std::getline(in, l)) n += l == line ? 1 : 0;
  return n;
}

std::string fresh_file(const std::string& tag) {
  static int counter = 0;
  const auto p = std::filesystem::temp_directory_path() /
                 ("gpuplan-outbox-" + std::to_string(::getpid()) + "-" + tag + "-" + std::to_string(counter++));
  std::filesystem::remove(p);
  std::filesystem::remove(p.string() + ".calls");
  std::filesystem::remove(p.string() + ".fail");
  return p.string();
}

NodeSpec slurm_node_spec(const std::string& name, Scheduler scheduler = Scheduler::kSlurm) {
  NodeSpec spec;
  spec.name = name;
  spec.region = "eu-west";
  spec.interconnect = Interconnect::kNvlink;
  spec.vcpus = 64;
  spec.ram_gb = 512;
  spec.disk_gb = 2000;
  spec.scheduler = scheduler;
  if (scheduler == Scheduler::kSlurm) {
    spec.slurm_partition = "gpuplan";
    spec.slurm_node = "gpuplan-slurm";
  } else {
    spec.ssh = "ubuntu@node.example:2222";
  }
  spec.gpus.push_back(GpuSpec{"a100-80gb-sxm4", "GPU-" + name + "-0", MigPolicy::kStatic, "3g.40gb@0,3g.40gb@4"});
  return spec;
}

class MarketOutbox : public testing::StoreTest {
 protected:
  MarketOutbox() : StoreTest(false) {}
  void SetUp() override {
    StoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    path_ = fresh_file("target");
    MarketOptions o;
    o.targets.push_back(std::shared_ptr<handoff::HandoffTarget>(handoff::make_file_target(path_)));
    ASSERT_TRUE(w.init(std::move(db_), o));
    auto node = w.market->add_node(w.provider, slurm_node_spec("s1"));
    ASSERT_TRUE(node.ok()) << node.error().message;
    node_ = *node;
    offer_ = w.add_offer(kMigTarget, 1, 630'000);
  }
  std::string name_of(const Rental& r, int64_t generation) const {
    return "gpuplan-r" + r.id + "-g" + std::to_string(generation);
  }
  Rental rent() {
    auto r = w.market->rent(w.renter_a, RentRequest{offer_.id, 1, {}, "", ""});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : Rental{};
  }
  Rental get(const std::string& id) {
    auto r = w.market->get_rental(w.renter_a, id);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : Rental{};
  }
  std::vector<OutboxRow> rows(const std::string& id) {
    auto r = w.market->outbox_rows(w.platform, id);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : std::vector<OutboxRow>{};
  }
  int64_t available() {
    auto o = w.market->get_offer(offer_.id);
    return o.ok() ? o->available : -1;
  }
  std::string path_;
  Node node_;
  Offer offer_;
};

TEST_P(MarketOutbox, ManualNodeRunsAtOnceAndWritesNoRow) {
  w.clock->advance_ms(1000);  // a later node: placed on after the Slurm node's slices (nodes tie on age by id)
  auto manual = w.market->add_node(w.provider, slurm_node_spec("m1", Scheduler::kManual));
  ASSERT_TRUE(manual.ok()) << manual.error().message;
  EXPECT_EQ(manual->scheduler, Scheduler::kManual);
  EXPECT_EQ(manual->ssh, "ubuntu@node.example:2222");
  // Fill the Slurm node's two slices first so that the third rental lands on the manual node.
  Rental a = rent();
  Rental b = rent();
  Rental c = rent();
  ASSERT_EQ(c.placements.size(), 1u);
  EXPECT_EQ(c.placements[0].node_id, manual->id);
  EXPECT_EQ(c.state, RentalState::kRunning);
  EXPECT_TRUE(rows(c.id).empty());
  EXPECT_EQ(a.state, RentalState::kReserved);
  EXPECT_EQ(b.state, RentalState::kReserved);
  auto access = w.market->rental_access(w.renter_a, c.id);
  ASSERT_TRUE(access.ok()) << access.error().message;
  EXPECT_EQ(access->access.kind, "manual");
  EXPECT_EQ(access->access.ssh, "ubuntu@node.example:2222");
  EXPECT_EQ(access->node_name, "m1");
}

TEST_P(MarketOutbox, ApplyRowIsWrittenWithTheReservationAndDeliveredOnce) {
  Rental r = rent();
  EXPECT_EQ(r.state, RentalState::kReserved);  // the engine has not been asked yet
  auto before = rows(r.id);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].action, "apply");
  EXPECT_EQ(before[0].target_kind, "slurm");
  EXPECT_EQ(before[0].generation, r.version);
  EXPECT_FALSE(before[0].delivered_at_ms.has_value());
  EXPECT_EQ(count_lines(path_, name_of(r, r.version)), 0);

  auto rep = w.market->deliver_outbox();
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  EXPECT_EQ(rep->delivered, 1);
  EXPECT_EQ(count_lines(path_, name_of(r, r.version)), 1);
  Rental now = get(r.id);
  EXPECT_EQ(now.state, RentalState::kRunning);
  auto after = rows(r.id);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_TRUE(after[0].delivered_at_ms.has_value());
  EXPECT_EQ(after[0].external_id, "job-" + name_of(r, r.version));
  EXPECT_EQ(after[0].attempts, 1);

  // A second pass has nothing to hand off.
  auto again = w.market->deliver_outbox();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->delivered, 0);
  EXPECT_EQ(count_lines(path_ + ".calls", "apply " + name_of(r, r.version)), 1);

  auto access = w.market->rental_access(w.renter_a, r.id);
  ASSERT_TRUE(access.ok()) << access.error().message;
  EXPECT_EQ(access->access.kind, "slurm");
  EXPECT_EQ(access->access.external_id, "job-" + name_of(r, r.version));
  EXPECT_EQ(access->generation, r.version);
  // Another tenant's rental does not exist for it.
  auto other = w.market->rental_access(w.renter_b, r.id);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, ErrorCode::kNotFound);
}

TEST_P(MarketOutbox, StopStartAndDeleteGoThroughTheOutbox) {
  Rental r = rent();
  const int64_t gen1 = r.version;
  ASSERT_TRUE(w.market->deliver_outbox().ok());
  auto stopped = w.market->stop_rental(w.renter_a, r.id);
  ASSERT_TRUE(stopped.ok()) << stopped.error().message;
  EXPECT_EQ(stopped->state, RentalState::kStopped);
  auto rs = rows(r.id);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[1].action, "stop");
  EXPECT_EQ(rs[1].generation, gen1);  // it undoes that apply: the same name
  auto rep = w.market->deliver_outbox();
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  EXPECT_EQ(rep->delivered, 1);
  EXPECT_EQ(count_lines(path_, "stopped " + name_of(r, gen1)), 1);

  // Start: placed again, a new generation, a new name.
  auto started = w.market->start_rental(w.renter_a, r.id);
  ASSERT_TRUE(started.ok()) << started.error().message;
  EXPECT_EQ(started->state, RentalState::kReserved);
  const int64_t gen2 = started->version;
  EXPECT_GT(gen2, gen1);
  ASSERT_TRUE(w.market->deliver_outbox().ok());
  EXPECT_EQ(count_lines(path_, name_of(r, gen2)), 1);
  EXPECT_EQ(get(r.id).state, RentalState::kRunning);

  auto deleted = w.market->delete_rental(w.renter_a, r.id);
  ASSERT_TRUE(deleted.ok()) << deleted.error().message;
  ASSERT_TRUE(w.market->deliver_outbox().ok());
  EXPECT_EQ(count_lines(path_, "stopped " + name_of(r, gen2)), 1);
  rs = rows(r.id);
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_EQ(rs[3].action, "delete");
  for (const auto& row : rs) EXPECT_TRUE(row.delivered_at_ms.has_value()) << row.action << " " << row.generation;
}

TEST_P(MarketOutbox, StopBeforeDeliveryNeverApplies) {
  Rental r = rent();
  ASSERT_TRUE(w.market->stop_rental(w.renter_a, r.id).ok());
  auto rep = w.market->deliver_outbox();  // the apply (superseded), then the stop, one per pass
  ASSERT_TRUE(rep.ok());
  ASSERT_TRUE(w.market->deliver_outbox().ok());
  EXPECT_EQ(count_lines(path_, name_of(r, r.version)), 0);
  EXPECT_EQ(count_lines(path_ + ".calls", "apply " + name_of(r, r.version)), 0);
  auto rs = rows(r.id);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_NE(rs[0].last_error.find("superseded"), std::string::npos) << rs[0].last_error;
  EXPECT_TRUE(rs[1].delivered_at_ms.has_value());
}

TEST_P(MarketOutbox, FailingApplyBacksOffThenFailsTheRentalAndFreesItsSlice) {
  Rental r = rent();
  {
    std::ofstream fail(path_ + ".fail");
    fail << name_of(r, r.version) << "\n";
  }
  EXPECT_EQ(available(), 1);
  int64_t wait_ms = kOutboxFirstBackoffMs;
  for (int attempt = 1; attempt < kMaxApplyAttempts; ++attempt) {
    auto rep = w.market->deliver_outbox();
    ASSERT_TRUE(rep.ok()) << rep.error().message;
    EXPECT_EQ(rep->retried, 1) << "attempt " << attempt;
    // Not due again before its backoff.
    auto early = w.market->deliver_outbox();
    ASSERT_TRUE(early.ok());
    EXPECT_EQ(early->retried, 0);
    EXPECT_EQ(get(r.id).state, RentalState::kReserved);
    w.clock->advance_ms(wait_ms);
    wait_ms *= 2;
  }
  auto last = w.market->deliver_outbox();
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->failed, 1);
  Rental failed = get(r.id);
  EXPECT_EQ(failed.state, RentalState::kFailed);
  EXPECT_NE(failed.state_reason.find("refuses"), std::string::npos) << failed.state_reason;
  EXPECT_NE(failed.state_reason.find(std::to_string(kMaxApplyAttempts) + " times"), std::string::npos);
  EXPECT_EQ(available(), 2);  // its slice is free again
  auto rs = rows(r.id);
  ASSERT_GE(rs.size(), 1u);
  EXPECT_TRUE(rs[0].gave_up_at_ms.has_value());
  EXPECT_EQ(rs[0].attempts, kMaxApplyAttempts);
}

TEST_P(MarketOutbox, NodeOptionsAreCheckedAndStored) {
  NodeSpec bad = slurm_node_spec("m2", Scheduler::kManual);
  bad.slurm_partition = "gpu";
  auto r = w.market->add_node(w.provider, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().field, "slurm_partition");
  auto nodes = w.market->list_nodes(w.provider);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].scheduler, Scheduler::kSlurm);
  EXPECT_EQ((*nodes)[0].slurm_partition, "gpuplan");
  EXPECT_EQ((*nodes)[0].slurm_node, "gpuplan-slurm");
}

TEST_P(MarketOutbox, WithoutATargetOfItsKindTheRowWaits) {
  // A Kubernetes node, and this market has no Kubernetes target: the row waits and says why.
  NodeSpec spec = slurm_node_spec("k1", Scheduler::kManual);
  spec.scheduler = Scheduler::kKubernetes;
  spec.ssh.clear();
  w.clock->advance_ms(1000);  // a later node: placed on after the Slurm node's slices
  ASSERT_TRUE(w.market->add_node(w.provider, spec).ok());
  Rental a = rent();
  Rental b = rent();
  Rental c = rent();  // the third slice: on the Kubernetes node
  EXPECT_EQ(c.state, RentalState::kReserved);
  auto rep = w.market->deliver_outbox();
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  EXPECT_EQ(rep->delivered, 2);
  EXPECT_EQ(rep->waiting, 1);
  auto rs = rows(c.id);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].target_kind, "kubernetes");
  EXPECT_NE(rs[0].last_error.find("no hand-off target of kind 'kubernetes'"), std::string::npos) << rs[0].last_error;
  EXPECT_EQ(get(c.id).state, RentalState::kReserved);
  (void)a;
  (void)b;
}

INSTANTIATE_TEST_SUITE_P(Stores, MarketOutbox, ::testing::ValuesIn(kStoreKinds), store_name);

// --- SIGKILL at each step --------------------------------------------------------------------------------
// The child opens the same store with the same file target, rents on the Slurm node and delivers, with
// GPUPLAN_FAILPOINT armed at one step; the parent then delivers after the lease ran out and checks that
// the target created the name exactly once and the rental runs.
class MarketOutboxCrash : public ::testing::TestWithParam<const char*> {};

struct CrashWorld {
  std::string kind;
  std::string where;  // SQLite data dir or PostgreSQL conninfo
  std::unique_ptr<Db> open() const {
    auto db = kind == "sqlite" ? open_store(where) : open_postgresql(where);
    return db ? std::move(*db) : nullptr;
  }
};

void crash_at(const CrashWorld& cw, const std::string& failpoint_name) {
  SCOPED_TRACE(cw.kind + " at " + failpoint_name);
  const std::string path = fresh_file("crash");
  testing::World w;
  {
    MarketOptions o;
    o.targets.push_back(std::shared_ptr<handoff::HandoffTarget>(handoff::make_file_target(path)));
    ASSERT_TRUE(w.init(cw.open(), o));
  }
  ASSERT_TRUE(w.market->add_node(w.provider, slurm_node_spec("s1")).ok());
  const Offer offer = w.add_offer(kMigTarget, 1, 630'000);
  const int64_t t0 = w.clock->now_ms();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("GPUPLAN_FAILPOINT", failpoint_name.c_str(), 1);
    MarketOptions o;
    o.targets.push_back(std::shared_ptr<handoff::HandoffTarget>(handoff::make_file_target(path)));
    auto m = Market::open(cw.open(), std::make_shared<ManualClock>(t0), o);
    if (!m) ::_exit(3);
    auto r = (*m)->rent(w.renter_a, RentRequest{offer.id, 1, {}, "crash-key", ""});
    if (!r) ::_exit(4);
    (void)(*m)->deliver_outbox();
    ::_exit(0);  // the failpoint did not fire
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  // After the restart: the rental committed (same idempotency key: the same one), its row is due once
  // the dead worker's lease ran out.
  auto r = w.market->rent(w.renter_a, RentRequest{offer.id, 1, {}, "crash-key", ""});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->replayed);
  w.clock->advance_ms(MarketOptions{}.outbox_lease_ms + 1);
  for (int pass = 0; pass < 2; ++pass) ASSERT_TRUE(w.market->deliver_outbox().ok());
  const std::string name = "gpuplan-r" + r->id + "-g" + std::to_string(r->version);
  EXPECT_EQ(count_lines(path, name), 1) << "created exactly once";
  auto now = w.market->get_rental(w.renter_a, r->id);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->state, RentalState::kRunning);
  auto rows = w.market->outbox_rows(w.platform, r->id);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_TRUE((*rows)[0].delivered_at_ms.has_value());
  const int calls = count_lines(path + ".calls", "apply " + name);
  std::printf("[ outbox crash ] %s %s: %d apply call(s), created once\n", cw.kind.c_str(), failpoint_name.c_str(),
              calls);
}

TEST_P(MarketOutboxCrash, KilledAtEachStepDeliversExactlyOnce) {
  const std::string kind = GetParam();
  for (const char* fp :
       {"after_commit", "outbox_before_deliver", "outbox_after_deliver", "outbox_before_mark_commit"}) {
    CrashWorld cw{kind, ""};
    std::string skip;
    if (kind == "sqlite") {
      static int counter = 0;
      const auto dir = std::filesystem::path(std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp") /
                       ("gpuplan-outbox-crash-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
      std::filesystem::remove_all(dir);
      cw.where = dir.string();
    } else {
      auto db = testing::make_store(kind, &skip);  // resets the schema
      if (!db) GTEST_SKIP() << skip;
      cw.where = std::getenv("GPUPLAN_TEST_POSTGRES");
    }
    crash_at(cw, fp);
    if (kind == "sqlite") std::filesystem::remove_all(cw.where);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, MarketOutboxCrash, ::testing::ValuesIn(kStoreKinds), store_name);

}  // namespace
}  // namespace gpuplan::market
