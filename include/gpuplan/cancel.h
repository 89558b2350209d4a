// Cancellation: a deadline and a flag that long-running library work checks and stops at.
//
// The server gives every request one deadline (reading, running and writing). A command that passes
// it must stop, drop what it built and release its memory, not run on in the background. Library
// loops that can run long (the MIG packer's search, the planner's sweeps, validation) call
// `cancel_requested()` once per outer iteration and return early when it is true; `run_command`
// then turns the whole command into an ErrorCode::kCancelled error, so a partial answer is never
// returned as if it were whole.
//
// The token of the running command is per thread (`CancelScope`), so pure functions keep their
// signatures: a call without a scope is never cancelled.
#pragma once

#include <atomic>
#include <chrono>

#include "gpuplan/status.h"

namespace gpuplan {

class CancelToken {
 public:
  using Clock = std::chrono::steady_clock;
  CancelToken() = default;
  explicit CancelToken(Clock::time_point deadline) : deadline_(deadline) {}
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  // From any thread: the work that holds this token stops at its next check.
  void cancel() noexcept { flag_.store(true, std::memory_order_relaxed); }
  // True once cancel() was called or the deadline has passed.
  bool cancelled() const noexcept;
  Clock::time_point deadline() const noexcept { return deadline_; }

 private:
  std::atomic<bool> flag_{false};
  Clock::time_point deadline_ = Clock::time_point::max();
};

// Makes `token` the current thread's token until the scope ends (scopes nest; nullptr clears).
class CancelScope {
 public:
  explicit CancelScope(const CancelToken* token) noexcept;
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  const CancelToken* previous_;
};

// True when the command running on this thread has been cancelled or passed its deadline. Costs a
// thread-local read and, with a token, one clock read (about 20 ns): call it per outer iteration.
bool cancel_requested() noexcept;

// The error a cancelled command returns.
Error cancelled_error();

}  // namespace gpuplan
