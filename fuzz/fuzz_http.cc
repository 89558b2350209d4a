// Fuzzes the server's request handling as the server does it: raw connection bytes -> the strict
// incremental parser (src/server/http_parser.h), fed in chunks whose sizes come from the input so
// that every split of a request is tried -> server::Router::handle with the library's real commands
// behind it (each under a deadline) -> a response. Pipelined requests in one input are each handled.
// Captured HTTP/1.1 requests are seeds. A 500 (an exception the router caught) or a parser error
// outside 4xx/5xx is a crash here: no input may reach an internal error.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "server/http_parser.h"
#include "server/server.h"

namespace {

namespace fz = gpuplan::fuzz;
namespace srv = gpuplan::server;

// Server limits for fuzzing: the defaults' body bound, a request deadline under libFuzzer's -timeout.
constexpr std::chrono::milliseconds kRequestDeadline{2000};
constexpr int kWorkerThreads = 2;  // the router's pool; commands run there, as in the server
// Requests handled from one input: pipelining is exercised, a long input of tiny requests is not slow.
constexpr int kMaxRequestsPerInput = 4;

// Never destroyed: at exit a worker may still be finishing a command, and joining it is not a test.
const srv::Router& router() {
  static const srv::Router* r = [] {
    srv::Options options;
    options.request_deadline = kRequestDeadline;
    options.threads = kWorkerThreads;
    srv::Runner runner = [](std::string_view command, const gpuplan::Json& request) {
      fz::Deadline deadline;
      return gpuplan::run_command(fz::context(), command, request);
    };
    return new srv::Router(std::move(runner), gpuplan::command_names(), options);
  }();
  return *r;
}

void check_response(const srv::HttpRequest& req, const srv::HttpResponse& res) {
  if (res.status == 500) {
    std::fprintf(stderr, "fuzz oracle: %s %s -> 500: %s\n", req.method.c_str(), req.path.c_str(), res.body.c_str());
    std::abort();
  }
  if (res.status < 100 || res.status > 599) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the chunk size (1..256 bytes) the connection delivers at a time.
  const size_t chunk = static_cast<size_t>(data[0]) + 1;
  std::string_view bytes = fz::as_text(data + 1, size - 1);
  srv::ParserLimits limits;
  limits.max_body_bytes = srv::Options{}.max_body_bytes;
  srv::HttpParser parser(limits);
  std::string pending;  // bytes delivered but not yet consumed by the parser
  int handled = 0;
  while (handled < kMaxRequestsPerInput && (!bytes.empty() || !pending.empty())) {
    const size_t n = std::min(chunk, bytes.size());
    pending.append(bytes.substr(0, n));
    bytes.remove_prefix(n);
    const srv::ParseResult r = parser.feed(pending);
    if (r.consumed > pending.size()) std::abort();
    pending.erase(0, r.consumed);
    if (r.status == srv::ParseStatus::kError) {
      if (r.http_status < 400 || r.http_status > 599 || r.message.empty()) std::abort();
      return 0;  // the server answers and closes
    }
    if (r.status == srv::ParseStatus::kNeedMore) {
      if (n == 0) return 0;  // the connection ended mid-request
      continue;
    }
    const srv::HttpRequest req = parser.take();
    check_response(req, router().handle(req));
    parser.reset();
    ++handled;
  }
  return 0;
}
