// The hand-off outbox (issue #15, part 2; docs/market.md, "The outbox"). A rental on a node with an
// engine (Slurm, Kubernetes) gets an outbox row in the SAME transaction as the transition that needs the
// engine: reserved writes `apply`, stopped `stop`, terminated or failed `delete`. deliver_outbox() hands
// each row to its HandoffTarget outside any transaction and marks it delivered in a transaction after
// the target answered. Every name a target creates derives from (rental id, generation), and a target's
// apply of an existing name (stop of a missing one) is success, so a process killed at any step
// delivers again after restart and the engine still holds one job per generation
// (tests/unit/market_outbox_test.cc, SIGKILL at each step). Rentals change state only through market.cc's
// transition function (market_internal.h).
#include <algorithm>
#include <map>
#include <set>

#include "gpuplan/market.h"
#include "market/db.h"
#include "market/market_internal.h"

namespace gpuplan::market {

namespace {

template <typename... A>
std::vector<Value> params(A&&... a) {
  return {Value(std::forward<A>(a))...};
}
Value opt_text(const std::string& s) { return s.empty() ? Value(std::monostate{}) : Value(s); }

constexpr size_t kMaxErrorBytes = 1024;  // last_error keeps the start of a long message (a tool's stderr)
constexpr int kMaxBackoffShift = 20;     // 2^20 s is far past kOutboxMaxBackoffMs: no overflow

// Backoff after the `attempts`-th failure: 1 s, 2 s, 4 s ... at most kOutboxMaxBackoffMs.
int64_t backoff_ms(int64_t attempts) {
  const int shift = static_cast<int>(std::clamp<int64_t>(attempts - 1, 0, kMaxBackoffShift));
  return std::min(kOutboxFirstBackoffMs << shift, kOutboxMaxBackoffMs);
}

std::string clip(std::string s) {
  if (s.size() > kMaxErrorBytes) s.resize(kMaxErrorBytes);
  return s;
}

constexpr const char* kOutboxCols =
    "rental_id, generation, action, target_kind, node_id, attempts, next_attempt_at, delivered_at, gave_up_at, "
    "COALESCE(last_error, ''), COALESCE(external_id, '') ";

// A rental's rows in the order they must reach the engine: by generation, apply before stop before delete.
constexpr const char* kOutboxOrder =
    "created_at, rental_id, generation, CASE action WHEN 'apply' THEN 0 WHEN 'stop' THEN 1 ELSE 2 END";

OutboxRow row_from(const Row& r) {
  OutboxRow o;
  o.rental_id = r.text(0);
  o.generation = r.integer(1);
  o.action = r.text(2);
  o.target_kind = r.text(3);
  o.node_id = r.text(4);
  o.attempts = r.integer(5);
  o.next_attempt_at_ms = r.integer(6);
  o.delivered_at_ms = r.maybe_integer(7);
  o.gave_up_at_ms = r.maybe_integer(8);
  o.last_error = r.text(9);
  o.external_id = r.text(10);
  return o;
}

// The GRES type gpuplan's Slurm export writes (src/mig/export.cc): the MIG profile's name ("3g.40gb"),
// or, for a whole GPU, its catalog id ("a100-80gb-sxm4").
std::string gres_type(const std::string& catalog_id, const std::string& profile) {
  return profile.empty() ? catalog_id : profile;
}

// What the target needs of `row`'s rental, read in `tx`. A rental that released its placements (stop,
// delete) still names its node (the row's) and its generation: the target finds the job by name.
Result<handoff::HandoffRental> handoff_rental(Tx& tx, const OutboxRow& row) {
  GPUPLAN_TRY(r, internal::load_rental(tx, row.rental_id));
  handoff::HandoffRental h;
  h.rental_id = r.id;
  h.generation = row.generation;
  h.tenant_id = r.tenant_id;
  h.node_id = row.node_id;
  GPUPLAN_TRY(t, tx.query("SELECT name FROM tenants WHERE id = ?1", params(r.tenant_id)));
  if (!t.empty()) h.tenant_name = t[0].text(0);
  GPUPLAN_TRY(n, tx.query("SELECT name, COALESCE(slurm_partition, ''), COALESCE(slurm_node, '') FROM nodes WHERE id = "
                          "?1",
                          params(row.node_id)));
  if (!n.empty()) {
    h.node_name = n[0].text(0);
    h.slurm_partition = n[0].text(1);
    h.slurm_node = n[0].text(2).empty() ? h.node_name : n[0].text(2);
  }
  if (!r.template_name.empty()) {
    GPUPLAN_TRY(tp, tx.query("SELECT image FROM templates WHERE name = ?1", params(r.template_name)));
    if (!tp.empty()) h.image = tp[0].text(0);
  }
  if (!r.placements.empty()) {
    const Placement& p = r.placements.front();
    h.gpu_uuid = p.gpu_uuid;
    h.mig_profile = p.profile;
    h.placement_start = p.start;
    h.gpus = static_cast<int>(r.placements.size());
    GPUPLAN_TRY(g, tx.query("SELECT catalog_id FROM gpus WHERE id = ?1", params(p.gpu_id)));
    if (!g.empty()) h.gpu_type = g[0].text(0);
    h.slurm_gres_type = gres_type(h.gpu_type, h.mig_profile);
  } else {
    // Released (stop, delete): the profile from the rental's target ("a100-80gb-sxm4/3g.40gb"), which the
    // Kubernetes target's quota needs.
    const size_t slash = r.target.find('/');
    h.gpu_type = r.target.substr(0, slash);
    if (slash != std::string::npos) h.mig_profile = r.target.substr(slash + 1);
  }
  // The tenant's other live rentals on this engine (the Kubernetes quota counts them).
  GPUPLAN_TRY(live, tx.query("SELECT DISTINCT r.id, COALESCE(p.profile, '') FROM rentals r JOIN rental_placements p ON "
                             "p.rental_id = r.id JOIN gpus g ON g.id = p.gpu_id JOIN nodes n ON n.id = g.node_id "
                             "WHERE r.tenant_id = ?1 AND r.id <> ?2 AND r.state IN ('reserved', 'starting', "
                             "'running') AND n.scheduler = ?3 ORDER BY r.id LIMIT " +
                                 std::to_string(handoff::kMaxTenantSlices),
                             params(r.tenant_id, r.id, row.target_kind)));
  for (const Row& l : live) h.tenant_live.push_back(handoff::TenantSlice{l.text(0), l.text(1)});
  return h;
}

}  // namespace

namespace internal {

Result<bool> enqueue_apply(Tx& tx, const Rental& r, int64_t now_ms) {
  if (r.placements.empty()) return false;
  const std::string& node_id = r.placements.front().node_id;
  GPUPLAN_TRY(n, tx.query("SELECT scheduler FROM nodes WHERE id = ?1", params(node_id)));
  if (n.empty() || n[0].text(0) == to_string(Scheduler::kManual)) return false;
  for (const Placement& p : r.placements) {
    if (p.node_id != node_id) {
      return Error{ErrorCode::kConflict,
                   "rental " + r.id + " spans several nodes; an engine runs one rental on one node", "count"};
    }
  }
  GPUPLAN_TRY(ins, tx.exec("INSERT INTO outbox (rental_id, generation, action, target_kind, node_id, attempts, "
                           "next_attempt_at, created_at) VALUES (?1, ?2, 'apply', ?3, ?4, 0, ?5, ?5)",
                           params(r.id, r.version, n[0].text(0), node_id, now_ms)));
  (void)ins;
  return true;
}

Status enqueue_undo(Tx& tx, const std::string& rental_id, const std::string& action, int64_t now_ms) {
  GPUPLAN_TRY(last, tx.query("SELECT generation, target_kind, node_id FROM outbox WHERE rental_id = ?1 AND action = "
                             "'apply' ORDER BY generation DESC LIMIT 1",
                             params(rental_id)));
  if (last.empty()) return Status::Ok();  // never handed to an engine (manual)
  const int64_t gen = last[0].integer(0);
  GPUPLAN_TRY(undone, tx.query("SELECT COUNT(*) FROM outbox WHERE rental_id = ?1 AND generation = ?2 AND action <> "
                               "'apply'",
                               params(rental_id, gen)));
  if (!undone.empty() && undone[0].integer(0) > 0)
    return Status::Ok();  // stopped already; the delete has nothing to do
  GPUPLAN_TRY(ins, tx.exec("INSERT INTO outbox (rental_id, generation, action, target_kind, node_id, attempts, "
                           "next_attempt_at, created_at) VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?6)",
                           params(rental_id, gen, action, last[0].text(1), last[0].text(2), now_ms)));
  (void)ins;
  return Status::Ok();
}

}  // namespace internal

namespace {

handoff::HandoffTarget* target_of(const MarketOptions& o, const std::string& kind) {
  for (const auto& t : o.targets) {
    if (t && t->kind() == kind) return t.get();
  }
  return nullptr;
}

const char* kPk = "rental_id = ?1 AND generation = ?2 AND action = ?3";

}  // namespace

Result<OutboxReport> Market::deliver_outbox(size_t limit) {
  limit = std::min(limit, kMaxOutboxBatch);
  Impl& m = *impl_;
  const MarketOptions& opts = internal::options(m);
  Db& store = internal::db(m);
  OutboxReport report;
  std::vector<OutboxRow> rows;
  {
    Status s = with_tx(store, TxMode::kRead, [&](Tx& tx) -> Status {
      rows.clear();
      GPUPLAN_TRY(found, tx.query(std::string("SELECT ") + kOutboxCols +
                                      "FROM outbox WHERE delivered_at IS NULL AND gave_up_at IS NULL ORDER BY " +
                                      kOutboxOrder + " LIMIT " + std::to_string(kMaxOutboxScan),
                                  {}));
      for (const Row& r : found) rows.push_back(row_from(r));
      return Status::Ok();
    });
    if (!s) return s.error();
  }
  std::set<std::string> blocked;  // rentals with an earlier row not delivered: their later rows wait
  size_t handled = 0;
  for (const OutboxRow& row : rows) {
    if (blocked.count(row.rental_id) != 0) continue;
    blocked.insert(row.rental_id);  // one row per rental per call: the next waits for this one's mark
    const int64_t now = internal::now(m);
    if (row.next_attempt_at_ms > now) continue;
    if (handled >= limit) {
      ++report.waiting;
      continue;
    }
    handoff::HandoffTarget* target = target_of(opts, row.target_kind);
    // Lease the row (a second worker skips it; a dead worker's lease runs out) and read what the target needs.
    handoff::HandoffRental h;
    bool leased = false, superseded = false;
    Status lease = with_tx(store, TxMode::kWrite, [&](Tx& tx) -> Status {
      leased = superseded = false;
      GPUPLAN_TRY(
          n,
          tx.exec(std::string("UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ?4, last_error = "
                              "?6 WHERE ") +
                      kPk + " AND delivered_at IS NULL AND next_attempt_at = ?5",
                  params(row.rental_id, row.generation, row.action,
                         now + (target != nullptr ? opts.outbox_lease_ms : kOutboxMaxBackoffMs), row.next_attempt_at_ms,
                         target != nullptr ? Value(opt_text(row.last_error))
                                           : Value(std::string("no hand-off target of kind '") + row.target_kind +
                                                   "' runs in this server; it waits for one that has it"))));
      if (n != 1) return Status::Ok();
      leased = true;
      GPUPLAN_TRY(hr, handoff_rental(tx, row));
      h = hr;
      if (row.action == "apply") {
        GPUPLAN_TRY(r, internal::load_rental(tx, row.rental_id));
        // Stopped, deleted or lost before it was delivered: the stop or delete row that follows cleans up.
        superseded = r.state != RentalState::kReserved || r.version != row.generation;
      }
      return Status::Ok();
    });
    if (!lease) return lease.error();
    if (!leased) continue;
    if (target == nullptr) {
      ++report.waiting;
      continue;
    }
    ++handled;
    failpoint("outbox_before_deliver");
    Result<handoff::HandoffResult> answer = handoff::HandoffResult{};
    if (row.action == "apply") {
      if (!superseded) answer = target->apply(h);
    } else {
      answer = target->stop(h, row.external_id);
    }
    failpoint("outbox_after_deliver");
    const int64_t at = internal::now(m);
    bool gave_up = false;
    Status mark = with_tx(store, TxMode::kWrite, [&](Tx& tx) -> Status {
      gave_up = false;
      if (answer) {
        GPUPLAN_TRY(
            n,
            tx.exec(std::string("UPDATE outbox SET delivered_at = ?4, external_id = ?5, last_error = ?6 "
                                "WHERE ") +
                        kPk + " AND delivered_at IS NULL",
                    params(row.rental_id, row.generation, row.action, at, opt_text(answer->external_id),
                           superseded ? Value(std::string("superseded: the rental left reserved before its hand-off"))
                                      : Value(std::monostate{}))));
        if (n == 1 && row.action == "apply" && !superseded) {
          GPUPLAN_TRY(r, internal::load_rental(tx, row.rental_id));
          if (r.state == RentalState::kReserved && r.version == row.generation) {
            const std::string how = "hand-off: " + row.target_kind +
                                    (answer->external_id.empty() ? "" : " " + answer->external_id) +
                                    (answer->already_existed ? " (already there)" : "");
            GPUPLAN_CHECK(internal::transition(m, tx, r.id, RentalState::kStarting, how));
            if (answer->state == handoff::ExternalState::kRunning) {
              GPUPLAN_CHECK(internal::transition(m, tx, r.id, RentalState::kRunning, how));
            }
            GPUPLAN_CHECK(internal::bump_version(tx));
          }
        }
        failpoint("outbox_before_mark_commit");
        return Status::Ok();
      }
      const std::string why = clip(answer.error().message);
      GPUPLAN_TRY(cur, tx.query(std::string("SELECT attempts FROM outbox WHERE ") + kPk,
                                params(row.rental_id, row.generation, row.action)));
      const int64_t attempts = cur.empty() ? row.attempts + 1 : cur[0].integer(0);
      gave_up = row.action == "apply" && attempts >= kMaxApplyAttempts;
      GPUPLAN_TRY(n, tx.exec(std::string("UPDATE outbox SET last_error = ?4, next_attempt_at = ?5, gave_up_at = ?6 "
                                         "WHERE ") +
                                 kPk + " AND delivered_at IS NULL",
                             params(row.rental_id, row.generation, row.action, why, at + backoff_ms(attempts),
                                    gave_up ? Value(at) : Value(std::monostate{}))));
      (void)n;
      if (gave_up) {
        GPUPLAN_TRY(r, internal::load_rental(tx, row.rental_id));
        if (r.state == RentalState::kReserved && r.version == row.generation) {
          GPUPLAN_CHECK(internal::transition(
              m, tx, r.id, RentalState::kFailed,
              "hand-off to " + row.target_kind + " failed " + std::to_string(attempts) + " times: " + why));
          GPUPLAN_CHECK(internal::bump_version(tx));
        }
      }
      return Status::Ok();
    });
    if (!mark) return mark.error();
    if (answer) {
      ++report.delivered;
    } else if (gave_up) {
      ++report.failed;
    } else {
      ++report.retried;
    }
  }

  // The engines of rentals handed off but not running yet: running -> running; gone -> failed.
  std::vector<OutboxRow> starting;
  Status s = with_tx(store, TxMode::kRead, [&](Tx& tx) -> Status {
    starting.clear();
    GPUPLAN_TRY(found, tx.query(std::string("SELECT o.rental_id, o.generation, o.action, o.target_kind, o.node_id, "
                                            "o.attempts, o.next_attempt_at, o.delivered_at, o.gave_up_at, '', "
                                            "COALESCE(o.external_id, '') FROM outbox o JOIN rentals r ON r.id = "
                                            "o.rental_id WHERE o.action = 'apply' AND o.delivered_at IS NOT NULL AND "
                                            "r.state = 'starting' AND r.version = o.generation + 1 ORDER BY "
                                            "o.delivered_at LIMIT ") +
                                    std::to_string(limit),
                                {}));
    for (const Row& r : found) starting.push_back(row_from(r));
    return Status::Ok();
  });
  if (!s) return s.error();
  for (const OutboxRow& row : starting) {
    handoff::HandoffTarget* target = target_of(opts, row.target_kind);
    if (target == nullptr) continue;
    handoff::HandoffRental h;
    Status read = with_tx(store, TxMode::kRead, [&](Tx& tx) -> Status {
      GPUPLAN_TRY(hr, handoff_rental(tx, row));
      h = hr;
      return Status::Ok();
    });
    if (!read) return read.error();
    auto st = target->status(h, row.external_id);
    if (!st || st->state == handoff::ExternalState::kPending) continue;  // asked again at the next call
    const bool running = st->state == handoff::ExternalState::kRunning;
    Status moved = with_tx(store, TxMode::kWrite, [&](Tx& tx) -> Status {
      GPUPLAN_TRY(r, internal::load_rental(tx, row.rental_id));
      if (r.state != RentalState::kStarting || r.version != row.generation + 1) return Status::Ok();
      GPUPLAN_CHECK(internal::transition(
          m, tx, r.id, running ? RentalState::kRunning : RentalState::kFailed,
          running ? "hand-off: " + row.target_kind + " " + row.external_id + " runs"
                  : "hand-off: " + row.target_kind + " " + row.external_id + " ended before it ran"));
      return internal::bump_version(tx);
    });
    if (!moved) return moved.error();
    if (running) ++report.running;
  }
  return report;
}

Result<std::vector<OutboxRow>> Market::outbox_rows(const Principal& p, std::string_view rental_id) const {
  if (p.tenant_kind != TenantKind::kPlatform || p.role != Role::kAdmin) {
    return Error{ErrorCode::kForbidden, "only the platform's admin may read the outbox", ""};
  }
  std::vector<OutboxRow> out;
  Status s = with_tx(internal::db(*impl_), TxMode::kRead, [&](Tx& tx) -> Status {
    out.clear();
    const std::string sql = std::string("SELECT ") + kOutboxCols + "FROM outbox WHERE " +
                            (rental_id.empty() ? "delivered_at IS NULL" : "rental_id = ?1") + " ORDER BY " +
                            kOutboxOrder + " LIMIT " + std::to_string(kMaxListRows);
    GPUPLAN_TRY(rows, rental_id.empty() ? tx.query(sql) : tx.query(sql, params(std::string(rental_id))));
    for (const Row& r : rows) out.push_back(row_from(r));
    return Status::Ok();
  });
  if (!s) return s.error();
  return out;
}

Result<RentalAccess> Market::rental_access(const Principal& p, std::string_view rental_id) const {
  RentalAccess out;
  const MarketOptions& opts = internal::options(*impl_);
  const handoff::HandoffTarget* target = nullptr;
  handoff::HandoffRental h;
  std::string external_id;
  Status s = with_tx(internal::db(*impl_), TxMode::kRead, [&](Tx& tx) -> Status {
    auto r = internal::load_rental(tx, rental_id);
    if (!r || r->tenant_id != p.tenant_id) return not_found_error("no rental '" + std::string(rental_id) + "'", "id");
    out = RentalAccess{};
    target = nullptr;
    out.rental_id = r->id;
    out.state = r->state;
    GPUPLAN_TRY(last, tx.query(std::string("SELECT ") + kOutboxCols +
                                   "FROM outbox WHERE rental_id = ?1 AND action = 'apply' ORDER BY generation DESC "
                                   "LIMIT 1",
                               params(r->id)));
    std::string node_id = r->placements.empty() ? "" : r->placements.front().node_id;
    if (!last.empty()) {
      const OutboxRow row = row_from(last[0]);
      node_id = row.node_id;
      out.generation = row.generation;
      GPUPLAN_TRY(hr, handoff_rental(tx, row));
      h = hr;
      external_id = row.external_id;
      // Only a live hand-off gets the engine's access (a Kubernetes token is made for it).
      const bool live =
          r->state == RentalState::kReserved || r->state == RentalState::kStarting || r->state == RentalState::kRunning;
      target = live ? target_of(opts, row.target_kind) : nullptr;
      out.access.kind = row.target_kind;
      out.access.external_id = row.external_id;
    } else {
      out.access.kind = std::string(to_string(Scheduler::kManual));
    }
    if (!node_id.empty()) {
      GPUPLAN_TRY(n, tx.query("SELECT name, COALESCE(ssh, '') FROM nodes WHERE id = ?1", params(node_id)));
      if (!n.empty()) {
        out.node_name = n[0].text(0);
        if (out.access.kind == to_string(Scheduler::kManual)) out.access.ssh = n[0].text(1);
      }
    }
    return Status::Ok();
  });
  if (!s) return s.error();
  // Outside the transaction: the target may call its engine (kubectl create token).
  if (target != nullptr) out.access = target->access(h, external_id);
  return out;
}

}  // namespace gpuplan::market
