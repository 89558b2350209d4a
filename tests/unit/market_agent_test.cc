// The node agent's side of the market (issue #15, part 1), on every store kind, with the injected clock:
// enrolment tokens (digest only, single use, expiring), agent tokens bound to one node, inventory
// reconciliation (unknown names kept unsellable, missing GPUs unsellable), fencing (older seq or
// generation), and loss: three missed heartbeats (30 s) lose the node (capacity leaves the offers at once,
// billing ends at the last heartbeat, claims stay); the same boot id resumes, a new one ends the rentals
// as lost and frees the claims; a vanished GPU or MIG instance does the same for the rentals on it.
#include <gtest/gtest.h>

#include "market_fixture.h"

namespace gpuplan::market {
namespace {

constexpr int64_t kPricePerHour = 3'600'000;  // 1,000 micro-units a second: charges read as seconds x 1000
const std::string kBoot = "boot-1";

class MarketAgent : public testing::StoreTest {
 protected:
  int64_t scalar(const std::string& sql, std::vector<Value> v = {}) {
    int64_t out = -1;
    Status s = with_tx(w.market->db(), TxMode::kRead, [&](Tx& tx) -> Status {
      GPUPLAN_TRY(rows, tx.query(sql, v));
      out = rows.empty() ? -1 : rows[0].integer(0);
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    return out;
  }
  std::string text(const std::string& sql, std::vector<Value> v = {}) {
    std::string out;
    Status s = with_tx(w.market->db(), TxMode::kRead, [&](Tx& tx) -> Status {
      GPUPLAN_TRY(rows, tx.query(sql, v));
      out = rows.empty() ? "<none>" : rows[0].text(0);
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok());
    return out;
  }
  AgentPrincipal enrol(const Node& n) {
    auto e = w.market->issue_enrollment(w.provider, n.id);
    EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
    auto t = w.market->enroll_agent(e->token, kBoot);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
    auto a = w.market->authenticate_agent("Bearer " + t->token);
    EXPECT_TRUE(a.ok());
    return a.ok() ? *a : AgentPrincipal{};
  }
  // The inventory of an A100 node as registered by add_a100_node (uuids GPU-<name>-<i>).
  Inventory a100_inventory(const std::string& name, int n, int64_t seq, const std::string& boot = kBoot) {
    Inventory inv;
    inv.seq = seq;
    inv.boot_id = boot;
    inv.driver_version = "550.54.15";
    for (int i = 0; i < n; ++i) {
      inv.gpus.push_back(InventoryGpu{"GPU-" + name + "-" + std::to_string(i),
                                      "NVIDIA A100-SXM4-80GB",
                                      "00000000:1" + std::to_string(i) + ":00.0",
                                      85'899'345'920,
                                      "disabled",
                                      {}});
    }
    return inv;
  }
  int64_t available(const std::string& offer_id) {
    auto o = w.market->get_offer(offer_id);
    EXPECT_TRUE(o.ok());
    return o.ok() ? o->available : -1;
  }
  int64_t charge(const std::string& rental_id) {
    auto u = w.market->rental_usage(w.renter_a, rental_id);
    EXPECT_TRUE(u.ok());
    return u.ok() ? u->charge_micros : -1;
  }
  RentalState state(const std::string& rental_id) {
    auto r = w.market->get_rental(w.renter_a, rental_id);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->state : RentalState::kFailed;
  }
  int64_t claims(const std::string& rental_id) {
    return scalar("SELECT COUNT(*) FROM slice_claims WHERE rental_id = ?1", {Value(rental_id)});
  }
};

TEST_P(MarketAgent, EnrolmentTokenIsADigestSingleUseExpiringAndTheAgentTokenIsBoundToItsNode) {
  Node n = w.add_a100_node("n1", 1, MigPolicy::kNone);
  Node other = w.add_a100_node("n2", 1, MigPolicy::kNone);
  auto e = w.market->issue_enrollment(w.provider, n.id);
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->token.rfind("gpe_" + n.id + "_", 0), 0u) << e->token;
  // Only the digest is stored: no column holds the token or its secret.
  const std::string secret = e->token.substr(e->token.rfind('_') + 1);
  EXPECT_EQ(scalar("SELECT COUNT(*) FROM node_agents WHERE enroll_sha256 = ?1 OR enroll_sha256 LIKE ?2",
                   {Value(e->token), Value("%" + secret + "%")}),
            0);
  EXPECT_EQ(text("SELECT enroll_sha256 FROM node_agents WHERE node_id = ?1", {Value(n.id)}).size(), 64u);
  // Who may issue: another provider's node is not found; a renter or a viewer is refused.
  auto renter = w.market->issue_enrollment(w.renter_a, n.id);
  ASSERT_FALSE(renter.ok());
  EXPECT_EQ(renter.error().code, ErrorCode::kNotFound);
  std::string viewer_tenant;
  // A second provider tenant's admin on our node: not found.
  Principal prov2 = w.add_tenant("prov2", TenantKind::kProvider, &viewer_tenant);
  auto foreign = w.market->issue_enrollment(prov2, n.id);
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.error().code, ErrorCode::kNotFound);

  auto t = w.market->enroll_agent(e->token, kBoot);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->node_id, n.id);
  EXPECT_EQ(t->heartbeat_seconds, 10);
  auto again = w.market->enroll_agent(e->token, kBoot);  // single use
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kUnauthenticated);
  auto a = w.market->authenticate_agent("Bearer " + t->token);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->node_id, n.id);
  EXPECT_EQ(a->provider_id, w.provider_id);
  // The agent token is not a user's token, and a user's is not an agent's.
  EXPECT_FALSE(w.market->authenticate(t->token).ok());
  EXPECT_TRUE(Market::looks_like_agent_token("Bearer " + t->token));
  std::string tampered = t->token;
  tampered.back() = tampered.back() == '0' ? '1' : '0';
  EXPECT_FALSE(w.market->authenticate_agent(tampered).ok());

  // Expiry: a fresh token a day and a millisecond later is refused.
  auto late = w.market->issue_enrollment(w.provider, other.id);
  ASSERT_TRUE(late.ok());
  w.clock->advance_ms(kEnrollmentTtlMs + 1);
  auto expired = w.market->enroll_agent(late->token, kBoot);
  ASSERT_FALSE(expired.ok());
  EXPECT_EQ(expired.error().code, ErrorCode::kUnauthenticated);
  // A tampered token naming the other node does not open it either.
  std::string swapped = e->token;
  swapped.replace(4, n.id.size(), other.id);
  EXPECT_FALSE(w.market->enroll_agent(swapped, kBoot).ok());
  // Re-enrolment replaces the agent token: the old one stops working.
  auto e2 = w.market->issue_enrollment(w.provider, n.id);
  ASSERT_TRUE(e2.ok());
  auto t2 = w.market->enroll_agent(e2->token, kBoot);
  ASSERT_TRUE(t2.ok());
  EXPECT_FALSE(w.market->authenticate_agent(t->token).ok());
  EXPECT_TRUE(w.market->authenticate_agent(t2->token).ok());
}

TEST_P(MarketAgent, InventoryReconcilesGpusUnknownNamesAreKeptUnsellableAndMissingOnesLeaveTheOffers) {
  Node n = w.add_a100_node("n1", 2, MigPolicy::kNone);
  Offer whole = w.add_offer("a100-80gb-sxm4", 1, kPricePerHour);
  AgentPrincipal a = enrol(n);
  EXPECT_EQ(available(whole.id), 2);
  Inventory inv = a100_inventory("n1", 1, 1);  // GPU-n1-1 is missing
  inv.gpus.push_back(
      InventoryGpu{"GPU-new-h100", "NVIDIA H100 80GB HBM3", "00000000:20:00.0", 85'520'809'984, "disabled", {}});
  inv.gpus.push_back(InventoryGpu{"GPU-mystery", "NVIDIA Mystery 9000", "00000000:30:00.0", 1, "", {}});
  inv.features_off = {"mig"};
  auto r = w.market->put_inventory(a, inv);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->gpus.size(), 4u);
  EXPECT_EQ(r->gpus[0].target, "a100-80gb-sxm4");
  EXPECT_TRUE(r->gpus[0].unsellable_reason.empty());
  EXPECT_EQ(r->gpus[1].target, "h100-80gb-sxm5");
  EXPECT_TRUE(r->gpus[1].unsellable_reason.empty());
  EXPECT_TRUE(r->gpus[2].target.empty());
  EXPECT_NE(r->gpus[2].unsellable_reason.find("does not know"), std::string::npos) << r->gpus[2].unsellable_reason;
  EXPECT_EQ(r->gpus[3].uuid, "GPU-n1-1");
  EXPECT_NE(r->gpus[3].unsellable_reason.find("missing"), std::string::npos);
  // The node keeps all four GPUs; only the A100 the agent reports sells.
  auto node = w.market->get_node(w.provider, n.id);
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->gpus.size(), 4u);
  EXPECT_EQ(available(whole.id), 1);
  EXPECT_NE(text("SELECT unsellable_reason FROM gpus WHERE uuid = 'GPU-mystery'").find("NVIDIA Mystery 9000"),
            std::string::npos);
  EXPECT_EQ(text("SELECT features_off FROM node_agents WHERE node_id = ?1", {Value(n.id)}), "mig");
  EXPECT_EQ(scalar("SELECT memory_bytes FROM gpus WHERE uuid = 'GPU-new-h100'"), 85'520'809'984);
  Offer h100 = w.add_offer("h100-80gb-sxm5", 1, kPricePerHour);
  EXPECT_EQ(available(h100.id), 1);
  // The missing GPU comes back: it sells again.
  ASSERT_TRUE(w.market->put_inventory(a, a100_inventory("n1", 2, 2)).ok());
  EXPECT_EQ(available(whole.id), 2);
  // A GPU UUID that another node holds is refused, naming it.
  Node n2 = w.add_a100_node("n2", 1, MigPolicy::kNone);
  Inventory dup = a100_inventory("n1", 2, 3);
  dup.gpus.push_back(InventoryGpu{"GPU-n2-0", "NVIDIA A100-SXM4-80GB", "", 0, "", {}});
  auto refused = w.market->put_inventory(a, dup);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  EXPECT_EQ(refused.error().field, "gpus[2].uuid");
  (void)n2;
}

TEST_P(MarketAgent, OlderSeqAndOlderGenerationAreFencedAndTheDesiredListNamesPlacements) {
  Node n = w.add_a100_node("n1", 1, MigPolicy::kDynamic);
  Offer slice = w.add_offer("a100-80gb-sxm4/3g.40gb", 1, kPricePerHour);
  AgentPrincipal a = enrol(n);
  ASSERT_TRUE(w.market->put_inventory(a, a100_inventory("n1", 1, 5)).ok());
  auto stale = w.market->put_inventory(a, a100_inventory("n1", 1, 4));
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, ErrorCode::kConflict);
  EXPECT_EQ(stale.error().field, "seq");
  auto hb_stale = w.market->heartbeat(a, Heartbeat{3, kBoot, {}});
  ASSERT_FALSE(hb_stale.ok());
  EXPECT_EQ(hb_stale.error().field, "seq");
  auto wrong_boot = w.market->heartbeat(a, Heartbeat{6, "boot-2", {}});
  ASSERT_FALSE(wrong_boot.ok());
  EXPECT_EQ(wrong_boot.error().field, "boot_id");

  auto r = w.market->rent(w.renter_a, RentRequest{slice.id});
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto hb = w.market->heartbeat(a, Heartbeat{6, kBoot, {}});
  ASSERT_TRUE(hb.ok()) << hb.error().message;
  EXPECT_EQ(hb->heartbeat_seconds, 10);
  ASSERT_EQ(hb->desired.size(), 1u);
  EXPECT_EQ(hb->desired[0].rental_id, r->id);
  EXPECT_EQ(hb->desired[0].generation, r->version);
  EXPECT_EQ(hb->desired[0].state, RentalState::kRunning);
  EXPECT_EQ(hb->desired[0].gpu_uuid, "GPU-n1-0");
  EXPECT_EQ(hb->desired[0].profile, "3g.40gb");
  EXPECT_EQ(hb->desired[0].placement, r->placements[0].start);
  // The current generation is accepted; an older one is stale; another node's (or no) rental is ignored.
  auto ok = w.market->heartbeat(a, Heartbeat{7, kBoot, {{r->id, r->version}, {"r_not_here", 1}}});
  ASSERT_TRUE(ok.ok());
  EXPECT_FALSE(ok->stale);
  ASSERT_EQ(ok->ignored.size(), 1u);
  EXPECT_EQ(ok->ignored[0], "r_not_here");
  auto old = w.market->heartbeat(a, Heartbeat{8, kBoot, {{r->id, r->version - 1}}});
  ASSERT_TRUE(old.ok());
  EXPECT_TRUE(old->stale);
  EXPECT_NE(old->stale_reason.find(r->id), std::string::npos);
  ASSERT_EQ(old->desired.size(), 1u);  // the answer still says what should run, to catch up
  // Another node's agent sees nothing of this node and its rental ids are ignored there.
  Node n2 = w.add_a100_node("n2", 1, MigPolicy::kNone);
  AgentPrincipal b = enrol(n2);
  ASSERT_TRUE(w.market->put_inventory(b, a100_inventory("n2", 1, 1)).ok());
  auto theirs = w.market->heartbeat(b, Heartbeat{2, kBoot, {{r->id, r->version}}});
  ASSERT_TRUE(theirs.ok());
  EXPECT_TRUE(theirs->desired.empty());
  ASSERT_EQ(theirs->ignored.size(), 1u);
  EXPECT_EQ(state(r->id), RentalState::kRunning);
}

// The heartbeat's `failed` (issue #15; dynamic MIG could not create the instance): the rental fails with
// the agent's reason, its claims are freed and billing ends at the report; a report for an older
// generation, or for a rental that is not on this node, is ignored. Before, the server ignored `failed`:
// the rental stayed running and billed.
TEST_P(MarketAgent, AHeartbeatsFailedFailsTheRentalAtItsGenerationFreesItsClaimsAndEndsBilling) {
  Node n = w.add_a100_node("n1", 1, MigPolicy::kDynamic);
  Offer slice = w.add_offer("a100-80gb-sxm4/3g.40gb", 1, kPricePerHour);
  AgentPrincipal a = enrol(n);
  ASSERT_TRUE(w.market->put_inventory(a, a100_inventory("n1", 1, 1)).ok());
  const int64_t free_before = available(slice.id);
  auto r = w.market->rent(w.renter_a, RentRequest{slice.id});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(state(r->id), RentalState::kRunning);
  EXPECT_GT(claims(r->id), 0);
  EXPECT_EQ(available(slice.id), free_before - 1);
  w.clock->advance_seconds(10);
  const std::string why = "nvmlDeviceCreateGpuInstanceWithPlacement: Insufficient Resources";
  // An older generation and another node's rental: ignored, nothing changes.
  auto old = w.market->heartbeat(
      a, Heartbeat{2, kBoot, {}, {{r->id, r->version - 1, "insufficient_resources", why}, {"r_nosuch", 1, "", ""}}});
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_TRUE(old->failed.empty());
  EXPECT_EQ(old->ignored.size(), 2u);
  EXPECT_EQ(state(r->id), RentalState::kRunning);
  // The current generation: failed now, with the agent's reason; claims freed; billed up to the report.
  auto hb = w.market->heartbeat(a, Heartbeat{3, kBoot, {}, {{r->id, r->version, "insufficient_resources", why}}});
  ASSERT_TRUE(hb.ok()) << hb.error().message;
  ASSERT_EQ(hb->failed.size(), 1u);
  EXPECT_EQ(hb->failed[0], r->id);
  EXPECT_TRUE(hb->desired.empty());
  EXPECT_EQ(state(r->id), RentalState::kFailed);
  EXPECT_EQ(claims(r->id), 0);
  EXPECT_EQ(available(slice.id), free_before);
  EXPECT_EQ(charge(r->id), 10'000);
  w.clock->advance_seconds(3600);
  EXPECT_EQ(charge(r->id), 10'000);
  auto got = w.market->get_rental(w.renter_a, r->id);
  ASSERT_TRUE(got.ok());
  EXPECT_NE(got->state_reason.find("insufficient_resources"), std::string::npos) << got->state_reason;
  EXPECT_NE(got->state_reason.find(why), std::string::npos) << got->state_reason;
  // Reported again (the agent's next heartbeat before it saw the answer): ignored, still failed once.
  auto again = w.market->heartbeat(a, Heartbeat{4, kBoot, {}, {{r->id, r->version, "insufficient_resources", why}}});
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(again->failed.empty());
  EXPECT_EQ(state(r->id), RentalState::kFailed);
  // Bounds: a message over the limit is refused naming the field.
  auto big = w.market->heartbeat(a, Heartbeat{5, kBoot, {}, {{r->id, r->version, "x", std::string(5000, 'm')}}});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, ErrorCode::kLimit);
  EXPECT_EQ(big.error().field, "failed[0].message");
}

TEST_P(MarketAgent, ThreeMissedHeartbeatsLoseTheNodeAndTheSameBootIdResumesBilledFromThen) {
  Node n = w.add_a100_node("n1", 2, MigPolicy::kNone);
  Offer whole = w.add_offer("a100-80gb-sxm4", 1, kPricePerHour);
  AgentPrincipal a = enrol(n);
  ASSERT_TRUE(w.market->put_inventory(a, a100_inventory("n1", 2, 1)).ok());
  auto r = w.market->rent(w.renter_a, RentRequest{whole.id});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(available(whole.id), 1);
  w.clock->advance_seconds(10);
  ASSERT_TRUE(w.market->heartbeat(a, Heartbeat{2, kBoot, {{r->id, r->version}}}).ok());  // last heartbeat: t=10 s
  w.clock->advance_seconds(30);  // 30 s since: not yet more than three missed
  ASSERT_TRUE(w.market->tick().ok());
  EXPECT_EQ(state(r->id), RentalState::kRunning);
  w.clock->advance_seconds(1);  // 31 s: lost
  auto changed = w.market->tick();
  ASSERT_TRUE(changed.ok()) << changed.error().message;
  EXPECT_EQ(*changed, 1);
  EXPECT_EQ(state(r->id), RentalState::kLost);
  EXPECT_EQ(available(whole.id), 0);  // the lost node's free GPU leaves the offers at once
  EXPECT_EQ(claims(r->id), 8);        // its GPU (all 8 memory slices) stays claimed
  EXPECT_EQ(charge(r->id), 10'000);   // billed up to the last heartbeat, not to the loss
  w.clock->advance_seconds(3600);
  EXPECT_EQ(charge(r->id), 10'000);  // nothing while lost
  EXPECT_EQ(*w.market->tick(), 0);   // marked once
  // The same boot reports again: the rental resumes, billed from now; capacity returns.
  auto back = w.market->heartbeat(a, Heartbeat{3, kBoot, {}});
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(state(r->id), RentalState::kRunning);
  EXPECT_EQ(available(whole.id), 1);
  w.clock->advance_seconds(5);
  EXPECT_EQ(charge(r->id), 15'000);
  auto events = w.market->rental_events(w.renter_a, r->id);
  ASSERT_TRUE(events.ok());
  ASSERT_GE(events->size(), 2u);
  EXPECT_EQ(events->at(events->size() - 2).to, RentalState::kLost);
  EXPECT_EQ(events->back().to, RentalState::kRunning);
}

TEST_P(MarketAgent, ANewBootIdEndsTheRentalsAsLostAndFreesTheClaimsAfterTheFreshInventory) {
  Node n = w.add_a100_node("n1", 1, MigPolicy::kNone);
  Offer whole = w.add_offer("a100-80gb-sxm4", 1, kPricePerHour);
  AgentPrincipal a = enrol(n);
  ASSERT_TRUE(w.market->put_inventory(a, a100_inventory("n1", 1, 1)).ok());
  auto r = w.market->rent(w.renter_a, RentRequest{whole.id});
  ASSERT_TRUE(r.ok());
  w.clock->advance_seconds(20);
  ASSERT_TRUE(w.market->heartbeat(a, Heartbeat{2, kBoot, {}}).ok());
  w.clock->advance_seconds(45);
  ASSERT_TRUE(w.market->tick().ok());
  EXPECT_EQ(state(r->id), RentalState::kLost);
  // Rebooted: the heartbeat of the new boot is refused until the inventory describes it.
  auto hb = w.market->heartbeat(a, Heartbeat{3, "boot-2", {}});
  ASSERT_FALSE(hb.ok());
  EXPECT_EQ(hb.error().field, "boot_id");
  EXPECT_EQ(claims(r->id), 8);  // a whole A100: all 8 memory slices
  auto inv = w.market->put_inventory(a, a100_inventory("n1", 1, 4, "boot-2"));
  ASSERT_TRUE(inv.ok()) << inv.error().message;
  EXPECT_EQ(inv->ended, 1);
  auto got = w.market->get_rental(w.renter_a, r->id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, RentalState::kTerminated);
  EXPECT_NE(got->state_reason.find("lost"), std::string::npos) << got->state_reason;
  EXPECT_EQ(claims(r->id), 0);
  EXPECT_EQ(available(whole.id), 1);
  EXPECT_EQ(charge(r->id), 20'000);  // up to the last heartbeat
  ASSERT_TRUE(w.market->heartbeat(a, Heartbeat{5, "boot-2", {}}).ok());

  // A node that reboots faster than the loss: running -> lost -> terminated in one inventory.
  auto r2 = w.market->rent(w.renter_a, RentRequest{whole.id});
  ASSERT_TRUE(r2.ok()) << r2.error().message;
  w.clock->advance_seconds(7);
  auto fast = w.market->put_inventory(a, a100_inventory("n1", 1, 6, "boot-3"));
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(fast->ended, 1);
  EXPECT_EQ(state(r2->id), RentalState::kTerminated);
  EXPECT_EQ(charge(r2->id), 0);  // the last heartbeat came before it started: nothing billed
}

TEST_P(MarketAgent, AVanishedGpuOrMigInstanceLosesItsRentalsAndTheirReturnResumesThem) {
  Node n = w.add_a100_node("n1", 2, MigPolicy::kNone);
  Node m = w.add_a100_node("m1", 1, MigPolicy::kStatic, Interconnect::kNvlink, "3g.40gb,3g.40gb");
  Offer whole = w.add_offer("a100-80gb-sxm4", 1, kPricePerHour);
  Offer slice = w.add_offer("a100-80gb-sxm4/3g.40gb", 1, kPricePerHour);
  AgentPrincipal a = enrol(n);
  AgentPrincipal b = enrol(m);
  ASSERT_TRUE(w.market->put_inventory(a, a100_inventory("n1", 2, 1)).ok());
  Inventory mig = a100_inventory("m1", 1, 1);
  mig.gpus[0].mig_mode = "enabled";
  mig.gpus[0].instances = {{"3g.40gb", 0}, {"3g.40gb", 4}};
  ASSERT_TRUE(w.market->put_inventory(b, mig).ok());
  auto g0 = w.market->rent(w.renter_a, RentRequest{whole.id});
  auto g1 = w.market->rent(w.renter_a, RentRequest{whole.id});
  auto s0 = w.market->rent(w.renter_a, RentRequest{slice.id});
  auto s1 = w.market->rent(w.renter_a, RentRequest{slice.id});
  ASSERT_TRUE(g0.ok() && g1.ok() && s0.ok() && s1.ok());
  const std::string gone_uuid = g1->placements[0].gpu_uuid;
  w.clock->advance_seconds(10);
  ASSERT_TRUE(w.market->heartbeat(a, Heartbeat{2, kBoot, {}}).ok());
  // The GPU of g1 vanishes from the inventory: g1 is lost (billed to the last report), g0 runs on.
  Inventory less = a100_inventory("n1", 2, 3);
  less.gpus.erase(less.gpus[0].uuid == gone_uuid ? less.gpus.begin() : less.gpus.begin() + 1);
  w.clock->advance_seconds(4);
  auto r = w.market->put_inventory(a, less);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->lost, 1);
  EXPECT_EQ(state(g1->id), RentalState::kLost);
  EXPECT_EQ(state(g0->id), RentalState::kRunning);
  EXPECT_EQ(claims(g1->id), 8);
  EXPECT_EQ(charge(g1->id), 10'000);
  // The instance of s1 vanishes; s0's stays.
  const int s1_start = s1->placements[0].start;
  Inventory one = mig;
  one.seq = 2;
  one.gpus[0].instances = {{"3g.40gb", s1_start == 0 ? 4 : 0}};
  auto ri = w.market->put_inventory(b, one);
  ASSERT_TRUE(ri.ok()) << ri.error().message;
  EXPECT_EQ(ri->lost, 1);
  EXPECT_EQ(state(s1->id), RentalState::kLost);
  EXPECT_EQ(state(s0->id), RentalState::kRunning);
  // Both come back with the same boot id: they resume.
  auto back = w.market->put_inventory(a, a100_inventory("n1", 2, 4));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->resumed, 1);
  EXPECT_EQ(state(g1->id), RentalState::kRunning);
  mig.seq = 3;
  auto back2 = w.market->put_inventory(b, mig);
  ASSERT_TRUE(back2.ok());
  EXPECT_EQ(back2->resumed, 1);
  EXPECT_EQ(state(s1->id), RentalState::kRunning);
}

// A node's MIG policy (migration 0007): static unless the provider says dynamic; stored, listed and told
// to the node's agent in every heartbeat answer (the agent writes MIG only when it says dynamic).
TEST_P(MarketAgent, TheNodesMigPolicyIsStoredListedAndToldToItsAgent) {
  Node plain = w.add_a100_node("n1", 1, MigPolicy::kDynamic);
  EXPECT_EQ(plain.mig_policy, MigPolicy::kStatic) << "the default";
  NodeSpec spec;
  spec.name = "n2";
  spec.region = "eu-west";
  spec.gpus.push_back(GpuSpec{"a100-80gb-sxm4", "GPU-n2-0", MigPolicy::kDynamic, ""});
  spec.mig_policy = MigPolicy::kNone;
  auto refused = w.market->add_node(w.provider, spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().field, "mig_policy");
  spec.mig_policy = MigPolicy::kDynamic;
  auto dynamic = w.market->add_node(w.provider, spec);
  ASSERT_TRUE(dynamic.ok()) << dynamic.error().message;
  EXPECT_EQ(dynamic->mig_policy, MigPolicy::kDynamic);
  auto listed = w.market->list_nodes(w.provider);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  for (const Node& n : *listed) {
    EXPECT_EQ(n.mig_policy, n.id == plain.id ? MigPolicy::kStatic : MigPolicy::kDynamic) << n.name;
  }
  EXPECT_EQ(text("SELECT mig_policy FROM nodes WHERE id = ?1", {Value(plain.id)}), "static");
  for (const Node& n : {plain, *dynamic}) {
    AgentPrincipal a = enrol(n);
    ASSERT_TRUE(w.market->put_inventory(a, a100_inventory(n.name, 1, 1)).ok());
    auto hb = w.market->heartbeat(a, Heartbeat{2, kBoot, {}});
    ASSERT_TRUE(hb.ok()) << hb.error().message;
    EXPECT_EQ(hb->mig_policy, n.id == plain.id ? MigPolicy::kStatic : MigPolicy::kDynamic) << n.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, MarketAgent, ::testing::ValuesIn(testing::kStoreKinds), testing::store_name);

}  // namespace
}  // namespace gpuplan::market
