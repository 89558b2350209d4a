// The Slurm hand-off target: a rental of a GPU or MIG slice becomes a holding job on the chosen node
// with the typed GRES gpuplan's Slurm export writes (src/mig/export.cc: the MIG profile name, or the
// catalog id for a whole GPU). Idempotent on the job name "gpuplan-r<id>-g<gen>": apply looks the name
// up first, stop of an unknown name is success. Every command goes through SlurmOptions::run (argv, no
// shell), so tests can fake Slurm; with-slurm.sh runs a real one. docs/market.md, "Hand-off to Slurm".
#include <cctype>
#include <sstream>

#include "gpuplan/handoff.h"

namespace gpuplan::handoff {

std::string handoff_name(const HandoffRental& r) {
  return "gpuplan-r" + r.rental_id + "-g" + std::to_string(r.generation);
}

std::string_view to_string(ExternalState s) {
  switch (s) {
    case ExternalState::kPending:
      return "pending";
    case ExternalState::kRunning:
      return "running";
    case ExternalState::kGone:
      return "gone";
  }
  return "gone";
}

namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])) != 0) ++i;
  return s.substr(i);
}

// Slurm account names: lowercase letters, digits, '_' and '-' (sacctmgr lowercases them anyway).
std::string account_name(const HandoffRental& r) {
  if (!r.slurm_account.empty()) return r.slurm_account;
  std::string out = "gpuplan-";
  for (char c : r.tenant_name.empty() ? r.tenant_id : r.tenant_name) {
    const auto u = static_cast<unsigned char>(c);
    out += (std::isalnum(u) != 0 || c == '-' || c == '_') ? static_cast<char>(std::tolower(u)) : '_';
  }
  return out;
}

ExternalState parse_state(const std::string& t) {
  if (t == "RUNNING") return ExternalState::kRunning;
  if (t == "PENDING" || t == "CONFIGURING" || t == "REQUEUED" || t == "RESIZING" || t == "SUSPENDED") {
    return ExternalState::kPending;
  }
  return ExternalState::kGone;  // COMPLETING, COMPLETED, CANCELLED, FAILED, TIMEOUT, NODE_FAIL, ...
}

class SlurmTarget final : public HandoffTarget {
 public:
  explicit SlurmTarget(SlurmOptions o) : o_(std::move(o)) {
    if (!o_.run)
      o_.run = [](const std::vector<std::string>& argv, const std::string& in) { return run_process(argv, in); };
  }
  std::string_view kind() const override { return "slurm"; }

  Result<HandoffResult> apply(const HandoffRental& r) override {
    GPUPLAN_TRY(found, lookup(r));
    if (found.state != ExternalState::kGone) {
      HandoffResult again = found;
      again.already_existed = true;
      return again;
    }
    if (o_.accounting) GPUPLAN_CHECK(ensure_account(r));
    GPUPLAN_TRY(res, o_.run(slurm_sbatch_argv(r, o_), {}));
    if (res.exit_code != 0) {
      return Error{ErrorCode::kUnavailable,
                   "sbatch failed (exit " + std::to_string(res.exit_code) + "): " + trim(res.err), ""};
    }
    // --parsable prints "<job id>" or "<job id>;<cluster>".
    std::string id = trim(res.out);
    if (const size_t semi = id.find(';'); semi != std::string::npos) id.resize(semi);
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
      return Error{ErrorCode::kInternal, "sbatch answered '" + trim(res.out) + "', not a job id", ""};
    }
    HandoffResult out;
    out.external_id = id;
    out.state = ExternalState::kPending;
    return out;
  }

  Result<HandoffResult> stop(const HandoffRental& r, std::string_view external_id) override {
    std::string id(external_id);
    if (id.empty()) {
      GPUPLAN_TRY(found, lookup(r));
      if (found.state == ExternalState::kGone) return HandoffResult{"", ExternalState::kGone, true, "no such job"};
      id = found.external_id;
    }
    GPUPLAN_TRY(res, o_.run({bin("scancel"), id}, {}));
    // scancel of a finished or unknown job prints "Invalid job id" (exit 0 or 1 by version): it is gone.
    if (res.exit_code != 0 && res.err.find("Invalid job id") == std::string::npos) {
      return Error{ErrorCode::kUnavailable,
                   "scancel " + id + " failed (exit " + std::to_string(res.exit_code) + "): " + trim(res.err), ""};
    }
    return HandoffResult{id, ExternalState::kGone, res.err.find("Invalid job id") != std::string::npos, ""};
  }

  Result<HandoffResult> status(const HandoffRental& r, std::string_view external_id) override {
    if (external_id.empty()) return lookup(r);
    GPUPLAN_TRY(res, o_.run({bin("squeue"), "-h", "-j", std::string(external_id), "-o", "%T"}, {}));
    HandoffResult out;
    out.external_id = std::string(external_id);
    // A job squeue no longer knows: "slurm_load_jobs error: Invalid job id specified" (exit 1).
    if (res.exit_code != 0) {
      if (res.err.find("Invalid job id") != std::string::npos) {
        out.state = ExternalState::kGone;
        return out;
      }
      return Error{ErrorCode::kUnavailable,
                   "squeue failed (exit " + std::to_string(res.exit_code) + "): " + trim(res.err), ""};
    }
    const std::string t = trim(res.out);
    out.state = t.empty() ? ExternalState::kGone : parse_state(t);
    out.detail = "JobState=" + t;
    return out;
  }

  HandoffAccess access(const HandoffRental&, std::string_view external_id) const override {
    HandoffAccess a;
    a.kind = "slurm";
    a.external_id = std::string(external_id);
    if (!external_id.empty()) a.command = "srun --jobid=" + std::string(external_id) + " --overlap --pty bash";
    return a;
  }

 private:
  std::string bin(const char* tool) const { return o_.bin_dir.empty() ? tool : o_.bin_dir + "/" + tool; }

  // The job of this name that is still pending or running, if any.
  Result<HandoffResult> lookup(const HandoffRental& r) {
    GPUPLAN_TRY(res, o_.run({bin("squeue"), "-h", "-n", handoff_name(r), "-o", "%i %T"}, {}));
    if (res.exit_code != 0) {
      return Error{ErrorCode::kUnavailable,
                   "squeue failed (exit " + std::to_string(res.exit_code) + "): " + trim(res.err), ""};
    }
    HandoffResult out;
    out.state = ExternalState::kGone;
    std::istringstream lines(res.out);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream words(line);
      std::string id, state;
      if (!(words >> id >> state)) continue;
      const ExternalState s = parse_state(state);
      if (s == ExternalState::kGone) continue;
      out.external_id = id;
      out.state = s;
      out.detail = "JobState=" + state;
      break;
    }
    return out;
  }

  Status ensure_account(const HandoffRental& r) {
    const std::string acct = account_name(r);
    GPUPLAN_TRY(res, o_.run({bin("sacctmgr"), "-i", "add", "account", acct, "Description=gpuplan tenant"}, {}));
    // An account that exists answers " Nothing new added." with exit 0 or 1 depending on the version.
    if (res.exit_code != 0 && res.out.find("Nothing new") == std::string::npos &&
        res.err.find("Nothing new") == std::string::npos) {
      return Error{ErrorCode::kUnavailable, "sacctmgr add account " + acct + " failed: " + trim(res.err + res.out), ""};
    }
    return Status::Ok();
  }

  SlurmOptions o_;
};

}  // namespace

std::vector<std::string> slurm_sbatch_argv(const HandoffRental& r, const SlurmOptions& options) {
  std::vector<std::string> argv = {options.bin_dir.empty() ? "sbatch" : options.bin_dir + "/sbatch", "--parsable",
                                   "--job-name", handoff_name(r)};
  if (!r.slurm_partition.empty()) argv.insert(argv.end(), {"--partition", r.slurm_partition});
  argv.insert(argv.end(), {"--nodelist", r.slurm_node.empty() ? r.node_name : r.slurm_node});
  argv.push_back("--gres=gpu:" + r.slurm_gres_type + ":" + std::to_string(r.gpus < 1 ? 1 : r.gpus));
  if (options.accounting) argv.insert(argv.end(), {"--account", account_name(r)});
  // The holding job's output goes nowhere: the renter runs its own steps with srun.
  argv.insert(argv.end(), {"--output", "/dev/null", "--wrap", options.wrap});
  return argv;
}

std::unique_ptr<HandoffTarget> make_slurm_target(SlurmOptions options) {
  return std::make_unique<SlurmTarget>(std::move(options));
}

}  // namespace gpuplan::handoff
