// An incremental, strict HTTP/1.1 request parser: bytes in, one request (or one refusal) out.
//
// No sockets and no allocation beyond the limits: the server feeds whatever recv() returned and acts
// on the answer; a fuzzer can drive it the same way.
//
//   HttpParser p(limits);
//   for (each chunk) {
//     ParseResult r = p.feed(chunk);          // r.consumed bytes of chunk were used
//     if (r.status == ParseStatus::kNeedMore) continue;
//     if (r.status == ParseStatus::kError) { answer r.http_status / r.message, close; }
//     HttpRequest req = p.take();             // kComplete; then p.reset() for the next request and
//   }                                         // feed it chunk.substr(r.consumed) (pipelining)
//
// What it refuses (and the status the server answers with):
//   request line longer than max_request_line_bytes                         414
//   request line + headers longer than max_head_bytes, or over max_headers   431
//   bad request line, header syntax, obs-fold, control bytes, bad percent    400
//   a version other than HTTP/1.0 or HTTP/1.1                                505
//   Content-Length that is not digits, or two that differ                   400
//   Content-Length over max_body_bytes (known before any body byte is read)  413
//   Transfer-Encoding: chunked (send Content-Length instead); other codings  411; 501
//   Transfer-Encoding together with Content-Length (request smuggling)       400
//   Expect other than 100-continue                                           417
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuplan::server {

struct HttpRequest {
  std::string method;
  std::string path;                                        // percent-decoded, without the query string
  std::vector<std::pair<std::string, std::string>> query;  // percent-decoded, '+' is a space
  std::string host;                                        // the Host header
  std::string content_type;                                // the Content-Type header
  std::string if_none_match;
  std::string authorization;  // the Authorization header (the market's "Bearer <token>")
  std::string if_match;       // the If-Match header (the market's rental version)
  std::string body;
  bool keep_alive = true;        // HTTP/1.1 without `Connection: close`, or 1.0 with `keep-alive`
  bool expect_continue = false;  // `Expect: 100-continue`: the client waits for a 100 before the body
};

struct ParserLimits {
  // Longest request line: long enough for any GET of the API with a query (the page's longest is
  // under 1 KiB), short enough that a URL cannot be a memory weapon. Same figure as nginx's default
  // large_client_header_buffers (8k).
  std::size_t max_request_line_bytes = 8 * 1024;
  // Request line and headers together (browsers send 1-2 KiB).
  std::size_t max_head_bytes = 8 * 1024;
  // Header lines (browsers send about 15).
  std::size_t max_headers = 100;
  // Largest body accepted (Options::max_body_bytes).
  std::size_t max_body_bytes = 1 << 20;
};

enum class ParseStatus { kNeedMore, kComplete, kError };

struct ParseResult {
  ParseStatus status = ParseStatus::kNeedMore;
  std::size_t consumed = 0;  // bytes of the fed chunk that were used; the rest belongs to the next request
  int http_status = 0;       // kError: the status to answer with
  std::string message;       // kError: what was wrong, for the JSON error body
};

class HttpParser {
 public:
  explicit HttpParser(ParserLimits limits = {});

  // Feeds the next bytes of the connection. After kComplete or kError, further calls return the same
  // result with consumed 0 until reset().
  ParseResult feed(std::string_view bytes);

  // True once any byte of the current request arrived (a connection closed before that is an idle
  // keep-alive connection, not a broken request).
  bool started() const { return started_; }
  // True once the request line and headers are complete (the body may still be arriving).
  bool head_complete() const { return state_ == State::kBody || state_ == State::kDone; }
  // The request line and headers, valid once head_complete() (the body fills in up to kComplete).
  const HttpRequest& request() const { return request_; }
  // Moves the complete request out (after kComplete).
  HttpRequest take() { return std::move(request_); }
  // Ready for the next request on the same connection.
  void reset();

 private:
  enum class State { kHead, kBody, kDone, kError };
  ParseResult fail(int status, std::string message);
  ParseResult parse_head();

  ParserLimits limits_;
  State state_ = State::kHead;
  bool started_ = false;
  std::string head_;               // bytes of the head so far
  std::size_t scanned_ = 0;        // head_ bytes already searched for the blank line
  std::size_t body_expected_ = 0;  // Content-Length
  HttpRequest request_;
  ParseResult error_;
};

// Percent-decodes `in` (and '+' as a space when `plus_is_space`, for query strings). False on a bad
// escape or a decoded NUL byte.
bool percent_decode(std::string_view in, bool plus_is_space, std::string& out);

// ASCII lowercase (header names, media types, tokens).
std::string lower(std::string_view s);
// `s` without leading and trailing spaces and tabs (HTTP's optional whitespace).
std::string_view trim(std::string_view s);

// The reason phrase of a status code ("Not Found"); "Unknown" for codes it does not know.
const char* reason_phrase(int status);

}  // namespace gpuplan::server
