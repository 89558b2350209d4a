// core/http_client.h: URL parsing, the response parser on well-formed, split and hostile answers, and
// real exchanges with the server on 127.0.0.1 (plus a listener that never answers: the deadline).
#include "core/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "server/server.h"

namespace gpuplan::http {
namespace {

TEST(HttpClient, ParsesUrls) {
  auto u = parse_url("http://127.0.0.1:8080", "server");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->base_path, "");
  u = parse_url("http://example.org/prefix/", "server");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->base_path, "/prefix");
  u = parse_url("http://[::1]:9000", "server");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 9000);
  for (const char* bad : {"https://x", "ftp://x", "http://", "http://:80", "http://h:0", "http://h:65536",
                          "http://h:8x", "http://u@h", "http://[::1", "http://h o"}) {
    auto r = parse_url(bad, "server");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kUsage) << bad;
    EXPECT_EQ(r.error().field, "server");
  }
  EXPECT_NE(parse_url("https://x", "server").error().message.find("TLS proxy"), std::string::npos);
}

constexpr size_t kMax = 1 << 20;

TEST(HttpClient, ParsesContentLengthAndWaitsForTheRest) {
  const std::string whole =
      "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
  for (size_t cut = 0; cut < whole.size(); ++cut) {
    auto partial = parse_response(std::string_view(whole).substr(0, cut), false, kMax);
    ASSERT_TRUE(partial.ok()) << cut;
    EXPECT_FALSE(partial->has_value()) << cut;
    EXPECT_FALSE(parse_response(std::string_view(whole).substr(0, cut), true, kMax).ok()) << cut;
  }
  auto r = parse_response(whole, false, kMax);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->status, 201);
  EXPECT_EQ((*r)->body, "{\"a\":1}");
  EXPECT_EQ((*r)->header("content-type"), "application/json");
}

TEST(HttpClient, ParsesChunkedAndCloseDelimitedBodies) {
  auto r = parse_response(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n", false, kMax);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->body, "Wikipedia");
  auto open = parse_response("HTTP/1.0 200 OK\r\n\r\nabc", false, kMax);
  ASSERT_TRUE(open.ok());
  EXPECT_FALSE(open->has_value());
  auto closed = parse_response("HTTP/1.0 200 OK\r\n\r\nabc", true, kMax);
  ASSERT_TRUE(closed.ok());
  ASSERT_TRUE(closed->has_value());
  EXPECT_EQ((*closed)->body, "abc");
  auto empty = parse_response("HTTP/1.1 204 No Content\r\n\r\n", false, kMax);
  ASSERT_TRUE(empty.ok() && empty->has_value());
}

TEST(HttpClient, RefusesMalformedAndOversizedAnswers) {
  const std::string big_head = "HTTP/1.1 200 OK\r\nX: " + std::string(70000, 'a');
  std::string many = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 101; ++i) many += "X" + std::to_string(i) + ": y\r\n";
  many += "\r\n";
  for (const std::string& bad :
       {std::string("SSH-2.0-OpenSSH\r\n\r\n"), std::string("HTTP/1.1 999 Odd\r\n\r\n"),
        std::string("HTTP/1.1 2x0 OK\r\n\r\n"), std::string("HTTP/1.1 200 OK\r\nNoColon\r\n\r\n"),
        std::string("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"),
        std::string("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n"),
        std::string("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
        std::string("HTTP/1.1 200 OK\r\nContent-Length: 2000000\r\n\r\n"),
        std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
        std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFF\r\n"),
        std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab"), big_head, many}) {
    // With the connection closed after these bytes (a truncated chunk only waits for more while open).
    auto r = parse_response(bad, true, kMax);
    EXPECT_FALSE(r.ok()) << bad.substr(0, 80);
    if (!r.ok()) EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  }
}

class HttpClientLoopback : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_ = std::make_unique<Context>(Context{Catalog::embedded()});
    server::Options o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.threads = 2;
    server_ = std::make_unique<server::Server>(server::make_router(*ctx_, o));
    auto port = server_->bind();
    ASSERT_TRUE(port.ok());
    port_ = *port;
    thread_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override {
    server_->stop();
    thread_.join();
  }
  Url url() const { return Url{"127.0.0.1", port_, ""}; }
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<server::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

TEST_F(HttpClientLoopback, GetsAndPostsToTheServer) {
  Request get;
  get.target = "/api/v1/health";
  auto r = send(url(), get);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("ok"), std::string::npos);

  Request post;
  post.method = "POST";
  post.target = "/api/v1/fit";
  post.headers.emplace_back("Content-Type", "application/json");
  post.body = R"({"model":"llama-2-7b","gpu":["h100-sxm5-80gb"]})";
  r = send(url(), post);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200) << r->body;

  post.body = R"({"model":"no-such-model"})";
  r = send(url(), post);
  ASSERT_TRUE(r.ok());  // an HTTP error is an answer, not a transport failure
  EXPECT_GE(r->status, 400);
  EXPECT_LT(r->status, 500);
}

TEST_F(HttpClientLoopback, RefusesHeaderInjection) {
  Request get;
  get.target = "/api/v1/health";
  get.headers.emplace_back("Authorization", "Bearer x\r\nX-Evil: 1");
  auto r = send(url(), get);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUsage);
}

TEST(HttpClient, ConnectionRefusedAndSilentServerAreErrorsWithinTheDeadline) {
  // A port nobody listens on: bind one, note it, close it.
  int s = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  Request get;
  get.target = "/";
  get.timeout_ms = 300;
  close(s);
  auto refused = send(Url{"127.0.0.1", port, ""}, get);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);

  // A listener that accepts (the kernel's backlog) and never answers: the deadline ends the call.
  s = socket(AF_INET, SOCK_STREAM, 0);
  a.sin_port = 0;
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(s, 4), 0);
  len = sizeof a;
  ASSERT_EQ(getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
  auto silent = send(Url{"127.0.0.1", ntohs(a.sin_port), ""}, get);
  close(s);
  ASSERT_FALSE(silent.ok());
  EXPECT_EQ(silent.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(silent.error().message.find("no answer"), std::string::npos) << silent.error().message;
}

}  // namespace
}  // namespace gpuplan::http
