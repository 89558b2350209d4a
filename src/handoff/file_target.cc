// A fake hand-off target for tests: `path` holds one line per created name (what "exists"), and
// `path`.calls one line per call ("apply <name>", "stop <name>"). Appends with O_APPEND write(), so a
// SIGKILLed process leaves whole lines; the outbox crash tests count them.
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "gpuplan/handoff.h"

namespace gpuplan::handoff {

namespace {

Status append_line(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Error{ErrorCode::kInternal, "cannot open " + path, ""};
  const std::string text = line + "\n";
  const ssize_t n = ::write(fd, text.data(), text.size());
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) return Error{ErrorCode::kInternal, "short write to " + path, ""};
  return Status::Ok();
}

std::multiset<std::string> read_lines(const std::string& path) {
  std::multiset<std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) out.insert(line);
  return out;
}

class FileTarget final : public HandoffTarget {
 public:
  FileTarget(std::string path, std::string kind) : path_(std::move(path)), kind_(std::move(kind)) {}
  std::string_view kind() const override { return kind_; }
  Result<HandoffResult> apply(const HandoffRental& r) override {
    const std::string name = handoff_name(r);
    GPUPLAN_CHECK(append_line(path_ + ".calls", "apply " + name));
    HandoffResult out{"job-" + name, ExternalState::kRunning, false, ""};
    const auto have = read_lines(path_);
    if (have.count(name) != 0 || have.count("stopped " + name) != 0) {
      out.already_existed = true;
      return out;
    }
    if (read_lines(path_ + ".fail").count(name) != 0) {
      return Error{ErrorCode::kUnavailable, "the fake target refuses " + name, ""};
    }
    GPUPLAN_CHECK(append_line(path_, name));
    return out;
  }
  Result<HandoffResult> stop(const HandoffRental& r, std::string_view) override {
    const std::string name = handoff_name(r);
    GPUPLAN_CHECK(append_line(path_ + ".calls", "stop " + name));
    const auto have = read_lines(path_);
    const bool gone = have.count(name) == 0 || have.count("stopped " + name) != 0;
    if (!gone) GPUPLAN_CHECK(append_line(path_, "stopped " + name));
    return HandoffResult{"job-" + name, ExternalState::kGone, gone, ""};
  }
  Result<HandoffResult> status(const HandoffRental& r, std::string_view) override {
    const std::string name = handoff_name(r);
    const auto have = read_lines(path_);
    const bool live = have.count(name) != 0 && have.count("stopped " + name) == 0;
    return HandoffResult{"job-" + name, live ? ExternalState::kRunning : ExternalState::kGone, false, ""};
  }
  HandoffAccess access(const HandoffRental&, std::string_view external_id) const override {
    HandoffAccess a;
    a.kind = kind_;
    a.external_id = std::string(external_id);
    a.command = "fake: " + std::string(external_id);
    return a;
  }

 private:
  std::string path_;
  std::string kind_;
};

}  // namespace

std::unique_ptr<HandoffTarget> make_file_target(std::string path, std::string kind) {
  return std::make_unique<FileTarget>(std::move(path), std::move(kind));
}

}  // namespace gpuplan::handoff
