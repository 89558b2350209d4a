// The market's vocabularies (read by their tables in gpuplan/market_vocabulary.h), clocks and the
// crash-test failpoint.
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdlib>

#include "gpuplan/market.h"
#include "gpuplan/market_vocabulary.h"
#include "gpuplan/vocabulary.h"

namespace gpuplan::market {

namespace {

template <typename E>
constexpr int v(E e) {
  return static_cast<int>(e);
}

// Each vocabulary ONCE: the tables are in gpuplan/market_vocabulary.h (data/options.yaml names them).

// The canonical word of `value`, or `fallback`'s for a value outside the enum (as the switches did).
template <typename E, size_t N>
std::string_view name_of(const VocabEntry (&words)[N], E value, E fallback) {
  const std::string_view name = word_name(words, v(value));
  return name == "?" ? word_name(words, v(fallback)) : name;
}

// parse_word over the vocabulary `id` (kMarketVocabularies), the error on `field`: "unknown role 'x';
// roles: admin, member, viewer".
template <typename E>
Result<E> parse_in(std::string_view id, std::string_view s, std::string_view field) {
  const Vocabulary* words = market_vocabulary(id);
  if (!words) return Error{ErrorCode::kInternal, "no market vocabulary '" + std::string(id) + "'", std::string(field)};
  const Vocabulary voc{field, words->what, words->plural, words->entries};
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
std::string_view to_string(Scheduler v) { return name_of(kSchedulerWords, v, Scheduler::kManual); }

Result<TenantKind> parse_tenant_kind(std::string_view s, std::string_view field) {
  return parse_in<TenantKind>("tenant_kind", s, field);
}
Result<Role> parse_role(std::string_view s, std::string_view field) { return parse_in<Role>("role", s, field); }
Result<Scope> parse_scope(std::string_view s, std::string_view field) { return parse_in<Scope>("scope", s, field); }
Result<Interconnect> parse_interconnect(std::string_view s, std::string_view field) {
  return parse_in<Interconnect>("interconnect", s, field);
}
Result<MigPolicy> parse_mig_policy(std::string_view s, std::string_view field) {
  return parse_in<MigPolicy>("mig_policy", s, field);
}
Result<Scheduler> parse_scheduler(std::string_view s, std::string_view field) {
  return parse_in<Scheduler>("scheduler", s, field);
}
Result<RentalState> parse_rental_state(std::string_view s, std::string_view field) {
  return parse_in<RentalState>("rental_state", s, field);
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
    case S::kRunning:  // failed: the node's agent could not start it (a heartbeat's `failed`)
      return to == S::kStopping || to == S::kTerminating || to == S::kLost || to == S::kFailed;
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
