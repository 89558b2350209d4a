// run_process: the one way a hand-off target runs an engine's command-line tool (sbatch, squeue,
// scancel, kubectl). argv only, never a shell; bounded output; a deadline after which the child is
// SIGKILLed. posix_spawnp, so a multi-threaded server forks nothing by hand.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

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

Result<ProcessResult> run_process(const std::vector<std::string>& argv, int timeout_ms, size_t max_output_bytes) {
  if (argv.empty() || argv[0].empty()) return usage_error("run_process: no command", "argv");
  Pipe out, err;
  if (::pipe2(out.fd, O_CLOEXEC) != 0 || ::pipe2(err.fd, O_CLOEXEC) != 0) {
    return Error{ErrorCode::kInternal, std::string("pipe: ") + std::strerror(errno), ""};
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err.fd[1], 2);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  out.close_end(1);
  err.close_end(1);
  if (rc != 0) {
    return not_found_error("cannot run '" + argv[0] + "': " + std::strerror(rc) + " (is it installed and on PATH?)",
                           "argv");
  }
  ProcessResult r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  pollfd fds[2] = {{out.fd[0], POLLIN, 0}, {err.fd[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[kReadChunkBytes];
  while (open_fds > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    const int n = ::poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        fds[i].fd = -1;
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

}  // namespace gpuplan::handoff
