// The market's vocabularies (tenant kind, role, token scope, interconnect, MIG policy, node state,
// rental state), each ONCE as a VocabEntry table: the words to_string prints and the store keeps, that
// parse_tenant_kind & co. read (src/market/market_types.cc), and that data/options.yaml's market bodies
// name (`vocabulary: role`). They live in this header so that the declaration's readers below the
// market (api/vocabulary.h: web/openapi.json's schemas, GET /api/v1/vocabulary) list the same words
// without linking the market. They stay out of gpuplan::vocabularies(), the workload's words.
#pragma once

#include <span>
#include <string_view>

#include "gpuplan/market.h"
#include "gpuplan/vocabulary.h"

namespace gpuplan::market {

namespace words_detail {
template <typename E>
constexpr int value(E e) {
  return static_cast<int>(e);
}
}  // namespace words_detail

inline constexpr VocabEntry kTenantKindWords[] = {
    {words_detail::value(TenantKind::kRenter), "renter", "", "rents GPUs and MIG slices"},
    {words_detail::value(TenantKind::kProvider), "provider", "", "lists nodes and offers"},
    {words_detail::value(TenantKind::kPlatform), "platform", "", "runs the market"},
};
inline constexpr VocabEntry kRoleWords[] = {
    {words_detail::value(Role::kAdmin), "admin", "", "users, tokens and all writes"},
    {words_detail::value(Role::kMember), "member", "", "writes"},
    {words_detail::value(Role::kViewer), "viewer", "", "reads"},
};
inline constexpr VocabEntry kScopeWords[] = {
    {words_detail::value(Scope::kFull), "full", "", "what the user's role allows"},
    {words_detail::value(Scope::kRead), "read", "", "reads only, whatever the user's role"},
};
inline constexpr VocabEntry kInterconnectWords[] = {
    {words_detail::value(Interconnect::kNvlink), "nvlink", "", "GPUs linked by NVLink"},
    {words_detail::value(Interconnect::kPcie), "pcie", "", "GPUs on PCIe only"},
};
inline constexpr VocabEntry kMigPolicyWords[] = {
    {words_detail::value(MigPolicy::kNone), "none", "", "whole GPU only"},
    {words_detail::value(MigPolicy::kStatic), "static", "", "a fixed layout"},
    {words_detail::value(MigPolicy::kDynamic), "dynamic", "", "any valid layout"},
};
inline constexpr VocabEntry kNodeStateWords[] = {
    {words_detail::value(NodeState::kReady), "ready", "", "takes new rentals"},
    {words_detail::value(NodeState::kDraining), "draining", "", "takes no new rentals; running ones stay"},
};
inline constexpr VocabEntry kSchedulerWords[] = {
    {words_detail::value(Scheduler::kManual), "manual", "", "no engine: the hand-off is immediate"},
    {words_detail::value(Scheduler::kSlurm), "slurm", "", "a holding job per rental (sbatch), stopped by scancel"},
    {words_detail::value(Scheduler::kKubernetes), "kubernetes", "", "a Pod per rental in the tenant's namespace"},
};
inline constexpr VocabEntry kRentalStateWords[] = {
    {words_detail::value(RentalState::kRequested), "requested", "", "being placed"},
    {words_detail::value(RentalState::kReserved), "reserved", "", "claims held, waiting for the hand-off"},
    {words_detail::value(RentalState::kStarting), "starting", "", "handed off, workload coming up"},
    {words_detail::value(RentalState::kRunning), "running", "", "billed: a usage segment is open"},
    {words_detail::value(RentalState::kStopping), "stopping", "", "stopped by the user, claims being released"},
    {words_detail::value(RentalState::kStopped), "stopped", "", "holds nothing, bills nothing"},
    {words_detail::value(RentalState::kTerminating), "terminating", "", "deleted, ended or out of credit"},
    {words_detail::value(RentalState::kTerminated), "terminated", "", "final"},
    {words_detail::value(RentalState::kFailed), "failed", "", "final: the hand-off failed"},
    {words_detail::value(RentalState::kLost), "lost", "", "the node disappeared while it ran"},
};

// Every market vocabulary; `key` is the id data/options.yaml names it by (an error's field is the
// request key the caller reads it from).
inline constexpr Vocabulary kMarketVocabularies[] = {
    {"tenant_kind", "tenant kind", "kinds", kTenantKindWords},
    {"role", "role", "roles", kRoleWords},
    {"scope", "scope", "scopes", kScopeWords},
    {"interconnect", "interconnect", "interconnects", kInterconnectWords},
    {"mig_policy", "MIG policy", "policies", kMigPolicyWords},
    {"node_state", "node state", "states", kNodeStateWords},
    {"scheduler", "scheduler", "schedulers", kSchedulerWords},
    {"rental_state", "rental state", "states", kRentalStateWords},
};

// The market vocabulary of id `id` ("role", "mig_policy"), or nullptr.
inline const Vocabulary* market_vocabulary(std::string_view id) {
  for (const Vocabulary& v : kMarketVocabularies) {
    if (v.key == id) return &v;
  }
  return nullptr;
}

}  // namespace gpuplan::market
