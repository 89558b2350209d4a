// Tokens (digest only, expiry, revocation), tenant isolation (another tenant's id -> kNotFound on every
// operation), roles (viewer writes -> kForbidden), and the migrations.
#include <gtest/gtest.h>

#include "market/migrations.h"
#include "market_fixture.h"

namespace gpuplan::market {
namespace {

class MarketAuth : public testing::StoreTest {};

TEST_P(MarketAuth, TokenIsStoredOnlyAsItsDigestAndInitIsOnce) {
  auto again = w.market->init_platform();
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kConflict);
  auto u = w.market->create_user(w.renter_a, w.a_id, "ann", Role::kMember);
  ASSERT_TRUE(u.ok());
  auto t = w.market->create_token(w.renter_a, u->id);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->token.rfind("gpl_" + t->id + "_", 0), 0u);
  EXPECT_EQ(t->token.size(), 4 + t->id.size() + 1 + 64);  // 256 bits as hex
  // The store holds no copy of the secret: only a 64-hex-digit digest.
  Status s = with_tx(w.market->db(), TxMode::kRead, [&](Tx& tx) -> Status {
    auto rows = tx.query("SELECT secret_sha256 FROM api_tokens WHERE id = ?1", std::vector<Value>{t->id});
    if (!rows) return rows.error();
    EXPECT_EQ(rows->size(), 1u);
    EXPECT_EQ((*rows)[0].text(0).size(), 64u);
    EXPECT_EQ(t->token.find((*rows)[0].text(0)), std::string::npos);
    EXPECT_NE((*rows)[0].text(0), t->token);
    return Status::Ok();
  });
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto p = w.market->authenticate("Bearer " + t->token);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->user_id, u->id);
  EXPECT_EQ(p->tenant_id, w.a_id);
  EXPECT_EQ(p->role, Role::kMember);
  // One changed digit of the secret, a missing token, garbage: all kUnauthenticated.
  std::string forged = t->token;
  forged.back() = forged.back() == '0' ? '1' : '0';
  for (const std::string& bad : {forged, std::string(), std::string("Bearer"), std::string("gpl_"),
                                 std::string("gpl_x_y"), std::string(5000, 'a')}) {
    auto r = w.market->authenticate(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kUnauthenticated);
  }
}

TEST_P(MarketAuth, ExpiredAndRevokedTokensAreRefused) {
  auto users = w.market->list_users(w.renter_a, w.a_id);
  ASSERT_TRUE(users.ok());
  const std::string uid = users->front().id;
  const int64_t now = w.clock->now_ms();
  auto t = w.market->create_token(w.renter_a, uid, TokenOptions{now + 60'000, Scope::kFull});
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(w.market->authenticate(t->token).ok());
  w.clock->advance_ms(59'999);
  EXPECT_TRUE(w.market->authenticate(t->token).ok());
  w.clock->advance_ms(1);
  auto expired = w.market->authenticate(t->token);
  ASSERT_FALSE(expired.ok());
  EXPECT_EQ(expired.error().code, ErrorCode::kUnauthenticated);
  auto past = w.market->create_token(w.renter_a, uid, TokenOptions{now - 1, Scope::kFull});
  EXPECT_FALSE(past.ok());

  auto t2 = w.market->create_token(w.renter_a, uid);
  ASSERT_TRUE(t2.ok());
  auto p2 = w.market->authenticate(t2->token);
  ASSERT_TRUE(p2.ok());
  ASSERT_TRUE(w.market->revoke_token(*p2, t2->id).ok());  // one's own token: always allowed
  auto revoked = w.market->authenticate(t2->token);
  ASSERT_FALSE(revoked.ok());
  EXPECT_EQ(revoked.error().code, ErrorCode::kUnauthenticated);

  // A read-scoped token reads but cannot write.
  auto ro = w.market->create_token(w.renter_a, uid, TokenOptions{std::nullopt, Scope::kRead});
  ASSERT_TRUE(ro.ok());
  auto pro = w.market->authenticate(ro->token);
  ASSERT_TRUE(pro.ok());
  EXPECT_TRUE(w.market->list_rentals(*pro).ok());
  auto o = w.add_offer("a100-80gb-sxm4", 1, 1'000'000);
  auto r = w.market->rent(*pro, RentRequest{o.id});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kForbidden);
}

// Every operation that takes an id, called as tenant B on tenant A's objects: kNotFound each time.
TEST_P(MarketAuth, AnotherTenantsIdsAreNotFoundOnEveryOperation) {
  w.add_a100_node("n1", 2, MigPolicy::kDynamic);
  auto o = w.add_offer("a100-80gb-sxm4", 1, 2'000'000);
  auto r = w.market->rent(w.renter_a, RentRequest{o.id, 1, std::nullopt, "k1", ""});
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto users = w.market->list_users(w.renter_a, w.a_id);
  ASSERT_TRUE(users.ok());
  const std::string a_user = users->front().id;
  auto a_token = w.market->create_token(w.renter_a, a_user);
  ASSERT_TRUE(a_token.ok());

  auto expect_nf = [](const auto& result, const char* what) {
    ASSERT_FALSE(result.ok()) << what;
    EXPECT_EQ(result.error().code, ErrorCode::kNotFound) << what << ": " << result.error().message;
  };
  const Principal& b = w.renter_b;
  expect_nf(w.market->get_rental(b, r->id), "get_rental");
  expect_nf(w.market->stop_rental(b, r->id), "stop_rental");
  expect_nf(w.market->start_rental(b, r->id), "start_rental");
  expect_nf(w.market->delete_rental(b, r->id), "delete_rental");
  expect_nf(w.market->rental_events(b, r->id), "rental_events");
  expect_nf(w.market->rental_usage(b, r->id), "rental_usage");
  expect_nf(w.market->get_tenant(b, w.a_id), "get_tenant");
  expect_nf(w.market->list_users(b, w.a_id), "list_users");
  expect_nf(w.market->create_user(b, w.a_id, "eve", Role::kAdmin), "create_user");
  expect_nf(w.market->create_token(b, a_user), "create_token");
  expect_nf(w.market->revoke_token(b, a_token->id), "revoke_token");
  // A renter (or another provider) on the provider's objects.
  const auto nodes = w.market->list_nodes(w.provider);
  ASSERT_TRUE(nodes.ok());
  const std::string node = nodes->front().id;
  std::string other_id;
  const Principal other = w.add_tenant("prov2", TenantKind::kProvider, &other_id);
  for (const Principal* q : {&b, &other}) {
    expect_nf(w.market->get_node(*q, node), "get_node");
    expect_nf(w.market->drain_node(*q, node), "drain_node");
    expect_nf(w.market->remove_node(*q, node), "remove_node");
    expect_nf(w.market->set_offer_price(*q, o.id, 1), "set_offer_price");
    expect_nf(w.market->delete_offer(*q, o.id), "delete_offer");
    expect_nf(w.market->mark_running(*q, r->id), "mark_running");
  }
  // B's lists do not show A's objects.
  auto lb = w.market->list_rentals(b);
  ASSERT_TRUE(lb.ok());
  EXPECT_TRUE(lb->empty());
  auto other_nodes = w.market->list_nodes(other);
  ASSERT_TRUE(other_nodes.ok());
  EXPECT_TRUE(other_nodes->empty());
  // B's idempotency key "k1" is its own: a new rental, not A's.
  auto rb = w.market->rent(b, RentRequest{o.id, 1, std::nullopt, "k1", ""});
  ASSERT_TRUE(rb.ok()) << rb.error().message;
  EXPECT_NE(rb->id, r->id);
  EXPECT_FALSE(rb->replayed);
}

TEST_P(MarketAuth, ViewerWritesAreForbidden) {
  w.add_a100_node("n1", 1, MigPolicy::kNone);
  auto o = w.add_offer("a100-80gb-sxm4", 1, 1'000'000);
  auto r = w.market->rent(w.renter_a, RentRequest{o.id});
  ASSERT_TRUE(r.ok());
  auto expect_forbidden = [](const auto& result, const char* what) {
    ASSERT_FALSE(result.ok()) << what;
    EXPECT_EQ(result.error().code, ErrorCode::kForbidden) << what << ": " << result.error().message;
  };
  const Principal& v = w.viewer_a;
  expect_forbidden(w.market->rent(v, RentRequest{o.id}), "rent");
  expect_forbidden(w.market->stop_rental(v, r->id), "stop_rental");
  expect_forbidden(w.market->start_rental(v, r->id), "start_rental");
  expect_forbidden(w.market->delete_rental(v, r->id), "delete_rental");
  expect_forbidden(w.market->create_user(v, w.a_id, "x", Role::kAdmin), "create_user");
  expect_forbidden(w.market->create_token(v, w.renter_a.user_id), "create_token");
  expect_forbidden(w.market->create_tenant(v, "t", TenantKind::kRenter), "create_tenant");
  expect_forbidden(w.market->set_credit_limit(w.renter_a, w.a_id, 1), "set_credit_limit by a non-platform admin");
  // Reads work.
  EXPECT_TRUE(w.market->get_rental(v, r->id).ok());
  EXPECT_TRUE(w.market->list_rentals(v).ok());
  EXPECT_TRUE(w.market->usage(v).ok());
  // A renter may not act as a provider.
  expect_forbidden(w.market->create_offer(w.renter_a, OfferSpec{"a100-80gb-sxm4", 1, "eu-west", 1, 0}), "create_offer");
  // A member may not create tokens for others.
  auto m = w.market->create_user(w.renter_a, w.a_id, "mem", Role::kMember);
  ASSERT_TRUE(m.ok());
  auto mt = w.market->create_token(w.renter_a, m->id);
  ASSERT_TRUE(mt.ok());
  auto pm = w.login(*mt);
  expect_forbidden(w.market->create_token(pm, w.renter_a.user_id), "member token for another");
  EXPECT_TRUE(w.market->create_token(pm, m->id).ok());
}

TEST_P(MarketAuth, MigrationsAreRecordedAndIdempotent) {
  auto v = schema_version(w.market->db());
  ASSERT_TRUE(v.ok());
  ASSERT_FALSE(migrations().empty());
  EXPECT_EQ(*v, migrations().back().version);
  ASSERT_TRUE(w.market->db().migrate().ok());  // again: nothing to do
  auto templates = w.market->list_templates();
  ASSERT_TRUE(templates.ok());
  ASSERT_EQ(templates->size(), 3u);
  EXPECT_EQ((*templates)[0].name, "cuda");
  EXPECT_EQ((*templates)[1].name, "pytorch");
  EXPECT_EQ((*templates)[2].name, "tensorflow");
}

INSTANTIATE_TEST_SUITE_P(Stores, MarketAuth, ::testing::ValuesIn(testing::kStoreKinds), testing::store_name);

TEST(MarketMigrations, SplitStatementsKeepsQuotesAndDropsComments) {
  const auto s =
      split_statements("-- c; x\nCREATE TABLE a (x TEXT DEFAULT 'a;b'); -- tail\n\nINSERT INTO a VALUES ('it''s');\n");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_NE(s[0].find("'a;b'"), std::string::npos);
  EXPECT_NE(s[1].find("'it''s'"), std::string::npos);
  ASSERT_EQ(migrations().front().name, "0001_init");
}

TEST(MarketVocabulary, EdgesOfTheStateMachine) {
  EXPECT_TRUE(edge_allowed(RentalState::kRunning, RentalState::kStopping));
  EXPECT_FALSE(edge_allowed(RentalState::kRunning, RentalState::kStopped));
  EXPECT_FALSE(edge_allowed(RentalState::kTerminated, RentalState::kRequested));
  EXPECT_FALSE(edge_allowed(RentalState::kStopped, RentalState::kRunning));
  EXPECT_TRUE(edge_allowed(RentalState::kStopped, RentalState::kRequested));
  auto bad = parse_rental_state("runing");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "state");
}

// Each vocabulary is one table: every word parses back to its value, and an unknown word's message
// names the field and lists the words (parse_word's form).
TEST(MarketVocabulary, WordsRoundTripAndUnknownWordsListTheTable) {
  for (auto s : {RentalState::kRequested, RentalState::kReserved, RentalState::kStarting, RentalState::kRunning,
                 RentalState::kStopping, RentalState::kStopped, RentalState::kTerminating, RentalState::kTerminated,
                 RentalState::kFailed, RentalState::kLost}) {
    auto back = parse_rental_state(to_string(s));
    ASSERT_TRUE(back.ok()) << to_string(s);
    EXPECT_EQ(*back, s);
  }
  for (auto k : {TenantKind::kRenter, TenantKind::kProvider, TenantKind::kPlatform}) {
    EXPECT_EQ(parse_tenant_kind(to_string(k)).value(), k);
  }
  for (auto r : {Role::kAdmin, Role::kMember, Role::kViewer}) EXPECT_EQ(parse_role(to_string(r)).value(), r);
  for (auto s : {Scope::kFull, Scope::kRead}) EXPECT_EQ(parse_scope(to_string(s)).value(), s);
  for (auto i : {Interconnect::kNvlink, Interconnect::kPcie}) EXPECT_EQ(parse_interconnect(to_string(i)).value(), i);
  for (auto m : {MigPolicy::kNone, MigPolicy::kStatic, MigPolicy::kDynamic}) {
    EXPECT_EQ(parse_mig_policy(to_string(m)).value(), m);
  }
  EXPECT_EQ(to_string(NodeState::kReady), "ready");
  EXPECT_EQ(to_string(NodeState::kDraining), "draining");

  auto bad = parse_mig_policy("fixed", "offers[2].mig");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kUsage);
  EXPECT_EQ(bad.error().field, "offers[2].mig");
  EXPECT_EQ(bad.error().message, "unknown MIG policy 'fixed'; policies: none, static, dynamic");
  auto role = parse_role("owner");
  ASSERT_FALSE(role.ok());
  EXPECT_EQ(role.error().message, "unknown role 'owner'; roles: admin, member, viewer");
}

}  // namespace
}  // namespace gpuplan::market
