// A plain HTTP/1.1 client for the CLI's market commands and the node agent: one request per connection
// (`Connection: close`), http:// only, every step under a deadline and every answer bounded. Ours, not
// cpp-httplib's: that shared library and the OpenSSL and Brotli libraries it pulls in cost every gpuplan
// process about 6 ms of start-up (issue #19; docs/design.md "Dependencies"), for a client that needs
// none of their features.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuplan/status.h"

namespace gpuplan::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Url {
  std::string host;  // a name or an IPv4/IPv6 literal (without brackets)
  int port = 80;
  std::string base_path;  // the path part of the URL without a trailing '/', often empty
};
// "http://host[:port][/base]". kUsage naming `field` for anything else (https:// says it needs a proxy).
Result<Url> parse_url(std::string_view url, const std::string& field);

struct Request {
  std::string method = "GET";
  std::string target;  // origin-form: "/api/v1/offers?x=1"
  Headers headers;     // Host, Content-Length and Connection are added
  std::string body;
  int connect_timeout_ms = 5000;            // a dead host is reported in seconds, not minutes
  int timeout_ms = 30000;                   // the whole exchange: three times the server's 10 s deadline
  size_t max_response_bytes = 64ULL << 20;  // a bigger answer is an error, not an allocation
};

struct Response {
  int status = 0;
  Headers headers;  // names lowercased
  std::string body;
  std::optional<std::string> header(std::string_view lower_name) const;
};

// A call of gpuplan's HTTP API (the CLI's market commands, the agent): target "/api/v1" + path, the
// bearer token when not empty, the JSON body with its Content-Type when given, default timeouts.
Request api_request(std::string method, std::string_view path, const std::string& token, const std::string* json_body);

// One exchange. Transport failures (refused, unreachable, timed out, malformed or oversized answers) are
// kUnavailable with a message saying which; an HTTP error status is a Response, not an Error.
Result<Response> send(const Url& url, const Request& request);

// The parser `send` uses, exposed for tests and the fuzzer: `raw` is what was read so far, `eof` whether
// the peer closed. nullopt: need more bytes. Bounded by `max_bytes`.
Result<std::optional<Response>> parse_response(std::string_view raw, bool eof, size_t max_bytes);

}  // namespace gpuplan::http
