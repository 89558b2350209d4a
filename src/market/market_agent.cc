// The node agent's side of the market (issue #15, part 1; docs/market.md, "The node agent"): enrolment
// tokens, agent tokens, inventory reconciliation, heartbeats with fencing, and loss. Rentals change state
// only through market.cc's one transition function (market_internal.h).
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "core/digest.h"
#include "gpuplan/catalog.h"
#include "gpuplan/market.h"
#include "gpuplan/mig.h"
#include "market/db.h"
#include "market/market_internal.h"

namespace gpuplan::market {

namespace {

constexpr std::string_view kEnrollPrefix = "gpe_";
constexpr std::string_view kAgentPrefix = "gpa_";
constexpr size_t kSecretBytes = 32;       // 256 random bits, as the API tokens'
constexpr size_t kAgentTokenIdBytes = 8;  // the public part: 64 bits, unique by the column's UNIQUE
constexpr int64_t kMsPerSecond = 1000;
constexpr int64_t kMaxMemoryBytes = int64_t{1} << 50;  // 1 PiB: far above any GPU's memory
constexpr int64_t kMaxSeq = int64_t{1} << 53;          // a JSON number's exact whole numbers
constexpr int kMaxMigStart = 7;                        // memory slices 0..7 (slice_claims' CHECK)
const std::string kBadAgentToken = "a valid agent token is required: Authorization: Bearer gpa_... (gpuplan agent)";

template <typename... A>
std::vector<Value> params(A&&... a) {
  return {Value(std::forward<A>(a))...};
}
Value opt_text(const std::string& s) { return s.empty() ? Value(std::monostate{}) : Value(s); }

Error unauthenticated(std::string message) {
  return Error{ErrorCode::kUnauthenticated, std::move(message), "Authorization"};
}
Error conflict(std::string message, std::string field) {
  return Error{ErrorCode::kConflict, std::move(message), std::move(field)};
}

std::string_view bare_token(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.size() > 7 && (s.substr(0, 7) == "Bearer " || s.substr(0, 7) == "bearer ")) s.remove_prefix(7);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return s;
}

// "<prefix><id>_<hex secret>" -> id (the id may hold '_': node ids do); empty when malformed.
std::string token_id(std::string_view token, std::string_view prefix) {
  if (token.size() > kMaxNameBytes || token.substr(0, prefix.size()) != prefix) return {};
  const std::string_view rest = token.substr(prefix.size());
  const size_t us = rest.rfind('_');
  if (us == std::string_view::npos || us == 0 || us + 1 == rest.size()) return {};
  return std::string(rest.substr(0, us));
}

Status bounded(std::string_view s, const std::string& field, bool required) {
  if (required && s.empty()) return usage_error("'" + field + "' is required", field);
  if (s.size() > kMaxNameBytes) {
    return limit_error(
        "'" + field + "' is " + std::to_string(s.size()) + " bytes; the limit is " + std::to_string(kMaxNameBytes),
        field);
  }
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return usage_error("'" + field + "' holds a control character", field);
    }
  }
  return Status::Ok();
}

Status in_range(int64_t v, int64_t lo, int64_t hi, const std::string& field) {
  if (v < lo || v > hi) {
    return limit_error("'" + field + "' is " + std::to_string(v) + "; it must be between " + std::to_string(lo) +
                           " and " + std::to_string(hi),
                       field);
  }
  return Status::Ok();
}

Status require_provider_writer(const Principal& p) {
  if (p.tenant_kind != TenantKind::kProvider) {
    return Error{ErrorCode::kForbidden, "only a provider tenant enrols node agents", ""};
  }
  if (p.role == Role::kViewer || p.scope == Scope::kRead) {
    return Error{ErrorCode::kForbidden, "a viewer or read-scoped token cannot issue enrolment tokens", ""};
  }
  return Status::Ok();
}

// The agent's row of its node.
struct AgentRow {
  int64_t seq = 0;
  std::string boot_id;  // of the last accepted inventory; empty before the first
  std::optional<int64_t> last_heartbeat_ms;
  std::optional<int64_t> lost_at_ms;
};
Result<AgentRow> load_agent(Tx& tx, const std::string& node_id) {
  GPUPLAN_TRY(rows, tx.query("SELECT seq, boot_id, last_heartbeat_at, lost_at FROM node_agents WHERE node_id = ?1",
                             params(node_id)));
  if (rows.empty()) return unauthenticated(kBadAgentToken);
  return AgentRow{rows[0].integer(0), rows[0].text(1), rows[0].maybe_integer(2), rows[0].maybe_integer(3)};
}

Status fence_seq(const AgentRow& row, int64_t seq) {
  if (seq < row.seq) {
    return conflict("stale report: seq " + std::to_string(seq) + " is older than the last accepted " +
                        std::to_string(row.seq) + " (another agent process of this node reports newer)",
                    "seq");
  }
  return Status::Ok();
}

// Ends billing of a rental that just left running at `at` (its last heartbeat) instead of now: the
// segment the transition closed is cut back, never before its own start.
Status bill_until(Tx& tx, const std::string& rental_id, int64_t at) {
  GPUPLAN_TRY(n, tx.exec("UPDATE usage_segments SET ended_at = CASE WHEN started_at > ?2 THEN started_at ELSE ?2 END "
                         "WHERE rental_id = ?1 AND ended_at IS NOT NULL AND ended_at > ?2 AND seq = (SELECT "
                         "MAX(seq) FROM usage_segments WHERE rental_id = ?1)",
                         params(rental_id, at)));
  (void)n;
  return Status::Ok();
}

std::string instance_key(std::string_view profile, int start) {
  return std::string(profile) + "@" + std::to_string(start);
}

// The canonical "profile@start,..." of reported instances, sorted by start.
std::string instances_text(std::vector<InventoryInstance> v) {
  std::sort(v.begin(), v.end(), [](const InventoryInstance& a, const InventoryInstance& b) {
    return std::tie(a.start, a.profile) < std::tie(b.start, b.profile);
  });
  std::string out;
  for (const InventoryInstance& i : v) out += (out.empty() ? "" : ",") + instance_key(i.profile, i.start);
  return out;
}

std::set<std::string> split_csv(const std::string& s) {
  std::set<std::string> out;
  size_t b = 0;
  while (b < s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.insert(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

}  // namespace

// --- tokens ------------------------------------------------------------------------------------------------
bool Market::looks_like_agent_token(std::string_view bearer) {
  return bare_token(bearer).substr(0, kAgentPrefix.size()) == kAgentPrefix;
}

Result<EnrollmentToken> Market::issue_enrollment(const Principal& p, std::string_view node_id) {
  EnrollmentToken out;
  const int64_t now = internal::now(*impl_);
  const std::string id(node_id);
  Status s = with_tx(internal::db(*impl_), TxMode::kWrite, [&](Tx& tx) -> Status {
    // Another tenant's node is not found (never forbidden), before any role check.
    GPUPLAN_TRY(node, tx.query("SELECT id FROM nodes WHERE id = ?1 AND provider_id = ?2", params(id, p.tenant_id)));
    if (node.empty()) return not_found_error("no node '" + id + "'", "id");
    GPUPLAN_CHECK(require_provider_writer(p));
    out.node_id = id;
    out.token = std::string(kEnrollPrefix) + id + "_" + internal::random_hex(kSecretBytes);
    out.expires_at_ms = now + kEnrollmentTtlMs;
    const std::string digest = sha256_hex(out.token);
    GPUPLAN_TRY(changed, tx.exec("UPDATE node_agents SET enroll_sha256 = ?2, enroll_expires_at = ?3 WHERE node_id = ?1",
                                 params(id, digest, out.expires_at_ms)));
    if (changed == 0) {
      GPUPLAN_TRY(n, tx.exec("INSERT INTO node_agents (node_id, enroll_sha256, enroll_expires_at, seq, created_at) "
                             "VALUES (?1, ?2, ?3, 0, ?4)",
                             params(id, digest, out.expires_at_ms, now)));
      (void)n;
    }
    return Status::Ok();
  });
  if (!s) return s.error();
  return out;
}

Result<BenchRequest> Market::request_bench(const Principal& p, std::string_view node_id) {
  BenchRequest out;
  const std::string id(node_id);
  Status s = with_tx(internal::db(*impl_), TxMode::kWrite, [&](Tx& tx) -> Status {
    // Another tenant's node is not found (never forbidden), before any role check.
    GPUPLAN_TRY(node, tx.query("SELECT bench_request, bench_answered FROM nodes WHERE id = ?1 AND provider_id = ?2",
                               params(id, p.tenant_id)));
    if (node.empty()) return not_found_error("no node '" + id + "'", "id");
    GPUPLAN_CHECK(require_provider_writer(p));
    out.node_id = id;
    out.bench_request = node[0].integer(0) + 1;
    out.bench_answered = node[0].integer(1);
    GPUPLAN_TRY(n, tx.exec("UPDATE nodes SET bench_request = ?2 WHERE id = ?1 AND bench_request = ?3",
                           params(id, out.bench_request, node[0].integer(0))));
    if (n != 1) {
      return Error{ErrorCode::kPreconditionFailed, "node " + id + " changed underneath; ask again", "id"};
    }
    return Status::Ok();
  });
  if (!s) return s.error();
  return out;
}

Result<AgentToken> Market::enroll_agent(std::string_view enrollment_token, std::string_view boot_id) {
  GPUPLAN_CHECK(bounded(boot_id, "boot_id", true));
  const std::string_view token = bare_token(enrollment_token);
  const std::string node_id = token_id(token, kEnrollPrefix);
  const Error refused = unauthenticated(
      "the enrolment token is unknown, used or expired; the node's provider issues a fresh one with POST "
      "/api/v1/nodes/{id}/enrollment");
  if (node_id.empty()) return refused;
  const std::string digest = sha256_hex(token);
  const int64_t now = internal::now(*impl_);
  AgentToken out;
  bool ok = false;
  Status s = with_tx(internal::db(*impl_), TxMode::kWrite, [&](Tx& tx) -> Status {
    ok = false;
    GPUPLAN_TRY(
        rows, tx.query("SELECT enroll_sha256, enroll_expires_at FROM node_agents WHERE node_id = ?1", params(node_id)));
    if (rows.empty() || rows[0].is_null(0)) return Status::Ok();
    if (!constant_time_equal(rows[0].text(0), digest)) return Status::Ok();
    if (rows[0].integer(1) <= now) return Status::Ok();
    const std::string id = "ak" + internal::random_hex(kAgentTokenIdBytes);
    out.node_id = node_id;
    out.token = std::string(kAgentPrefix) + id + "_" + internal::random_hex(kSecretBytes);
    out.heartbeat_seconds = kHeartbeatSeconds;
    // Single use: the enrolment digest goes; a previous agent token of the node stops working. Loss is
    // watched from the first inventory on (last_heartbeat_at stays NULL until then).
    GPUPLAN_TRY(n, tx.exec("UPDATE node_agents SET enroll_sha256 = NULL, enroll_expires_at = NULL, token_id = ?2, "
                           "token_sha256 = ?3 WHERE node_id = ?1",
                           params(node_id, id, sha256_hex(out.token))));
    (void)n;
    ok = true;
    return Status::Ok();
  });
  if (!s) return s.error();
  if (!ok) return refused;
  return out;
}

Result<AgentPrincipal> Market::authenticate_agent(std::string_view bearer) const {
  const std::string_view token = bare_token(bearer);
  const std::string id = token_id(token, kAgentPrefix);
  if (id.empty()) return unauthenticated(kBadAgentToken);
  const std::string digest = sha256_hex(token);
  AgentPrincipal out;
  bool ok = false;
  Status s = with_tx(internal::db(*impl_), TxMode::kRead, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(rows, tx.query("SELECT a.token_sha256, a.node_id, n.provider_id FROM node_agents a JOIN nodes n ON "
                               "n.id = a.node_id WHERE a.token_id = ?1",
                               params(id)));
    if (rows.empty() || rows[0].is_null(0)) return Status::Ok();
    if (!constant_time_equal(rows[0].text(0), digest)) return Status::Ok();
    out = AgentPrincipal{rows[0].text(1), rows[0].text(2)};
    ok = true;
    return Status::Ok();
  });
  if (!s) return s.error();
  if (!ok) return unauthenticated(kBadAgentToken);
  return out;
}

// --- reconciliation ----------------------------------------------------------------------------------------
namespace {

struct Counts {
  int64_t resumed = 0, lost = 0, ended = 0;
};

// The node's live rentals against its GPUs as the last inventory left them: a rental whose GPU is gone
// (not in the inventory) or whose static MIG instance vanished becomes lost (billing ends at the last
// heartbeat, claims stay); a lost one whose GPUs and instances are all back runs again (billed from now);
// on a new boot id every live rental on the node ends as lost (-> lost -> terminated: claims freed).
Status reconcile(Market::Impl& m, Tx& tx, const std::string& node_id, bool new_boot, int64_t last_heartbeat,
                 Counts* c) {
  struct GpuState {
    bool present = false;
    bool static_policy = false;
    bool instances_known = false;
    std::set<std::string> instances;
  };
  std::map<std::string, GpuState> gpus;  // by gpu id
  GPUPLAN_TRY(grows, tx.query("SELECT id, reported_name, mig_policy, reported_instances FROM gpus WHERE node_id = ?1",
                              params(node_id)));
  for (const Row& r : grows) {
    GpuState& g = gpus[r.text(0)];
    g.present = !r.is_null(1);
    g.static_policy = r.text(2) == to_string(MigPolicy::kStatic);
    g.instances_known = !r.is_null(3);
    g.instances = split_csv(r.text(3));
  }
  GPUPLAN_TRY(ids, tx.query("SELECT DISTINCT p.rental_id FROM rental_placements p JOIN gpus g ON g.id = p.gpu_id "
                            "WHERE g.node_id = ?1 ORDER BY p.rental_id",
                            params(node_id)));
  for (const Row& idrow : ids) {
    GPUPLAN_TRY(r, internal::load_rental(tx, idrow.text(0)));
    const bool runs = r.state == RentalState::kRunning || r.state == RentalState::kStarting;
    if (!runs && r.state != RentalState::kLost) continue;
    bool healthy = true;
    std::string why;
    for (const Placement& p : r.placements) {
      const GpuState& g = gpus[p.gpu_id];
      if (!g.present) {
        healthy = false;
        why = "GPU " + p.gpu_uuid + " vanished from the node's inventory";
      } else if (!p.profile.empty() && g.static_policy && g.instances_known &&
                 g.instances.count(instance_key(p.profile, p.start)) == 0) {
        healthy = false;
        why = "MIG instance " + instance_key(p.profile, p.start) + " on GPU " + p.gpu_uuid + " vanished";
      }
    }
    if (new_boot) {
      if (runs) {
        GPUPLAN_CHECK(internal::transition(m, tx, r.id, RentalState::kLost, "lost: the node booted again"));
        GPUPLAN_CHECK(bill_until(tx, r.id, last_heartbeat));
      }
      GPUPLAN_CHECK(internal::transition(m, tx, r.id, RentalState::kTerminated,
                                         "lost: the node booted again (new boot id); its MIG instances are gone"));
      ++c->ended;
    } else if (!healthy && runs) {
      GPUPLAN_CHECK(internal::transition(m, tx, r.id, RentalState::kLost, "lost: " + why));
      GPUPLAN_CHECK(bill_until(tx, r.id, last_heartbeat));
      ++c->lost;
    } else if (healthy && r.state == RentalState::kLost) {
      GPUPLAN_CHECK(internal::transition(m, tx, r.id, RentalState::kRunning, "resumed: the node reports it again"));
      ++c->resumed;
    }
  }
  return Status::Ok();
}

Status check_inventory(const Inventory& inv) {
  GPUPLAN_CHECK(in_range(inv.seq, 0, kMaxSeq, "seq"));
  GPUPLAN_CHECK(bounded(inv.boot_id, "boot_id", true));
  GPUPLAN_CHECK(bounded(inv.driver_version, "driver_version", false));
  if (inv.features_off.size() > kMaxFeaturesOff) {
    return limit_error("'features_off' has " + std::to_string(inv.features_off.size()) + " items; the limit is " +
                           std::to_string(kMaxFeaturesOff),
                       "features_off");
  }
  for (size_t i = 0; i < inv.features_off.size(); ++i) {
    GPUPLAN_CHECK(bounded(inv.features_off[i], "features_off[" + std::to_string(i) + "]", true));
  }
  if (inv.gpus.size() > static_cast<size_t>(kMaxGpusPerNode)) {
    return limit_error("the inventory has " + std::to_string(inv.gpus.size()) + " GPUs; the limit is " +
                           std::to_string(kMaxGpusPerNode),
                       "gpus");
  }
  std::set<std::string> uuids;
  for (size_t i = 0; i < inv.gpus.size(); ++i) {
    const InventoryGpu& g = inv.gpus[i];
    const std::string f = "gpus[" + std::to_string(i) + "]";
    GPUPLAN_CHECK(bounded(g.uuid, f + ".uuid", true));
    if (!uuids.insert(g.uuid).second) return usage_error("GPU UUID " + g.uuid + " appears twice", f + ".uuid");
    GPUPLAN_CHECK(bounded(g.name, f + ".name", true));
    GPUPLAN_CHECK(bounded(g.pci_bus_id, f + ".pci_bus_id", false));
    GPUPLAN_CHECK(bounded(g.mig_mode, f + ".mig_mode", false));
    GPUPLAN_CHECK(in_range(g.memory_bytes, 0, kMaxMemoryBytes, f + ".memory_bytes"));
    if (g.instances.size() > kMaxInstancesPerGpu) {
      return limit_error(f + " has " + std::to_string(g.instances.size()) + " MIG instances; the limit is " +
                             std::to_string(kMaxInstancesPerGpu),
                         f + ".instances");
    }
    for (size_t k = 0; k < g.instances.size(); ++k) {
      const std::string fi = f + ".instances[" + std::to_string(k) + "]";
      GPUPLAN_CHECK(bounded(g.instances[k].profile, fi + ".profile", true));
      GPUPLAN_CHECK(in_range(g.instances[k].start, 0, kMaxMigStart, fi + ".start"));
    }
  }
  return Status::Ok();
}

// What the catalog makes of a reported GPU: its canonical id, memory slices and, for a new GPU in MIG
// mode, the static layout its instances form; or why it cannot be sold.
struct Resolved {
  std::string catalog_id;
  int mem_slices = 1;
  std::string layout;  // canonical; empty: no MIG instances (policy none)
  std::string unsellable;
};
Resolved resolve_gpu(const Catalog& catalog, const InventoryGpu& g) {
  Resolved out;
  auto ref = catalog.resolve(g.name);
  if (!ref || ref->is_mig()) {
    out.unsellable = "the catalog does not know a GPU named '" + g.name + "' (gpuplan gpus list names them)";
    return out;
  }
  out.catalog_id = ref->gpu->id;
  if (ref->mig_table == nullptr) return out;
  out.mem_slices = ref->mig_table->memory_slices;
  if (g.instances.empty()) return out;
  std::vector<InventoryInstance> sorted = g.instances;
  auto entries = mig::parse_layout(instances_text(sorted));
  if (!entries) {
    out.unsellable = "its MIG instances do not parse: " + entries.error().message;
    return out;
  }
  auto check = mig::check_layout(*ref->mig_table, *entries);
  if (!check || !check->valid) {
    out.unsellable = "its MIG instances break a rule: " + (check ? check->reason : check.error().message);
    return out;
  }
  for (const mig::Placed& pl : check->placements) {
    out.layout += (out.layout.empty() ? "" : ",") + ref->mig_table->profiles[static_cast<size_t>(pl.profile)].name +
                  "@" + std::to_string(pl.start);
  }
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

Result<InventoryResult> Market::put_inventory(const AgentPrincipal& a, const Inventory& inv) {
  GPUPLAN_CHECK(check_inventory(inv));
  const Catalog& catalog = internal::catalog(*impl_);
  std::vector<Resolved> resolved;
  resolved.reserve(inv.gpus.size());
  for (const InventoryGpu& g : inv.gpus) resolved.push_back(resolve_gpu(catalog, g));
  const int64_t now = internal::now(*impl_);
  InventoryResult out;
  Status s = with_tx(internal::db(*impl_), TxMode::kWrite, [&](Tx& tx) -> Status {
    out = InventoryResult{};
    out.node_id = a.node_id;
    out.seq = inv.seq;
    GPUPLAN_TRY(row, load_agent(tx, a.node_id));
    GPUPLAN_CHECK(fence_seq(row, inv.seq));
    const bool new_boot = !row.boot_id.empty() && row.boot_id != inv.boot_id;
    const int64_t last_heartbeat = row.last_heartbeat_ms.value_or(now);
    GPUPLAN_TRY(existing, tx.query("SELECT id, uuid, catalog_id, idx FROM gpus WHERE node_id = ?1", params(a.node_id)));
    std::map<std::string, std::pair<std::string, std::string>> by_uuid;  // uuid -> (gpu id, catalog id)
    int64_t next_idx = 0;
    for (const Row& r : existing) {
      by_uuid[r.text(1)] = {r.text(0), r.text(2)};
      next_idx = std::max(next_idx, r.integer(3) + 1);
    }
    std::set<std::string> seen;
    const bool instances_off =
        std::find(inv.features_off.begin(), inv.features_off.end(), "mig_instances") != inv.features_off.end();
    for (size_t i = 0; i < inv.gpus.size(); ++i) {
      const InventoryGpu& g = inv.gpus[i];
      const Resolved& res = resolved[i];
      std::string reason = res.unsellable;
      // The instances count only when the agent could list them (feature "mig_instances" not off).
      const bool known_mig = g.mig_mode == "enabled" && !instances_off;
      const Value instances = known_mig ? Value(instances_text(g.instances)) : Value(std::monostate{});
      auto it = by_uuid.find(g.uuid);
      if (it != by_uuid.end()) {
        seen.insert(g.uuid);
        if (reason.empty() && res.catalog_id != it->second.second) {
          reason =
              "registered as " + it->second.second + ", the agent reports '" + g.name + "' (" + res.catalog_id + ")";
        }
        GPUPLAN_TRY(n, tx.exec("UPDATE gpus SET unsellable_reason = ?2, reported_name = ?3, pci_bus_id = ?4, "
                               "memory_bytes = ?5, mig_mode = ?6, reported_instances = ?7 WHERE id = ?1",
                               params(it->second.first, opt_text(reason), g.name, opt_text(g.pci_bus_id),
                                      g.memory_bytes, opt_text(g.mig_mode), instances)));
        (void)n;
      } else {
        // A GPU the node did not have: kept (sellable when the catalog knows it), MIG instances as a static
        // layout, whole otherwise.
        const std::string policy(to_string(res.layout.empty() ? MigPolicy::kNone : MigPolicy::kStatic));
        auto n = tx.exec(
            "INSERT INTO gpus (id, node_id, idx, uuid, catalog_id, mig_policy, mig_layout, mem_slices, "
            "unsellable_reason, reported_name, pci_bus_id, memory_bytes, mig_mode, reported_instances) VALUES "
            "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params(internal::new_id("g_"), a.node_id, next_idx++, g.uuid, res.catalog_id, policy, opt_text(res.layout),
                   int64_t{res.mem_slices}, opt_text(reason), g.name, opt_text(g.pci_bus_id), g.memory_bytes,
                   opt_text(g.mig_mode), instances));
        if (!n) {
          if (n.error().code == ErrorCode::kConflict) {
            return conflict("GPU UUID " + g.uuid + " is registered on another node",
                            "gpus[" + std::to_string(i) + "].uuid");
          }
          return n.error();
        }
      }
      out.gpus.push_back(InventoryGpuResult{g.uuid, res.catalog_id, reason});
    }
    for (const auto& [uuid, ids] : by_uuid) {
      if (seen.count(uuid) != 0) continue;
      GPUPLAN_TRY(
          n, tx.exec("UPDATE gpus SET unsellable_reason = ?2, reported_name = NULL WHERE id = ?1",
                     params(ids.first, "missing from the agent's inventory (seq " + std::to_string(inv.seq) + ")")));
      (void)n;
      out.gpus.push_back(InventoryGpuResult{uuid, ids.second, "missing from the agent's inventory"});
    }
    GPUPLAN_TRY(upd, tx.exec("UPDATE node_agents SET seq = ?2, boot_id = ?3, driver_version = ?4, features_off = ?5, "
                             "last_heartbeat_at = ?6, lost_at = NULL WHERE node_id = ?1",
                             params(a.node_id, inv.seq, inv.boot_id, opt_text(inv.driver_version),
                                    opt_text(join(inv.features_off)), now)));
    (void)upd;
    Counts c;
    GPUPLAN_CHECK(reconcile(*impl_, tx, a.node_id, new_boot, last_heartbeat, &c));
    out.resumed = c.resumed;
    out.lost = c.lost;
    out.ended = c.ended;
    return internal::bump_version(tx);
  });
  if (!s) return s.error();
  return out;
}

namespace {

// The heartbeat's `failed`: each rental of this node that the agent could not start fails, with the
// agent's reason (its claims freed, billing ended now, at the report), when the report acts on the
// rental's current generation; a report for an older (or a newer, unknown) generation, for a rental
// that is not on this node, or for one that cannot fail any more (stopping, ended) is ignored.
Status record_failures(Market::Impl& m, Tx& tx, const std::string& node_id, const std::vector<FailedReport>& failed,
                       HeartbeatAnswer& out) {
  bool changed = false;
  for (const FailedReport& f : failed) {
    GPUPLAN_TRY(rows, tx.query("SELECT r.version, r.state FROM rentals r JOIN rental_placements p ON p.rental_id = "
                               "r.id JOIN gpus g ON g.id = p.gpu_id WHERE g.node_id = ?1 AND r.id = ?2 LIMIT 1",
                               params(node_id, f.rental_id)));
    if (rows.empty()) {
      out.ignored.push_back(f.rental_id);  // not on this node: the same answer whether it exists or not
      continue;
    }
    const auto state = parse_rental_state(rows[0].text(1));
    if (rows[0].integer(0) != f.generation || !state || !edge_allowed(*state, RentalState::kFailed)) {
      out.ignored.push_back(f.rental_id);
      continue;
    }
    const std::string code = f.code.empty() ? std::string("failed") : f.code;
    GPUPLAN_CHECK(internal::transition(
        m, tx, f.rental_id, RentalState::kFailed,
        "the node could not start it: " + code + (f.message.empty() ? std::string() : ": " + f.message)));
    out.failed.push_back(f.rental_id);
    changed = true;
  }
  return changed ? internal::bump_version(tx) : Status::Ok();
}

}  // namespace

Result<HeartbeatAnswer> Market::heartbeat(const AgentPrincipal& a, const Heartbeat& hb) {
  GPUPLAN_CHECK(in_range(hb.seq, 0, kMaxSeq, "seq"));
  GPUPLAN_CHECK(bounded(hb.boot_id, "boot_id", true));
  // Both lists: at most kMaxRunningReports items, each a bounded rental id at a generation in range.
  auto check_list = [](const auto& items, const char* name) -> Status {
    if (items.size() > kMaxRunningReports) {
      return limit_error("'" + std::string(name) + "' has " + std::to_string(items.size()) + " items; the limit is " +
                             std::to_string(kMaxRunningReports),
                         name);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string f = std::string(name) + "[" + std::to_string(i) + "]";
      GPUPLAN_CHECK(bounded(items[i].rental_id, f + ".rental_id", true));
      GPUPLAN_CHECK(in_range(items[i].generation, 0, kMaxSeq, f + ".generation"));
    }
    return Status::Ok();
  };
  GPUPLAN_CHECK(check_list(hb.running, "running"));
  GPUPLAN_CHECK(check_list(hb.failed, "failed"));
  for (size_t i = 0; i < hb.failed.size(); ++i) {
    const std::string f = "failed[" + std::to_string(i) + "]";
    GPUPLAN_CHECK(bounded(hb.failed[i].code, f + ".code", false));
    if (hb.failed[i].message.size() > kMaxFailureMessageBytes) {
      return limit_error("'" + f + ".message' is " + std::to_string(hb.failed[i].message.size()) +
                             " bytes; the limit is " + std::to_string(kMaxFailureMessageBytes),
                         f + ".message");
    }
  }
  const int64_t now = internal::now(*impl_);
  HeartbeatAnswer out;
  Status s = with_tx(internal::db(*impl_), TxMode::kWrite, [&](Tx& tx) -> Status {
    out = HeartbeatAnswer{};
    out.heartbeat_seconds = kHeartbeatSeconds;
    GPUPLAN_TRY(row, load_agent(tx, a.node_id));
    GPUPLAN_CHECK(fence_seq(row, hb.seq));
    if (row.boot_id.empty()) {
      return conflict("no inventory yet: PUT /api/v1/agent/inventory before the first heartbeat", "boot_id");
    }
    if (row.boot_id != hb.boot_id) {
      return conflict("the node booted again (boot id " + hb.boot_id + ", the inventory said " + row.boot_id +
                          "): PUT /api/v1/agent/inventory first",
                      "boot_id");
    }
    GPUPLAN_TRY(upd,
                tx.exec("UPDATE node_agents SET seq = ?2, last_heartbeat_at = ?3, lost_at = NULL WHERE node_id = ?1",
                        params(a.node_id, hb.seq, now)));
    (void)upd;
    if (row.lost_at_ms) {
      // Back after a loss with the same boot id: capacity returns to the offers, rentals resume.
      Counts c;
      GPUPLAN_CHECK(reconcile(*impl_, tx, a.node_id, false, row.last_heartbeat_ms.value_or(now), &c));
      GPUPLAN_CHECK(internal::bump_version(tx));
    }
    GPUPLAN_CHECK(record_failures(*impl_, tx, a.node_id, hb.failed, out));
    GPUPLAN_TRY(
        node, tx.query("SELECT bench_request, bench_answered, mig_policy FROM nodes WHERE id = ?1", params(a.node_id)));
    if (!node.empty()) {
      if (node[0].integer(0) > node[0].integer(1)) out.bench_request = node[0].integer(0);
      auto node_policy = parse_mig_policy(node[0].text(2));
      if (node_policy) out.mig_policy = *node_policy;
    }
    GPUPLAN_TRY(rows, tx.query("SELECT r.id, r.version, r.state, g.uuid, p.profile, p.start_slice FROM "
                               "rental_placements p JOIN gpus g ON g.id = p.gpu_id JOIN rentals r ON r.id = "
                               "p.rental_id WHERE g.node_id = ?1 ORDER BY r.id, p.seq",
                               params(a.node_id)));
    std::map<std::string, int64_t> generation;
    for (const Row& r : rows) {
      DesiredRental d;
      d.rental_id = r.text(0);
      d.generation = r.integer(1);
      auto state = parse_rental_state(r.text(2));
      d.state = state ? *state : RentalState::kFailed;
      d.gpu_uuid = r.text(3);
      d.profile = r.text(4);
      d.placement = static_cast<int>(r.integer(5));
      generation[d.rental_id] = d.generation;
      out.desired.push_back(std::move(d));
    }
    for (const RunningReport& rep : hb.running) {
      auto it = generation.find(rep.rental_id);
      if (it == generation.end()) {
        out.ignored.push_back(rep.rental_id);  // not on this node: the same answer whether it exists or not
      } else if (rep.generation < it->second) {
        out.stale = true;
        out.stale_reason = "stale report: rental " + rep.rental_id + " is at generation " + std::to_string(it->second) +
                           ", the report acts on " + std::to_string(rep.generation);
      }
    }
    return Status::Ok();
  });
  if (!s) return s.error();
  return out;
}

Result<int64_t> Market::mark_lost_nodes() {
  const int64_t now = internal::now(*impl_);
  const int64_t deadline = now - kMissedHeartbeatsForLoss * kHeartbeatSeconds * kMsPerSecond;
  int64_t changed = 0;
  Status s = with_tx(internal::db(*impl_), TxMode::kWrite, [&](Tx& tx) -> Status {
    changed = 0;
    GPUPLAN_TRY(nodes, tx.query("SELECT node_id, last_heartbeat_at FROM node_agents WHERE lost_at IS NULL AND "
                                "token_sha256 IS NOT NULL AND last_heartbeat_at < ?1 ORDER BY node_id",
                                params(deadline)));
    for (const Row& n : nodes) {
      const std::string& node_id = n.text(0);
      const int64_t last = n.integer(1);
      GPUPLAN_TRY(u, tx.exec("UPDATE node_agents SET lost_at = ?2 WHERE node_id = ?1", params(node_id, now)));
      (void)u;
      GPUPLAN_TRY(ids, tx.query("SELECT DISTINCT r.id FROM rentals r JOIN rental_placements p ON p.rental_id = r.id "
                                "JOIN gpus g ON g.id = p.gpu_id WHERE g.node_id = ?1 AND r.state IN ('running', "
                                "'starting') ORDER BY r.id",
                                params(node_id)));
      for (const Row& r : ids) {
        GPUPLAN_CHECK(
            internal::transition(*impl_, tx, r.text(0), RentalState::kLost,
                                 "lost: the node missed " + std::to_string(kMissedHeartbeatsForLoss) + " heartbeats"));
        GPUPLAN_CHECK(bill_until(tx, r.text(0), last));
        ++changed;
      }
    }
    return nodes.empty() ? Status::Ok() : internal::bump_version(tx);
  });
  if (!s) return s.error();
  return changed;
}

}  // namespace gpuplan::market
