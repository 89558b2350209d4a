// The incremental HTTP/1.1 parser on its own: whole requests, byte-at-a-time feeding, pipelining, and
// every refusal with its status (issue #11: Content-Length -1 was 413 and 'abc' was read as 0).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "server/http_parser.h"

namespace gpuplan::server {
namespace {

struct Parsed {
  ParseResult result;
  HttpRequest request;
};

Parsed parse(const std::string& bytes, ParserLimits limits = {}) {
  HttpParser p(limits);
  Parsed out;
  out.result = p.feed(bytes);
  if (out.result.status == ParseStatus::kComplete) out.request = p.take();
  return out;
}

int status_of(const std::string& bytes, ParserLimits limits = {}) {
  const Parsed p = parse(bytes, limits);
  return p.result.status == ParseStatus::kError ? p.result.http_status
                                                : (p.result.status == ParseStatus::kComplete ? 200 : 0);
}

TEST(HttpParser, AGetWithQueryAndEscapes) {
  const Parsed p = parse(
      "GET /api/v1/gpus/a100%2F3g.20gb?min-memory-gb=40&q=a+b%21&flag HTTP/1.1\r\n"
      "Host: 127.0.0.1:8080\r\nIf-None-Match: \"x\"\r\n\r\n");
  ASSERT_EQ(p.result.status, ParseStatus::kComplete) << p.result.message;
  EXPECT_EQ(p.request.method, "GET");
  EXPECT_EQ(p.request.path, "/api/v1/gpus/a100/3g.20gb");
  ASSERT_EQ(p.request.query.size(), 3U);
  EXPECT_EQ(p.request.query[0], (std::pair<std::string, std::string>{"min-memory-gb", "40"}));
  EXPECT_EQ(p.request.query[1], (std::pair<std::string, std::string>{"q", "a b!"}));
  EXPECT_EQ(p.request.query[2], (std::pair<std::string, std::string>{"flag", ""}));
  EXPECT_EQ(p.request.host, "127.0.0.1:8080");
  EXPECT_EQ(p.request.if_none_match, "\"x\"");
  EXPECT_TRUE(p.request.keep_alive);
}

TEST(HttpParser, APostBodyByteByByteAndPipelined) {
  const std::string one =
      "POST /api/v1/fit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 7\r\n\r\n{\"a\":1}";
  const std::string two = "GET /api/v1/health HTTP/1.1\r\nConnection: close\r\n\r\n";
  HttpParser p;
  ParseResult r;
  std::size_t i = 0;
  for (; i < one.size(); ++i) {
    r = p.feed(std::string_view(one).substr(i, 1));
    ASSERT_EQ(r.consumed, 1U);
    if (i + 1 < one.size()) ASSERT_EQ(r.status, ParseStatus::kNeedMore) << i;
  }
  ASSERT_EQ(r.status, ParseStatus::kComplete);
  HttpRequest req = p.take();
  EXPECT_EQ(req.body, "{\"a\":1}");
  EXPECT_EQ(req.content_type, "application/json");
  // Both at once: the first leaves the second's bytes unconsumed.
  p.reset();
  const std::string both = one + two;
  r = p.feed(both);
  ASSERT_EQ(r.status, ParseStatus::kComplete);
  EXPECT_EQ(r.consumed, one.size());
  p.reset();
  r = p.feed(std::string_view(both).substr(one.size()));
  ASSERT_EQ(r.status, ParseStatus::kComplete);
  EXPECT_EQ(p.request().path, "/api/v1/health");
  EXPECT_FALSE(p.request().keep_alive);
}

TEST(HttpParser, KeepAliveRules) {
  EXPECT_FALSE(parse("GET / HTTP/1.0\r\n\r\n").request.keep_alive);
  EXPECT_TRUE(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").request.keep_alive);
  EXPECT_FALSE(parse("GET / HTTP/1.1\r\nConnection: foo, close\r\n\r\n").request.keep_alive);
  EXPECT_TRUE(parse("GET / HTTP/1.1\r\n\r\n").request.keep_alive);
}

TEST(HttpParser, StartedOnlyAfterARealByte) {
  HttpParser p;
  EXPECT_EQ(p.feed("\r\n").status, ParseStatus::kNeedMore);
  EXPECT_FALSE(p.started());
  EXPECT_EQ(p.feed("G").status, ParseStatus::kNeedMore);
  EXPECT_TRUE(p.started());
}

TEST(HttpParser, ContentLengthMustBeDigits) {
  const std::string head = "POST /api/v1/fit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
  EXPECT_EQ(status_of(head + "Content-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(status_of(head + "Content-Length: abc\r\n\r\n{}"), 400);
  EXPECT_EQ(status_of(head + "Content-Length: \r\n\r\n"), 400);
  EXPECT_EQ(status_of(head + "Content-Length: +2\r\n\r\n{}"), 400);
  EXPECT_EQ(status_of(head + "Content-Length: 2, 2\r\n\r\n{}"), 400);
  EXPECT_EQ(status_of(head + "Content-Length: 0x10\r\n\r\n"), 400);
  EXPECT_EQ(status_of(head + "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}"), 400);
  EXPECT_EQ(status_of(head + "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}"), 200);
  EXPECT_EQ(status_of(head + "Content-Length: 2\r\n\r\n{}"), 200);
  const Parsed minus = parse(head + "Content-Length: -1\r\n\r\n");
  EXPECT_NE(minus.result.message.find("digits only"), std::string::npos) << minus.result.message;
}

TEST(HttpParser, BodyLimitIs413BeforeTheBody) {
  ParserLimits limits;
  limits.max_body_bytes = 100;
  const std::string head = "POST /api/v1/fit HTTP/1.1\r\nContent-Length: ";
  EXPECT_EQ(status_of(head + "101\r\n\r\n", limits), 413);  // no body byte sent
  EXPECT_EQ(status_of(head + "99999999999999999999999999\r\n\r\n", limits), 413);
  EXPECT_EQ(status_of(head + "100\r\n\r\n" + std::string(100, 'x'), limits), 200);
}

TEST(HttpParser, TransferEncodingIsRefused) {
  const std::string head = "POST /api/v1/fit HTTP/1.1\r\nHost: x\r\n";
  EXPECT_EQ(status_of(head + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), 411);
  EXPECT_EQ(status_of(head + "Transfer-Encoding: gzip\r\n\r\n"), 501);
  EXPECT_EQ(status_of(head + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello"), 400);
}

TEST(HttpParser, SizeAndCountLimits) {
  EXPECT_EQ(status_of("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n"), 414);
  EXPECT_EQ(status_of("GET /" + std::string(9000, 'a')), 414);  // refused before the line ends
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 101; ++i) many += "X-" + std::to_string(i) + ": 1\r\n";
  EXPECT_EQ(status_of(many + "\r\n"), 431);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nX-Big: " + std::string(9000, 'b') + "\r\n\r\n"), 431);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nX-Big: " + std::string(9000, 'b')), 431);  // unfinished
  std::string fine = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 100; ++i) fine += "X-" + std::to_string(i) + ": 1\r\n";
  EXPECT_EQ(status_of(fine + "\r\n"), 200);
}

TEST(HttpParser, MalformedHeads) {
  for (const std::string& bad : std::vector<std::string>{
           "GARBAGE\r\n\r\n", "GET /\r\n\r\n", "GET  / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1 x\r\n\r\n",
           "GET http://x/ HTTP/1.1\r\n\r\n", "G(T / HTTP/1.1\r\n\r\n", "GET / HTTX/1.1\r\n\r\n",
           "GET / HTTP/1.1\r\nNoColon\r\n\r\n", "GET / HTTP/1.1\r\nBad Name: 1\r\n\r\n",
           "GET / HTTP/1.1\r\nA: 1\r\n folded\r\n\r\n", "GET / HTTP/1.1\r\nA: \x01\r\n\r\n",
           "GET /%zz HTTP/1.1\r\n\r\n", "GET /%00 HTTP/1.1\r\n\r\n", "GET /a%2 HTTP/1.1\r\n\r\n",
           "GET /?a=%g0 HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
           "GET / HTTP/1.1\r\n: empty\r\n\r\n", std::string("GET /\0 HTTP/1.1\r\n\r\n", 20)}) {
    EXPECT_EQ(status_of(bad), 400) << bad;
  }
  EXPECT_EQ(status_of("GET / HTTP/2.0\r\n\r\n"), 505);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nExpect: fancy\r\n\r\n"), 417);
  const Parsed cont = parse("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(cont.result.status, ParseStatus::kComplete);
  EXPECT_TRUE(cont.request.expect_continue);
}

TEST(HttpParser, GarbageIsRefusedBeforeTheHeadEnds) {
  HttpParser p;
  EXPECT_EQ(p.feed(std::string("\x16\x03\x01\x02\x00", 5)).status, ParseStatus::kError);  // a TLS hello
  HttpParser q;
  EXPECT_EQ(q.feed("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA").status, ParseStatus::kError);
  HttpParser r;
  EXPECT_EQ(r.feed("GET /slow").status, ParseStatus::kNeedMore);
}

TEST(HttpParser, AnErrorSticksUntilReset) {
  HttpParser p;
  EXPECT_EQ(p.feed("BAD\r\n\r\n").status, ParseStatus::kError);
  const ParseResult again = p.feed("GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(again.status, ParseStatus::kError);
  EXPECT_EQ(again.consumed, 0U);
  p.reset();
  EXPECT_EQ(p.feed("GET / HTTP/1.1\r\n\r\n").status, ParseStatus::kComplete);
}

// Random bytes and random cuts of valid requests, fed in random chunks: never more consumed than fed,
// and the same outcome however the bytes are cut.
TEST(HttpParser, RandomInputInRandomChunks) {
  std::mt19937 rng(11);
  const std::vector<std::string> seeds = {
      "POST /api/v1/fit?a=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\n{\"a\"}",
      "GET /%41%2f HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"};
  for (int round = 0; round < 3000; ++round) {
    std::string input = seeds[rng() % seeds.size()];
    const int edits = static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !input.empty(); ++e) input[rng() % input.size()] = static_cast<char>(rng());
    if (round % 5 == 0) {
      input.resize(rng() % 200);
      for (auto& c : input) c = static_cast<char>(rng());
    }
    HttpParser whole;
    const ParseResult once = whole.feed(input);
    ASSERT_LE(once.consumed, input.size());
    HttpParser pieces;
    ParseResult r;
    std::size_t at = 0;
    while (at < input.size()) {
      const std::size_t n = std::min<std::size_t>(1 + rng() % 7, input.size() - at);
      r = pieces.feed(std::string_view(input).substr(at, n));
      ASSERT_LE(r.consumed, n);
      at += n;
      if (r.status != ParseStatus::kNeedMore) break;
    }
    if (input.empty()) continue;
    EXPECT_EQ(r.status, once.status) << round;
    if (once.status == ParseStatus::kError) EXPECT_EQ(r.http_status, once.http_status) << round;
    if (once.status == ParseStatus::kComplete) EXPECT_EQ(pieces.take().body, whole.take().body) << round;
  }
}

}  // namespace
}  // namespace gpuplan::server
