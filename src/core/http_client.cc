#include "core/http_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace gpuplan::http {
namespace {

// The response head (status line and headers) this client reads at most: our server's are under 1 KiB;
// nginx's default large_client_header_buffers is 8 KiB a line.
constexpr size_t kMaxHeadBytes = size_t{64} * 1024;
constexpr size_t kMaxHeaders = 100;  // a response with more is refused, not stored
constexpr size_t kReadChunkBytes = size_t{16} * 1024;
constexpr size_t kMaxChunkSizeDigits = 15;  // hex digits of one chunk's size: 2^60 bytes, far above any bound

Error unavailable(std::string message) { return Error{ErrorCode::kUnavailable, std::move(message), "server"}; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

// A header value this client sends: no CR, LF or NUL (a caller's string cannot inject a header).
bool safe_value(std::string_view v) { return v.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos; }

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(left);
}

// Waits for `events` on fd until the deadline; false on timeout or error.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, remaining_ms(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

Result<int> connect_to(const Url& url, Clock::time_point connect_deadline, Fd& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(url.port);
  if (const int rc = getaddrinfo(url.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return unavailable("cannot resolve " + url.host + " (" + gai_strerror(rc) + ")");
  }
  std::string last = "no address";
  for (addrinfo* a = found; a; a = a->ai_next) {
    Fd fd{socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol)};
    if (fd.fd < 0) {
      last = std::strerror(errno);
      continue;
    }
    if (connect(fd.fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last = std::strerror(errno);
      continue;
    }
    if (!wait_for(fd.fd, POLLOUT, connect_deadline)) {
      last = "connect timed out";
      continue;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      last = std::strerror(err != 0 ? err : errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    out.fd = fd.fd;
    fd.fd = -1;
    freeaddrinfo(found);
    return out.fd;
  }
  freeaddrinfo(found);
  return unavailable("cannot connect to " + url.host + ":" + port + " (" + last + ")");
}

Result<int> parse_int(std::string_view s, int base, const char* what) {
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) {
    return unavailable(std::string("the server's answer has a malformed ") + what);
  }
  if (v > int64_t{1} << 60) return unavailable(std::string("the server's answer has an oversized ") + what);
  return static_cast<int>(std::min<int64_t>(v, INT32_MAX));
}

// Decodes a chunked body starting at `raw`; nullopt while incomplete.
Result<std::optional<std::string>> dechunk(std::string_view raw, size_t max_bytes) {
  std::string body;
  size_t pos = 0;
  for (;;) {
    const size_t eol = raw.find("\r\n", pos);
    if (eol == std::string_view::npos) {
      if (raw.size() - pos > kMaxChunkSizeDigits + 256) return unavailable("the server's answer has a malformed chunk");
      return std::optional<std::string>();
    }
    std::string_view size_line = raw.substr(pos, eol - pos);
    if (const size_t semi = size_line.find(';'); semi != std::string_view::npos) size_line = size_line.substr(0, semi);
    size_line = trim(size_line);
    if (size_line.empty() || size_line.size() > kMaxChunkSizeDigits) {
      return unavailable("the server's answer has a malformed chunk size");
    }
    uint64_t size = 0;
    const auto [p, ec] = std::from_chars(size_line.data(), size_line.data() + size_line.size(), size, 16);
    if (ec != std::errc() || p != size_line.data() + size_line.size()) {
      return unavailable("the server's answer has a malformed chunk size");
    }
    if (size > max_bytes || body.size() + size > max_bytes) {
      return unavailable("the server's answer is over " + std::to_string(max_bytes) + " bytes");
    }
    pos = eol + 2;
    if (size == 0) {
      // Trailers (ignored) end with an empty line.
      const size_t end = raw.find("\r\n\r\n", eol);
      if (raw.compare(pos, 2, "\r\n") == 0 || end != std::string_view::npos) return std::optional<std::string>(body);
      return std::optional<std::string>();
    }
    if (raw.size() - pos < size + 2) return std::optional<std::string>();
    body.append(raw.substr(pos, static_cast<size_t>(size)));
    pos += static_cast<size_t>(size);
    if (raw.compare(pos, 2, "\r\n") != 0) return unavailable("the server's answer has a malformed chunk end");
    pos += 2;
  }
}

}  // namespace

std::optional<std::string> Response::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers) {
    if (k == lower_name) return v;
  }
  return std::nullopt;
}

Result<Url> parse_url(std::string_view url, const std::string& field) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind("https://", 0) == 0) {
    return usage_error("--" + field + " must be an http:// URL (got '" + std::string(url) +
                           "'); https needs a TLS proxy (stunnel, nginx) in front of this client",
                       field);
  }
  if (url.rfind(kScheme, 0) != 0) {
    return usage_error(
        "--" + field + " must be an http:// URL, e.g. http://127.0.0.1:8080 (got '" + std::string(url) + "')", field);
  }
  std::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  Url out;
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash);
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    out.base_path = std::string(path);
  }
  if (authority.find('@') != std::string_view::npos) {
    return usage_error("--" + field + " must not carry credentials (use --token)", field);
  }
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return usage_error("--" + field + ": an IPv6 literal needs its ']'", field);
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return usage_error("--" + field + ": unexpected text after ']'", field);
      port_text = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (out.host.empty()) return usage_error("--" + field + " has no host (e.g. http://127.0.0.1:8080)", field);
  for (char c : out.host) {
    if (!(token_char(c) || c == ':')) return usage_error("--" + field + " has a malformed host", field);
  }
  if (!port_text.empty()) {
    int port = 0;
    const auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || p != port_text.data() + port_text.size() || port < 1 || port > 65535) {
      return usage_error("--" + field + " has a port outside 1..65535", field);
    }
    out.port = port;
  }
  return out;
}

Result<std::optional<Response>> parse_response(std::string_view raw, bool eof, size_t max_bytes) {
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string_view::npos) {
    if (raw.size() > kMaxHeadBytes) return unavailable("the server's answer has a head over 64 KiB");
    if (eof)
      return unavailable(raw.empty() ? "the server closed the connection without answering"
                                     : "the server's answer ended inside its head");
    return std::optional<Response>();
  }
  if (head_end > kMaxHeadBytes) return unavailable("the server's answer has a head over 64 KiB");
  std::string_view head = raw.substr(0, head_end);
  Response r;
  size_t line_end = head.find("\r\n");
  std::string_view status_line = head.substr(0, line_end);
  // "HTTP/1.1 200 OK": the version, a space, three digits.
  if (status_line.size() < 12 || status_line.rfind("HTTP/1.", 0) != 0 || status_line[8] != ' ') {
    return unavailable("the server's answer is not HTTP/1.x");
  }
  GPUPLAN_TRY(status, parse_int(status_line.substr(9, 3), 10, "status code"));
  if (status < 100 || status > 599) return unavailable("the server's answer has a status outside 100..599");
  r.status = status;
  std::optional<size_t> content_length;
  bool chunked = false;
  while (line_end != std::string_view::npos) {
    const size_t start = line_end + 2;
    line_end = head.find("\r\n", start);
    std::string_view line =
        head.substr(start, line_end == std::string_view::npos ? std::string_view::npos : line_end - start);
    const size_t colon = line.find(':');
    if (colon == 0 || colon == std::string_view::npos) return unavailable("the server's answer has a malformed header");
    for (char c : line.substr(0, colon)) {
      if (!token_char(c)) return unavailable("the server's answer has a malformed header name");
    }
    if (r.headers.size() >= kMaxHeaders) return unavailable("the server's answer has over 100 headers");
    std::string name = lower(line.substr(0, colon));
    std::string value(trim(line.substr(colon + 1)));
    if (name == "content-length") {
      GPUPLAN_TRY(n, parse_int(value, 10, "Content-Length"));
      if (content_length && *content_length != static_cast<size_t>(n)) {
        return unavailable("the server's answer has two different Content-Length headers");
      }
      content_length = static_cast<size_t>(n);
    } else if (name == "transfer-encoding") {
      chunked = lower(value).find("chunked") != std::string::npos;
    }
    r.headers.emplace_back(std::move(name), std::move(value));
  }
  std::string_view rest = raw.substr(head_end + 4);
  if (r.status < 200 || r.status == 204 || r.status == 304) return std::optional<Response>(std::move(r));
  if (chunked) {
    GPUPLAN_TRY(body, dechunk(rest, max_bytes));
    if (!body) {
      if (eof) return unavailable("the server's answer ended inside a chunk");
      return std::optional<Response>();
    }
    r.body = *body;
    return std::optional<Response>(std::move(r));
  }
  if (content_length) {
    if (*content_length > max_bytes) {
      return unavailable("the server's answer is over " + std::to_string(max_bytes) + " bytes");
    }
    if (rest.size() < *content_length) {
      if (eof) return unavailable("the server's answer ended before its Content-Length");
      return std::optional<Response>();
    }
    r.body = std::string(rest.substr(0, *content_length));
    return std::optional<Response>(std::move(r));
  }
  if (rest.size() > max_bytes)
    return unavailable("the server's answer is over " + std::to_string(max_bytes) + " bytes");
  if (!eof) return std::optional<Response>();
  r.body = std::string(rest);
  return std::optional<Response>(std::move(r));
}

Request api_request(std::string method, std::string_view path, const std::string& token, const std::string* json_body) {
  Request req;
  req.method = std::move(method);
  req.target = "/api/v1" + std::string(path);
  if (!token.empty()) req.headers.emplace_back("Authorization", "Bearer " + token);
  if (json_body) {
    req.headers.emplace_back("Content-Type", "application/json");
    req.body = *json_body;
  }
  return req;
}

Result<Response> send(const Url& url, const Request& request) {
  if (!safe_value(request.method) || !safe_value(request.target) || request.target.empty() ||
      request.target.front() != '/') {
    return usage_error("an HTTP request needs a method and an origin-form target", "server");
  }
  for (const auto& [k, v] : request.headers) {
    if (k.empty() || !std::all_of(k.begin(), k.end(), token_char) || !safe_value(v)) {
      return usage_error("the header '" + k + "' has characters HTTP does not allow", "server");
    }
  }
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(request.timeout_ms);
  const auto connect_deadline = std::min(deadline, start + std::chrono::milliseconds(request.connect_timeout_ms));
  Fd fd;
  GPUPLAN_CHECK(connect_to(url, connect_deadline, fd));

  std::string out;
  out.reserve(256 + request.body.size());
  out += request.method + " " + url.base_path + request.target + " HTTP/1.1\r\n";
  const bool v6 = url.host.find(':') != std::string::npos;
  out += "Host: ";
  out += v6 ? "[" + url.host + "]" : url.host;
  out += ":" + std::to_string(url.port) + "\r\n";
  out += "Connection: close\r\n";
  for (const auto& [k, v] : request.headers) {
    out += k;
    out += ": ";
    out += v;
    out += "\r\n";
  }
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT" || request.method == "PATCH") {
    out += "Content-Length: " + std::to_string(request.body.size()) + "\r\n";
  }
  out += "\r\n";
  out += request.body;
  size_t sent = 0;
  while (sent < out.size()) {
    const ssize_t n = ::send(fd.fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd.fd, POLLOUT, deadline)) return unavailable("timed out sending the request");
      continue;
    }
    return unavailable(std::string("the connection failed while sending (") + std::strerror(errno) + ")");
  }

  std::string in;
  char buffer[kReadChunkBytes];
  for (;;) {
    const ssize_t n = recv(fd.fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      in.append(buffer, static_cast<size_t>(n));
      if (in.size() > request.max_response_bytes + kMaxHeadBytes) {
        return unavailable("the server's answer is over " + std::to_string(request.max_response_bytes) + " bytes");
      }
      GPUPLAN_TRY(done, parse_response(in, false, request.max_response_bytes));
      if (done) return *done;
      continue;
    }
    if (n == 0) {
      GPUPLAN_TRY(done, parse_response(in, true, request.max_response_bytes));
      if (done) return *done;
      return unavailable("the server closed the connection early");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd.fd, POLLIN, deadline)) {
        return unavailable("no answer within " + std::to_string(request.timeout_ms / 1000) + " s");
      }
      continue;
    }
    return unavailable(std::string("the connection failed while reading (") + std::strerror(errno) + ")");
  }
}

}  // namespace gpuplan::http
