// Fuzzes the server's request handling: bytes -> an HttpRequest -> server::Router::handle -> a
// response, with the library's real commands behind the router (each under a deadline). The bytes are
// a raw HTTP/1.1 request, so captured requests are seeds:
//   METHOD SP TARGET [SP VERSION] LF, then "Name: value" header lines, an empty line, then the body.
// A 500 (an exception the router caught) is a crash here: no input may reach an internal error.
//
// TODO(http_parser): when src/server/http_parser.{h,cc} replaces cpp-httplib, replace
// request_from_bytes() with the parser's entry (bytes -> HttpRequest or a 4xx) and fuzz that too; the
// rest of this file stays.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cctype>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "server/server.h"

namespace {

namespace fz = gpuplan::fuzz;
namespace srv = gpuplan::server;

// Server limits for fuzzing: the defaults' body bound, a command timeout under libFuzzer's -timeout.
constexpr std::chrono::milliseconds kCommandTimeout{2000};
constexpr int kWorkerThreads = 2;  // the router's pool; commands run there, as in the server

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX and '+' decoding, as the server's HTTP layer hands decoded paths and query values to the router.
std::string url_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(plus_is_space && s[i] == '+' ? ' ' : s[i]);
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

srv::HttpRequest request_from_bytes(std::string_view bytes) {
  srv::HttpRequest req;
  auto next_line = [&]() {
    const size_t end = bytes.find('\n');
    std::string_view line = bytes.substr(0, end);
    bytes = end == std::string_view::npos ? std::string_view{} : bytes.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line;
  };
  std::string_view line = next_line();
  const size_t sp1 = line.find(' ');
  req.method = std::string(line.substr(0, sp1));
  std::string_view target = sp1 == std::string_view::npos ? std::string_view{} : line.substr(sp1 + 1);
  target = target.substr(0, target.find(' '));
  const size_t q = target.find('?');
  req.path = url_decode(target.substr(0, q), false);
  if (q != std::string_view::npos) {
    std::string_view query = target.substr(q + 1);
    while (!query.empty()) {
      const size_t amp = query.find('&');
      std::string_view pair = query.substr(0, amp);
      const size_t eq = pair.find('=');
      req.query.emplace_back(url_decode(pair.substr(0, eq), true),
                             eq == std::string_view::npos ? std::string() : url_decode(pair.substr(eq + 1), true));
      query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    }
  }
  while (!bytes.empty()) {
    line = next_line();
    if (line.empty()) break;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = trim(line.substr(0, colon));
    const std::string value(trim(line.substr(colon + 1)));
    if (iequals(name, "Host")) req.host = value;
    if (iequals(name, "Content-Type")) req.content_type = value;
    if (iequals(name, "If-None-Match")) req.if_none_match = value;
  }
  req.body = std::string(bytes);
  return req;
}

// Never destroyed: at exit a worker may still be finishing a command, and joining it is not a test.
const srv::Router& router() {
  static const srv::Router* r = [] {
    srv::Options options;
    options.command_timeout = kCommandTimeout;
    options.threads = kWorkerThreads;
    srv::Runner runner = [](std::string_view command, const gpuplan::Json& request) {
      fz::Deadline deadline;
      return gpuplan::run_command(fz::context(), command, request);
    };
    return new srv::Router(std::move(runner), gpuplan::command_names(), options);
  }();
  return *r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const srv::HttpRequest req = request_from_bytes(fz::as_text(data, size));
  const srv::HttpResponse res = router().handle(req);
  if (res.status == 500) {
    std::fprintf(stderr, "fuzz oracle: %s %s -> 500: %s\n", req.method.c_str(), req.path.c_str(), res.body.c_str());
    std::abort();
  }
  if (res.status < 100 || res.status > 599) std::abort();
  return 0;
}
