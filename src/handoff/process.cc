// run_process: the one way a hand-off target runs an engine's command-line tool (sbatch, squeue,
// scancel, kubectl). argv only, never a shell; bounded output; a deadline after which the child is
// SIGKILLed. posix_spawnp, so a multi-threaded server forks nothing by hand.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <mutex>

#include "gpuplan/handoff.h"

extern char** environ;

namespace gpuplan::handoff {

namespace {
constexpr size_t kReadChunkBytes = 4096;  // one read() of a pipe

struct Pipe {
  int fd[2] = {-1, -1};
  ~Pipe() {
    for (int f : fd) {
      if (f >= 0) ::close(f);
    }
  }
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
};
}  // namespace

Result<ProcessResult> run_process(const std::vector<std::string>& argv, const std::string& stdin_text, int timeout_ms,
                                  size_t max_output_bytes) {
  if (argv.empty() || argv[0].empty()) return usage_error("run_process: no command", "argv");
  Pipe in, out, err;
  if (::pipe2(in.fd, O_CLOEXEC) != 0 || ::pipe2(out.fd, O_CLOEXEC) != 0 || ::pipe2(err.fd, O_CLOEXEC) != 0) {
    return Error{ErrorCode::kInternal, std::string("pipe: ") + std::strerror(errno), ""};
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (stdin_text.empty()) {
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  } else {
    posix_spawn_file_actions_adddup2(&fa, in.fd[0], 0);
  }
  posix_spawn_file_actions_adddup2(&fa, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err.fd[1], 2);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  in.close_end(0);
  out.close_end(1);
  err.close_end(1);
  // The write end is non-blocking: a child that stops reading cannot hold this thread past the deadline.
  if (stdin_text.empty()) {
    in.close_end(1);
  } else {
    ::fcntl(in.fd[1], F_SETFL, O_NONBLOCK);
  }
  if (rc != 0) {
    return not_found_error("cannot run '" + argv[0] + "': " + std::strerror(rc) + " (is it installed and on PATH?)",
                           "argv");
  }
  if (!stdin_text.empty()) {
    // A child that exits without reading all of its stdin must not kill gpuplan with SIGPIPE (the server
    // ignores it already; the CLI's `k8s render --apply` does from here on). write() then fails with EPIPE.
    static std::once_flag ignore_sigpipe;
    std::call_once(ignore_sigpipe, [] { std::signal(SIGPIPE, SIG_IGN); });
  }
  ProcessResult r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  size_t written = 0;
  char buf[kReadChunkBytes];
  int readers[2] = {out.fd[0], err.fd[0]};
  while (open_fds > 0 || in.fd[1] >= 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[3];
    nfds_t n = 0;
    for (int i = 0; i < 2; ++i) {
      if (readers[i] >= 0) fds[n++] = pollfd{readers[i], POLLIN, 0};
    }
    if (in.fd[1] >= 0) fds[n++] = pollfd{in.fd[1], POLLOUT, 0};
    const int ready = ::poll(fds, n, static_cast<int>(left.count()));
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (nfds_t k = 0; k < n; ++k) {
      if ((fds[k].revents & (POLLIN | POLLOUT | POLLHUP | POLLERR)) == 0) continue;
      if (fds[k].fd == in.fd[1]) {
        const ssize_t w = ::write(in.fd[1], stdin_text.data() + written, stdin_text.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        if ((w < 0 && errno != EAGAIN && errno != EINTR) || written >= stdin_text.size()) in.close_end(1);
        continue;
      }
      const int i = fds[k].fd == readers[0] ? 0 : 1;
      const ssize_t got = ::read(readers[i], buf, sizeof buf);
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        readers[i] = -1;
        --open_fds;
        continue;
      }
      const size_t room = max_output_bytes - std::min(max_output_bytes, sinks[i]->size());
      const size_t take = std::min(room, static_cast<size_t>(got));
      sinks[i]->append(buf, take);
      if (take < static_cast<size_t>(got)) r.truncated = true;
    }
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return Error{ErrorCode::kUnavailable,
                 "'" + argv[0] + "' did not answer within " + std::to_string(timeout_ms) + " ms; it was killed", ""};
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return r;
}

ProcessRunner runner_or_default(ProcessRunner run) {
  if (run) return run;
  return [](const std::vector<std::string>& argv, const std::string& in) { return run_process(argv, in); };
}

}  // namespace gpuplan::handoff
