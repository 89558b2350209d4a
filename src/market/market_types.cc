// The market's vocabulary (enum names), clocks and the crash-test failpoint.
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdlib>

#include "gpuplan/market.h"

namespace gpuplan::market {

namespace {

template <typename E, size_t N>
Result<E> parse_enum(std::string_view s, std::string_view field, const E (&values)[N]) {
  std::string words;
  for (E v : values) {
    if (to_string(v) == s) return v;
    words += (words.empty() ? "" : ", ") + std::string(to_string(v));
  }
  return usage_error("'" + std::string(s) + "' is not one of: " + words, std::string(field));
}

}  // namespace

std::string_view to_string(TenantKind v) {
  switch (v) {
    case TenantKind::kRenter:
      return "renter";
    case TenantKind::kProvider:
      return "provider";
    case TenantKind::kPlatform:
      return "platform";
  }
  return "renter";
}
std::string_view to_string(Role v) {
  switch (v) {
    case Role::kAdmin:
      return "admin";
    case Role::kMember:
      return "member";
    case Role::kViewer:
      return "viewer";
  }
  return "viewer";
}
std::string_view to_string(Scope v) { return v == Scope::kFull ? "full" : "read"; }
std::string_view to_string(Interconnect v) { return v == Interconnect::kNvlink ? "nvlink" : "pcie"; }
std::string_view to_string(MigPolicy v) {
  switch (v) {
    case MigPolicy::kNone:
      return "none";
    case MigPolicy::kStatic:
      return "static";
    case MigPolicy::kDynamic:
      return "dynamic";
  }
  return "none";
}
std::string_view to_string(NodeState v) { return v == NodeState::kReady ? "ready" : "draining"; }
std::string_view to_string(RentalState v) {
  switch (v) {
    case RentalState::kRequested:
      return "requested";
    case RentalState::kReserved:
      return "reserved";
    case RentalState::kStarting:
      return "starting";
    case RentalState::kRunning:
      return "running";
    case RentalState::kStopping:
      return "stopping";
    case RentalState::kStopped:
      return "stopped";
    case RentalState::kTerminating:
      return "terminating";
    case RentalState::kTerminated:
      return "terminated";
    case RentalState::kFailed:
      return "failed";
    case RentalState::kLost:
      return "lost";
  }
  return "failed";
}

Result<TenantKind> parse_tenant_kind(std::string_view s, std::string_view field) {
  static constexpr TenantKind kAll[] = {TenantKind::kRenter, TenantKind::kProvider, TenantKind::kPlatform};
  return parse_enum(s, field, kAll);
}
Result<Role> parse_role(std::string_view s, std::string_view field) {
  static constexpr Role kAll[] = {Role::kAdmin, Role::kMember, Role::kViewer};
  return parse_enum(s, field, kAll);
}
Result<Scope> parse_scope(std::string_view s, std::string_view field) {
  static constexpr Scope kAll[] = {Scope::kFull, Scope::kRead};
  return parse_enum(s, field, kAll);
}
Result<Interconnect> parse_interconnect(std::string_view s, std::string_view field) {
  static constexpr Interconnect kAll[] = {Interconnect::kNvlink, Interconnect::kPcie};
  return parse_enum(s, field, kAll);
}
Result<MigPolicy> parse_mig_policy(std::string_view s, std::string_view field) {
  static constexpr MigPolicy kAll[] = {MigPolicy::kNone, MigPolicy::kStatic, MigPolicy::kDynamic};
  return parse_enum(s, field, kAll);
}
Result<RentalState> parse_rental_state(std::string_view s, std::string_view field) {
  static constexpr RentalState kAll[] = {RentalState::kRequested,   RentalState::kReserved,   RentalState::kStarting,
                                         RentalState::kRunning,     RentalState::kStopping,   RentalState::kStopped,
                                         RentalState::kTerminating, RentalState::kTerminated, RentalState::kFailed,
                                         RentalState::kLost};
  return parse_enum(s, field, kAll);
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
