#include "gpuplan/cancel.h"

namespace gpuplan {

namespace {
thread_local const CancelToken* current_token = nullptr;
}  // namespace

bool CancelToken::cancelled() const noexcept {
  return flag_.load(std::memory_order_relaxed) || Clock::now() >= deadline_;
}

CancelScope::CancelScope(const CancelToken* token) noexcept : previous_(current_token) { current_token = token; }
CancelScope::~CancelScope() { current_token = previous_; }

bool cancel_requested() noexcept { return current_token != nullptr && current_token->cancelled(); }

Error cancelled_error() {
  return Error{ErrorCode::kCancelled,
               "the command passed its deadline and was stopped; ask for less (fewer GPUs, targets or requests)", ""};
}

}  // namespace gpuplan
