// The incremental HTTP/1.1 request parser (see http_parser.h).
#include "server/http_parser.h"

#include <algorithm>
#include <cctype>

namespace gpuplan::server {

namespace {

// The blank line that ends the head.
constexpr std::string_view kHeadEnd = "\r\n\r\n";
// Longest method token: the longest standard method (OPTIONS, CONNECT) is 7 characters; anything
// much longer is not HTTP.
constexpr std::size_t kMaxMethodChars = 16;
// Content-Length digits: 18 decimal digits always fit in 64 bits, and any value that long is far over
// every body limit, so a longer run of digits is 413, not an overflow.
constexpr std::size_t kMaxLengthDigits = 18;

// RFC 9110 tchar: the characters of a method or header name.
bool is_tchar(char c) {
  if (std::isalnum(static_cast<unsigned char>(c))) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

// Bytes a header value may hold: visible ASCII, space, tab and obs-text; no other control byte.
bool is_value_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == '\t' || (u >= 0x20 && u != 0x7F);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// True when the comma-separated list `value` holds `token` (case-insensitive).
bool has_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    const std::string_view item = trim(value.substr(0, comma));
    if (lower(item) == token) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool percent_decode(std::string_view in, bool plus_is_space, std::string& out) {
  out.clear();
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = hex_value(in[i + 1]);
      const int lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      const char decoded = static_cast<char>(hi * 16 + lo);
      if (decoded == '\0') return false;
      out += decoded;
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return true;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 422:
      return "Unprocessable Content";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

HttpParser::HttpParser(ParserLimits limits) : limits_(limits) {}

void HttpParser::reset() {
  state_ = State::kHead;
  started_ = false;
  head_.clear();
  scanned_ = 0;
  body_expected_ = 0;
  request_ = HttpRequest{};
  error_ = ParseResult{};
}

ParseResult HttpParser::fail(int status, std::string message) {
  state_ = State::kError;
  error_ = ParseResult{ParseStatus::kError, 0, status, std::move(message)};
  return error_;
}

ParseResult HttpParser::feed(std::string_view bytes) {
  if (state_ == State::kDone) return ParseResult{ParseStatus::kComplete, 0, 0, {}};
  if (state_ == State::kError) {
    ParseResult again = error_;
    again.consumed = 0;
    return again;
  }
  std::size_t used = 0;
  if (state_ == State::kHead) {
    // Empty lines before a request line are ignored (RFC 9112 2.2): clients may send a CRLF after a body.
    if (head_.empty()) {
      while (used < bytes.size() && (bytes[used] == '\r' || bytes[used] == '\n')) ++used;
    }
    if (used < bytes.size()) started_ = true;
    // The blank line must lie within max_head_bytes, so more than that (plus the blank line) is never kept.
    const std::size_t cap = limits_.max_head_bytes + kHeadEnd.size();
    const std::size_t take = std::min(bytes.size() - used, cap - std::min(cap, head_.size()));
    const std::size_t before = head_.size();
    head_.append(bytes.substr(used, take));
    const std::size_t from = scanned_ >= kHeadEnd.size() - 1 ? scanned_ - (kHeadEnd.size() - 1) : 0;
    const std::size_t end = head_.find(kHeadEnd, from);
    if (end == std::string::npos) {
      scanned_ = head_.size();
      // Bytes that cannot begin a request line are refused now rather than at the header timeout.
      const std::size_t space = head_.find(' ');
      const std::size_t method_end = std::min(space, head_.size());
      if (!std::all_of(head_.begin(), head_.begin() + static_cast<std::ptrdiff_t>(method_end), is_tchar) ||
          (space == std::string::npos && head_.size() > kMaxMethodChars)) {
        return fail(400, "the request line must be METHOD /path HTTP/1.1");
      }
      const std::size_t line_end = head_.find("\r\n");
      if ((line_end == std::string::npos ? head_.size() : line_end) > limits_.max_request_line_bytes) {
        return fail(414, "the request line is longer than " + std::to_string(limits_.max_request_line_bytes) +
                             " bytes; send long requests as a JSON body with POST");
      }
      if (head_.size() >= cap) {
        return fail(
            431, "the request line and headers are longer than " + std::to_string(limits_.max_head_bytes) + " bytes");
      }
      return ParseResult{ParseStatus::kNeedMore, used + take, 0, {}};
    }
    const std::size_t head_bytes = end + kHeadEnd.size();
    used += head_bytes - before;
    head_.resize(head_bytes);
    if (ParseResult r = parse_head(); r.status == ParseStatus::kError) return r;
    state_ = State::kBody;
  }
  // The body: exactly Content-Length bytes.
  const std::size_t want = body_expected_ - request_.body.size();
  const std::size_t take = std::min(want, bytes.size() - used);
  request_.body.append(bytes.substr(used, take));
  used += take;
  if (request_.body.size() < body_expected_) return ParseResult{ParseStatus::kNeedMore, used, 0, {}};
  state_ = State::kDone;
  return ParseResult{ParseStatus::kComplete, used, 0, {}};
}

ParseResult HttpParser::parse_head() {
  std::string_view head(head_);
  head.remove_suffix(kHeadEnd.size());
  // The request line: METHOD SP request-target SP HTTP-version.
  const std::size_t line_end = std::min(head.find("\r\n"), head.size());
  const std::string_view line = head.substr(0, line_end);
  if (line.size() > limits_.max_request_line_bytes) {
    return fail(414, "the request line is longer than " + std::to_string(limits_.max_request_line_bytes) + " bytes");
  }
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return fail(400, "the request line must be METHOD /path HTTP/1.1");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (method.empty() || method.size() > kMaxMethodChars || !std::all_of(method.begin(), method.end(), is_tchar)) {
    return fail(400, "the request method is not an HTTP method token");
  }
  if (target.empty() || target.front() != '/' || !std::all_of(target.begin(), target.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u > 0x20 && u < 0x7F;
      })) {
    return fail(400, "the request target must be a path starting with '/' (no spaces or control bytes)");
  }
  bool http10 = false;
  if (version == "HTTP/1.0") {
    http10 = true;
  } else if (version != "HTTP/1.1") {
    if (version.size() == 8 && version.starts_with("HTTP/") && std::isdigit(static_cast<unsigned char>(version[5])) &&
        version[6] == '.' && std::isdigit(static_cast<unsigned char>(version[7]))) {
      return fail(505, "only HTTP/1.0 and HTTP/1.1 are served");
    }
    return fail(400, "the request line must end with HTTP/1.1");
  }
  request_.method = std::string(method);
  const std::size_t qmark = target.find('?');
  const std::string_view raw_path = target.substr(0, qmark);
  if (!percent_decode(raw_path, false, request_.path)) {
    return fail(400, "the path has a bad percent escape (or an encoded NUL)");
  }
  if (qmark != std::string_view::npos) {
    std::string_view q = target.substr(qmark + 1);
    if (const std::size_t hash = q.find('#'); hash != std::string_view::npos) q = q.substr(0, hash);
    while (!q.empty()) {
      const std::size_t amp = q.find('&');
      const std::string_view part = q.substr(0, amp);
      if (!part.empty()) {
        const std::size_t eq = part.find('=');
        std::string key;
        std::string value;
        if (!percent_decode(part.substr(0, eq), true, key) ||
            (eq != std::string_view::npos && !percent_decode(part.substr(eq + 1), true, value))) {
          return fail(400, "the query string has a bad percent escape (or an encoded NUL)");
        }
        request_.query.emplace_back(std::move(key), std::move(value));
      }
      if (amp == std::string_view::npos) break;
      q.remove_prefix(amp + 1);
    }
  }

  // Header fields.
  request_.keep_alive = !http10;
  bool have_length = false;
  bool have_host = false;
  bool have_type = false;
  std::string transfer_encoding;
  bool have_te = false;
  std::size_t count = 0;
  std::size_t pos = line_end;
  while (pos < head.size()) {
    pos += 2;  // the CRLF that ended the previous line
    const std::size_t next = std::min(head.find("\r\n", pos), head.size());
    const std::string_view field = head.substr(pos, next - pos);
    pos = next;
    if (++count > limits_.max_headers) {
      return fail(431, "more than " + std::to_string(limits_.max_headers) + " header fields");
    }
    if (field.empty() || field.front() == ' ' || field.front() == '\t') {
      return fail(400, "a header line is empty or folded (obs-fold is not accepted)");
    }
    const std::size_t colon = field.find(':');
    if (colon == std::string_view::npos || colon == 0) return fail(400, "a header line has no 'name:'");
    const std::string_view name = field.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_tchar)) {
      return fail(400, "a header name has a character that is not allowed (no space before ':')");
    }
    const std::string_view value = trim(field.substr(colon + 1));
    if (!std::all_of(value.begin(), value.end(), is_value_byte)) {
      return fail(400, "a header value has a control byte");
    }
    const std::string key = lower(name);
    if (key == "host") {
      if (have_host) return fail(400, "more than one Host header");
      have_host = true;
      request_.host = std::string(value);
    } else if (key == "content-type") {
      if (have_type) return fail(400, "more than one Content-Type header");
      have_type = true;
      request_.content_type = std::string(value);
    } else if (key == "if-none-match") {
      request_.if_none_match = std::string(value);
    } else if (key == "authorization") {
      if (!request_.authorization.empty()) return fail(400, "more than one Authorization header");
      request_.authorization = std::string(value);
    } else if (key == "if-match") {
      request_.if_match = std::string(value);
    } else if (key == "content-length") {
      if (value.empty() || !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return fail(400, "Content-Length must be a number of bytes (digits only), got '" + std::string(value) + "'");
      }
      std::size_t n = 0;
      if (value.size() > kMaxLengthDigits) {
        n = limits_.max_body_bytes + 1;  // over any limit; never parsed, so never overflows
      } else {
        for (char c : value) n = n * 10 + static_cast<std::size_t>(c - '0');
      }
      if (have_length && n != body_expected_) return fail(400, "two Content-Length headers that differ");
      have_length = true;
      body_expected_ = n;
    } else if (key == "transfer-encoding") {
      have_te = true;
      if (!transfer_encoding.empty()) transfer_encoding += ",";
      transfer_encoding += value;
    } else if (key == "connection") {
      if (has_token(value, "close")) {
        request_.keep_alive = false;
      } else if (has_token(value, "keep-alive")) {
        request_.keep_alive = true;
      }
    } else if (key == "expect") {
      if (lower(value) != "100-continue") return fail(417, "the only Expect served is 100-continue");
      request_.expect_continue = true;
    }
  }
  if (have_te) {
    if (have_length) return fail(400, "Transfer-Encoding and Content-Length together are not accepted");
    if (has_token(transfer_encoding, "chunked")) {
      return fail(411, "chunked request bodies are not accepted; send the body with a Content-Length");
    }
    return fail(501, "Transfer-Encoding '" + transfer_encoding + "' is not implemented");
  }
  if (body_expected_ > limits_.max_body_bytes) {
    return fail(413, "the request body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
  }
  request_.body.reserve(body_expected_);
  return ParseResult{ParseStatus::kNeedMore, 0, 0, {}};
}

}  // namespace gpuplan::server
