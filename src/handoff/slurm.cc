// The Slurm hand-off target: a rental of a GPU or MIG slice becomes a holding job on the chosen node
// with the typed GRES gpuplan's Slurm export writes (src/mig/export.cc: the MIG profile name, or the
// catalog id for a whole GPU). Idempotent on the job name "gpuplan-r<id>-g<gen>": apply looks the name
// up first, stop of an unknown name is success. Every command goes through SlurmOptions::run (argv, no
// shell), so tests can fake Slurm; with-slurm.sh runs a real one. docs/market.md, "Hand-off to Slurm".
#include <cctype>
#include <mutex>
#include <sstream>

#include "core/text.h"
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

ExternalState parse_state(const std::string& t) {
  if (t == "RUNNING") return ExternalState::kRunning;
  if (t == "PENDING" || t == "CONFIGURING" || t == "REQUEUED" || t == "RESIZING" || t == "SUSPENDED") {
    return ExternalState::kPending;
  }
  return ExternalState::kGone;  // COMPLETING, COMPLETED, CANCELLED, FAILED, TIMEOUT, NODE_FAIL, ...
}

constexpr std::string_view kNoAccounting = "accounting_storage/none";
constexpr std::string_view kContainerImageFlag = "--container-image";  // pyxis' srun/sbatch option

class SlurmTarget final : public HandoffTarget {
 public:
  explicit SlurmTarget(SlurmOptions o) : o_(std::move(o)) { o_.run = runner_or_default(std::move(o_.run)); }
  std::string_view kind() const override { return "slurm"; }

  Result<HandoffResult> apply(const HandoffRental& r) override {
    GPUPLAN_TRY(found, lookup(r));
    if (found.state != ExternalState::kGone) {
      HandoffResult again = found;
      again.already_existed = true;
      return again;
    }
    GPUPLAN_TRY(accounting,
                detect(o_.accounting, accounting_, {bin("scontrol"), "show", "config"}, accounting_enabled));
    if (accounting) GPUPLAN_CHECK(ensure_account(r));
    GPUPLAN_TRY(plugin, container_plugin());
    GPUPLAN_TRY(res, o_.run(slurm_sbatch_argv(r, o_, plugin), {}));
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

  HandoffAccess access(const HandoffRental& r, std::string_view external_id) const override {
    HandoffAccess a;
    a.kind = "slurm";
    a.external_id = std::string(external_id);
    auto plugin = container_plugin();
    const bool in_container = plugin.ok() && *plugin && !r.image.empty();
    if (!external_id.empty()) {
      // Steps join the holding job's named container (pyxis keeps a named container for the job's life).
      a.command = "srun --jobid=" + std::string(external_id) + " --overlap" +
                  (in_container ? " --container-name=" + handoff_name(r) : "") + " --pty bash";
    }
    if (r.image.empty()) {
      a.note = "no template image: the job runs on the node as it is";
    } else if (!plugin.ok()) {
      a.note = "could not ask Slurm for its container plugin: " + plugin.error().message;
    } else if (*plugin) {
      a.note = "the job runs " + r.image + " (pyxis --container-image); srun steps join it with --container-name";
    } else {
      a.note = "no container plugin: the image is not run (" + r.image + ")";
    }
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

  // Asks the cluster once (argv's answer read by `parse`); kYes/kNo given in the options are not asked.
  Result<bool> detect(Detect given, Detect& cached, const std::vector<std::string>& argv,
                      bool (*parse)(std::string_view)) const {
    if (given != Detect::kAsk) return given == Detect::kYes;
    std::lock_guard lock(mu_);
    if (cached != Detect::kAsk) return cached == Detect::kYes;
    GPUPLAN_TRY(res, o_.run(argv, {}));
    if (res.exit_code != 0) {
      return Error{ErrorCode::kUnavailable,
                   argv[0] + " failed (exit " + std::to_string(res.exit_code) + "): " + trim(res.err), ""};
    }
    cached = parse(res.out + res.err) ? Detect::kYes : Detect::kNo;
    return cached == Detect::kYes;
  }
  Result<bool> container_plugin() const {
    return detect(o_.container_plugin, plugin_, {bin("srun"), "--help"}, has_container_plugin);
  }

  Status ensure_account(const HandoffRental& r) {
    const std::string acct = slurm_account_name(r);
    GPUPLAN_TRY(res, o_.run({bin("sacctmgr"), "-i", "add", "account", acct, "Description=gpuplan tenant"}, {}));
    // An account that exists answers " Nothing new added." with exit 0 or 1 depending on the version.
    if (res.exit_code != 0 && res.out.find("Nothing new") == std::string::npos &&
        res.err.find("Nothing new") == std::string::npos) {
      return Error{ErrorCode::kUnavailable, "sacctmgr add account " + acct + " failed: " + trim(res.err + res.out), ""};
    }
    return Status::Ok();
  }

  SlurmOptions o_;
  mutable std::mutex mu_;  // guards the two answers below (the outbox worker and access calls run at once)
  mutable Detect accounting_ = Detect::kAsk;
  mutable Detect plugin_ = Detect::kAsk;
};

}  // namespace

std::string slurm_account_name(const HandoffRental& r) {
  if (!r.slurm_account.empty()) return r.slurm_account;
  std::string out = "gpuplan-";
  for (char c : r.tenant_name.empty() ? r.tenant_id : r.tenant_name) {
    if (out.size() >= kMaxSlurmAccountBytes) break;
    const auto u = static_cast<unsigned char>(c);
    out += (std::isalnum(u) != 0 || c == '-' || c == '_') ? static_cast<char>(std::tolower(u)) : '_';
  }
  return out;
}

bool accounting_enabled(std::string_view config) {
  std::istringstream lines{std::string(config)};
  std::string line;
  while (std::getline(lines, line)) {
    line = trim(line);
    constexpr std::string_view kKey = "AccountingStorageType";
    if (line.rfind(kKey, 0) != 0) continue;
    std::string rest = trim(line.substr(kKey.size()));
    if (rest.empty() || rest[0] != '=') continue;  // AccountingStorageTypeX, or no value
    rest = trim(rest.substr(1));
    return !rest.empty() && rest != kNoAccounting && rest != "(null)";
  }
  return false;  // not said: Slurm's default is none
}

bool has_container_plugin(std::string_view help) {
  for (size_t at = help.find(kContainerImageFlag); at != std::string_view::npos;
       at = help.find(kContainerImageFlag, at + 1)) {
    const size_t end = at + kContainerImageFlag.size();
    const bool starts = at == 0 || std::isspace(static_cast<unsigned char>(help[at - 1])) != 0;
    const bool ends = end == help.size() || help[end] == '=' || help[end] == '[' ||
                      std::isspace(static_cast<unsigned char>(help[end])) != 0;
    if (starts && ends) return true;  // an option of its own, not "--container-image-save"
  }
  return false;
}

std::vector<std::string> slurm_sbatch_argv(const HandoffRental& r, const SlurmOptions& options, bool container_plugin) {
  std::vector<std::string> argv = {options.bin_dir.empty() ? "sbatch" : options.bin_dir + "/sbatch", "--parsable",
                                   "--job-name", handoff_name(r)};
  if (!r.slurm_partition.empty()) argv.insert(argv.end(), {"--partition", r.slurm_partition});
  argv.insert(argv.end(), {"--nodelist", r.slurm_node.empty() ? r.node_name : r.slurm_node});
  argv.push_back("--gres=gpu:" + r.slurm_gres_type + ":" + std::to_string(r.gpus < 1 ? 1 : r.gpus));
  argv.insert(argv.end(), {"--account", slurm_account_name(r)});  // recorded even without slurmdbd
  if (container_plugin && !r.image.empty()) {
    argv.push_back(std::string(kContainerImageFlag) + "=" + r.image);
    argv.push_back("--container-name=" + handoff_name(r));  // srun steps join it (access)
  }
  // The holding job's output goes nowhere: the renter runs its own steps with srun.
  argv.insert(argv.end(), {"--output", "/dev/null", "--wrap", options.wrap});
  return argv;
}

std::unique_ptr<HandoffTarget> make_slurm_target(SlurmOptions options) {
  return std::make_unique<SlurmTarget>(std::move(options));
}

}  // namespace gpuplan::handoff
