// Hand-off targets (issue #15): what turns a rental the market reserved into something running on the
// engine a provider's node is managed by (Slurm, Kubernetes, or nothing: "manual"). The market writes an
// outbox row in the rental's transaction; its worker (Market::deliver_outbox) calls a HandoffTarget
// outside any transaction and marks the row delivered after the target answered. A target therefore
// must be idempotent on (rental id, generation): every name it creates derives from them
// (handoff_name: "gpuplan-r<id>-g<gen>"), `apply` of an existing one and `stop` of a missing one are
// success. docs/market.md, "The outbox" and "Hand-off to Slurm".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/status.h"

namespace gpuplan::handoff {

// One live rental of a tenant (the Kubernetes target's ResourceQuota counts them: one quota a namespace).
struct TenantSlice {
  std::string rental_id;
  std::string mig_profile;  // empty: a whole GPU
};

// What a target needs to know of one rental (one placement: a GPU or a MIG slice on a node).
struct HandoffRental {
  std::string rental_id;
  int64_t generation = 0;  // the rental's version when the outbox row was written: names derive from it
  std::string tenant_id;
  std::string tenant_name;
  std::string node_id;
  std::string node_name;
  std::string gpu_uuid;
  std::string gpu_type;         // canonical catalog id ("a100-80gb-sxm4")
  std::string mig_profile;      // "3g.40gb"; empty for a whole GPU
  int placement_start = 0;      // MIG placement start (memory slice); 0 for a whole GPU
  int gpus = 1;                 // whole GPUs held on the node (MIG: 1)
  std::string image;            // the template's container image; empty without a template
  std::string slurm_gres_type;  // the GRES type gpuplan's Slurm export writes ("a100_3g.40gb", "a100")
  std::string slurm_partition;  // Slurm-managed nodes: the partition and the node's Slurm name
  std::string slurm_node;
  std::string slurm_account;  // empty: "gpuplan-<tenant name>", sanitised (slurm_account_name)
  // The tenant's live rentals (reserved, starting, running) on nodes of the same scheduler, this one
  // excluded; at most kMaxTenantSlices (the market reads no more).
  std::vector<TenantSlice> tenant_live;
};
inline constexpr size_t kMaxTenantSlices = 1024;  // k8s.h kMaxTenantRentals: rentals one quota counts

// The name every object a target creates for `r` carries: "gpuplan-r<rental id>-g<generation>".
std::string handoff_name(const HandoffRental& r);

enum class ExternalState {
  kPending,  // accepted, not running yet (a Slurm job waiting for resources)
  kRunning,
  kGone,  // finished, cancelled or never there
};
std::string_view to_string(ExternalState s);

struct HandoffResult {
  std::string external_id;  // the Slurm job id, the Pod's name; empty for manual
  ExternalState state = ExternalState::kPending;
  bool already_existed = false;  // apply: it was there (a retried delivery); stop: it was already gone
  std::string detail;            // e.g. "JobState=RUNNING TRES=...gres/gpu:a100_3g.40gb=1"
};

// How the renter reaches what it rented (GET /api/v1/rentals/{id}/access).
struct HandoffAccess {
  std::string kind;         // "slurm", "kubernetes", "manual"
  std::string external_id;  // job id, pod name
  std::string command;      // slurm: "srun --jobid=<id> --overlap --pty bash"
  std::string ssh;          // manual: "user@host:port" as the provider declared it
  std::string kube_namespace;
  std::string pod;
  std::string server;  // kubernetes: the API server URL (from the configured kubeconfig)
  // kubernetes: a ServiceAccount token scoped to the tenant's namespace, made at each access call
  // (`kubectl create token`, kAccessTokenSeconds) and never stored by gpuplan.
  std::string token;
  int64_t token_expires_in_seconds = 0;
  std::string note;  // what the renter should know ("no container plugin: the image is not run")
};
inline constexpr int64_t kAccessTokenSeconds = 3600;  // issue #15: a short-lived credential, one hour

class HandoffTarget {
 public:
  virtual ~HandoffTarget() = default;
  virtual std::string_view kind() const = 0;  // "slurm", "kubernetes", "fake"...
  // Creates what runs the rental; "already exists" (the same name) is success with already_existed.
  virtual Result<HandoffResult> apply(const HandoffRental& r) = 0;
  // Ends it; "not found" is success with already_existed. `external_id` may be empty (look up by name).
  virtual Result<HandoffResult> stop(const HandoffRental& r, std::string_view external_id) = 0;
  // Where it is now; kGone when the engine does not know it.
  virtual Result<HandoffResult> status(const HandoffRental& r, std::string_view external_id) = 0;
  // May call the engine (the Kubernetes target makes a token): the market calls it outside any transaction.
  virtual HandoffAccess access(const HandoffRental& r, std::string_view external_id) const = 0;
};

// --- running a command: the ONE way a target calls an engine's CLI, so that tests can fake it ---------
struct ProcessResult {
  int exit_code = 0;  // the exit status; 128 + signal when killed by one
  std::string out;    // stdout, at most max_output_bytes
  std::string err;    // stderr, at most max_output_bytes
  bool truncated = false;
};
inline constexpr size_t kMaxProcessOutputBytes = 1 << 20;  // 1 MiB: squeue/scontrol answers are a few KB
inline constexpr int kProcessTimeoutMs = 30'000;           // sbatch answers in well under a second
// Runs argv[0] (searched on PATH) with argv, no shell, `stdin_text` written to its standard input (an
// empty one: /dev/null); kills it (SIGKILL) after timeout_ms and answers kUnavailable then; kNotFound
// when argv[0] cannot be executed; otherwise the result, whatever its exit. Slurm's tools and kubectl
// (a manifest list on stdin) both run through it.
Result<ProcessResult> run_process(const std::vector<std::string>& argv, const std::string& stdin_text = {},
                                  int timeout_ms = kProcessTimeoutMs, size_t max_output_bytes = kMaxProcessOutputBytes);
// What a target calls instead of run_process, so that tests can fake the engine's tools.
using ProcessRunner =
    std::function<Result<ProcessResult>(const std::vector<std::string>& argv, const std::string& stdin_text)>;
// `run` itself, or run_process (default timeout and output bound) when `run` is empty: what a target
// constructed without a fake runs.
ProcessRunner runner_or_default(ProcessRunner run);

// --- Slurm (src/handoff/slurm.cc) ----------------------------------------------------------------------------
// Every job carries `--account gpuplan-<tenant>` (Slurm records it even without slurmdbd: squeue -o %a).
// The account is created (`sacctmgr -i add account`) only where the cluster keeps accounting
// (`scontrol show config`: AccountingStorageType is not accounting_storage/none), asked once per target.
// The container plugin (pyxis: `srun --help` lists --container-image) is asked once too; with it the
// holding job runs the rental's image (--container-image=IMAGE), without it the job runs bare.
enum class Detect { kAsk, kYes, kNo };  // kAsk: ask the cluster once, at the first apply
struct SlurmOptions {
  ProcessRunner run;                       // empty: run_process
  std::string bin_dir;                     // where sbatch, squeue, scancel, scontrol, sacctmgr are; empty: PATH
  Detect accounting = Detect::kAsk;        // kYes: create the tenant's account with sacctmgr before its first job
  Detect container_plugin = Detect::kAsk;  // kYes: --container-image on jobs whose rental has an image
  std::string wrap = "sleep infinity";     // the holding job's command
};
// "gpuplan-" and the tenant's name (its id when it has none): lower-case letters, digits, '-' and '_'
// kept, anything else '_', cut to kMaxSlurmAccountBytes; r.slurm_account when set.
std::string slurm_account_name(const HandoffRental& r);
inline constexpr size_t kMaxSlurmAccountBytes = 64;  // sacctmgr keeps longer, but squeue's %a columns do not
// Parsers of Slurm's answers (outside input: fuzz/fuzz_slurm_output.cc).
bool accounting_enabled(std::string_view scontrol_show_config);  // AccountingStorageType != ...none
bool has_container_plugin(std::string_view srun_help);           // lists --container-image
std::unique_ptr<HandoffTarget> make_slurm_target(SlurmOptions options = {});
// The sbatch argv for `r` (the test reads it; apply runs it). `container_plugin`: add --container-image.
std::vector<std::string> slurm_sbatch_argv(const HandoffRental& r, const SlurmOptions& options,
                                           bool container_plugin = false);

// --- a fake target for tests: records in `path` one line per created name, and every call in path.calls --
std::unique_ptr<HandoffTarget> make_file_target(std::string path, std::string kind = "slurm");

}  // namespace gpuplan::handoff
