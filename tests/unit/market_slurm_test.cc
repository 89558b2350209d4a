// The Slurm hand-off (issue #15, part 2; docs/market.md, "Hand-off to Slurm"):
// - the target's commands, through a fake runner: sbatch's argv (job name from rental id + generation,
//   partition, nodelist, typed GRES), apply looks the name up first (an existing job is success and
//   sbatch is not run again), stop of an unknown name is success, squeue states map to the rental's;
// - against a REAL Slurm (scripts/with-slurm.sh: slurmctld + slurmd + munged on localhost; skipped when
//   GPUPLAN_TEST_SLURM is unset): reserve -> the outbox worker submits -> the job runs with its GRES
//   (scontrol show job) -> `srun --jobid=<id> --overlap true` as the renter succeeds -> stop -> the job
//   is gone and the slice free in the live offers. On SQLite and PostgreSQL.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "gpuplan/handoff.h"
#include "gpuplan/market.h"
#include "market_fixture.h"

namespace gpuplan::market {
namespace {

using handoff::HandoffRental;
using handoff::ProcessResult;

HandoffRental sample() {
  HandoffRental r;
  r.rental_id = "r_abc";
  r.generation = 3;
  r.tenant_id = "t_1";
  r.tenant_name = "Acme Corp";
  r.node_name = "n1";
  r.slurm_node = "gpu-node-7";
  r.slurm_partition = "gpu";
  r.gpu_type = "a100-80gb-sxm4";
  r.mig_profile = "3g.40gb";
  r.slurm_gres_type = "3g.40gb";
  return r;
}

TEST(SlurmTarget, SbatchArgvNamesTheJobByRentalAndGeneration) {
  handoff::SlurmOptions o;
  auto argv = handoff::slurm_sbatch_argv(sample(), o);
  // The tenant's account is always passed: Slurm records it on the job even without slurmdbd.
  const std::vector<std::string> want = {
      "sbatch",     "--parsable", "--job-name",           "gpuplan-rr_abc-g3", "--partition",       "gpu",
      "--nodelist", "gpu-node-7", "--gres=gpu:3g.40gb:1", "--account",         "gpuplan-acme_corp", "--output",
      "/dev/null",  "--wrap",     "sleep infinity"};
  EXPECT_EQ(argv, want);
  // With pyxis and an image: the job runs it in a named container the renter's steps join.
  HandoffRental with_image = sample();
  with_image.image = "nvcr.io/nvidia/pytorch:24.05-py3";
  argv = handoff::slurm_sbatch_argv(with_image, o, true);
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--container-image=nvcr.io/nvidia/pytorch:24.05-py3"), argv.end());
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--container-name=gpuplan-rr_abc-g3"), argv.end());
  EXPECT_EQ(handoff::slurm_sbatch_argv(sample(), o, true), want) << "no image: nothing to run";
  HandoffRental odd = sample();
  odd.tenant_name = std::string(200, 'A') + " $(x)";
  EXPECT_EQ(handoff::slurm_account_name(odd), "gpuplan-" + std::string(handoff::kMaxSlurmAccountBytes - 8, 'a'));
}

TEST(SlurmTarget, AccountingAndContainerPluginAreAskedOnceAndFollowed) {
  for (const bool on : {false, true}) {
    SCOPED_TRACE(on ? "slurmdbd and pyxis" : "no accounting, no plugin");
    std::vector<std::vector<std::string>> calls;
    handoff::SlurmOptions o;
    o.run = [&](const std::vector<std::string>& argv, const std::string&) -> Result<ProcessResult> {
      calls.push_back(argv);
      if (argv[0] == "squeue") return ProcessResult{0, "", "", false};
      if (argv[0] == "scontrol") {
        return ProcessResult{0,
                             std::string("AccountingStorageHost   = localhost\nAccountingStorageType   = ") +
                                 (on ? "accounting_storage/slurmdbd" : "accounting_storage/none") + "\n",
                             "", false};
      }
      if (argv[0] == "srun") {
        return ProcessResult{0,
                             on ? "      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH\n"
                                  "                              [pyxis] the image to use for the container\n"
                                : "      --cpu-bind=...\n      --container=id\n",
                             "", false};
      }
      if (argv[0] == "sacctmgr") return ProcessResult{0, " Adding Account(s)\n", "", false};
      if (argv[0] == "sbatch") return ProcessResult{0, "7\n", "", false};
      return ProcessResult{1, "", "unexpected", false};
    };
    auto t = handoff::make_slurm_target(o);
    HandoffRental r = sample();
    r.image = "nvcr.io/nvidia/pytorch:24.05-py3";
    for (int i = 0; i < 2; ++i) {
      HandoffRental ri = r;
      ri.generation = 3 + i;
      ASSERT_TRUE(t->apply(ri).ok());
    }
    auto count = [&](const std::string& tool) {
      return std::count_if(calls.begin(), calls.end(), [&](const auto& a) { return a[0] == tool; });
    };
    EXPECT_EQ(count("scontrol"), 1) << "asked once per target";
    EXPECT_EQ(count("srun"), 1);
    EXPECT_EQ(count("sacctmgr"), on ? 2 : 0);
    const auto& sbatch = *std::find_if(calls.begin(), calls.end(), [](const auto& a) { return a[0] == "sbatch"; });
    EXPECT_EQ(std::find(sbatch.begin(), sbatch.end(), "--container-image=" + r.image) != sbatch.end(), on);
    EXPECT_NE(std::find(sbatch.begin(), sbatch.end(), "gpuplan-acme_corp"), sbatch.end());
    const handoff::HandoffAccess a = t->access(r, "7");
    if (on) {
      EXPECT_EQ(a.command, "srun --jobid=7 --overlap --container-name=gpuplan-rr_abc-g3 --pty bash");
      EXPECT_NE(a.note.find("pyxis"), std::string::npos) << a.note;
    } else {
      EXPECT_EQ(a.command, "srun --jobid=7 --overlap --pty bash");
      EXPECT_NE(a.note.find("no container plugin: the image is not run"), std::string::npos) << a.note;
    }
  }
  EXPECT_FALSE(handoff::accounting_enabled("AccountingStorageType = accounting_storage/none\n"));
  EXPECT_FALSE(handoff::accounting_enabled("AccountingStorageTypeX = accounting_storage/slurmdbd\n"));
  EXPECT_FALSE(handoff::accounting_enabled(""));
  EXPECT_TRUE(handoff::accounting_enabled("  AccountingStorageType=accounting_storage/slurmdbd"));
  EXPECT_FALSE(handoff::has_container_plugin("--container-image-save=PATH"));
  EXPECT_TRUE(handoff::has_container_plugin("--container-image"));
}

TEST(SlurmTarget, ApplyIsIdempotentOnTheJobName) {
  std::vector<std::vector<std::string>> calls;
  std::string queue;  // what squeue -n answers
  handoff::SlurmOptions o;
  o.run = [&](const std::vector<std::string>& argv, const std::string&) -> Result<ProcessResult> {
    calls.push_back(argv);
    if (argv[0] == "squeue") return ProcessResult{0, queue, "", false};
    if (argv[0] == "sbatch") return ProcessResult{0, "4242\n", "", false};
    if (argv[0] == "scontrol" || argv[0] == "srun") return ProcessResult{0, "", "", false};  // no dbd, no pyxis
    if (argv[0] == "scancel") return ProcessResult{0, "", "", false};
    return ProcessResult{1, "", "unexpected", false};
  };
  auto t = handoff::make_slurm_target(o);
  auto first = t->apply(sample());
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->external_id, "4242");
  EXPECT_FALSE(first->already_existed);
  ASSERT_EQ(calls.size(), 4u);  // squeue -n, scontrol show config, srun --help, then sbatch
  EXPECT_EQ(calls[0], (std::vector<std::string>{"squeue", "-h", "-n", "gpuplan-rr_abc-g3", "-o", "%i %T"}));
  // A retried delivery: the job is there, so sbatch does not run again.
  queue = "4242 RUNNING\n";
  auto again = t->apply(sample());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already_existed);
  EXPECT_EQ(again->external_id, "4242");
  EXPECT_EQ(again->state, handoff::ExternalState::kRunning);
  EXPECT_EQ(calls.size(), 5u);
  // Stop by name of a job that is gone: success, nothing cancelled.
  queue = "";
  auto stop = t->stop(sample(), "");
  ASSERT_TRUE(stop.ok());
  EXPECT_TRUE(stop->already_existed);
  EXPECT_EQ(calls.back()[0], "squeue");
  auto stop_id = t->stop(sample(), "4242");
  ASSERT_TRUE(stop_id.ok());
  EXPECT_EQ(calls.back(), (std::vector<std::string>{"scancel", "4242"}));
  EXPECT_EQ(t->access(sample(), "4242").command, "srun --jobid=4242 --overlap --pty bash");
}

TEST(SlurmTarget, FailuresAreErrorsNotCrashes) {
  handoff::SlurmOptions o;
  o.run = [](const std::vector<std::string>& argv, const std::string&) -> Result<ProcessResult> {
    if (argv[0] == "squeue" || argv[0] == "scontrol" || argv[0] == "srun") return ProcessResult{0, "", "", false};
    return ProcessResult{1, "", "sbatch: error: Invalid generic resource (gres) specification", false};
  };
  auto t = handoff::make_slurm_target(o);
  auto r = t->apply(sample());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("Invalid generic resource"), std::string::npos);
  // A missing tool, through the real runner.
  handoff::SlurmOptions missing;
  missing.bin_dir = "/nonexistent/bin";
  auto m = handoff::make_slurm_target(missing)->apply(sample());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("cannot run"), std::string::npos) << m.error().message;
}

TEST(RunProcess, BoundsOutputAndTime) {
  auto ok = handoff::run_process({"sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->exit_code, 3);
  EXPECT_EQ(ok->out, "out\n");
  EXPECT_EQ(ok->err, "err\n");
  auto big = handoff::run_process({"head", "-c", "100000", "/dev/zero"}, {}, handoff::kProcessTimeoutMs, 1000);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->out.size(), 1000u);
  EXPECT_TRUE(big->truncated);
  auto slow = handoff::run_process({"sleep", "10"}, {}, 200);
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.error().code, ErrorCode::kUnavailable);
  // No shell: the argument is one word, not a command line.
  auto literal = handoff::run_process({"echo", "$(id); rm -rf /"});
  ASSERT_TRUE(literal.ok());
  EXPECT_EQ(literal->out, "$(id); rm -rf /\n");
}

TEST(RunProcess, WritesStdinAndSurvivesAChildThatDoesNotReadIt) {
  // kubectl apply -f - reads the manifest list from stdin.
  const std::string text(300000, 'x');  // larger than a pipe's buffer
  auto echoed = handoff::run_process({"cat"}, text);
  ASSERT_TRUE(echoed.ok()) << echoed.error().message;
  EXPECT_EQ(echoed->out, text);
  // A child that exits at once: the write gets EPIPE (no SIGPIPE kills the test), the exit code stands.
  auto ignored = handoff::run_process({"sh", "-c", "exit 4"}, text);
  ASSERT_TRUE(ignored.ok()) << ignored.error().message;
  EXPECT_EQ(ignored->exit_code, 4);
  // A child that never reads and never exits: the deadline still holds.
  auto stuck = handoff::run_process({"sleep", "10"}, text, 200);
  ASSERT_FALSE(stuck.ok());
  EXPECT_EQ(stuck.error().code, ErrorCode::kUnavailable);
}

// --- a real Slurm ---------------------------------------------------------------------------------------------
class MarketSlurm : public testing::StoreTest {
 protected:
  MarketSlurm() : StoreTest(false) {}
  void SetUp() override {
    if (std::getenv("GPUPLAN_TEST_SLURM") == nullptr) {
      GTEST_SKIP() << "GPUPLAN_TEST_SLURM is unset: run under scripts/with-slurm.sh (make test does)";
    }
    StoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    MarketOptions o;
    o.targets.push_back(std::shared_ptr<handoff::HandoffTarget>(handoff::make_slurm_target()));
    ASSERT_TRUE(w.init(std::move(db_), o));
  }
};

Result<handoff::ProcessResult> sh(const std::vector<std::string>& argv) { return handoff::run_process(argv); }

TEST_P(MarketSlurm, RentalBecomesARunningJobWithItsGresAndStopEndsIt) {
  NodeSpec spec;
  spec.name = "slurm-a100";
  spec.region = "eu-west";
  spec.vcpus = 8;
  spec.ram_gb = 64;
  spec.disk_gb = 100;
  spec.scheduler = Scheduler::kSlurm;
  spec.slurm_partition = std::getenv("GPUPLAN_TEST_SLURM_PARTITION");
  spec.slurm_node = std::getenv("GPUPLAN_TEST_SLURM_NODE");
  spec.gpus.push_back(GpuSpec{"a100-80gb-sxm4", "GPU-slurm-0", MigPolicy::kStatic, "3g.40gb@0,3g.40gb@4"});
  ASSERT_TRUE(w.market->add_node(w.provider, spec).ok());
  const Offer offer = w.add_offer("a100-80gb-sxm4/3g.40gb", 1, 630'000);
  auto rented = w.market->rent(w.renter_a, RentRequest{offer.id, 1, {}, "", ""});
  ASSERT_TRUE(rented.ok()) << rented.error().message;
  EXPECT_EQ(rented->state, RentalState::kReserved);

  // The worker submits; Slurm starts the holding job within a scheduling cycle or two. A bounded wait,
  // not a timed assert: the state is what is checked.
  RentalState state = RentalState::kReserved;
  for (int i = 0; i < 100 && state != RentalState::kRunning; ++i) {
    auto rep = w.market->deliver_outbox();
    ASSERT_TRUE(rep.ok()) << rep.error().message;
    state = w.market->get_rental(w.renter_a, rented->id)->state;
    if (state != RentalState::kRunning) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(state, RentalState::kRunning);
  auto access = w.market->rental_access(w.renter_a, rented->id);
  ASSERT_TRUE(access.ok()) << access.error().message;
  const std::string job = access->access.external_id;
  ASSERT_FALSE(job.empty());
  EXPECT_EQ(access->access.command, "srun --jobid=" + job + " --overlap --pty bash");

  auto show = sh({"scontrol", "show", "job", job});
  ASSERT_TRUE(show.ok());
  EXPECT_NE(show->out.find("JobState=RUNNING"), std::string::npos) << show->out;
  EXPECT_NE(show->out.find("gres:gpu:3g.40gb:1"), std::string::npos) << show->out;
  EXPECT_NE(show->out.find("JobName=gpuplan-r" + rented->id + "-g" + std::to_string(rented->version)),
            std::string::npos)
      << show->out;

  // The tenant's account is on the job, though this cluster keeps no accounting (no slurmdbd).
  auto account = sh({"squeue", "-h", "-j", job, "-o", "%a"});
  ASSERT_TRUE(account.ok());
  EXPECT_EQ(account->out, "gpuplan-acme\n") << account->err;

  // The renter runs inside the job.
  auto step = sh({"srun", "--jobid=" + job, "--overlap", "true"});
  ASSERT_TRUE(step.ok());
  EXPECT_EQ(step->exit_code, 0) << step->err;

  EXPECT_EQ(w.market->get_offer(offer.id)->available, 1);
  ASSERT_TRUE(w.market->stop_rental(w.renter_a, rented->id).ok());
  auto rep = w.market->deliver_outbox();
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  EXPECT_EQ(rep->delivered, 1);
  std::string left = "RUNNING";
  for (int i = 0; i < 50 && !left.empty(); ++i) {
    auto q = sh({"squeue", "-h", "-j", job, "-o", "%T"});
    ASSERT_TRUE(q.ok());
    left = q->exit_code == 0 ? q->out : "";
    if (left == "COMPLETING\n") left.clear();  // cancelled, its step being reaped
    if (!left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(left.empty()) << "job " << job << " still " << left;
  EXPECT_EQ(w.market->get_offer(offer.id)->available, 2);  // the slice is free in the live offers
}

INSTANTIATE_TEST_SUITE_P(Stores, MarketSlurm, ::testing::ValuesIn(testing::kStoreKinds), testing::store_name);

}  // namespace
}  // namespace gpuplan::market
