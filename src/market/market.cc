// The market's logic over the store: identities, inventory, live offers, placement, the rental state
// machine and billing. Every statement is written once, in the portable SQL subset (db.h).
#include "gpuplan/market.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <tuple>

#include "core/digest.h"
#include "gpuplan/catalog.h"
#include "gpuplan/mig.h"
#include "market/db.h"
#include "market/market_internal.h"

// GPUPLAN_CHECK around a call whose lambda argument uses GPUPLAN_CHECK itself would shadow its variable.
#define MARKET_RUN(expr)                                        \
  do {                                                          \
    ::gpuplan::Status market_run_status_ = (expr);              \
    if (!market_run_status_) return market_run_status_.error(); \
  } while (0)

namespace gpuplan::market {

namespace {

__extension__ typedef __int128 Int128;  // exact money products (GCC and clang)

// Random bits in a token's secret: 256 (the issue).
constexpr size_t kTokenSecretBytes = 32;
// Random bits in an object id: 80, so ids of a market with billions of rows do not collide by chance.
constexpr size_t kIdRandomBytes = 10;
constexpr std::string_view kTokenPrefix = "gpl_";
// Times a rental's body runs again when a claim's primary key was taken underneath it (the next
// candidate is then chosen from fresh state). Bounded: each retry sees at least one more claim.
constexpr int kMaxClaimAttempts = 8;
// Rental writes whose view deltas may wait for a predecessor's (Market::Impl::pending_deltas): far more
// than the writers that can commit between one commit and its own publication.
constexpr size_t kMaxPendingDeltas = 256;
// How long a reader or writer waits for this process's commit in flight to reach the view before it
// reads the tables instead: a publication takes microseconds after its commit; far more is a stall.
constexpr std::chrono::milliseconds kMaxPublicationWait{20};
// Reasons listed in a kConflict message, one per candidate, before "... and N more".
constexpr size_t kMaxReasons = 12;
// Bounds of a node's size figures (a stated limit, so no arithmetic overflows downstream).
constexpr int64_t kMaxNodeVcpus = 8192;
constexpr int64_t kMaxNodeRamGb = 1 << 20;   // 1 PiB
constexpr int64_t kMaxNodeDiskGb = 1 << 24;  // 16 PiB
constexpr int64_t kMsPerSecond = 1000;
constexpr int64_t kSecondsPerHour = 3600;
// A rental may end at most this far ahead (ends_at), so time arithmetic stays far from overflow.
constexpr int64_t kMaxRentalMs = 10LL * 365 * 24 * 3600 * 1000;

Error forbidden(std::string message) { return Error{ErrorCode::kForbidden, std::move(message), ""}; }
Error conflict(std::string message, std::string field = {}) {
  return Error{ErrorCode::kConflict, std::move(message), std::move(field)};
}

std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (!random_bytes(std::span(reinterpret_cast<uint8_t*>(raw.data()), raw.size()))) {
    std::abort();  // no entropy: continuing would issue guessable tokens
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::string new_id(std::string_view prefix) { return std::string(prefix) + random_hex(kIdRandomBytes); }

// Names, regions, UUIDs, idempotency keys: 1..kMaxNameBytes of [A-Za-z0-9._:-@/ ] (printable, no quotes).
Status check_name(std::string_view s, const std::string& field, bool allow_empty = false) {
  if (s.empty()) {
    if (allow_empty) return Status::Ok();
    return usage_error("'" + field + "' is required", field);
  }
  if (s.size() > kMaxNameBytes) {
    return limit_error(
        "'" + field + "' is " + std::to_string(s.size()) + " bytes; the limit is " + std::to_string(kMaxNameBytes),
        field);
  }
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-' || c == ':' || c == '@' || c == '/' || c == ' ';
    if (!ok) return usage_error("'" + field + "' may hold letters, digits, spaces and . _ - : @ / only", field);
  }
  return Status::Ok();
}

Status require_write(const Principal& p) {
  if (p.scope == Scope::kRead) return forbidden("this token is read-only");
  if (p.role == Role::kViewer) return forbidden("a viewer may read but not change anything");
  return Status::Ok();
}
Status require_kind(const Principal& p, TenantKind kind) {
  if (p.tenant_kind != kind) {
    return forbidden("this needs a " + std::string(to_string(kind)) + " tenant; yours is a " +
                     std::string(to_string(p.tenant_kind)));
  }
  return Status::Ok();
}
bool is_platform_admin(const Principal& p) {
  return p.tenant_kind == TenantKind::kPlatform && p.role == Role::kAdmin && p.scope == Scope::kFull;
}
Status require_platform_admin(const Principal& p) {
  if (!is_platform_admin(p)) return forbidden("only the platform's admin may do this");
  return Status::Ok();
}

template <typename... A>
std::vector<Value> params(A&&... a) {
  return std::vector<Value>{Value(std::forward<A>(a))...};
}
Value opt(const std::optional<int64_t>& v) { return v ? Value(*v) : Value(std::monostate{}); }
Value opt_text(const std::string& s) { return s.empty() ? Value(std::monostate{}) : Value(s); }

// ceil(seconds x price / 3600) in 128-bit arithmetic (no overflow within the stated bounds).
int64_t charge_for(int64_t seconds, int64_t price_micros_per_hour) {
  const Int128 num = static_cast<Int128>(seconds) * price_micros_per_hour;
  return static_cast<int64_t>((num + kSecondsPerHour - 1) / kSecondsPerHour);
}

// --- rows ----------------------------------------------------------------------------------------------
// A word the store holds, back to its value (market_types.cc's tables); a word it should never hold (a
// hand-edited row) reads as `fallback`, the safest value of its vocabulary.
template <typename E>
E stored_word(const Result<E>& parsed, E fallback) {
  return parsed ? *parsed : fallback;
}
Interconnect stored_interconnect(const std::string& word) {
  return stored_word(parse_interconnect(word), Interconnect::kPcie);
}
NodeState stored_node_state(const std::string& word) {
  return word == to_string(NodeState::kReady) ? NodeState::kReady : NodeState::kDraining;
}

constexpr const char* kRentalCols =
    "r.id, r.tenant_id, r.created_by, r.offer_id, r.provider_id, r.target, r.units, r.price_micros_per_hour, "
    "r.min_billable_seconds, COALESCE(t.name, ''), r.state, r.state_reason, r.version, r.idempotency_key, r.ends_at, "
    "r.created_at, r.updated_at, r.prev_gpus";
constexpr const char* kRentalFrom = " FROM rentals r LEFT JOIN templates t ON t.id = r.template_id ";

struct RentalRow {
  Rental r;
  std::string prev_gpus;
};

RentalRow rental_from(const Row& row) {
  RentalRow out;
  Rental& r = out.r;
  r.id = row.text(0);
  r.tenant_id = row.text(1);
  r.created_by = row.text(2);
  r.offer_id = row.text(3);
  r.provider_id = row.text(4);
  r.target = row.text(5);
  r.count = static_cast<int>(row.integer(6));
  r.price_micros_per_hour = row.integer(7);
  r.min_billable_seconds = row.integer(8);
  r.template_name = row.text(9);
  r.state = stored_word(parse_rental_state(row.text(10)), RentalState::kFailed);
  r.state_reason = row.text(11);
  r.version = row.integer(12);
  r.idempotency_key = row.text(13);
  r.ends_at_ms = row.maybe_integer(14);
  r.created_at_ms = row.integer(15);
  r.updated_at_ms = row.integer(16);
  out.prev_gpus = row.text(17);
  return out;
}

Status load_placements(Tx& tx, Rental& r) {
  GPUPLAN_TRY(rows, tx.query("SELECT p.gpu_id, g.uuid, g.node_id, p.profile, p.start_slice, p.size_slices FROM "
                             "rental_placements p JOIN gpus g ON g.id = p.gpu_id WHERE p.rental_id = ?1 ORDER BY p.seq",
                             params(r.id)));
  r.placements.clear();
  for (const Row& row : rows) {
    r.placements.push_back(Placement{row.text(0), row.text(1), row.text(2), row.text(3),
                                     static_cast<int>(row.integer(4)), static_cast<int>(row.integer(5))});
  }
  return Status::Ok();
}

// A rental by id, visible to `tenant` ("" = any): kNotFound otherwise (another tenant's rental included).
Result<RentalRow> load_rental(Tx& tx, std::string_view id, const std::string& tenant,
                              const std::string& provider = {}) {
  std::string sql = std::string("SELECT ") + kRentalCols + kRentalFrom + "WHERE r.id = ?1";
  std::vector<Value> v = params(std::string(id));
  if (!tenant.empty()) {
    sql += " AND r.tenant_id = ?2";
    v.emplace_back(tenant);
  } else if (!provider.empty()) {
    sql += " AND r.provider_id = ?2";
    v.emplace_back(provider);
  }
  GPUPLAN_TRY(rows, tx.query(sql, v));
  if (rows.empty()) return not_found_error("no rental '" + std::string(id) + "'", "id");
  RentalRow out = rental_from(rows[0]);
  GPUPLAN_CHECK(load_placements(tx, out.r));
  return out;
}

// --- billing ----------------------------------------------------------------------------------------------
struct SegmentRow {
  int64_t started = 0;
  std::optional<int64_t> ended;
  int64_t price = 0;
};

RentalUsage usage_of(const std::string& rental_id, const std::string& tenant, const std::string& provider,
                     int64_t price, int64_t min_billable, const std::vector<SegmentRow>& segs, int64_t now) {
  RentalUsage u;
  u.rental_id = rental_id;
  u.tenant_id = tenant;
  u.provider_id = provider;
  int64_t seconds = 0;
  for (const SegmentRow& s : segs) {
    const int64_t end = s.ended.value_or(std::max(now, s.started));
    seconds += (end - s.started + kMsPerSecond - 1) / kMsPerSecond;  // a started second counts
    u.segments.push_back(UsageSegment{s.started, s.ended, s.price});
  }
  if (!segs.empty()) seconds = std::max(seconds, min_billable);
  u.billed_seconds = seconds;
  u.charge_micros = charge_for(seconds, price);
  return u;
}

// Usage of every rental matching `where` (a condition on r with ?1 bound to `key`).
Result<std::vector<RentalUsage>> usages(Tx& tx, const std::string& where, const std::string& key, int64_t now) {
  GPUPLAN_TRY(rows,
              tx.query("SELECT r.id, r.tenant_id, r.provider_id, r.price_micros_per_hour, r.min_billable_seconds, "
                       "s.started_at, s.ended_at, s.price_micros_per_hour FROM rentals r LEFT JOIN usage_segments s "
                       "ON s.rental_id = r.id WHERE " +
                           where + " ORDER BY r.created_at, r.id, s.seq",
                       params(key)));
  std::vector<RentalUsage> out;
  size_t i = 0;
  while (i < rows.size()) {
    const std::string id = rows[i].text(0);
    std::vector<SegmentRow> segs;
    const size_t first = i;
    for (; i < rows.size() && rows[i].text(0) == id; ++i) {
      if (!rows[i].is_null(5))
        segs.push_back(SegmentRow{rows[i].integer(5), rows[i].maybe_integer(6), rows[i].integer(7)});
    }
    const Row& r = rows[first];
    out.push_back(usage_of(id, r.text(1), r.text(2), r.integer(3), r.integer(4), segs, now));
  }
  return out;
}

// A tenant's charges so far: the final rentals' frozen charges in one SUM, plus the rentals that can
// still bill (live or stopped, or final before migration 0002 froze charges) from their segments. The
// history of ended rentals is never read row by row.
Result<int64_t> tenant_charges(Tx& tx, const std::string& tenant, int64_t now) {
  GPUPLAN_TRY(settled, tx.query("SELECT COALESCE(SUM(final_charge_micros), 0) FROM rentals WHERE tenant_id = ?1 AND "
                                "final_charge_micros IS NOT NULL",
                                params(tenant)));
  int64_t sum = settled.empty() ? 0 : settled[0].integer(0);
  GPUPLAN_TRY(us, usages(tx, "r.tenant_id = ?1 AND r.final_charge_micros IS NULL", tenant, now));
  for (const auto& u : us) sum += u.charge_micros;
  return sum;
}

// Every write that changes inventory, claims or offers bumps the one-row market_version in its own
// transaction, so that each process's view of live offers (Market::Impl::offer_view) sees the change.
// next_version answers the version the write moves the store to.
Result<int64_t> next_version(Tx& tx) {
  GPUPLAN_TRY(rows, tx.query("UPDATE market_version SET version = version + 1 WHERE id = 1 RETURNING version"));
  if (rows.empty()) return Error{ErrorCode::kInternal, "market_version has no row (migration 0002)", ""};
  return rows[0].integer(0);
}
Status bump_version(Tx& tx) {
  GPUPLAN_TRY(v, next_version(tx));
  (void)v;
  return Status::Ok();
}
Result<int64_t> read_version(Tx& tx) {
  GPUPLAN_TRY(rows, tx.query("SELECT version FROM market_version WHERE id = 1"));
  if (rows.empty()) return Error{ErrorCode::kInternal, "market_version has no row (migration 0002)", ""};
  return rows[0].integer(0);
}

std::string money(int64_t micros) {
  const bool neg = micros < 0;
  const uint64_t m = neg ? static_cast<uint64_t>(-(micros + 1)) + 1 : static_cast<uint64_t>(micros);
  std::string frac = std::to_string(m % 1'000'000);
  frac.insert(0, 6 - frac.size(), '0');
  return std::string(neg ? "-" : "") + std::to_string(m / 1'000'000) + "." + frac;
}

// kPaymentRequired when charges so far plus `lookahead_micros` would cross the tenant's limit.
Status check_credit(Tx& tx, const std::string& tenant, int64_t lookahead_micros, int64_t now) {
  GPUPLAN_TRY(rows, tx.query("SELECT credit_limit_micros FROM tenants WHERE id = ?1", params(tenant)));
  if (rows.empty() || rows[0].is_null(0)) return Status::Ok();
  const int64_t limit = rows[0].integer(0);
  GPUPLAN_TRY(charges, tenant_charges(tx, tenant, now));
  if (charges + lookahead_micros > limit) {
    return Error{ErrorCode::kPaymentRequired,
                 "charges so far " + money(charges) + " plus the next hour of this rental " + money(lookahead_micros) +
                     " exceed the tenant's credit limit of " + money(limit) + "; ask the platform to raise it",
                 "credit_limit"};
  }
  return Status::Ok();
}

// --- inventory snapshot and placement ---------------------------------------------------------------------
struct GpuSnap {
  std::string id, node_id, uuid, catalog_id;
  int idx = 0;
  MigPolicy mig = MigPolicy::kNone;
  int mem_slices = 1;
  const MigTable* table = nullptr;
  std::vector<mig::Placed> static_layout;
  std::vector<mig::Placed> running;  // live MIG instances (dynamic and static)
  uint32_t claimed = 0;              // bit i: memory slice i held
  uint32_t full_mask() const { return mem_slices >= 32 ? ~0u : ((1u << mem_slices) - 1u); }
};
struct NodeSnap {
  std::string id, provider_id, name, region;
  Interconnect interconnect = Interconnect::kPcie;
  NodeState state = NodeState::kReady;
  int64_t order = 0;
  std::vector<size_t> gpus;  // indices into Snapshot::gpus
};
struct Snapshot {
  std::vector<NodeSnap> nodes;
  std::vector<GpuSnap> gpus;
};

std::vector<mig::Placed> parse_placed(const MigTable& table, std::string_view text) {
  std::vector<mig::Placed> out;
  auto entries = mig::parse_layout(text);
  if (!entries) return out;
  for (const auto& e : *entries) {
    for (size_t i = 0; i < table.profiles.size(); ++i) {
      if (table.profiles[i].name == e.profile && e.start) out.push_back(mig::Placed{static_cast<int>(i), *e.start});
    }
  }
  return out;
}

int profile_index(const MigTable& table, std::string_view name) {
  for (size_t i = 0; i < table.profiles.size(); ++i) {
    if (table.profiles[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// A condition on `n` (nodes): the node's agent has not been marked lost (market_agent.cc; no agent: not lost).
constexpr const char* kNodeNotLost =
    "NOT EXISTS (SELECT 1 FROM node_agents a WHERE a.node_id = n.id AND a.lost_at IS NOT NULL)";

uint32_t mask_of(int start, int size) { return size >= 32 ? ~0u : (((1u << size) - 1u) << start); }

// Everything placement needs, in one consistent read: the provider's nodes ("" = all), GPUs, claims,
// and live MIG instances.
// `region` and `gpu` ("" = any) narrow it to what one offer can use; `ready_only` leaves draining nodes out.
Result<Snapshot> load_snapshot(Tx& tx, const Catalog& catalog, const std::string& provider,
                               const std::string& region = {}, const std::string& gpu_id = {},
                               bool ready_only = false) {
  Snapshot snap;
  std::string where;
  std::vector<Value> v;
  auto add = [&](const std::string& value, const char* column) {
    if (value.empty()) return;
    v.emplace_back(value);
    where += std::string(where.empty() ? " WHERE " : " AND ") + column + " = ?" + std::to_string(v.size());
  };
  add(provider, "n.provider_id");
  add(region, "n.region");
  add(gpu_id, "g.catalog_id");
  // The agent's word (migration 0004): a GPU its inventory marked unsellable is never placed on, and a lost
  // node sells nothing (it reads as draining) until it reports again (market_agent.cc).
  where += std::string(where.empty() ? " WHERE " : " AND ") + "g.unsellable_reason IS NULL";
  if (ready_only) where += " AND n.state = 'ready' AND " + std::string(kNodeNotLost);
  GPUPLAN_TRY(rows, tx.query("SELECT n.id, n.provider_id, n.name, n.region, n.interconnect, CASE WHEN " +
                                 std::string(kNodeNotLost) +
                                 " THEN n.state ELSE 'draining' END, g.id, g.idx, g.uuid, g.catalog_id, g.mig_policy, "
                                 "g.mig_layout, g.mem_slices FROM nodes n JOIN gpus g ON g.node_id = n.id" +
                                 where + " ORDER BY n.created_at, n.id, g.idx",
                             v));
  std::map<std::string, size_t, std::less<>> gpu_index;
  for (const Row& row : rows) {
    if (snap.nodes.empty() || snap.nodes.back().id != row.text(0)) {
      NodeSnap n;
      n.id = row.text(0);
      n.provider_id = row.text(1);
      n.name = row.text(2);
      n.region = row.text(3);
      n.interconnect = stored_interconnect(row.text(4));
      n.state = stored_node_state(row.text(5));
      n.order = static_cast<int64_t>(snap.nodes.size());
      snap.nodes.push_back(std::move(n));
    }
    GpuSnap g;
    g.id = row.text(6);
    g.node_id = row.text(0);
    g.idx = static_cast<int>(row.integer(7));
    g.uuid = row.text(8);
    g.catalog_id = row.text(9);
    g.mig = stored_word(parse_mig_policy(row.text(10)), MigPolicy::kNone);
    g.mem_slices = static_cast<int>(row.integer(12));
    if (const Gpu* gpu = catalog.find_gpu(g.catalog_id); gpu != nullptr && !gpu->mig_table.empty()) {
      g.table = catalog.find_mig_table(gpu->mig_table);
    }
    if (g.table != nullptr && g.mig == MigPolicy::kStatic) g.static_layout = parse_placed(*g.table, row.text(11));
    gpu_index[g.id] = snap.gpus.size();
    snap.nodes.back().gpus.push_back(snap.gpus.size());
    snap.gpus.push_back(std::move(g));
  }
  GPUPLAN_TRY(claims,
              tx.query("SELECT c.gpu_id, c.mem_slice FROM slice_claims c JOIN gpus g ON g.id = c.gpu_id JOIN nodes "
                       "n ON n.id = g.node_id" +
                           where,
                       v));
  for (const Row& row : claims) {
    auto it = gpu_index.find(row.text(0));
    const int64_t s = row.integer(1);
    if (it != gpu_index.end() && s >= 0 && s < 32) snap.gpus[it->second].claimed |= 1u << s;
  }
  GPUPLAN_TRY(inst, tx.query("SELECT p.gpu_id, p.profile, p.start_slice FROM rental_placements p JOIN gpus g ON g.id = "
                             "p.gpu_id JOIN nodes n ON n.id = g.node_id" +
                                 (where.empty() ? std::string(" WHERE") : where + " AND") + " p.profile IS NOT NULL",
                             v));
  for (const Row& row : inst) {
    auto it = gpu_index.find(row.text(0));
    if (it == gpu_index.end()) continue;
    GpuSnap& g = snap.gpus[it->second];
    if (g.table == nullptr) continue;
    const int pi = profile_index(*g.table, row.text(1));
    if (pi >= 0) g.running.push_back(mig::Placed{pi, static_cast<int>(row.integer(2))});
  }
  return snap;
}

struct OfferRow {
  Offer o;
};

Offer offer_from(const Row& row) {
  Offer o;
  o.id = row.text(0);
  o.provider_id = row.text(1);
  o.provider = row.text(2);
  o.target = row.text(3);
  o.gpu = row.text(4);
  o.profile = row.text(5);
  o.gpus = static_cast<int>(row.integer(6));
  o.region = row.text(7);
  o.price_micros_per_hour = row.integer(8);
  o.min_billable_seconds = row.integer(9);
  o.active = row.integer(10) != 0;
  o.created_at_ms = row.integer(11);
  return o;
}
constexpr const char* kOfferSelect =
    "SELECT o.id, o.provider_id, t.name, o.target, o.catalog_id, COALESCE(o.profile, ''), o.gpus, o.region, "
    "o.price_micros_per_hour, o.min_billable_seconds, o.active, o.created_at FROM offers o JOIN tenants t ON t.id = "
    "o.provider_id ";

// One MIG candidate: a profile instance on a GPU at a start, with its fragmentation score (lower is
// better): (not a previous GPU, takes a GPU whose whole capacity is free, dynamic rather than static,
// memory slices then compute slices stranded by the new layout, free slices left, GPU order, start).
using MigScore = std::tuple<int, int, int, int, int, int, int64_t, int>;
struct MigCandidate {
  size_t gpu = 0;
  int start = 0;
  MigScore score;
};
// The best start on one GPU depends only on its state (table, policy, layout, claims) and the profile:
// (empty, dynamic, stranded memory, stranded compute, free after, start). Identical GPUs (most of an
// inventory) are scored once per call through this memo, and so are the greedy counts of `available`.
using LocalScore = std::tuple<int, int, int, int, int, int>;
struct Memo {
  std::map<std::string, std::optional<LocalScore>> best;
  std::map<std::string, int64_t> count;
};

std::string state_key(const GpuSnap& g, int profile) {
  std::vector<mig::Placed> running = g.running;
  std::sort(running.begin(), running.end(), [](const mig::Placed& a, const mig::Placed& b) {
    return std::tie(a.start, a.profile) < std::tie(b.start, b.profile);
  });
  std::string key = g.table != nullptr ? g.table->id : "";
  key += "|" + std::to_string(static_cast<int>(g.mig)) + "|" + std::to_string(g.claimed) + "|" +
         std::to_string(profile) + "|";
  for (const mig::Placed& p : running) key += std::to_string(p.profile) + "@" + std::to_string(p.start) + ",";
  if (g.mig == MigPolicy::kStatic) {
    key += "|";
    for (const mig::Placed& p : g.static_layout) key += std::to_string(p.profile) + "@" + std::to_string(p.start) + ",";
  }
  return key;
}

std::optional<LocalScore> best_on_gpu(const GpuSnap& g, int pi, Memo& memo) {
  const std::string key = state_key(g, pi);
  if (auto it = memo.best.find(key); it != memo.best.end()) return it->second;
  const MigProfile& prof = g.table->profiles[static_cast<size_t>(pi)];
  std::optional<LocalScore> best;
  auto consider = [&](int start, int empty, int dynamic) {
    std::vector<mig::Placed> layout = g.running;
    layout.push_back(mig::Placed{pi, start});
    std::string why;
    if (mig::first_broken_rule(*g.table, layout, &why) != mig::Rule::kNone) return;
    const mig::Stranded st = dynamic != 0 ? mig::stranded(*g.table, layout) : mig::Stranded{};
    const int free_after = std::popcount(g.full_mask() & ~(g.claimed | mask_of(start, prof.memory_slices)));
    LocalScore score{empty, dynamic, st.memory_slices, st.compute_slices, free_after, start};
    if (!best || score < *best) best = score;
  };
  if (g.mig == MigPolicy::kStatic) {
    for (const mig::Placed& inst : g.static_layout) {
      if (inst.profile != pi || (g.claimed & mask_of(inst.start, prof.memory_slices)) != 0) continue;
      consider(inst.start, 0, 0);
    }
  } else if (g.mig == MigPolicy::kDynamic) {
    for (int start : prof.placement_starts) {
      if (start + prof.memory_slices > g.mem_slices) continue;
      if ((g.claimed & mask_of(start, prof.memory_slices)) != 0) continue;
      consider(start, g.claimed == 0 ? 1 : 0, 1);
    }
  }
  memo.best.emplace(key, best);
  return best;
}

bool node_matches(const NodeSnap& n, const Offer& o) { return n.region == o.region && n.state == NodeState::kReady; }

std::optional<MigCandidate> best_mig(const Snapshot& snap, const std::vector<size_t>& gpus, const Offer& o,
                                     const std::set<std::string>& prev, Memo& memo) {
  std::optional<MigCandidate> best;
  for (size_t gi : gpus) {
    const GpuSnap& g = snap.gpus[gi];
    if (g.table == nullptr) continue;
    const int pi = profile_index(*g.table, o.profile);
    if (pi < 0) continue;
    auto local = best_on_gpu(g, pi, memo);
    if (!local) continue;
    const auto [empty, dynamic, sm, sc, free_after, start] = *local;
    MigScore score{prev.count(g.id) > 0 ? 0 : 1, empty, dynamic, sm, sc, free_after, static_cast<int64_t>(gi), start};
    if (!best || score < best->score) best = MigCandidate{gi, start, score};
  }
  return best;
}

// The GPUs of `snap` a MIG offer may use.
std::vector<size_t> mig_gpus(const Snapshot& snap, const Offer& o) {
  std::vector<size_t> out;
  for (const NodeSnap& n : snap.nodes) {
    if (n.provider_id != o.provider_id || !node_matches(n, o)) continue;
    for (size_t gi : n.gpus) {
      const GpuSnap& g = snap.gpus[gi];
      if (g.catalog_id == o.gpu && (g.mig == MigPolicy::kStatic || g.mig == MigPolicy::kDynamic)) out.push_back(gi);
    }
  }
  return out;
}

bool whole_free(const GpuSnap& g, const Offer& o) {
  return g.catalog_id == o.gpu && g.mig != MigPolicy::kStatic && g.claimed == 0;
}

// How many more instances of profile `pi` fit on `g`, placing each by the same rule as rent().
int64_t greedy_count(const GpuSnap& start, int pi, Memo& memo) {
  const std::string key = state_key(start, pi);
  if (auto it = memo.count.find(key); it != memo.count.end()) return it->second;
  GpuSnap g = start;
  int64_t n = 0;
  const int size = g.table->profiles[static_cast<size_t>(pi)].memory_slices;
  while (auto c = best_on_gpu(g, pi, memo)) {
    const int st = std::get<5>(*c);
    g.running.push_back(mig::Placed{pi, st});
    g.claimed |= mask_of(st, size);
    ++n;
  }
  memo.count.emplace(key, n);
  return n;
}

// What node `n` adds to a whole-GPU offer's `available`: its free matching GPUs in whole rental units.
int64_t node_units(const Snapshot& snap, const NodeSnap& n, const Offer& o) {
  if (n.provider_id != o.provider_id || !node_matches(n, o)) return 0;
  int64_t free = 0;
  for (size_t gi : n.gpus) free += whole_free(snap.gpus[gi], o) ? 1 : 0;
  return free / std::max(1, o.gpus);
}
// What GPU `g` (on node `n`) adds to a MIG offer's `available` (the GPUs mig_gpus() lists).
int64_t gpu_units(const NodeSnap& n, const GpuSnap& g, const Offer& o, Memo& memo) {
  if (n.provider_id != o.provider_id || !node_matches(n, o)) return 0;
  if (g.catalog_id != o.gpu || (g.mig != MigPolicy::kStatic && g.mig != MigPolicy::kDynamic)) return 0;
  if (g.table == nullptr) return 0;
  const int pi = profile_index(*g.table, o.profile);
  return pi >= 0 ? greedy_count(g, pi, memo) : 0;
}

// Units of `o` placeable now: a sum over nodes (whole GPUs) or GPUs (MIG), so that a change to a few
// GPUs changes it by their terms only (Market::Impl::publish_delta).
int64_t available_units(const Snapshot& snap, const Offer& o, Memo& memo) {
  if (!o.active) return 0;
  int64_t units = 0;
  for (const NodeSnap& n : snap.nodes) {
    if (o.profile.empty()) {
      units += node_units(snap, n, o);
      continue;
    }
    for (size_t gi : n.gpus) units += gpu_units(n, snap.gpus[gi], o, memo);
  }
  return units;
}
int64_t available_units(const Snapshot& snap, const Offer& o) {
  Memo memo;
  return available_units(snap, o, memo);
}
// Whether at least one unit of `o` is placeable in `snap`: available_units() > 0, stopping at the first.
bool any_units(const Snapshot& snap, const Offer& o, Memo& memo) {
  if (!o.active) return false;
  for (const NodeSnap& n : snap.nodes) {
    if (o.profile.empty()) {
      if (node_units(snap, n, o) > 0) return true;
      continue;
    }
    for (size_t gi : n.gpus) {
      if (gpu_units(n, snap.gpus[gi], o, memo) > 0) return true;
    }
  }
  return false;
}

std::string join_reasons(const std::vector<std::string>& reasons) {
  std::string out;
  for (size_t i = 0; i < reasons.size() && i < kMaxReasons; ++i) out += (i == 0 ? "" : "; ") + reasons[i];
  if (reasons.size() > kMaxReasons) out += "; and " + std::to_string(reasons.size() - kMaxReasons) + " more";
  return out;
}

std::set<std::string> split_ids(const std::string& csv) {
  std::set<std::string> out;
  size_t b = 0;
  while (b < csv.size()) {
    size_t e = csv.find(',', b);
    if (e == std::string::npos) e = csv.size();
    if (e > b) out.insert(csv.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

// Chooses placements for `units` of `o` in `snap` (previous GPUs first), or kConflict with a reason per candidate.
Result<std::vector<Placement>> choose(Snapshot& snap, const Offer& o, int units, const std::set<std::string>& prev) {
  std::vector<Placement> out;
  std::vector<std::string> reasons;
  if (o.profile.empty()) {
    const int need = units * o.gpus;
    struct Cand {
      std::tuple<int, int, int64_t, int64_t> key;
      const NodeSnap* node;
      std::vector<size_t> free;
    };
    std::vector<Cand> cands;
    for (const NodeSnap& n : snap.nodes) {
      if (n.provider_id != o.provider_id || n.region != o.region) continue;
      std::vector<size_t> free;
      int matching = 0;
      for (size_t gi : n.gpus) {
        const GpuSnap& g = snap.gpus[gi];
        if (g.catalog_id == o.gpu && g.mig != MigPolicy::kStatic) ++matching;
        if (whole_free(g, o)) free.push_back(gi);
      }
      if (matching == 0) continue;
      if (n.state != NodeState::kReady) {
        reasons.push_back("node " + n.name + ": draining");
        continue;
      }
      if (static_cast<int>(free.size()) < need) {
        reasons.push_back("node " + n.name + ": " + std::to_string(free.size()) + " of " + std::to_string(matching) +
                          " " + o.gpu + " free, " + std::to_string(need) + " needed");
        continue;
      }
      int prev_here = 0;
      for (size_t gi : free) prev_here += prev.count(snap.gpus[gi].id) > 0 ? 1 : 0;
      std::stable_sort(free.begin(), free.end(), [&](size_t a, size_t b) {
        return (prev.count(snap.gpus[a].id) > 0 ? 0 : 1) < (prev.count(snap.gpus[b].id) > 0 ? 0 : 1);
      });
      const int not_nvlink = need > 1 && n.interconnect != Interconnect::kNvlink ? 1 : 0;
      cands.push_back(Cand{{-prev_here, not_nvlink, static_cast<int64_t>(free.size()), n.order}, &n, free});
    }
    if (cands.empty()) {
      if (reasons.empty()) reasons.push_back("no node of the provider in " + o.region + " has a " + o.gpu);
      return conflict("nothing free for " + std::to_string(need) + " x " + o.target + ": " + join_reasons(reasons),
                      "offer");
    }
    const Cand& best =
        *std::min_element(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return a.key < b.key; });
    for (int i = 0; i < need; ++i) {
      GpuSnap& g = snap.gpus[best.free[static_cast<size_t>(i)]];
      g.claimed = g.full_mask();
      out.push_back(Placement{g.id, g.uuid, g.node_id, "", 0, g.mem_slices});
    }
    return out;
  }
  const std::vector<size_t> gpus = mig_gpus(snap, o);
  Memo memo;
  for (int u = 0; u < units; ++u) {
    auto c = best_mig(snap, gpus, o, prev, memo);
    if (!c) {
      for (const NodeSnap& n : snap.nodes) {
        if (n.provider_id != o.provider_id || n.region != o.region) continue;
        for (size_t gi : n.gpus) {
          const GpuSnap& g = snap.gpus[gi];
          if (g.catalog_id != o.gpu) continue;
          if (n.state != NodeState::kReady)
            reasons.push_back(g.uuid + " on " + n.name + ": node draining");
          else if (g.mig == MigPolicy::kNone)
            reasons.push_back(g.uuid + " on " + n.name + ": MIG disabled (whole GPU only)");
          else
            reasons.push_back(g.uuid + " on " + n.name + ": no free valid placement for " + o.profile);
        }
      }
      if (reasons.empty()) reasons.push_back("no MIG-capable " + o.gpu + " of the provider in " + o.region);
      return conflict("nothing free for " + std::to_string(units) + " x " + o.target +
                          (u > 0 ? " (" + std::to_string(u) + " placed)" : "") + ": " + join_reasons(reasons),
                      "offer");
    }
    GpuSnap& g = snap.gpus[c->gpu];
    const int pi = profile_index(*g.table, o.profile);
    const int size = g.table->profiles[static_cast<size_t>(pi)].memory_slices;
    g.running.push_back(mig::Placed{pi, c->start});
    g.claimed |= mask_of(c->start, size);
    out.push_back(Placement{g.id, g.uuid, g.node_id, o.profile, c->start, size});
  }
  return out;
}

// The GPUs the running write transaction of this thread claimed or released (write_with_claims sets it).
thread_local std::set<std::string>* touched_gpus = nullptr;
void touch(const std::string& gpu_id) {
  if (touched_gpus != nullptr) touched_gpus->insert(gpu_id);
}

}  // namespace

// -------------------------------------------------------------------------------------------------------
struct Market::Impl {
  std::unique_ptr<Db> db;
  std::shared_ptr<const Clock> clock;
  MarketOptions options;
  std::shared_ptr<const Catalog> catalog;
  int64_t now() const { return clock->now_ms(); }

  // The view of live offers: every offer (active or not, in list order) with `available` computed, as of
  // one market_version. A list reads that one row and answers from the view while it is current. A
  // rental write of this process moves the view to its new version by the few GPUs it touched
  // (publish_delta); any other committed write (inventory, offers, or another process's on the same
  // PostgreSQL) bumps the version too, and the next list rebuilds the view in one consistent read.
  // Immutable once published: readers share it.
  struct OfferView {
    int64_t version = 0;
    std::vector<Offer> offers;
  };
  std::mutex view_mu;   // guards `view` and the inventory behind it (view_snap and its indexes)
  std::mutex build_mu;  // one rebuild at a time: the others wait for it instead of scanning too
  std::shared_ptr<const OfferView> view;
  Snapshot view_snap;  // the inventory `view` was computed from, at view->version
  std::map<std::string, size_t, std::less<>> view_gpu, view_node;  // ids -> indices into view_snap

  // A rental write's effect on the view: the GPUs it claimed or released and their state after it.
  struct GpuState {
    uint32_t claimed = 0;
    std::vector<std::pair<std::string, int>> running;  // MIG instances: (profile, start slice)
  };
  struct Delta {
    int64_t from_version = -1;  // the store's version before the write (its write lock held it there)
    std::map<std::string, GpuState> gpus;
  };

  std::shared_ptr<const OfferView> current_view(int64_t version) {
    std::unique_lock<std::mutex> lock(view_mu);
    wait_for_publications(lock, version);
    // Newer than the reader's snapshot is fine too: the version only grows.
    return view && view->version >= version ? view : nullptr;
  }

  // Versions this process's writers committed (or are committing) and have not published yet: a writer
  // registers its version inside its transaction and withdraws it once it has published (or failed), so
  // that a reader or the next writer, which can start the moment the commit released the write lock,
  // waits the microseconds until the view catches up instead of rebuilding it or reading GPUs from SQL.
  std::multiset<int64_t> publishing;  // guarded by view_mu
  std::condition_variable published;

  // view_mu held. Waits (bounded) while the view is behind `version` and a publication of this process
  // that would fill the gap is under way.
  void wait_for_publications(std::unique_lock<std::mutex>& lock, int64_t version) {
    (void)published.wait_for(lock, kMaxPublicationWait, [&] {
      if (!view || view->version >= version) return true;
      auto first = publishing.upper_bound(view->version);
      return first == publishing.end() || *first > version;
    });
  }

  // The view as of `tx`'s snapshot (or newer), rebuilt when the store's version moved.
  Result<std::shared_ptr<const OfferView>> offer_view(Tx& tx) {
    GPUPLAN_TRY(version, read_version(tx));
    if (auto v = current_view(version)) return v;
    std::lock_guard<std::mutex> build(build_mu);
    if (auto v = current_view(version)) return v;  // another thread built it meanwhile
    auto built = std::make_shared<OfferView>();
    built->version = version;
    GPUPLAN_TRY(rows, tx.query(std::string(kOfferSelect) + "ORDER BY o.created_at, o.id"));
    auto loaded = load_snapshot(tx, *catalog, "");
    if (!loaded) return loaded.error();
    Snapshot& snap = *loaded;
    Memo memo;
    built->offers.reserve(rows.size());
    for (const Row& r : rows) {
      Offer o = offer_from(r);
      o.available = available_units(snap, o, memo);
      built->offers.push_back(std::move(o));
    }
    std::lock_guard<std::mutex> lock(view_mu);
    if (!view || view->version < version) {
      view = built;
      view_gpu.clear();
      view_node.clear();
      for (size_t i = 0; i < snap.gpus.size(); ++i) view_gpu.emplace(snap.gpus[i].id, i);
      for (size_t i = 0; i < snap.nodes.size(); ++i) view_node.emplace(snap.nodes[i].id, i);
      view_snap = std::move(snap);
      drain_deltas();
    }
    return std::shared_ptr<const OfferView>(built);
  }

  // Inside the write transaction, after its last change: the version it moves the store from, and the
  // state of every GPU it touched as the transaction leaves it (claims, MIG instances).
  Status record_delta(Tx& tx, const std::set<std::string>& touched, Delta* d) {
    GPUPLAN_TRY(bumped, next_version(tx));
    d->from_version = bumped - 1;
    d->gpus.clear();
    if (touched.empty()) return Status::Ok();
    std::vector<Value> ids;
    std::string in;
    for (const std::string& id : touched) {
      ids.emplace_back(id);
      in += (in.empty() ? "?" : ", ?") + std::to_string(ids.size());
      d->gpus[id];
    }
    GPUPLAN_TRY(claims, tx.query("SELECT gpu_id, mem_slice FROM slice_claims WHERE gpu_id IN (" + in + ")", ids));
    for (const Row& row : claims) {
      const int64_t slice = row.integer(1);
      if (slice >= 0 && slice < 32) d->gpus[row.text(0)].claimed |= 1u << slice;
    }
    GPUPLAN_TRY(inst, tx.query("SELECT gpu_id, profile, start_slice FROM rental_placements WHERE gpu_id IN (" + in +
                                   ") AND profile IS NOT NULL",
                               ids));
    for (const Row& row : inst) {
      d->gpus[row.text(0)].running.emplace_back(row.text(1), static_cast<int>(row.integer(2)));
    }
    return Status::Ok();
  }

  // Writers commit one after another, but publish after their commits in any order: a delta that comes
  // before its predecessor waits here (keyed by the version it starts from) and is applied in turn.
  std::map<int64_t, Delta> pending_deltas;  // guarded by view_mu

  // After the commit: when the view is at the version the write started from, it moves to the next one
  // by the touched GPUs' terms of each offer's sum (available_units), so it equals a full recount. When
  // it is not (another process wrote in between, or no view yet), the next list rebuilds it.
  void publish_delta(Delta d) {
    std::lock_guard<std::mutex> lock(view_mu);
    if (!view || d.from_version < view->version) return;
    const int64_t from = d.from_version;
    pending_deltas.emplace(from, std::move(d));
    drain_deltas();
  }

  // Applies the waiting deltas that continue the view's version; drops the ones it has passed. view_mu held.
  void drain_deltas() {
    while (view) {
      auto it = pending_deltas.find(view->version);
      if (it == pending_deltas.end()) break;
      const bool applied = apply_delta(it->second);
      pending_deltas.erase(it);
      if (!applied) break;
    }
    if (view) pending_deltas.erase(pending_deltas.begin(), pending_deltas.lower_bound(view->version));
    // A gap that never fills (a commit that failed after its delta was recorded, or another process's
    // write): the next list rebuilds the view; meanwhile the waiting deltas stay bounded.
    if (pending_deltas.size() > kMaxPendingDeltas) pending_deltas.clear();
  }

  // view_mu held; `d` starts from view->version. False (and the view left as it is) when a GPU of `d` is
  // not in the view: the next list rebuilds it.
  bool apply_delta(const Delta& d) {
    std::set<size_t> gpus, nodes;
    for (const auto& [id, state] : d.gpus) {
      auto g = view_gpu.find(id);
      if (g == view_gpu.end()) return false;
      auto n = view_node.find(view_snap.gpus[g->second].node_id);
      if (n == view_node.end()) return false;
      gpus.insert(g->second);
      nodes.insert(n->second);
    }
    auto next = std::make_shared<OfferView>(*view);
    next->version = d.from_version + 1;
    Memo memo;
    auto terms = [&](const Offer& o) {
      int64_t sum = 0;
      if (!o.active) return sum;
      if (o.profile.empty()) {
        for (size_t ni : nodes) sum += node_units(view_snap, view_snap.nodes[ni], o);
        return sum;
      }
      for (size_t gi : gpus) {
        const GpuSnap& g = view_snap.gpus[gi];
        sum += gpu_units(view_snap.nodes[view_node.find(g.node_id)->second], g, o, memo);
      }
      return sum;
    };
    std::vector<int64_t> before;
    before.reserve(next->offers.size());
    for (const Offer& o : next->offers) before.push_back(terms(o));
    for (const auto& [id, state] : d.gpus) {
      GpuSnap& g = view_snap.gpus[view_gpu.find(id)->second];
      g.claimed = state.claimed;
      g.running.clear();
      if (g.table == nullptr) continue;
      for (const auto& [profile, start] : state.running) {
        const int pi = profile_index(*g.table, profile);
        if (pi >= 0) g.running.push_back(mig::Placed{pi, start});
      }
    }
    for (size_t i = 0; i < next->offers.size(); ++i) next->offers[i].available += terms(next->offers[i]) - before[i];
    view = next;
    return true;
  }

  // THE transition function: checks the edge, bumps the version, appends the event, and applies the
  // effects of entering `to` (usage segment, claims) in the caller's transaction.
  Status transition(Tx& tx, RentalRow& rr, RentalState to, const std::string& actor, const std::string& reason) {
    Rental& r = rr.r;
    if (!edge_allowed(r.state, to)) {
      return conflict("rental " + r.id + " is " + std::string(to_string(r.state)) + "; it cannot become " +
                          std::string(to_string(to)),
                      "state");
    }
    const int64_t t = now();
    if (r.state == RentalState::kRunning && to != RentalState::kRunning) {
      GPUPLAN_TRY(n, tx.exec("UPDATE usage_segments SET ended_at = ?2 WHERE rental_id = ?1 AND ended_at IS NULL",
                             params(r.id, t)));
      (void)n;
    }
    if (to == RentalState::kRunning) {
      // Two plain statements, not INSERT ... SELECT ?n: PostgreSQL cannot type a parameter in a select list.
      GPUPLAN_TRY(next,
                  tx.query("SELECT COALESCE(MAX(seq), 0) + 1 FROM usage_segments WHERE rental_id = ?1", params(r.id)));
      const int64_t seq = next.empty() ? 1 : next[0].integer(0);
      GPUPLAN_TRY(n, tx.exec("INSERT INTO usage_segments (rental_id, seq, started_at, ended_at, price_micros_per_hour) "
                             "VALUES (?1, ?2, ?3, NULL, ?4)",
                             params(r.id, seq, t, r.price_micros_per_hour)));
      (void)n;
    }
    if (to == RentalState::kStopped || to == RentalState::kTerminated || to == RentalState::kFailed) {
      if (!r.placements.empty()) {
        std::string prev;
        for (const Placement& p : r.placements) {
          if (prev.find(p.gpu_id) == std::string::npos) prev += (prev.empty() ? "" : ",") + p.gpu_id;
        }
        rr.prev_gpus = prev;
      }
      for (const Placement& p : r.placements) touch(p.gpu_id);
      GPUPLAN_TRY(a, tx.exec("DELETE FROM slice_claims WHERE rental_id = ?1", params(r.id)));
      GPUPLAN_TRY(b, tx.exec("DELETE FROM rental_placements WHERE rental_id = ?1", params(r.id)));
      (void)a;
      (void)b;
      r.placements.clear();
    }
    GPUPLAN_TRY(changed,
                tx.exec("UPDATE rentals SET state = ?2, state_reason = ?3, version = version + 1, updated_at = ?4, "
                        "prev_gpus = ?5 WHERE id = ?1 AND version = ?6",
                        params(r.id, std::string(to_string(to)), reason, t, rr.prev_gpus, r.version)));
    if (changed != 1) {
      return Error{ErrorCode::kPreconditionFailed, "rental " + r.id + " changed underneath; GET it again", "version"};
    }
    if (to == RentalState::kStopped || to == RentalState::kTerminated || to == RentalState::kFailed) {
      // What an engine runs for it goes too: a stop or delete row in this transaction (none for manual).
      GPUPLAN_CHECK(internal::enqueue_undo(tx, r.id, to == RentalState::kStopped ? "stop" : "delete", t));
    }
    if (is_final(to)) {
      // Its segments are closed for good: the charge is frozen, and the credit check sums it in SQL.
      GPUPLAN_TRY(us, usages(tx, "r.id = ?1", r.id, t));
      GPUPLAN_TRY(f, tx.exec("UPDATE rentals SET final_charge_micros = ?2 WHERE id = ?1",
                             params(r.id, us.empty() ? int64_t{0} : us[0].charge_micros)));
      (void)f;
    }
    GPUPLAN_TRY(
        ev, tx.exec("INSERT INTO rental_events (rental_id, seq, at, from_state, to_state, actor, reason) VALUES "
                    "(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params(r.id, r.version + 1, t, std::string(to_string(r.state)), std::string(to_string(to)), actor,
                           reason)));
    (void)ev;
    r.state = to;
    r.state_reason = reason;
    r.version += 1;
    r.updated_at_ms = t;
    return Status::Ok();
  }

  // Writes placements and their claims; kConflict (with *collision set) when a claim's key is taken.
  Status claim(Tx& tx, Rental& r, const std::vector<Placement>& ps, bool* collision) {
    int seq = 0;
    for (const Placement& p : ps) {
      touch(p.gpu_id);
      GPUPLAN_TRY(
          n, tx.exec("INSERT INTO rental_placements (rental_id, seq, gpu_id, profile, start_slice, size_slices) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                     params(r.id, int64_t{++seq}, p.gpu_id, opt_text(p.profile), int64_t{p.start}, int64_t{p.size})));
      (void)n;
      for (int s = p.start; s < p.start + p.size; ++s) {
        auto c = tx.exec("INSERT INTO slice_claims (gpu_id, mem_slice, rental_id) VALUES (?1, ?2, ?3)",
                         params(p.gpu_id, int64_t{s}, r.id));
        if (!c) {
          if (c.error().code == ErrorCode::kConflict) *collision = true;
          return c.error();
        }
      }
    }
    r.placements = ps;
    return Status::Ok();
  }

  // The GPUs that can serve `offer` (its provider, region and GPU, on ready nodes) with their claims and
  // MIG instances, in load_snapshot's order. From the view when it is at the store's version: this
  // write transaction holds the store's write lock, so the view is then exactly what the tables hold,
  // and the read costs no scan. Otherwise (another process wrote, or no list built the view yet) from SQL.
  Result<Snapshot> candidates(Tx& tx, const Offer& offer, bool from_tables = false) {
    if (from_tables) return load_snapshot(tx, *catalog, offer.provider_id, offer.region, offer.gpu, true);
    GPUPLAN_TRY(version, read_version(tx));
    {
      std::unique_lock<std::mutex> lock(view_mu);
      wait_for_publications(lock, version);
      if (view && view->version == version) {
        Snapshot out;
        for (const NodeSnap& n : view_snap.nodes) {
          if (n.provider_id != offer.provider_id || n.region != offer.region || n.state != NodeState::kReady) continue;
          NodeSnap copy = n;
          copy.gpus.clear();
          copy.order = static_cast<int64_t>(out.nodes.size());
          for (size_t gi : n.gpus) {
            if (view_snap.gpus[gi].catalog_id != offer.gpu) continue;
            copy.gpus.push_back(out.gpus.size());
            out.gpus.push_back(view_snap.gpus[gi]);
          }
          if (!copy.gpus.empty()) out.nodes.push_back(std::move(copy));
        }
        return out;
      }
    }
    return load_snapshot(tx, *catalog, offer.provider_id, offer.region, offer.gpu, true);
  }

  // Migration 0003: every target (GPU or MIG profile) sold on the GPUs `snap` holds (the offer's
  // provider, region and GPU) that has a unit free now, before this placement takes capacity, is
  // recorded as available now in target_last_available. A sell-out by a rental (of this target or of
  // another one sharing its GPUs) therefore leaves the instant just before it; the catalog's
  // `last_available_at` reads it.
  Status record_available(Tx& tx, const Snapshot& snap, const Offer& offer) {
    GPUPLAN_TRY(rows, tx.query(std::string(kOfferSelect) +
                                   "WHERE o.provider_id = ?1 AND o.region = ?2 AND o.catalog_id = ?3 AND o.active = 1",
                               params(offer.provider_id, offer.region, offer.gpu)));
    Memo memo;
    std::set<std::string> done;
    for (const Row& row : rows) {
      const Offer o = offer_from(row);
      if (done.count(o.target) != 0 || !any_units(snap, o, memo)) continue;
      done.insert(o.target);
      GPUPLAN_TRY(n, tx.exec("INSERT INTO target_last_available (target, region, at) VALUES (?1, ?2, ?3) "
                             "ON CONFLICT (target, region) DO UPDATE SET at = excluded.at",
                             params(o.target, o.region, now())));
      (void)n;
    }
    return Status::Ok();
  }

  // requested -> reserved with claims, then (immediate hand-off) -> starting -> running. `from_tables`:
  // place from the tables, not the view (rent_many's later units: the view does not hold the claims
  // this transaction made so far).
  Status place_and_run(Tx& tx, RentalRow& rr, const Offer& offer, const std::string& actor, bool* collision,
                       bool from_tables = false) {
    // Only the GPUs that can serve the offer: its provider, region and GPU, on ready nodes.
    const std::set<std::string> prev = split_ids(rr.prev_gpus);
    auto snap = candidates(tx, offer, from_tables);
    if (!snap) return snap.error();
    GPUPLAN_CHECK(record_available(tx, *snap, offer));
    auto ps = choose(*snap, offer, rr.r.count, prev);
    if (!ps) {
      if (ps.error().code != ErrorCode::kConflict) return ps.error();
      // Nothing free: the reasons also name the draining nodes, so read them too (only on this path).
      auto all = load_snapshot(tx, *catalog, offer.provider_id, offer.region, offer.gpu);
      if (!all) return all.error();
      auto again = choose(*all, offer, rr.r.count, prev);  // a draining node never serves: it fails the same way
      return again ? ps.error() : again.error();
    }
    GPUPLAN_CHECK(claim(tx, rr.r, *ps, collision));
    failpoint("after_claims");
    GPUPLAN_CHECK(transition(tx, rr, RentalState::kReserved, actor, "placed"));
    // A node with an engine (Slurm, Kubernetes): an outbox row in this transaction, delivered by
    // deliver_outbox after it commits (market_outbox.cc). A manual node has nothing to deliver.
    GPUPLAN_TRY(queued, internal::enqueue_apply(tx, rr.r, now()));
    if (queued) return Status::Ok();
    if (options.handoff == Handoff::kImmediate) {
      GPUPLAN_CHECK(transition(tx, rr, RentalState::kStarting, "system", "hand-off: manual (immediate)"));
      GPUPLAN_CHECK(transition(tx, rr, RentalState::kRunning, "system", "hand-off: manual (immediate)"));
    }
    return Status::Ok();
  }

  Status rent_one(Tx& tx, const Principal& p, const RentRequest& request, int64_t now, bool* collision,
                  bool credit_checked, bool from_tables, Rental& out);

  Result<Offer> offer_by_id(Tx& tx, std::string_view id) {
    GPUPLAN_TRY(rows, tx.query(std::string(kOfferSelect) + "WHERE o.id = ?1", params(std::string(id))));
    if (rows.empty()) return not_found_error("no offer '" + std::string(id) + "'", "offer");
    return offer_from(rows[0]);
  }

  // Runs a write body that may collide on a claim; collisions rerun it from fresh state.
  Status write_with_claims(const std::function<Status(Tx&, bool*)>& body) {
    for (int attempt = 0;; ++attempt) {
      bool collision = false;
      Delta delta;
      std::vector<int64_t> registered;  // this call's entries in `publishing` (one per attempt of the body)
      Status s = with_tx(*db, TxMode::kWrite, [&](Tx& tx) -> Status {
        collision = false;
        std::set<std::string> touched;
        touched_gpus = &touched;
        Status b = body(tx, &collision);
        touched_gpus = nullptr;
        if (!b) return b;
        GPUPLAN_CHECK(record_delta(tx, touched, &delta));
        std::lock_guard<std::mutex> lock(view_mu);
        publishing.insert(delta.from_version + 1);
        registered.push_back(delta.from_version + 1);
        return Status::Ok();
      });
      if (!registered.empty()) {
        if (s) publish_delta(std::move(delta));
        std::lock_guard<std::mutex> lock(view_mu);
        for (int64_t v : registered) {
          if (auto it = publishing.find(v); it != publishing.end()) publishing.erase(it);
        }
        published.notify_all();
      }
      if (s || !collision || attempt + 1 >= kMaxClaimAttempts) return s;
    }
  }

  // The common shape of stop/start/delete/mark_running: load visible, check If-Match, act.
  Result<Rental> change(const Principal& p, std::string_view id, std::optional<int64_t> if_match, bool provider_side,
                        const std::function<Status(Tx&, RentalRow&, bool*)>& act) {
    Rental out;
    MARKET_RUN(write_with_claims([&](Tx& tx, bool* collision) -> Status {
      const bool admin = is_platform_admin(p);
      Result<RentalRow> rr =
          provider_side ? load_rental(tx, id, "", admin ? "" : p.tenant_id) : load_rental(tx, id, p.tenant_id);
      if (!rr) return rr.error();
      GPUPLAN_CHECK(require_write(p));
      if (if_match && *if_match != rr->r.version) {
        return Error{ErrorCode::kPreconditionFailed,
                     "rental " + rr->r.id + " is at version " + std::to_string(rr->r.version) + ", not " +
                         std::to_string(*if_match) + "; GET it again",
                     "If-Match"};
      }
      GPUPLAN_CHECK(act(tx, *rr, collision));
      failpoint("before_commit");
      out = rr->r;
      return Status::Ok();
    }));
    failpoint("after_commit");
    return out;
  }
};

Market::Market(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Market::~Market() = default;
Db& Market::db() { return *impl_->db; }
const Clock& Market::clock() const { return *impl_->clock; }

Result<std::unique_ptr<Market>> Market::open(std::unique_ptr<Db> db, std::shared_ptr<const Clock> clock,
                                             MarketOptions options) {
  if (!db) return Error{ErrorCode::kInternal, "Market::open without a store", ""};
  GPUPLAN_CHECK(db->migrate());
  auto impl = std::make_unique<Impl>();
  impl->db = std::move(db);
  impl->clock = clock ? std::move(clock) : std::make_shared<SystemClock>();
  impl->catalog = options.catalog ? options.catalog : Catalog::embedded();
  impl->options = std::move(options);
  return std::unique_ptr<Market>(new Market(std::move(impl)));
}

// --- bootstrap and authentication ----------------------------------------------------------------------
namespace {
Result<IssuedToken> insert_token(Tx& tx, const std::string& user_id, const std::string& tenant_id,
                                 const TokenOptions& options, int64_t now) {
  IssuedToken t;
  t.id = "tk" + random_hex(8);
  t.token = std::string(kTokenPrefix) + t.id + "_" + random_hex(kTokenSecretBytes);
  t.user_id = user_id;
  t.tenant_id = tenant_id;
  t.scope = options.scope;
  t.expires_at_ms = options.expires_at_ms;
  GPUPLAN_TRY(n,
              tx.exec("INSERT INTO api_tokens (id, user_id, secret_sha256, scope, created_at, expires_at, revoked_at) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL)",
                      params(t.id, user_id, sha256_hex(t.token), std::string(to_string(options.scope)), now,
                             opt(options.expires_at_ms))));
  (void)n;
  return t;
}
}  // namespace

Result<IssuedToken> Market::init_platform(std::string_view admin_name) {
  GPUPLAN_CHECK(check_name(admin_name, "name"));
  IssuedToken out;
  Status s = with_tx(*impl_->db, TxMode::kWrite, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(rows, tx.query("SELECT id FROM tenants WHERE kind = 'platform'"));
    if (!rows.empty()) return conflict("the platform is initialised already; its admin's token was shown once then");
    const int64_t now = impl_->now();
    const std::string tenant = new_id("t_");
    const std::string user = new_id("u_");
    GPUPLAN_TRY(a,
                tx.exec("INSERT INTO tenants (id, name, kind, credit_limit_micros, created_at) VALUES (?1, 'platform', "
                        "'platform', NULL, ?2)",
                        params(tenant, now)));
    GPUPLAN_TRY(b, tx.exec("INSERT INTO users (id, tenant_id, name, role, created_at) VALUES (?1, ?2, ?3, 'admin', ?4)",
                           params(user, tenant, std::string(admin_name), now)));
    (void)a;
    (void)b;
    GPUPLAN_TRY(t, insert_token(tx, user, tenant, TokenOptions{}, now));
    out = t;
    return Status::Ok();
  });
  if (!s) {
    if (s.error().code == ErrorCode::kConflict) return conflict("the platform is initialised already");
    return s.error();
  }
  return out;
}

Result<Principal> Market::authenticate(std::string_view bearer) const {
  const Error unauth{ErrorCode::kUnauthenticated, "a valid API token is required: Authorization: Bearer gpl_...",
                     "Authorization"};
  std::string_view s = bearer;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.size() > 7 && (s.substr(0, 7) == "Bearer " || s.substr(0, 7) == "bearer ")) s.remove_prefix(7);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  if (s.size() > kMaxNameBytes || s.substr(0, kTokenPrefix.size()) != kTokenPrefix) return unauth;
  const std::string_view rest = s.substr(kTokenPrefix.size());
  const size_t us = rest.find('_');
  if (us == std::string_view::npos || us == 0) return unauth;
  const std::string token_id(rest.substr(0, us));
  Principal p;
  bool ok = false;
  const std::string digest = sha256_hex(s);
  const int64_t now = impl_->now();
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(rows,
                tx.query("SELECT k.secret_sha256, k.expires_at, k.revoked_at, k.scope, u.id, u.role, u.tenant_id, "
                         "t.kind FROM api_tokens k JOIN users u ON u.id = k.user_id JOIN tenants t ON t.id = "
                         "u.tenant_id WHERE k.id = ?1",
                         params(token_id)));
    if (rows.empty()) return Status::Ok();
    const Row& r = rows[0];
    if (!constant_time_equal(r.text(0), digest)) return Status::Ok();
    if (!r.is_null(2)) return Status::Ok();
    if (auto exp = r.maybe_integer(1); exp && *exp <= now) return Status::Ok();
    auto scope = parse_scope(r.text(3));
    auto role = parse_role(r.text(5));
    auto kind = parse_tenant_kind(r.text(7));
    if (!scope || !role || !kind) return Status::Ok();
    p = Principal{r.text(6), *kind, r.text(4), *role, *scope, token_id};
    ok = true;
    return Status::Ok();
  }));
  if (!ok) return unauth;
  return p;
}

// --- tenants, users, tokens -------------------------------------------------------------------------------
namespace {
Tenant tenant_from(const Row& r) {
  Tenant t;
  t.id = r.text(0);
  t.name = r.text(1);
  t.kind = stored_word(parse_tenant_kind(r.text(2)), TenantKind::kRenter);
  t.credit_limit_micros = r.maybe_integer(3);
  t.created_at_ms = r.integer(4);
  return t;
}
constexpr const char* kTenantSelect = "SELECT id, name, kind, credit_limit_micros, created_at FROM tenants ";

Result<Tenant> visible_tenant(Tx& tx, const Principal& p, std::string_view id) {
  if (!is_platform_admin(p) && id != p.tenant_id) return not_found_error("no tenant '" + std::string(id) + "'", "id");
  GPUPLAN_TRY(rows, tx.query(std::string(kTenantSelect) + "WHERE id = ?1", params(std::string(id))));
  if (rows.empty()) return not_found_error("no tenant '" + std::string(id) + "'", "id");
  return tenant_from(rows[0]);
}
}  // namespace

Result<Tenant> Market::create_tenant(const Principal& p, std::string_view name, TenantKind kind) {
  GPUPLAN_CHECK(require_platform_admin(p));
  GPUPLAN_CHECK(check_name(name, "name"));
  if (kind == TenantKind::kPlatform)
    return usage_error("there is one platform tenant; kind must be renter or provider", "kind");
  Tenant t{new_id("t_"), std::string(name), kind, std::nullopt, impl_->now()};
  Status s = with_tx(*impl_->db, TxMode::kWrite, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(
        n,
        tx.exec("INSERT INTO tenants (id, name, kind, credit_limit_micros, created_at) VALUES (?1, ?2, ?3, NULL, ?4)",
                params(t.id, t.name, std::string(to_string(kind)), t.created_at_ms)));
    (void)n;
    return Status::Ok();
  });
  if (!s) {
    if (s.error().code == ErrorCode::kConflict)
      return conflict("a tenant named '" + t.name + "' exists already", "name");
    return s.error();
  }
  return t;
}

Result<Tenant> Market::get_tenant(const Principal& p, std::string_view tenant_id) const {
  Tenant out;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(t, visible_tenant(tx, p, tenant_id));
    out = t;
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<Tenant>> Market::list_tenants(const Principal& p) const {
  std::vector<Tenant> out;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    out.clear();
    const bool all = is_platform_admin(p);
    GPUPLAN_TRY(rows, tx.query(std::string(kTenantSelect) + (all ? "" : "WHERE id = ?1 ") + "ORDER BY created_at, id",
                               all ? std::vector<Value>{} : params(p.tenant_id)));
    for (const Row& r : rows) {
      if (out.size() >= kMaxListRows) break;
      out.push_back(tenant_from(r));
    }
    return Status::Ok();
  }));
  return out;
}

Result<Tenant> Market::set_credit_limit(const Principal& p, std::string_view tenant_id, std::optional<int64_t> micros) {
  GPUPLAN_CHECK(require_platform_admin(p));
  if (micros && (*micros < 0 || *micros > kMaxPriceMicrosPerHour * 24 * 365)) {
    return limit_error(
        "credit_limit must be between 0 and " + std::to_string(kMaxPriceMicrosPerHour * 24 * 365) + " micros",
        "credit_limit");
  }
  Tenant out;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kWrite, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(t, visible_tenant(tx, p, tenant_id));
    GPUPLAN_TRY(n, tx.exec("UPDATE tenants SET credit_limit_micros = ?2 WHERE id = ?1", params(t.id, opt(micros))));
    (void)n;
    out = t;
    out.credit_limit_micros = micros;
    return Status::Ok();
  }));
  return out;
}

Result<User> Market::create_user(const Principal& p, std::string_view tenant_id, std::string_view name, Role role) {
  GPUPLAN_CHECK(check_name(name, "name"));
  User u{new_id("u_"), std::string(tenant_id), std::string(name), role, impl_->now()};
  Status s = with_tx(*impl_->db, TxMode::kWrite, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(t, visible_tenant(tx, p, tenant_id));
    (void)t;
    GPUPLAN_CHECK(require_write(p));
    if (p.role != Role::kAdmin) return forbidden("only an admin may add users");
    GPUPLAN_TRY(n, tx.exec("INSERT INTO users (id, tenant_id, name, role, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                           params(u.id, u.tenant_id, u.name, std::string(to_string(role)), u.created_at_ms)));
    (void)n;
    return Status::Ok();
  });
  if (!s) {
    if (s.error().code == ErrorCode::kConflict) return conflict("the tenant has a user named '" + u.name + "'", "name");
    return s.error();
  }
  return u;
}

Result<std::vector<User>> Market::list_users(const Principal& p, std::string_view tenant_id) const {
  std::vector<User> out;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    out.clear();
    GPUPLAN_TRY(t, visible_tenant(tx, p, tenant_id));
    GPUPLAN_TRY(rows, tx.query("SELECT id, tenant_id, name, role, created_at FROM users WHERE tenant_id = ?1 ORDER BY "
                               "created_at, id",
                               params(t.id)));
    for (const Row& r : rows) {
      if (out.size() >= kMaxListRows) break;
      out.push_back(
          User{r.text(0), r.text(1), r.text(2), stored_word(parse_role(r.text(3)), Role::kViewer), r.integer(4)});
    }
    return Status::Ok();
  }));
  return out;
}

Result<IssuedToken> Market::create_token(const Principal& p, std::string_view user_id, const TokenOptions& options) {
  const int64_t now = impl_->now();
  if (options.expires_at_ms && *options.expires_at_ms <= now) {
    return usage_error("expires_at must be in the future", "expires_at");
  }
  IssuedToken out;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kWrite, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(rows, tx.query("SELECT tenant_id FROM users WHERE id = ?1", params(std::string(user_id))));
    if (rows.empty() || (!is_platform_admin(p) && rows[0].text(0) != p.tenant_id)) {
      return not_found_error("no user '" + std::string(user_id) + "'", "user_id");
    }
    GPUPLAN_CHECK(require_write(p));
    if (p.role != Role::kAdmin && user_id != p.user_id)
      return forbidden("only an admin may create tokens for other users");
    GPUPLAN_TRY(t, insert_token(tx, std::string(user_id), rows[0].text(0), options, now));
    out = t;
    return Status::Ok();
  }));
  return out;
}

Status Market::revoke_token(const Principal& p, std::string_view token_id) {
  return with_tx(*impl_->db, TxMode::kWrite, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(rows, tx.query("SELECT k.user_id, u.tenant_id FROM api_tokens k JOIN users u ON u.id = k.user_id WHERE "
                               "k.id = ?1",
                               params(std::string(token_id))));
    if (rows.empty() || (!is_platform_admin(p) && rows[0].text(1) != p.tenant_id)) {
      return not_found_error("no token '" + std::string(token_id) + "'", "id");
    }
    const bool own = token_id == p.token_id;
    if (!own) {
      GPUPLAN_CHECK(require_write(p));
      if (p.role != Role::kAdmin && rows[0].text(0) != p.user_id)
        return forbidden("only an admin may revoke others' tokens");
    }
    GPUPLAN_TRY(n, tx.exec("UPDATE api_tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                           params(std::string(token_id), impl_->now())));
    (void)n;
    return Status::Ok();
  });
}

// --- inventory ---------------------------------------------------------------------------------------------
namespace {
Result<std::vector<Node>> load_nodes(Tx& tx, const std::string& provider, const std::string& node_id) {
  std::vector<Value> v = params(provider);
  std::string where = "n.provider_id = ?1";
  if (!node_id.empty()) {
    where += " AND n.id = ?2";
    v.emplace_back(node_id);
  }
  GPUPLAN_TRY(rows,
              tx.query("SELECT n.id, n.provider_id, n.name, n.region, n.interconnect, n.vcpus, n.ram_gb, n.disk_gb, "
                       "n.state, n.created_at, g.id, g.idx, g.uuid, g.catalog_id, g.mig_policy, "
                       "COALESCE(g.mig_layout, ''), g.mem_slices, (SELECT COUNT(*) FROM slice_claims c WHERE c.gpu_id "
                       "= g.id), n.scheduler, COALESCE(n.slurm_partition, ''), COALESCE(n.slurm_node, ''), "
                       "COALESCE(n.ssh, ''), n.mig_policy FROM nodes n JOIN gpus g ON g.node_id = n.id WHERE " +
                           where + " ORDER BY n.created_at, n.id, g.idx",
                       v));
  std::vector<Node> out;
  for (const Row& r : rows) {
    if (out.empty() || out.back().id != r.text(0)) {
      if (out.size() >= kMaxListRows) break;
      Node n;
      n.id = r.text(0);
      n.provider_id = r.text(1);
      n.name = r.text(2);
      n.region = r.text(3);
      n.interconnect = stored_interconnect(r.text(4));
      n.vcpus = r.integer(5);
      n.ram_gb = r.integer(6);
      n.disk_gb = r.integer(7);
      n.state = stored_node_state(r.text(8));
      n.created_at_ms = r.integer(9);
      n.scheduler = stored_word(parse_scheduler(r.text(18)), Scheduler::kManual);
      n.slurm_partition = r.text(19);
      n.slurm_node = r.text(20);
      n.ssh = r.text(21);
      n.mig_policy = stored_word(parse_mig_policy(r.text(22)), MigPolicy::kStatic);
      out.push_back(std::move(n));
    }
    NodeGpu g;
    g.id = r.text(10);
    g.index = static_cast<int>(r.integer(11));
    g.uuid = r.text(12);
    g.catalog_id = r.text(13);
    g.mig = stored_word(parse_mig_policy(r.text(14)), MigPolicy::kNone);
    g.layout = r.text(15);
    g.memory_slices = static_cast<int>(r.integer(16));
    g.claimed_slices = static_cast<int>(r.integer(17));
    out.back().gpus.push_back(std::move(g));
  }
  for (Node& n : out) {
    GPUPLAN_TRY(c,
                tx.query("SELECT COUNT(DISTINCT c.rental_id) FROM slice_claims c JOIN gpus g ON g.id = c.gpu_id WHERE "
                         "g.node_id = ?1",
                         params(n.id)));
    n.live_rentals = c.empty() ? 0 : c[0].integer(0);
  }
  return out;
}

Status check_range(int64_t v, int64_t lo, int64_t hi, const std::string& field) {
  if (v < lo || v > hi) {
    return limit_error("'" + field + "' is " + std::to_string(v) + "; it must be between " + std::to_string(lo) +
                           " and " + std::to_string(hi),
                       field);
  }
  return Status::Ok();
}
}  // namespace

Result<Node> Market::add_node(const Principal& p, const NodeSpec& spec) {
  GPUPLAN_CHECK(require_kind(p, TenantKind::kProvider));
  GPUPLAN_CHECK(require_write(p));
  GPUPLAN_CHECK(check_name(spec.name, "name"));
  GPUPLAN_CHECK(check_name(spec.region, "region"));
  GPUPLAN_CHECK(check_range(spec.vcpus, 0, kMaxNodeVcpus, "vcpus"));
  GPUPLAN_CHECK(check_range(spec.ram_gb, 0, kMaxNodeRamGb, "ram_gb"));
  GPUPLAN_CHECK(check_range(spec.disk_gb, 0, kMaxNodeDiskGb, "disk_gb"));
  if (spec.gpus.empty()) return usage_error("a node needs at least one GPU", "gpus");
  if (spec.gpus.size() > static_cast<size_t>(kMaxGpusPerNode)) {
    return limit_error(
        "a node has " + std::to_string(spec.gpus.size()) + " GPUs; the limit is " + std::to_string(kMaxGpusPerNode),
        "gpus");
  }
  if (spec.scheduler != Scheduler::kSlurm && (!spec.slurm_partition.empty() || !spec.slurm_node.empty())) {
    return usage_error("slurm_partition and slurm_node are for a Slurm-managed node (scheduler: slurm)",
                       spec.slurm_partition.empty() ? "slurm_node" : "slurm_partition");
  }
  if (spec.mig_policy != MigPolicy::kStatic && spec.mig_policy != MigPolicy::kDynamic) {
    return usage_error(
        "a node's mig_policy is static (the agent only reads) or dynamic (it may create and "
        "destroy GPU instances)",
        "mig_policy");
  }
  for (const auto& [v, f] : {std::pair{&spec.slurm_partition, "slurm_partition"},
                             std::pair{&spec.slurm_node, "slurm_node"}, std::pair{&spec.ssh, "ssh"}}) {
    if (!v->empty()) GPUPLAN_CHECK(check_name(*v, f));
  }
  struct Resolved {
    std::string catalog_id;
    std::string layout;
    int mem_slices = 1;
  };
  std::vector<Resolved> resolved;
  std::set<std::string> uuids;
  for (size_t i = 0; i < spec.gpus.size(); ++i) {
    const GpuSpec& g = spec.gpus[i];
    const std::string f = "gpus[" + std::to_string(i) + "]";
    GPUPLAN_CHECK(check_name(g.uuid, f + ".uuid"));
    if (!uuids.insert(g.uuid).second) return usage_error("GPU UUID " + g.uuid + " appears twice", f + ".uuid");
    auto ref = impl_->catalog->resolve(g.target);
    if (!ref) {
      Error e = ref.error();
      e.field = f + ".target";
      return e;
    }
    if (ref->is_mig()) {
      return usage_error("'" + g.target + "' is a MIG profile; a node lists GPUs (set mig: static with a layout)",
                         f + ".target");
    }
    Resolved r;
    r.catalog_id = ref->gpu->id;
    r.mem_slices = ref->mig_table != nullptr ? ref->mig_table->memory_slices : 1;
    if (g.mig != MigPolicy::kNone && ref->mig_table == nullptr) {
      return usage_error(r.catalog_id + " has no MIG; mig must be none", f + ".mig");
    }
    if (g.mig != MigPolicy::kStatic && !g.layout.empty()) {
      return usage_error("a layout is only for mig: static", f + ".layout");
    }
    if (g.mig == MigPolicy::kStatic) {
      if (g.layout.empty()) return usage_error("mig: static needs a layout (\"3g.40gb,3g.40gb\")", f + ".layout");
      auto entries = mig::parse_layout(g.layout);
      if (!entries) {
        Error e = entries.error();
        e.field = f + ".layout";
        return e;
      }
      auto check = mig::check_layout(*ref->mig_table, *entries);
      if (!check) {
        Error e = check.error();
        e.field = f + ".layout";
        return e;
      }
      if (!check->valid) return Error{ErrorCode::kInvalidLayout, check->reason, f + ".layout"};
      std::string canonical;
      for (const mig::Placed& pl : check->placements) {
        canonical += (canonical.empty() ? "" : ",") + ref->mig_table->profiles[static_cast<size_t>(pl.profile)].name +
                     "@" + std::to_string(pl.start);
      }
      r.layout = canonical;
    }
    resolved.push_back(r);
  }
  const std::string node_id = new_id("n_");
  const int64_t now = impl_->now();
  Node out;
  Status s = with_tx(*impl_->db, TxMode::kWrite, [&](Tx& tx) -> Status {
    auto n = tx.exec(
        "INSERT INTO nodes (id, provider_id, name, region, interconnect, vcpus, ram_gb, disk_gb, state, "
        "created_at, scheduler, slurm_partition, slurm_node, ssh, mig_policy) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
        "'ready', ?9, ?10, ?11, ?12, ?13, ?14)",
        params(node_id, p.tenant_id, spec.name, spec.region, std::string(to_string(spec.interconnect)), spec.vcpus,
               spec.ram_gb, spec.disk_gb, now, std::string(to_string(spec.scheduler)), opt_text(spec.slurm_partition),
               opt_text(spec.slurm_node), opt_text(spec.ssh), std::string(to_string(spec.mig_policy))));
    if (!n) {
      if (n.error().code == ErrorCode::kConflict) return conflict("you have a node named '" + spec.name + "'", "name");
      return n.error();
    }
    for (size_t i = 0; i < spec.gpus.size(); ++i) {
      auto g = tx.exec(
          "INSERT INTO gpus (id, node_id, idx, uuid, catalog_id, mig_policy, mig_layout, mem_slices) VALUES "
          "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
          params(new_id("g_"), node_id, static_cast<int64_t>(i), spec.gpus[i].uuid, resolved[i].catalog_id,
                 std::string(to_string(spec.gpus[i].mig)), opt_text(resolved[i].layout),
                 int64_t{resolved[i].mem_slices}));
      if (!g) {
        if (g.error().code == ErrorCode::kConflict) {
          return conflict("GPU UUID " + spec.gpus[i].uuid + " is registered already",
                          "gpus[" + std::to_string(i) + "].uuid");
        }
        return g.error();
      }
    }
    GPUPLAN_CHECK(bump_version(tx));
    GPUPLAN_TRY(nodes, load_nodes(tx, p.tenant_id, node_id));
    if (nodes.empty()) return Error{ErrorCode::kInternal, "the node just written is missing", ""};
    out = nodes[0];
    return Status::Ok();
  });
  if (!s) return s.error();
  return out;
}

Result<std::vector<Node>> Market::list_nodes(const Principal& p) const {
  GPUPLAN_CHECK(require_kind(p, TenantKind::kProvider));
  std::vector<Node> out;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(n, load_nodes(tx, p.tenant_id, ""));
    out = n;
    return Status::Ok();
  }));
  return out;
}

Result<Node> Market::get_node(const Principal& p, std::string_view node_id) const {
  Node out;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(n, load_nodes(tx, p.tenant_id, std::string(node_id)));
    if (n.empty()) return not_found_error("no node '" + std::string(node_id) + "'", "id");
    out = n[0];
    return Status::Ok();
  }));
  return out;
}

Result<Node> Market::drain_node(const Principal& p, std::string_view node_id) {
  Node out;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kWrite, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(n, load_nodes(tx, p.tenant_id, std::string(node_id)));
    if (n.empty()) return not_found_error("no node '" + std::string(node_id) + "'", "id");
    GPUPLAN_CHECK(require_write(p));
    GPUPLAN_TRY(c, tx.exec("UPDATE nodes SET state = 'draining' WHERE id = ?1", params(std::string(node_id))));
    (void)c;
    GPUPLAN_CHECK(bump_version(tx));
    out = n[0];
    out.state = NodeState::kDraining;
    return Status::Ok();
  }));
  return out;
}

Status Market::remove_node(const Principal& p, std::string_view node_id) {
  return with_tx(*impl_->db, TxMode::kWrite, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(n, load_nodes(tx, p.tenant_id, std::string(node_id)));
    if (n.empty()) return not_found_error("no node '" + std::string(node_id) + "'", "id");
    GPUPLAN_CHECK(require_write(p));
    if (n[0].live_rentals > 0) {
      return conflict("node " + n[0].name + " has " + std::to_string(n[0].live_rentals) +
                          " live rental(s); drain it and wait for them to end",
                      "id");
    }
    const std::string id(node_id);
    GPUPLAN_TRY(agent, tx.exec("DELETE FROM node_agents WHERE node_id = ?1", params(id)));
    GPUPLAN_TRY(a, tx.exec("DELETE FROM gpus WHERE node_id = ?1", params(id)));
    GPUPLAN_TRY(b, tx.exec("DELETE FROM nodes WHERE id = ?1", params(id)));
    (void)agent;
    (void)a;
    (void)b;
    return bump_version(tx);
  });
}

// --- offers ------------------------------------------------------------------------------------------------
Result<Offer> Market::create_offer(const Principal& p, const OfferSpec& spec) {
  GPUPLAN_CHECK(require_kind(p, TenantKind::kProvider));
  GPUPLAN_CHECK(require_write(p));
  GPUPLAN_CHECK(check_name(spec.region, "region"));
  auto ref = impl_->catalog->resolve(spec.target);
  if (!ref) {
    Error e = ref.error();
    e.field = "target";
    return e;
  }
  if (ref->is_mig() && spec.gpus != 1)
    return usage_error("a MIG offer rents one slice per unit: gpus must be 1", "gpus");
  if (spec.gpus != 1 && spec.gpus != 2 && spec.gpus != 4 && spec.gpus != 8) {
    return usage_error("gpus per rental must be 1, 2, 4 or 8 (on one node)", "gpus");
  }
  GPUPLAN_CHECK(check_range(spec.price_micros_per_hour, 1, kMaxPriceMicrosPerHour, "price_per_hour"));
  GPUPLAN_CHECK(check_range(spec.min_billable_seconds, 0, kMaxMinBillableSeconds, "min_billable_seconds"));
  Offer o;
  o.id = new_id("o_");
  o.provider_id = p.tenant_id;
  o.target = ref->id();
  o.gpu = ref->gpu->id;
  o.profile = ref->is_mig() ? ref->profile->name : "";
  o.gpus = spec.gpus;
  o.region = spec.region;
  o.price_micros_per_hour = spec.price_micros_per_hour;
  o.min_billable_seconds = spec.min_billable_seconds;
  o.created_at_ms = impl_->now();
  MARKET_RUN(with_tx(*impl_->db, TxMode::kWrite, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(n,
                tx.exec("INSERT INTO offers (id, provider_id, target, catalog_id, profile, gpus, region, "
                        "price_micros_per_hour, min_billable_seconds, active, created_at) VALUES (?1, ?2, ?3, ?4, ?5, "
                        "?6, ?7, ?8, ?9, 1, ?10)",
                        params(o.id, o.provider_id, o.target, o.gpu, opt_text(o.profile), int64_t{o.gpus}, o.region,
                               o.price_micros_per_hour, o.min_billable_seconds, o.created_at_ms)));
    (void)n;
    GPUPLAN_CHECK(bump_version(tx));
    GPUPLAN_TRY(full, impl_->offer_by_id(tx, o.id));
    GPUPLAN_TRY(snap, load_snapshot(tx, *impl_->catalog, p.tenant_id));
    o = full;
    o.available = available_units(snap, o);
    return Status::Ok();
  }));
  return o;
}

Result<Offer> Market::set_offer_price(const Principal& p, std::string_view offer_id, int64_t price_micros_per_hour) {
  GPUPLAN_CHECK(check_range(price_micros_per_hour, 1, kMaxPriceMicrosPerHour, "price_per_hour"));
  Offer out;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kWrite, [&](Tx& tx) -> Status {
    auto o = impl_->offer_by_id(tx, offer_id);
    if (!o || o->provider_id != p.tenant_id) return not_found_error("no offer '" + std::string(offer_id) + "'", "id");
    GPUPLAN_CHECK(require_write(p));
    GPUPLAN_TRY(n, tx.exec("UPDATE offers SET price_micros_per_hour = ?2 WHERE id = ?1",
                           params(std::string(offer_id), price_micros_per_hour)));
    (void)n;
    GPUPLAN_CHECK(bump_version(tx));
    out = *o;
    out.price_micros_per_hour = price_micros_per_hour;
    GPUPLAN_TRY(snap, load_snapshot(tx, *impl_->catalog, p.tenant_id));
    out.available = available_units(snap, out);
    return Status::Ok();
  }));
  return out;
}

Status Market::delete_offer(const Principal& p, std::string_view offer_id) {
  return with_tx(*impl_->db, TxMode::kWrite, [&](Tx& tx) -> Status {
    auto o = impl_->offer_by_id(tx, offer_id);
    if (!o || o->provider_id != p.tenant_id) return not_found_error("no offer '" + std::string(offer_id) + "'", "id");
    GPUPLAN_CHECK(require_write(p));
    GPUPLAN_TRY(n, tx.exec("UPDATE offers SET active = 0 WHERE id = ?1", params(std::string(offer_id))));
    (void)n;
    return bump_version(tx);
  });
}

Result<std::vector<Offer>> Market::list_offers(const OfferFilter& filter) const {
  std::string target;
  if (!filter.target.empty()) {
    auto ref = impl_->catalog->resolve(filter.target);
    if (!ref) {
      Error e = ref.error();
      e.field = "target";
      return e;
    }
    target = ref->id();
  }
  std::shared_ptr<const Impl::OfferView> view;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(v, impl_->offer_view(tx));
    view = v;
    return Status::Ok();
  }));
  std::vector<Offer> out;
  for (const Offer& o : view->offers) {
    if (out.size() >= kMaxListRows) break;
    if (!filter.include_inactive && !o.active) continue;
    if (!filter.provider.empty() && o.provider_id != filter.provider) continue;
    if (!filter.region.empty() && o.region != filter.region) continue;
    if (!target.empty() && o.target != target) continue;
    out.push_back(o);
  }
  MARKET_RUN(internal::attach_measured(*impl_, out));
  return out;
}

Result<Offer> Market::get_offer(std::string_view offer_id) const {
  std::shared_ptr<const Impl::OfferView> view;
  Offer out;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(version, read_version(tx));
    if (auto v = impl_->current_view(version)) {
      for (const Offer& o : v->offers) {
        if (o.id != offer_id) continue;
        out = o;
        return Status::Ok();
      }
      return not_found_error("no offer '" + std::string(offer_id) + "'", "offer");
    }
    // No current view: one offer needs only its provider's inventory, not a rebuild of every offer.
    GPUPLAN_TRY(o, impl_->offer_by_id(tx, offer_id));
    GPUPLAN_TRY(snap, load_snapshot(tx, *impl_->catalog, o.provider_id));
    out = o;
    out.available = available_units(snap, out);
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<LastAvailable>> Market::last_available() const {
  std::vector<LastAvailable> out;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(rows, tx.query("SELECT target, region, at FROM target_last_available ORDER BY target, region LIMIT ?1",
                               params(static_cast<int64_t>(kMaxListRows))));
    out.clear();
    for (const Row& r : rows) out.push_back(LastAvailable{r.text(0), r.text(1), r.integer(2)});
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<Template>> Market::list_templates() const {
  std::vector<Template> out;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    out.clear();
    GPUPLAN_TRY(rows, tx.query("SELECT id, name, image, command, description FROM templates ORDER BY name"));
    for (const Row& r : rows) out.push_back(Template{r.text(0), r.text(1), r.text(2), r.text(3), r.text(4)});
    return Status::Ok();
  }));
  return out;
}

// --- rentals -----------------------------------------------------------------------------------------------
namespace {

// The checks of one rent request that need no store.
Status check_rent_request(const RentRequest& request, int64_t now) {
  GPUPLAN_CHECK(check_name(request.offer_id, "offer"));
  GPUPLAN_CHECK(check_name(request.idempotency_key, "idempotency_key", true));
  GPUPLAN_CHECK(check_name(request.template_name, "template", true));
  GPUPLAN_CHECK(check_range(request.count, 1, kMaxRentCount, "count"));
  if (request.ends_at_ms && (*request.ends_at_ms <= now || *request.ends_at_ms - now > kMaxRentalMs)) {
    return usage_error("ends_at must be in the future and at most 10 years ahead", "ends_at");
  }
  return Status::Ok();
}

// A rent's credit lookahead: one hour of it, or its minimum billable time if longer.
int64_t rent_lookahead_micros(const Offer& offer, int count) {
  return charge_for(std::max(kCreditLookaheadSeconds, offer.min_billable_seconds), offer.price_micros_per_hour * count);
}

}  // namespace

// One rental inside the caller's write transaction: the idempotency replay, the offer, the credit check
// (unless `credit_checked`: rent_many checks the sum once), the rows, the placement. `from_tables`:
// place from the tables (a later unit of rent_many: the view lacks this transaction's claims).
Status Market::Impl::rent_one(Tx& tx, const Principal& p, const RentRequest& request, int64_t now, bool* collision,
                              bool credit_checked, bool from_tables, Rental& out) {
  if (!request.idempotency_key.empty()) {
    GPUPLAN_TRY(rows, tx.query("SELECT id FROM rentals WHERE tenant_id = ?1 AND idempotency_key = ?2",
                               params(p.tenant_id, request.idempotency_key)));
    if (!rows.empty()) {
      GPUPLAN_TRY(rr, load_rental(tx, rows[0].text(0), p.tenant_id));
      out = rr.r;
      out.replayed = true;
      return Status::Ok();
    }
  }
  GPUPLAN_TRY(offer, offer_by_id(tx, request.offer_id));
  if (!offer.active) return not_found_error("offer '" + request.offer_id + "' was withdrawn", "offer");
  if (offer.profile.empty() && request.count * offer.gpus > kMaxGpusPerNode) {
    return limit_error("count x gpus is " + std::to_string(request.count * offer.gpus) +
                           " GPUs; one node holds at most " + std::to_string(kMaxGpusPerNode),
                       "count");
  }
  Value template_id = std::monostate{};
  if (!request.template_name.empty()) {
    GPUPLAN_TRY(t, tx.query("SELECT id FROM templates WHERE name = ?1", params(request.template_name)));
    if (t.empty()) return not_found_error("no template '" + request.template_name + "'", "template");
    template_id = t[0].text(0);
  }
  const int64_t price = offer.price_micros_per_hour * request.count;
  if (!credit_checked) GPUPLAN_CHECK(check_credit(tx, p.tenant_id, rent_lookahead_micros(offer, request.count), now));
  RentalRow rr;
  Rental& r = rr.r;
  r.id = new_id("r_");
  r.tenant_id = p.tenant_id;
  r.created_by = p.user_id;
  r.offer_id = offer.id;
  r.provider_id = offer.provider_id;
  r.target = offer.target;
  r.count = request.count;
  r.price_micros_per_hour = price;
  r.min_billable_seconds = offer.min_billable_seconds;
  r.template_name = request.template_name;
  r.state = RentalState::kRequested;
  r.version = 1;
  r.idempotency_key = request.idempotency_key;
  r.ends_at_ms = request.ends_at_ms;
  r.created_at_ms = now;
  r.updated_at_ms = now;
  auto ins = tx.exec(
      "INSERT INTO rentals (id, tenant_id, created_by, offer_id, provider_id, target, units, "
      "price_micros_per_hour, min_billable_seconds, template_id, state, state_reason, version, "
      "idempotency_key, ends_at, prev_gpus, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
      "?8, ?9, ?10, 'requested', '', 1, ?11, ?12, '', ?13, ?13)",
      params(r.id, r.tenant_id, r.created_by, r.offer_id, r.provider_id, r.target, int64_t{r.count},
             r.price_micros_per_hour, r.min_billable_seconds, template_id, opt_text(r.idempotency_key),
             opt(r.ends_at_ms), now));
  if (!ins) {
    if (ins.error().code == ErrorCode::kConflict) *collision = true;  // the same key, concurrently: replay it
    return ins.error();
  }
  GPUPLAN_TRY(ev, tx.exec("INSERT INTO rental_events (rental_id, seq, at, from_state, to_state, actor, reason) VALUES "
                          "(?1, 1, ?2, NULL, 'requested', ?3, 'rent')",
                          params(r.id, now, p.user_id)));
  (void)ev;
  GPUPLAN_CHECK(place_and_run(tx, rr, offer, p.user_id, collision, from_tables));
  out = r;
  return Status::Ok();
}

Result<Rental> Market::rent(const Principal& p, const RentRequest& request) {
  GPUPLAN_CHECK(require_kind(p, TenantKind::kRenter));
  GPUPLAN_CHECK(require_write(p));
  const int64_t now = impl_->now();
  GPUPLAN_CHECK(check_rent_request(request, now));
  Rental out;
  Status s = impl_->write_with_claims([&](Tx& tx, bool* collision) -> Status {
    GPUPLAN_CHECK(impl_->rent_one(tx, p, request, now, collision, false, false, out));
    failpoint("before_commit");
    return Status::Ok();
  });
  if (!s) return s.error();
  failpoint("after_commit");
  return out;
}

Result<std::vector<Rental>> Market::rent_many(const Principal& p, const std::vector<RentRequest>& requests) {
  GPUPLAN_CHECK(require_kind(p, TenantKind::kRenter));
  GPUPLAN_CHECK(require_write(p));
  if (requests.empty()) return usage_error("rent_many needs at least one rental", "rentals");
  if (requests.size() > kMaxRentManyRentals) {
    return limit_error("one all-or-nothing rent holds at most " + std::to_string(kMaxRentManyRentals) +
                           " rentals, not " + std::to_string(requests.size()) +
                           " (kMaxRentManyRentals); plan with fewer instances (max_instances)",
                       "rentals");
  }
  const int64_t now = impl_->now();
  for (const auto& r : requests) GPUPLAN_CHECK(check_rent_request(r, now));
  std::vector<Rental> out;
  Status s = impl_->write_with_claims([&](Tx& tx, bool* collision) -> Status {
    out.clear();
    // The credit limit applies to the sum: charges so far plus the lookahead of every rental at once.
    int64_t lookahead = 0;
    for (const auto& r : requests) {
      GPUPLAN_TRY(offer, impl_->offer_by_id(tx, r.offer_id));
      lookahead += rent_lookahead_micros(offer, r.count);
    }
    GPUPLAN_CHECK(check_credit(tx, p.tenant_id, lookahead, now));
    for (size_t i = 0; i < requests.size(); ++i) {
      Rental one;
      Status placed = impl_->rent_one(tx, p, requests[i], now, collision, true, i > 0, one);
      if (!placed) {
        Error e = placed.error();
        if (e.code == ErrorCode::kConflict && !*collision) {
          e.message = "rental " + std::to_string(i + 1) + " of " + std::to_string(requests.size()) +
                      " could not be placed, so none was made (all or nothing): " + e.message;
        }
        return e;
      }
      out.push_back(std::move(one));
    }
    failpoint("before_commit");
    return Status::Ok();
  });
  if (!s) return s.error();
  failpoint("after_commit");
  return out;
}

Result<Rental> Market::get_rental(const Principal& p, std::string_view rental_id) const {
  Rental out;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(rr, load_rental(tx, rental_id, p.tenant_id));
    out = rr.r;
    return Status::Ok();
  }));
  return out;
}

namespace {
Result<std::vector<Rental>> list_where(Tx& tx, const std::string& column, const std::string& key) {
  GPUPLAN_TRY(rows, tx.query(std::string("SELECT ") + kRentalCols + kRentalFrom + "WHERE r." + column +
                                 " = ?1 ORDER BY r.created_at DESC, r.id",
                             params(key)));
  std::vector<Rental> out;
  std::map<std::string, size_t> index;
  for (const Row& row : rows) {
    if (out.size() >= kMaxListRows) break;
    index[row.text(0)] = out.size();
    out.push_back(rental_from(row).r);
  }
  GPUPLAN_TRY(ps,
              tx.query("SELECT p.rental_id, p.gpu_id, g.uuid, g.node_id, p.profile, p.start_slice, p.size_slices FROM "
                       "rental_placements p JOIN gpus g ON g.id = p.gpu_id JOIN rentals r ON r.id = p.rental_id WHERE "
                       "r." +
                           column + " = ?1 ORDER BY p.rental_id, p.seq",
                       params(key)));
  for (const Row& row : ps) {
    auto it = index.find(row.text(0));
    if (it == index.end()) continue;
    out[it->second].placements.push_back(Placement{row.text(1), row.text(2), row.text(3), row.text(4),
                                                   static_cast<int>(row.integer(5)), static_cast<int>(row.integer(6))});
  }
  return out;
}
}  // namespace

Result<std::vector<Rental>> Market::list_rentals(const Principal& p) const {
  std::vector<Rental> out;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(r, list_where(tx, "tenant_id", p.tenant_id));
    out = r;
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<Rental>> Market::list_provider_rentals(const Principal& p) const {
  GPUPLAN_CHECK(require_kind(p, TenantKind::kProvider));
  std::vector<Rental> out;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(r, list_where(tx, "provider_id", p.tenant_id));
    out = r;
    for (Rental& x : out) x.created_by.clear();  // the renter's users are not the provider's business
    return Status::Ok();
  }));
  return out;
}

Result<Rental> Market::stop_rental(const Principal& p, std::string_view rental_id, std::optional<int64_t> if_match) {
  return impl_->change(p, rental_id, if_match, false, [&](Tx& tx, RentalRow& rr, bool*) -> Status {
    GPUPLAN_CHECK(impl_->transition(tx, rr, RentalState::kStopping, p.user_id, "stop"));
    return impl_->transition(tx, rr, RentalState::kStopped, "system", "released");
  });
}

Result<Rental> Market::start_rental(const Principal& p, std::string_view rental_id, std::optional<int64_t> if_match) {
  return impl_->change(p, rental_id, if_match, false, [&](Tx& tx, RentalRow& rr, bool* collision) -> Status {
    if (rr.r.state != RentalState::kStopped) {
      return conflict(
          "rental " + rr.r.id + " is " + std::string(to_string(rr.r.state)) + "; only a stopped rental starts",
          "state");
    }
    GPUPLAN_TRY(offer, impl_->offer_by_id(tx, rr.r.offer_id));
    GPUPLAN_CHECK(
        check_credit(tx, p.tenant_id, charge_for(kCreditLookaheadSeconds, rr.r.price_micros_per_hour), impl_->now()));
    GPUPLAN_CHECK(impl_->transition(tx, rr, RentalState::kRequested, p.user_id, "start"));
    // Placement failure rolls the whole transaction back: the rental stays stopped.
    return impl_->place_and_run(tx, rr, offer, p.user_id, collision);
  });
}

Result<Rental> Market::delete_rental(const Principal& p, std::string_view rental_id, std::optional<int64_t> if_match) {
  return impl_->change(p, rental_id, if_match, false, [&](Tx& tx, RentalRow& rr, bool*) -> Status {
    GPUPLAN_CHECK(impl_->transition(tx, rr, RentalState::kTerminating, p.user_id, "delete"));
    return impl_->transition(tx, rr, RentalState::kTerminated, "system", "released");
  });
}

Result<Rental> Market::mark_running(const Principal& p, std::string_view rental_id, std::optional<int64_t> if_match) {
  // Scoped to the provider's rentals (any for the platform admin): others get kNotFound.
  return impl_->change(p, rental_id, if_match, true, [&](Tx& tx, RentalRow& rr, bool*) -> Status {
    GPUPLAN_CHECK(impl_->transition(tx, rr, RentalState::kStarting, p.user_id, "hand-off: manual"));
    return impl_->transition(tx, rr, RentalState::kRunning, p.user_id, "hand-off: manual");
  });
}

Result<std::vector<RentalEvent>> Market::rental_events(const Principal& p, std::string_view rental_id) const {
  std::vector<RentalEvent> out;
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    out.clear();
    GPUPLAN_TRY(rr, load_rental(tx, rental_id, p.tenant_id));
    GPUPLAN_TRY(rows,
                tx.query("SELECT seq, at, from_state, to_state, actor, reason FROM rental_events WHERE rental_id = ?1 "
                         "ORDER BY seq",
                         params(rr.r.id)));
    for (const Row& r : rows) {
      RentalEvent e;
      e.seq = r.integer(0);
      e.at_ms = r.integer(1);
      if (!r.is_null(2)) {
        if (auto f = parse_rental_state(r.text(2))) e.from = *f;
      }
      e.to = stored_word(parse_rental_state(r.text(3)), RentalState::kFailed);
      e.actor = r.text(4);
      e.reason = r.text(5);
      out.push_back(std::move(e));
    }
    return Status::Ok();
  }));
  return out;
}

// --- billing -----------------------------------------------------------------------------------------------
Result<RentalUsage> Market::rental_usage(const Principal& p, std::string_view rental_id) const {
  RentalUsage out;
  const int64_t now = impl_->now();
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    GPUPLAN_TRY(rr, load_rental(tx, rental_id, p.tenant_id));
    GPUPLAN_TRY(us, usages(tx, "r.id = ?1", rr.r.id, now));
    if (us.empty()) return Error{ErrorCode::kInternal, "rental without usage row", ""};
    out = us[0];
    return Status::Ok();
  }));
  return out;
}

Result<TenantUsage> Market::usage(const Principal& p) const {
  TenantUsage out;
  const int64_t now = impl_->now();
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    out = TenantUsage{};
    out.tenant_id = p.tenant_id;
    GPUPLAN_TRY(t, tx.query("SELECT credit_limit_micros FROM tenants WHERE id = ?1", params(p.tenant_id)));
    if (!t.empty()) out.credit_limit_micros = t[0].maybe_integer(0);
    GPUPLAN_TRY(us, usages(tx, "r.tenant_id = ?1", p.tenant_id, now));
    for (const auto& u : us) {
      out.charge_micros += u.charge_micros;
      if (out.rentals.size() < kMaxListRows) out.rentals.push_back(u);
    }
    return Status::Ok();
  }));
  return out;
}

Result<Earnings> Market::earnings(const Principal& p) const {
  GPUPLAN_CHECK(require_kind(p, TenantKind::kProvider));
  Earnings out;
  const int64_t now = impl_->now();
  MARKET_RUN(with_tx(*impl_->db, TxMode::kRead, [&](Tx& tx) -> Status {
    out = Earnings{};
    out.provider_id = p.tenant_id;
    GPUPLAN_TRY(us, usages(tx, "r.provider_id = ?1", p.tenant_id, now));
    for (auto u : us) {
      out.earnings_micros += u.charge_micros;
      u.tenant_id.clear();
      if (out.rentals.size() < kMaxListRows) out.rentals.push_back(std::move(u));
    }
    return Status::Ok();
  }));
  return out;
}

Result<int64_t> Market::tick() {
  GPUPLAN_TRY(lost, mark_lost_nodes());  // market_agent.cc: three missed heartbeats
  int64_t changed = lost;
  const int64_t now = impl_->now();
  MARKET_RUN(with_tx(*impl_->db, TxMode::kWrite, [&](Tx& tx) -> Status {
    changed = lost;
    GPUPLAN_TRY(ended, tx.query(std::string("SELECT ") + kRentalCols + kRentalFrom +
                                    "WHERE r.ends_at IS NOT NULL AND r.ends_at <= ?1 AND r.state NOT IN ('terminated', "
                                    "'failed', 'terminating')",
                                params(now)));
    for (const Row& row : ended) {
      RentalRow rr = rental_from(row);
      GPUPLAN_CHECK(load_placements(tx, rr.r));
      GPUPLAN_CHECK(impl_->transition(tx, rr, RentalState::kTerminating, "system", "ends_at reached"));
      GPUPLAN_CHECK(impl_->transition(tx, rr, RentalState::kTerminated, "system", "released"));
      ++changed;
    }
    GPUPLAN_TRY(limited, tx.query("SELECT id, credit_limit_micros FROM tenants WHERE credit_limit_micros IS NOT NULL"));
    for (const Row& t : limited) {
      GPUPLAN_TRY(charges, tenant_charges(tx, t.text(0), now));
      if (charges < t.integer(1)) continue;
      GPUPLAN_TRY(running, tx.query(std::string("SELECT ") + kRentalCols + kRentalFrom +
                                        "WHERE r.tenant_id = ?1 AND r.state = 'running'",
                                    params(t.text(0))));
      for (const Row& row : running) {
        RentalRow rr = rental_from(row);
        GPUPLAN_CHECK(load_placements(tx, rr.r));
        GPUPLAN_CHECK(impl_->transition(tx, rr, RentalState::kStopping, "system", "credit limit reached"));
        GPUPLAN_CHECK(impl_->transition(tx, rr, RentalState::kStopped, "system", "released"));
        ++changed;
      }
    }
    return changed > lost ? bump_version(tx) : Status::Ok();
  }));
  return changed;
}

// --- what market_agent.cc uses of the logic here (src/market/market_internal.h) -----------------------------
namespace internal {
const Catalog& catalog(const Market::Impl& m) { return *m.catalog; }
int64_t now(const Market::Impl& m) { return m.now(); }
Db& db(Market::Impl& m) { return *m.db; }
Status bump_version(Tx& tx) { return ::gpuplan::market::bump_version(tx); }
std::string random_hex(size_t bytes) { return ::gpuplan::market::random_hex(bytes); }
std::string new_id(std::string_view prefix) { return ::gpuplan::market::new_id(prefix); }
Result<Rental> load_rental(Tx& tx, std::string_view rental_id) {
  GPUPLAN_TRY(rr, ::gpuplan::market::load_rental(tx, rental_id, ""));
  return rr.r;
}
Status transition(Market::Impl& m, Tx& tx, std::string_view rental_id, RentalState to, const std::string& reason) {
  auto rr = ::gpuplan::market::load_rental(tx, rental_id, "");
  if (!rr) return rr.error();
  return m.transition(tx, *rr, to, "system", reason);
}
const MarketOptions& options(const Market::Impl& m) { return m.options; }
}  // namespace internal

}  // namespace gpuplan::market
