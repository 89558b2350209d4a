// Raw-socket helpers of the server tests (server_hostile_test.cc, server_loopback_test.cc): a
// connection to 127.0.0.1, one or several responses read by Content-Length, a whole round trip, and
// the parts of a response. Loopback only; every read has a timeout.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "gpuplan/api.h"

namespace gpuplan::test_http {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A connected socket to 127.0.0.1:`port`, or -1.
inline int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads one response (head and Content-Length body), or until the server closes or `timeout` passes.
inline std::string read_response(int fd, std::chrono::milliseconds timeout) {
  std::string out;
  const auto end = Clock::now() + timeout;
  char buf[65536];
  for (;;) {
    const auto head = out.find("\r\n\r\n");
    if (head != std::string::npos) {
      std::size_t length = 0;
      const auto cl = out.find("Content-Length: ");
      if (cl != std::string::npos && cl < head) length = std::stoul(out.substr(cl + 16));
      if (out.size() >= head + 4 + length) break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// `count` responses from one connection (pipelined answers may arrive in one read); the answer number
// `head_answer` is to a HEAD request (a Content-Length but no body).
inline std::vector<std::string> read_responses(int fd, std::size_t count, std::chrono::milliseconds timeout,
                                               std::size_t head_answer = SIZE_MAX) {
  std::vector<std::string> out;
  std::string buf;
  const auto end = Clock::now() + timeout;
  char chunk[65536];
  while (out.size() < count) {
    const auto head = buf.find("\r\n\r\n");
    if (head != std::string::npos) {
      std::size_t length = 0;
      const auto cl = buf.find("Content-Length: ");
      if (cl != std::string::npos && cl < head) length = std::stoul(buf.substr(cl + 16));
      if (out.size() == head_answer) length = 0;
      if (buf.size() >= head + 4 + length) {
        out.push_back(buf.substr(0, head + 4 + length));
        buf.erase(0, head + 4 + length);
        continue;
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) break;
    buf.append(chunk, static_cast<std::size_t>(n));
  }
  return out;
}

// One request on a new connection; the whole answer, or "" when the server closed without one.
inline std::string roundtrip(int port, const std::string& bytes, std::chrono::milliseconds timeout = 10s) {
  const int fd = connect_to(port);
  if (fd < 0) return "connect failed";
  (void)!::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::string out = read_response(fd, timeout);
  ::close(fd);
  return out;
}

inline int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return 0;
  return std::stoi(response.substr(9, 3));
}

inline std::string body_of(const std::string& response) {
  const auto head = response.find("\r\n\r\n");
  return head == std::string::npos ? "" : response.substr(head + 4);
}

inline std::string error_code_of(const std::string& response) {
  try {
    return Json::parse(body_of(response))["error"]["code"].get<std::string>();
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace gpuplan::test_http
