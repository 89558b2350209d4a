// The market's vocabularies (one VocabEntry table each), clocks and the crash-test failpoint.
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdlib>

#include "gpuplan/market.h"
#include "gpuplan/vocabulary.h"

namespace gpuplan::market {

namespace {

template <typename E>
constexpr int v(E e) {
  return static_cast<int>(e);
}

// Each vocabulary ONCE (vocabulary.h's VocabEntry): the canonical word to_string prints and the store
// keeps, and what it means. These are the market's own, not the workload's: they stay out of
// vocabularies().
constexpr VocabEntry kTenantKindWords[] = {
    {v(TenantKind::kRenter), "renter", "", "rents GPUs and MIG slices"},
    {v(TenantKind::kProvider), "provider", "", "lists nodes and offers"},
    {v(TenantKind::kPlatform), "platform", "", "runs the market"},
};
constexpr VocabEntry kRoleWords[] = {
    {v(Role::kAdmin), "admin", "", "users, tokens and all writes"},
    {v(Role::kMember), "member", "", "writes"},
    {v(Role::kViewer), "viewer", "", "reads"},
};
constexpr VocabEntry kScopeWords[] = {
    {v(Scope::kFull), "full", "", "what the user's role allows"},
    {v(Scope::kRead), "read", "", "reads only, whatever the user's role"},
};
constexpr VocabEntry kInterconnectWords[] = {
    {v(Interconnect::kNvlink), "nvlink", "", "GPUs linked by NVLink"},
    {v(Interconnect::kPcie), "pcie", "", "GPUs on PCIe only"},
};
constexpr VocabEntry kMigPolicyWords[] = {
    {v(MigPolicy::kNone), "none", "", "whole GPU only"},
    {v(MigPolicy::kStatic), "static", "", "a fixed layout"},
    {v(MigPolicy::kDynamic), "dynamic", "", "any valid layout"},
};
constexpr VocabEntry kNodeStateWords[] = {
    {v(NodeState::kReady), "ready", "", "takes new rentals"},
    {v(NodeState::kDraining), "draining", "", "takes no new rentals; running ones stay"},
};
constexpr VocabEntry kRentalStateWords[] = {
    {v(RentalState::kRequested), "requested", "", "being placed"},
    {v(RentalState::kReserved), "reserved", "", "claims held, waiting for the hand-off"},
    {v(RentalState::kStarting), "starting", "", "handed off, workload coming up"},
    {v(RentalState::kRunning), "running", "", "billed: a usage segment is open"},
    {v(RentalState::kStopping), "stopping", "", "stopped by the user, claims being released"},
    {v(RentalState::kStopped), "stopped", "", "holds nothing, bills nothing"},
    {v(RentalState::kTerminating), "terminating", "", "deleted, ended or out of credit"},
    {v(RentalState::kTerminated), "terminated", "", "final"},
    {v(RentalState::kFailed), "failed", "", "final: the hand-off failed"},
    {v(RentalState::kLost), "lost", "", "the node disappeared while it ran"},
};

// The canonical word of `value`, or `fallback`'s for a value outside the enum (as the switches did).
template <typename E, size_t N>
std::string_view name_of(const VocabEntry (&words)[N], E value, E fallback) {
  const std::string_view name = word_name(words, v(value));
  return name == "?" ? word_name(words, v(fallback)) : name;
}

// parse_word over one table, the error on `field`: "unknown role 'x'; roles: admin, member, viewer".
template <typename E, size_t N>
Result<E> parse_in(const VocabEntry (&words)[N], std::string_view what, std::string_view plural, std::string_view s,
                   std::string_view field) {
  const Vocabulary voc{field, what, plural, words};
  GPUPLAN_TRY(value, parse_word(voc, s));
  return static_cast<E>(value);
}

}  // namespace

std::string_view to_string(TenantKind v) { return name_of(kTenantKindWords, v, TenantKind::kRenter); }
std::string_view to_string(Role v) { return name_of(kRoleWords, v, Role::kViewer); }
std::string_view to_string(Scope v) { return name_of(kScopeWords, v, Scope::kRead); }
std::string_view to_string(Interconnect v) { return name_of(kInterconnectWords, v, Interconnect::kPcie); }
std::string_view to_string(MigPolicy v) { return name_of(kMigPolicyWords, v, MigPolicy::kNone); }
std::string_view to_string(NodeState v) { return name_of(kNodeStateWords, v, NodeState::kDraining); }
std::string_view to_string(RentalState v) { return name_of(kRentalStateWords, v, RentalState::kFailed); }

Result<TenantKind> parse_tenant_kind(std::string_view s, std::string_view field) {
  return parse_in<TenantKind>(kTenantKindWords, "tenant kind", "kinds", s, field);
}
Result<Role> parse_role(std::string_view s, std::string_view field) {
  return parse_in<Role>(kRoleWords, "role", "roles", s, field);
}
Result<Scope> parse_scope(std::string_view s, std::string_view field) {
  return parse_in<Scope>(kScopeWords, "scope", "scopes", s, field);
}
Result<Interconnect> parse_interconnect(std::string_view s, std::string_view field) {
  return parse_in<Interconnect>(kInterconnectWords, "interconnect", "interconnects", s, field);
}
Result<MigPolicy> parse_mig_policy(std::string_view s, std::string_view field) {
  return parse_in<MigPolicy>(kMigPolicyWords, "MIG policy", "policies", s, field);
}
Result<RentalState> parse_rental_state(std::string_view s, std::string_view field) {
  return parse_in<RentalState>(kRentalStateWords, "rental state", "states", s, field);
}

bool is_final(RentalState s) { return s == RentalState::kTerminated || s == RentalState::kFailed; }
bool is_live(RentalState s) { return !is_final(s) && s != RentalState::kStopped && s != RentalState::kTerminating; }

bool edge_allowed(RentalState from, RentalState to) {
  using S = RentalState;
  switch (from) {
    case S::kRequested:
      return to == S::kReserved || to == S::kFailed || to == S::kTerminating;
    case S::kReserved:
      return to == S::kStarting || to == S::kStopping || to == S::kTerminating || to == S::kFailed;
    case S::kStarting:
      return to == S::kRunning || to == S::kStopping || to == S::kTerminating || to == S::kFailed || to == S::kLost;
    case S::kRunning:
      return to == S::kStopping || to == S::kTerminating || to == S::kLost;
    case S::kStopping:
      return to == S::kStopped;
    case S::kStopped:
      return to == S::kRequested || to == S::kTerminating;
    case S::kTerminating:
      return to == S::kTerminated;
    case S::kLost:
      return to == S::kRunning || to == S::kTerminating || to == S::kTerminated;
    case S::kTerminated:
    case S::kFailed:
      return false;
  }
  return false;
}

int64_t SystemClock::now_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void failpoint(std::string_view name) {
  const char* armed = std::getenv("GPUPLAN_FAILPOINT");
  if (armed != nullptr && name == armed) {
    ::kill(::getpid(), SIGKILL);
    ::_exit(137);  // not reached: SIGKILL cannot be caught
  }
}

}  // namespace gpuplan::market
