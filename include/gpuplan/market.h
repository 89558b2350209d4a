// The market: providers' inventory (nodes and their GPUs), live offers, rentals of whole GPUs and MIG
// slices, tenants, users and API tokens, and billing. A thread-safe component that the server holds; it
// keeps all of its state in a transactional store (src/market/db.h: SQLite or PostgreSQL) and reads
// time only through an injectable Clock. The planner's commands stay pure: nothing here is called by them.
//
// Contracts every operation keeps (docs/market.md lists the test that proves each):
// - Errors are values. kUnauthenticated: no, unknown, expired or revoked token (authenticate only).
//   kForbidden: the caller's role, token scope or tenant kind may not do this. kNotFound: the object does
//   not exist OR belongs to another tenant (never kForbidden: its existence is not revealed). kConflict:
//   nothing free to place (the message has one reason per candidate), a name or UUID taken, a state edge
//   not allowed, a node with live rentals. kPaymentRequired: the tenant's credit limit would be crossed.
//   kPreconditionFailed: `if_match` names a version that is no longer current. kUnavailable: the store
//   stayed busy past its retries (retry later). kUsage / kLimit: a bad or over-bound field, named in
//   Error::field with the JSON key a client sends ("gpus[2].target", "price_per_hour").
// - No double booking, by construction: every (GPU, memory slice) a rental holds is a row of
//   slice_claims whose primary key is (gpu_id, mem_slice); a whole GPU claims all of its slices; claims
//   and the rental change in one transaction.
// - Rentals change state only through one transition function that checks the edge, bumps `version`,
//   appends a RentalEvent, opens or closes the usage segment and releases claims, in the same transaction.
// - Money is integer micro-units of the currency (1 USD = 1,000,000); times are Unix milliseconds.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/handoff.h"
#include "gpuplan/status.h"

namespace gpuplan {
class Catalog;
}

namespace gpuplan::market {

class Db;

// --- vocabulary --------------------------------------------------------------------------------------
enum class TenantKind { kRenter, kProvider, kPlatform };
enum class Role { kAdmin, kMember, kViewer };  // admin: users, tokens and all writes; member: writes; viewer: reads
enum class Scope { kFull, kRead };             // a kRead token cannot write whatever its user's role
enum class Interconnect { kNvlink, kPcie };
enum class MigPolicy {
  kNone,
  kStatic,
  kDynamic
};                                           // none: whole GPU only; static: a fixed layout; dynamic: any valid one
enum class NodeState { kReady, kDraining };  // a draining node takes no new rentals (running ones stay)
// Who runs a node's rentals (issue #15): manual (the hand-off is immediate, no outbox row), or an engine
// the outbox worker hands each rental to (Market::deliver_outbox).
enum class Scheduler { kManual, kSlurm, kKubernetes };
enum class RentalState {
  kRequested,    // being placed (also after start on a stopped rental)
  kReserved,     // claims held, waiting for the hand-off
  kStarting,     // handed off, workload coming up
  kRunning,      // billed: a usage segment is open
  kStopping,     // the user stopped it: segment closed, claims being released
  kStopped,      // holds nothing, bills nothing; start places it again
  kTerminating,  // deleted, ended (ends_at) or out of credit
  kTerminated,   // final
  kFailed,       // final: the hand-off failed
  kLost,         // the node disappeared while it ran (next issue: agents); segment closed
};

std::string_view to_string(TenantKind v);
std::string_view to_string(Role v);
std::string_view to_string(Scope v);
std::string_view to_string(Interconnect v);
std::string_view to_string(MigPolicy v);
std::string_view to_string(NodeState v);
std::string_view to_string(Scheduler v);
std::string_view to_string(RentalState v);
// The inverse of to_string; kUsage naming `field` and the accepted words otherwise.
Result<TenantKind> parse_tenant_kind(std::string_view s, std::string_view field = "kind");
Result<Role> parse_role(std::string_view s, std::string_view field = "role");
Result<Scope> parse_scope(std::string_view s, std::string_view field = "scope");
Result<Interconnect> parse_interconnect(std::string_view s, std::string_view field = "interconnect");
Result<MigPolicy> parse_mig_policy(std::string_view s, std::string_view field = "mig");
Result<RentalState> parse_rental_state(std::string_view s, std::string_view field = "state");
Result<Scheduler> parse_scheduler(std::string_view s, std::string_view field = "scheduler");
// Live: holds (or is about to hold) capacity or bills: requested..stopping, and lost.
bool is_live(RentalState s);
// Final: terminated or failed; no edge leaves it.
bool is_final(RentalState s);
// The edges of the state machine (docs/market.md, "State machine"); transition() refuses any other.
bool edge_allowed(RentalState from, RentalState to);

// --- time ----------------------------------------------------------------------------------------------
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t now_ms() const = 0;  // Unix time in milliseconds
};
class SystemClock final : public Clock {
 public:
  int64_t now_ms() const override;
};
// A clock that moves only when told: tests run hours in milliseconds.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ms = 1'767'225'600'000) : now_(start_ms) {}  // 2026-01-01T00:00:00Z
  int64_t now_ms() const override { return now_.load(); }
  void set_ms(int64_t ms) { now_.store(ms); }
  void advance_ms(int64_t ms) { now_.fetch_add(ms); }
  void advance_seconds(int64_t s) { now_.fetch_add(s * 1000); }

 private:
  std::atomic<int64_t> now_;
};

// --- identities --------------------------------------------------------------------------------------
// Who calls: the result of authenticate(). Every operation but the public ones takes one.
struct Principal {
  std::string tenant_id;
  TenantKind tenant_kind = TenantKind::kRenter;
  std::string user_id;
  Role role = Role::kViewer;
  Scope scope = Scope::kRead;
  std::string token_id;
};

struct Tenant {
  std::string id;
  std::string name;
  TenantKind kind = TenantKind::kRenter;
  std::optional<int64_t> credit_limit_micros;  // absent: unlimited
  int64_t created_at_ms = 0;
};

struct User {
  std::string id;
  std::string tenant_id;
  std::string name;
  Role role = Role::kMember;
  int64_t created_at_ms = 0;
};

struct TokenOptions {
  std::optional<int64_t> expires_at_ms;  // absent: never expires (revoke_token ends it)
  Scope scope = Scope::kFull;
};
// A token as created: `token` is the secret bearer string, returned exactly once and never stored (the
// store keeps its SHA-256 digest in hex). Format: "gpl_<id>_<64 hex digits: 256 random bits>".
struct IssuedToken {
  std::string id;  // public: DELETE /tokens/{id}
  std::string token;
  std::string user_id;
  std::string tenant_id;
  Scope scope = Scope::kFull;
  std::optional<int64_t> expires_at_ms;
};

// --- inventory -------------------------------------------------------------------------------------------
struct GpuSpec {
  std::string target;  // any catalog name of a GPU ("a100-80gb-sxm4", "NVIDIA A100-SXM4-80GB"), resolved
  std::string uuid;    // "GPU-..." as nvidia-smi prints it; unique in the market
  MigPolicy mig = MigPolicy::kNone;
  std::string layout;  // static only: "3g.40gb,3g.40gb" or with placements "3g.40gb@0,3g.40gb@4"; must pass mig check
};
struct NodeSpec {
  std::string name;  // unique per provider
  std::string region;
  Interconnect interconnect = Interconnect::kPcie;
  int64_t vcpus = 0;
  int64_t ram_gb = 0;
  int64_t disk_gb = 0;
  std::vector<GpuSpec> gpus;  // 1 .. kMaxGpusPerNode
  Scheduler scheduler = Scheduler::kManual;
  std::string slurm_partition;  // slurm: the partition its holding jobs go to (empty: the default one)
  std::string slurm_node;       // slurm: its NodeName in slurm.conf (empty: `name`)
  std::string ssh;              // manual: "user@host:port" GET /rentals/{id}/access shows the renter
  // The node's MIG policy (migration 0007): kStatic (the agent only reads) or kDynamic (the provider
  // lets the agent create and destroy GPU instances; the agent must be started --mig-policy dynamic too).
  MigPolicy mig_policy = MigPolicy::kStatic;
};
struct NodeGpu {
  std::string id;
  int index = 0;  // position in the node's list
  std::string uuid;
  std::string catalog_id;  // canonical GPU id
  MigPolicy mig = MigPolicy::kNone;
  std::string layout;      // static: canonical "profile@start,..."; else empty
  int memory_slices = 1;   // claimable slices: the MIG table's memory slices, 1 without MIG
  int claimed_slices = 0;  // held by live rentals now
};
struct Node {
  std::string id;
  std::string provider_id;
  std::string name;
  std::string region;
  Interconnect interconnect = Interconnect::kPcie;
  int64_t vcpus = 0;
  int64_t ram_gb = 0;
  int64_t disk_gb = 0;
  NodeState state = NodeState::kReady;
  std::vector<NodeGpu> gpus;
  Scheduler scheduler = Scheduler::kManual;
  std::string slurm_partition;
  std::string slurm_node;
  std::string ssh;
  MigPolicy mig_policy = MigPolicy::kStatic;  // NodeSpec::mig_policy
  int64_t live_rentals = 0;
  int64_t created_at_ms = 0;
};

// --- offers --------------------------------------------------------------------------------------------------
struct OfferSpec {
  std::string target;  // a GPU ("a100-80gb-sxm4") or a MIG profile ("a100-80gb-sxm4/1g.10gb"), any catalog name
  int gpus = 1;        // GPUs per rental unit, on one node: 1, 2, 4 or 8 (MIG offers: 1)
  std::string region;
  int64_t price_micros_per_hour = 0;  // per rental unit; > 0, <= kMaxPriceMicrosPerHour
  int64_t min_billable_seconds = 0;   // 0 .. kMaxMinBillableSeconds
};
// What `gpuplan bench` measured on the GPUs behind an offer (PUT /agent/bench; issue #16): of the GPUs of
// the offer's provider, region and target that reported a bench, the one furthest below the datasheet
// (a rental may land on any of them). docs/market.md, "Measured figures".
struct OfferMeasured {
  double bf16_dense_tflops = 0;   // best sustained dense bf16 GEMM rate; 0 = not measured
  double ratio_to_datasheet = 0;  // / the catalog's dense bf16 peak of the target
  double memory_gbps = 0;         // large-size streaming rate; 0 = not measured
  double ratio = 0;               // memory_gbps / the catalog's peak bandwidth
  int pcie_gen = 0;               // 0 = not reported
  int pcie_width = 0;
  std::string measured_at;    // the calibration's created_at (RFC 3339)
  std::string method;         // kCalibrationMethod: "gpuplan bench 1"
  std::string efficiency;     // the fitted curves as `--efficiency` text (gemm=...,bandwidth=...): what plan applies
  int64_t gpus_measured = 0;  // GPUs (or MIG instances) of the offer with a bench
};
struct Offer {
  std::string id;
  std::string provider_id;
  std::string provider;  // the provider tenant's name
  std::string target;    // canonical: "a100-80gb-sxm4" or "a100-80gb-sxm4/1g.10gb"
  std::string gpu;       // canonical GPU id
  std::string profile;   // MIG profile name; empty for whole GPUs
  int gpus = 1;
  std::string region;
  int64_t price_micros_per_hour = 0;
  int64_t min_billable_seconds = 0;
  bool active = true;     // false once deleted (rentals keep referring to it)
  int64_t available = 0;  // rental units placeable now: computed live from inventory minus claims (MIG rules)
  int64_t created_at_ms = 0;
  std::optional<OfferMeasured> measured;  // list_offers: when a GPU behind it reported a bench
};
// When a target last had a unit free in a region (Market::last_available).
struct LastAvailable {
  std::string target;  // canonical: "a100-80gb-sxm4" or "a100-80gb-sxm4/3g.40gb"
  std::string region;
  int64_t at_ms = 0;
};
struct OfferFilter {
  std::string target;    // a catalog name; empty: any
  std::string region;    // empty: any
  std::string provider;  // a provider tenant id; empty: any
  bool include_inactive = false;
};

struct Template {
  std::string id;
  std::string name;  // "pytorch", "tensorflow", "cuda"
  std::string image;
  std::string command;
  std::string description;
};

// --- rentals -------------------------------------------------------------------------------------------------
struct RentRequest {
  std::string offer_id;
  int count = 1;  // rental units; whole GPUs: count x offer.gpus GPUs on ONE node; MIG: count slices
  std::optional<int64_t> ends_at_ms;  // tick() terminates it then; must be in the future
  std::string idempotency_key;        // optional; the same (tenant, key) returns the same rental
  std::string template_name;          // optional; a Template name
};
struct Placement {
  std::string gpu_id;
  std::string gpu_uuid;
  std::string node_id;
  std::string profile;  // empty for a whole GPU
  int start = 0;        // first memory slice (0 for a whole GPU)
  int size = 1;         // memory slices held
};
struct Rental {
  std::string id;
  std::string tenant_id;
  std::string created_by;  // user id
  std::string offer_id;
  std::string provider_id;
  std::string target;
  int count = 1;
  int64_t price_micros_per_hour = 0;  // frozen at reservation: offer price x count
  int64_t min_billable_seconds = 0;   // frozen at reservation
  std::string template_name;
  RentalState state = RentalState::kRequested;
  std::string state_reason;
  int64_t version = 0;  // If-Match
  std::string idempotency_key;
  std::optional<int64_t> ends_at_ms;
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
  std::vector<Placement> placements;  // empty unless it holds capacity
  bool replayed = false;  // rent(): true when the idempotency key named an existing rental (HTTP 200, not 201)
};
struct RentalEvent {
  int64_t seq = 0;
  int64_t at_ms = 0;
  std::optional<RentalState> from;  // absent for the first event
  RentalState to = RentalState::kRequested;
  std::string actor;  // user id, or "system"
  std::string reason;
};

// --- billing ------------------------------------------------------------------------------------------------
struct UsageSegment {
  int64_t started_at_ms = 0;
  std::optional<int64_t> ended_at_ms;  // absent while running
  int64_t price_micros_per_hour = 0;
};
// Charge = ceil(billed_seconds x price_micros_per_hour / 3600) with billed_seconds = max(sum over
// segments of ceil(segment ms / 1000), min_billable_seconds) once the rental has run at all (else 0).
// An open segment counts up to now. docs/market.md, "Billing".
struct RentalUsage {
  std::string rental_id;
  std::string tenant_id;
  std::string provider_id;
  int64_t billed_seconds = 0;
  int64_t charge_micros = 0;
  std::vector<UsageSegment> segments;
};
struct TenantUsage {
  std::string tenant_id;
  int64_t charge_micros = 0;
  std::optional<int64_t> credit_limit_micros;
  std::vector<RentalUsage> rentals;
};
struct Earnings {
  std::string provider_id;
  int64_t earnings_micros = 0;  // the sum of its rentals' charges
  std::vector<RentalUsage> rentals;
};

// --- bounds (each a stated limit: kLimit names the field) -----------------------------------------------
inline constexpr int kMaxGpusPerNode = 16;         // HGX boards carry 8; 16 leaves room for 16-GPU systems
inline constexpr int kMaxRentCount = 64;           // units per rental: 8 nodes' worth of 1g slices
inline constexpr size_t kMaxRentManyRentals = 64;  // rentals of one all-or-nothing rent: plan's 16 instances x4
inline constexpr int64_t kMaxPriceMicrosPerHour = 1'000'000'000'000;  // $1M/h: above any real GPU price
inline constexpr int64_t kMaxMinBillableSeconds = 30LL * 24 * 3600;   // 30 days
inline constexpr size_t kMaxNameBytes = 128;                          // names, regions, uuids, keys
inline constexpr size_t kMaxListRows = 10'000;                        // rows one list call returns (then kLimit)

// --- the node agent (issue #15; src/market/market_agent.cc; docs/market.md, "The node agent") -------------
// An agent's identity: the node its token is bound to. Not a Principal: an agent token opens only the
// agent's endpoints (/api/v1/agent/*), for its own node; everywhere else it is 403.
struct AgentPrincipal {
  std::string node_id;
  std::string provider_id;
};
// The one-time enrolment token `gpuplan nodes add` prints: "gpe_<node id>_<64 hex digits>", single use,
// expiring; the store keeps its SHA-256 digest.
struct EnrollmentToken {
  std::string node_id;
  std::string token;
  int64_t expires_at_ms = 0;
};
// What enrolment gives the agent: its token "gpa_<id>_<64 hex digits>" (digest stored), shown once.
struct AgentToken {
  std::string node_id;
  std::string token;
  int64_t heartbeat_seconds = 0;
};
struct InventoryInstance {
  std::string profile;  // "3g.40gb"
  int start = 0;        // placement start (memory slice)
};
struct InventoryGpu {
  std::string uuid;
  std::string name;        // as NVML names it ("NVIDIA H100 80GB HBM3"); resolved through the catalog
  std::string pci_bus_id;  // "00000000:17:00.0"
  int64_t memory_bytes = 0;
  std::string mig_mode;  // "enabled", "disabled" or "" (not supported / feature off)
  std::vector<InventoryInstance> instances;
};
// A full snapshot: what the node has now. GPUs the node had and the snapshot lacks are gone.
struct Inventory {
  int64_t seq = 0;  // the agent's report counter: a report older than the last accepted is fenced (stale)
  std::string boot_id;
  std::string driver_version;
  std::vector<std::string> features_off;  // NVML features the agent turned off (a symbol missing, NOT_SUPPORTED)
  std::vector<InventoryGpu> gpus;
};
struct InventoryGpuResult {
  std::string uuid;
  std::string target;             // canonical catalog id; empty when unknown
  std::string unsellable_reason;  // empty: sellable
};
struct InventoryResult {
  std::string node_id;
  int64_t seq = 0;
  std::vector<InventoryGpuResult> gpus;
  int64_t resumed = 0;  // lost rentals running again (same boot id, their GPU and instance back)
  int64_t lost = 0;     // rentals whose GPU or MIG instance vanished (billing ended at the last heartbeat)
  int64_t ended = 0;    // rentals ended as lost (a new boot id): claims freed
};
struct RunningReport {
  std::string rental_id;
  int64_t generation = 0;  // the rental's version the agent acted on
};
// A rental the node could not start (dynamic MIG: the instance creation answered INSUFFICIENT_RESOURCES,
// a start the profile lacks, ...): the server fails it, fenced by its generation.
struct FailedReport {
  std::string rental_id;
  int64_t generation = 0;  // the rental's version the agent acted on: an older one is ignored
  std::string code;        // insufficient_resources | invalid_placement | not_found | unavailable
  std::string message;     // the agent's reason, at most kMaxFailureMessageBytes
};
struct Heartbeat {
  int64_t seq = 0;
  std::string boot_id;
  std::vector<RunningReport> running;
  std::vector<FailedReport> failed;
};
// One placement of a rental that should be on the node (a rental on two GPUs is two rows).
struct DesiredRental {
  std::string rental_id;
  int64_t generation = 0;  // the rental's version: names derived from (id, generation) are idempotent
  RentalState state = RentalState::kRunning;
  std::string gpu_uuid;
  std::string profile;  // empty: the whole GPU
  int placement = 0;    // MIG placement start (0 for a whole GPU)
};
struct HeartbeatAnswer {
  std::vector<DesiredRental> desired;
  int64_t heartbeat_seconds = 0;
  std::vector<std::string> ignored;  // reported rental ids that are not on this node (or not live)
  bool stale = false;                // a generation older than the rental's: nothing was recorded (HTTP 409 `stale`)
  std::string stale_reason;
  std::vector<std::string> failed;  // the reported failures this heartbeat recorded (rentals now failed)
  int64_t bench_request = 0;        // a pending bench request of the node (POST /nodes/{id}/bench); 0: none
  // The node's MIG policy: the agent creates or destroys GPU instances only when it is kDynamic.
  MigPolicy mig_policy = MigPolicy::kStatic;
};
// A bench report (PUT /agent/bench): the calibration file `gpuplan bench` wrote on the node, for one GPU
// of the agent's own node (by uuid) or one MIG profile of it.
struct BenchReport {
  std::string gpu_uuid;
  std::string profile;           // the MIG profile measured; empty: the whole GPU
  std::string calibration_text;  // schema gpuplan.calibration/1, at most kCalibrationMaxBytes
  int64_t bench_request = 0;     // the request (heartbeat's bench_request) this bench answers; 0: none asked
};
struct BenchResult {
  std::string gpu_uuid;
  std::string target;  // canonical: "h100-80gb-sxm5" or "a100-80gb-sxm4/3g.40gb"
  OfferMeasured measured;
  std::vector<std::string> warnings;  // the calibration's (old, another driver than the inventory's, shared)
  int64_t bench_request = 0;          // the request it answered (0: none)
};
// A provider's request that the node's agent bench its GPUs again (POST /nodes/{id}/bench).
struct BenchRequest {
  std::string node_id;
  int64_t bench_request = 0;   // the node's request generation, 1, 2, ...: the heartbeat answer carries it
  int64_t bench_answered = 0;  // the last request an agent's bench answered
};
inline constexpr int64_t kHeartbeatSeconds = 10;                 // the interval the server asks for (issue #15)
inline constexpr int kMissedHeartbeatsForLoss = 3;               // then the node is lost: 30 s
inline constexpr int64_t kEnrollmentTtlMs = 24LL * 3600 * 1000;  // a day to install the agent
inline constexpr size_t kMaxInstancesPerGpu = 8;                 // 7 1g slices is the most MIG makes; 8 leaves room
inline constexpr size_t kMaxRunningReports = 128;                // 16 GPUs x 7 slices, rounded up
inline constexpr size_t kMaxFailureMessageBytes = 1024;          // an NVML error string with its context
inline constexpr size_t kMaxFeaturesOff = 32;                    // the agent's NVML whitelist has fewer entries

enum class Handoff {
  kImmediate,  // rent/start go reserved -> starting -> running at once (billing starts): this issue's default
  kManual,     // rent/start stop at reserved; the provider calls mark_running()
};
struct MarketOptions {
  Handoff handoff = Handoff::kImmediate;
  std::shared_ptr<const Catalog> catalog;  // null: the embedded catalog
  // The engines the outbox worker delivers to, by kind() ("slurm", "kubernetes"). A row whose node's
  // scheduler has no target here waits (and says so in last_error) until a server that has one runs.
  std::vector<std::shared_ptr<handoff::HandoffTarget>> targets;
  int64_t outbox_lease_ms = 60'000;  // a delivery in flight is retried after this (the worker died)
};

// --- the outbox (src/market/market_outbox.cc; docs/market.md, "The outbox") ---------------------------------
inline constexpr int kMaxApplyAttempts = 5;              // then the rental fails with the last error
inline constexpr int64_t kOutboxFirstBackoffMs = 1'000;  // 1 s, doubling per attempt
inline constexpr int64_t kOutboxMaxBackoffMs = 300'000;  // 5 min: stops and deletes retry for ever, this far apart
inline constexpr size_t kMaxOutboxBatch = 256;           // rows one deliver_outbox call hands off
inline constexpr size_t kMaxOutboxScan = 4'096;          // undelivered rows one call reads to keep each rental's order
struct OutboxRow {
  std::string rental_id;
  int64_t generation = 0;
  std::string action;       // apply, stop, delete
  std::string target_kind;  // slurm, kubernetes
  std::string node_id;
  int64_t attempts = 0;
  int64_t next_attempt_at_ms = 0;
  std::optional<int64_t> delivered_at_ms;
  std::optional<int64_t> gave_up_at_ms;
  std::string last_error;
  std::string external_id;
};
struct OutboxReport {
  int64_t delivered = 0;  // rows the target answered and that are marked delivered
  int64_t retried = 0;    // rows that failed this time and wait for their backoff
  int64_t failed = 0;     // applies that gave up: their rental failed
  int64_t running = 0;    // rentals moved starting -> running by a status poll
  int64_t waiting = 0;    // due rows left for the next call (the batch was full, or no target of their kind)
};
// How the renter reaches a rental (GET /api/v1/rentals/{id}/access).
struct RentalAccess {
  std::string rental_id;
  RentalState state = RentalState::kRequested;
  handoff::HandoffAccess access;  // kind "manual" with `ssh` for nodes with no scheduler
  std::string node_name;
  int64_t generation = 0;  // of the hand-off shown (0 for manual)
};

// The market. All methods are thread-safe; each runs in its own store transaction(s).
class Market {
 public:
  // Migrates the store to the newest schema and returns the market over it.
  static Result<std::unique_ptr<Market>> open(std::unique_ptr<Db> db, std::shared_ptr<const Clock> clock = nullptr,
                                              MarketOptions options = {});
  ~Market();
  Market(const Market&) = delete;
  Market& operator=(const Market&) = delete;

  Db& db();
  const Clock& clock() const;

  // --- bootstrap and authentication ---
  // Creates the platform tenant ("platform") and its admin user and returns the admin's token, once.
  // kConflict when the platform tenant exists already.
  Result<IssuedToken> init_platform(std::string_view admin_name = "admin");
  // "Bearer gpl_..." or the bare token. kUnauthenticated when missing, malformed, unknown, expired or revoked.
  Result<Principal> authenticate(std::string_view bearer) const;

  // --- tenants, users, tokens ---
  // Platform admin only.
  Result<Tenant> create_tenant(const Principal& p, std::string_view name, TenantKind kind);
  // Platform admin: any; others: their own tenant.
  Result<Tenant> get_tenant(const Principal& p, std::string_view tenant_id) const;
  Result<std::vector<Tenant>> list_tenants(const Principal& p) const;
  // Platform admin only; absent: unlimited.
  Result<Tenant> set_credit_limit(const Principal& p, std::string_view tenant_id, std::optional<int64_t> micros);
  // Platform admin for any tenant; a tenant admin for its own.
  Result<User> create_user(const Principal& p, std::string_view tenant_id, std::string_view name, Role role);
  Result<std::vector<User>> list_users(const Principal& p, std::string_view tenant_id) const;
  // Admin (platform: any user; tenant admin: users of its tenant); member: itself only. Viewer: kForbidden.
  Result<IssuedToken> create_token(const Principal& p, std::string_view user_id, const TokenOptions& options = {});
  // The same rights as create_token; revoking one's own token is always allowed (logout).
  Status revoke_token(const Principal& p, std::string_view token_id);

  // --- inventory (provider tenants: admin or member writes, anyone of the tenant reads) ---
  Result<Node> add_node(const Principal& p, const NodeSpec& spec);
  Result<std::vector<Node>> list_nodes(const Principal& p) const;
  Result<Node> get_node(const Principal& p, std::string_view node_id) const;
  Result<Node> drain_node(const Principal& p, std::string_view node_id);
  // kConflict while a live rental holds any of its GPUs.
  Status remove_node(const Principal& p, std::string_view node_id);

  // --- offers ---
  Result<Offer> create_offer(const Principal& p, const OfferSpec& spec);
  // Changes the price for future rentals; live rentals keep their frozen price.
  Result<Offer> set_offer_price(const Principal& p, std::string_view offer_id, int64_t price_micros_per_hour);
  // Deactivates (rentals keep referring to it). Live rentals are not affected.
  Status delete_offer(const Principal& p, std::string_view offer_id);
  // Public: no principal. Active offers only unless the filter says otherwise; `available` computed live.
  Result<std::vector<Offer>> list_offers(const OfferFilter& filter = {}) const;
  Result<Offer> get_offer(std::string_view offer_id) const;  // public
  // Public: when each target (GPU or MIG profile) was last known to have a unit free, per region
  // (migration 0003: written by every placement, in its transaction, for each target with a unit free on
  // the GPUs it placed on, just before it took them). The catalog's `last_available_at` reads it.
  Result<std::vector<LastAvailable>> last_available() const;

  // --- templates (public) ---
  Result<std::vector<Template>> list_templates() const;

  // --- rentals (renter tenants: admin or member writes; viewers read) ---
  // Places and reserves: whole GPUs on one node (NVLink nodes first for more than one GPU), a MIG slice
  // at the valid placement with the lowest fragmentation score. kConflict with a reason per candidate
  // when nothing is free; kPaymentRequired over the credit limit (charges so far plus one hour of this
  // rental, kCreditLookaheadSeconds). With Handoff::kImmediate it returns the rental running.
  Result<Rental> rent(const Principal& p, const RentRequest& request);
  // All or nothing: every request placed as rent() places it, in ONE store transaction; when any of them
  // cannot be placed (kConflict, saying which and why) or the credit limit would be crossed by their sum
  // (charges so far plus the lookahead of every one), none is made. At most kMaxRentManyRentals. With
  // idempotency keys (one per request), a replay returns the rentals that were made. An empty list
  // checks only the caller's rights (kForbidden) and is otherwise kUsage.
  Result<std::vector<Rental>> rent_many(const Principal& p, const std::vector<RentRequest>& requests);
  Result<Rental> get_rental(const Principal& p, std::string_view rental_id) const;
  Result<std::vector<Rental>> list_rentals(const Principal& p) const;
  // Provider side: the rentals on its offers (tenant ids shown, nothing else of the renter).
  Result<std::vector<Rental>> list_provider_rentals(const Principal& p) const;
  // Stop: closes the usage segment and releases the claims (-> stopped). kConflict from a state that
  // cannot stop. `if_match`: the version the caller last saw (kPreconditionFailed when stale).
  Result<Rental> stop_rental(const Principal& p, std::string_view rental_id, std::optional<int64_t> if_match = {});
  // Start: places it again (its previous GPUs first), checks credit, and runs it (or reserves, kManual).
  // kConflict (state unchanged) when nothing is free.
  Result<Rental> start_rental(const Principal& p, std::string_view rental_id, std::optional<int64_t> if_match = {});
  // Delete: terminating -> terminated; releases everything, closes the segment. Final.
  Result<Rental> delete_rental(const Principal& p, std::string_view rental_id, std::optional<int64_t> if_match = {});
  // Manual hand-off (the provider or the platform admin): reserved -> starting -> running.
  Result<Rental> mark_running(const Principal& p, std::string_view rental_id, std::optional<int64_t> if_match = {});
  Result<std::vector<RentalEvent>> rental_events(const Principal& p, std::string_view rental_id) const;

  // --- billing ---
  Result<RentalUsage> rental_usage(const Principal& p, std::string_view rental_id) const;
  Result<TenantUsage> usage(const Principal& p) const;  // the caller's tenant
  Result<Earnings> earnings(const Principal& p) const;  // provider tenants

  // --- housekeeping (the server calls it every few seconds) ---
  // Terminates live rentals past ends_at and stops running rentals of tenants whose charges reached
  // their credit limit. Returns how many rentals it changed.
  Result<int64_t> tick();

  // --- the node agent (src/market/market_agent.cc) ---
  // The provider (write role) of the node: a fresh one-time enrolment token (an older unused one stops
  // working). add_node's HTTP route calls it, so `gpuplan nodes add` prints one.
  Result<EnrollmentToken> issue_enrollment(const Principal& p, std::string_view node_id);
  // Public (the token is the credential): trades a valid, unused, unexpired enrolment token for the node's
  // agent token (a previous agent token of the node stops working). kUnauthenticated otherwise.
  Result<AgentToken> enroll_agent(std::string_view enrollment_token, std::string_view boot_id);
  // "Bearer gpa_..." or the bare token: kUnauthenticated when not a valid agent token.
  Result<AgentPrincipal> authenticate_agent(std::string_view bearer) const;
  // Whether `bearer` has the agent token's shape (the router answers 403, not 401, on other endpoints).
  static bool looks_like_agent_token(std::string_view bearer);
  // Reconciles the node's GPUs with a full snapshot; kConflict field "seq" when older than the last.
  Result<InventoryResult> put_inventory(const AgentPrincipal& a, const Inventory& inventory);
  // Records a heartbeat and answers what should run. kConflict field "seq" (stale), field "boot_id"
  // (another boot: PUT the inventory first). A stale generation answers `stale` with the desired list.
  Result<HeartbeatAnswer> heartbeat(const AgentPrincipal& a, const Heartbeat& hb);
  // tick() calls it: nodes whose agent missed kMissedHeartbeatsForLoss heartbeats become lost (their
  // running rentals lost, billed up to the last heartbeat). Returns how many rentals it changed.
  Result<int64_t> mark_lost_nodes();
  // Stores the bench of one GPU (or MIG profile) of the agent's node, replacing the last one; the live
  // offers of that GPU then carry `measured`. kNotFound when the uuid is not a GPU of this node (another
  // node's GPU is not found either: an agent sees only its own); a usage error naming the field when the
  // file is malformed, is for another GPU than the uuid, or exceeds the catalog's peaks.
  // A report answering a request (bench_request N > 0) is fenced: N newer than the node's latest request
  // is kConflict (no such request), N at or below the one this GPU's stored bench answered is kConflict
  // (stale or a duplicate); both name the field bench_request.
  Result<BenchResult> put_bench(const AgentPrincipal& a, const BenchReport& report);
  // The provider (write role) of the node asks its agent to bench the GPUs again: the node's request
  // generation goes up by one and the next heartbeat answers carry it until a bench answers it.
  // Another tenant's node is kNotFound.
  Result<BenchRequest> request_bench(const Principal& p, std::string_view node_id);

  // --- the outbox (src/market/market_outbox.cc) ---
  // Delivers up to `limit` due outbox rows, each rental's in order (apply before stop before delete):
  // leases the row (attempts + 1, due again after outbox_lease_ms), calls the target outside any
  // transaction, then marks it delivered (an apply moves its rental reserved -> starting, and -> running
  // when the engine says it runs) in a transaction after the target answered. A failure backs off
  // (1 s doubling, at most 5 min); an apply that failed kMaxApplyAttempts times fails its rental with the
  // error. Then polls the starting rentals' engines: running -> running, gone -> failed. The server calls
  // it every second on a thread of its own; `gpuplan market deliver --once` runs it once.
  Result<OutboxReport> deliver_outbox(size_t limit = kMaxOutboxBatch);
  // Platform admin: the outbox rows of one rental (empty id: every undelivered row), for operators and tests.
  Result<std::vector<OutboxRow>> outbox_rows(const Principal& p, std::string_view rental_id) const;
  // The renter's own rental (another tenant's: kNotFound): the Slurm job and srun line, the namespace
  // and Pod, or the SSH endpoint the provider declared for the node.
  Result<RentalAccess> rental_access(const Principal& p, std::string_view rental_id) const;

  struct Impl;

 private:
  explicit Market(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

inline constexpr int64_t kCreditLookaheadSeconds = 3600;  // rent/start need room for one hour (design notes §5)

// Crash-test hook: when the environment variable GPUPLAN_FAILPOINT equals `name`, the process kills
// itself with SIGKILL at once. Names used: "after_claims", "before_commit", "after_commit", and the
// outbox worker's "outbox_before_deliver", "outbox_after_deliver", "outbox_before_mark_commit".
void failpoint(std::string_view name);

}  // namespace gpuplan::market
