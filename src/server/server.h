// `gpuplan serve`: the HTTP API and the web page. A thin layer over gpuplan::run_command.
//
// The Router is a pure function from an HTTP request to an HTTP response (no sockets, no files): it
// maps routes onto command names, turns query strings and JSON bodies into request objects, runs the
// command and writes its result or its error as JSON. Commands are looked up by name at request
// time, so a command added to the library is served without a change here:
//   POST /api/v1/fit        -> "fit"           GET /api/v1/gpus           -> "catalog.list"
//   POST /api/v1/mig/check  -> "mig.check"     GET /api/v1/gpus/{id}      -> "catalog.show"
//   GET  /api/v1/mig/{gpu}/profiles|layouts -> "mig.profiles" | "mig.layouts"
// The Server is our own event-driven HTTP/1.1 server (server.cc): one I/O thread on epoll with
// non-blocking sockets parses requests (http_parser.h), answers what needs no command itself, and
// hands commands to the Router's worker pool under a CancelToken whose deadline is the request's.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/cancel.h"
#include "gpuplan/market.h"
#include "server/http_parser.h"
#include "server/json_limits.h"

namespace gpuplan::server {

struct Options {
  std::string host = "127.0.0.1";
  int port = 8080;                       // 0: any free port
  std::size_t max_body_bytes = 1 << 20;  // larger bodies get 413 before they are read
  // A larger result gets 413 `limit` ("ask for fewer ..."): 6x the mig.pack answer for a 16,000-GPU
  // fleet (2.8 MB); compare of 50,000 copies of one GPU was 96 MB.
  std::size_t max_response_bytes = 16 << 20;
  // One deadline for each request, from its first byte: reading, queueing, running and writing. At the
  // deadline the command's CancelToken fires and the client gets 503 `timeout` (408 while still reading).
  // 10 s: the old command time limit (--timeout-ms); the slowest page request (plan) takes ~0.1 s.
  std::chrono::milliseconds request_deadline{10000};
  // The request line and headers must be complete this soon after the first byte (slowloris); a
  // browser sends them in one packet. 5 s: the old per-read timeout.
  std::chrono::milliseconds header_timeout{5000};
  // A keep-alive connection with no request in flight is closed after this long (as before: 2 s).
  std::chrono::milliseconds keep_alive_timeout{2000};
  int threads = 0;  // workers that run heavy commands; 0: one per core (at least 2)
  // Open connections; beyond it new ones get 503 and are closed. A few hundred browsers' keep-alive
  // connections; each costs ~1 KiB idle and one descriptor (the soft RLIMIT_NOFILE is raised to fit).
  int max_connections = 1024;
  std::size_t max_headers = 100;          // header fields in a request (431 beyond); see ParserLimits
  std::size_t max_head_bytes = 8 * 1024;  // request line + headers (414 / 431 beyond); see ParserLimits
  JsonLimits json;                        // bounds on a JSON body (400 `usage`, field `body`)
  std::optional<Json> default_offers;     // --offers FILE: used by plan when a request has none
  // The market (--data-dir / --database): its endpoints (market_routes.h) answer 404 `market_disabled`
  // without one. Shared: the server's workers and the housekeeping thread call it at once.
  std::shared_ptr<market::Market> market;
  // Workers of the market's lane: its calls mostly wait on the store (a commit's fsync, a lock), so
  // more than the cores; 16 keeps a 64-client load at ~4 queued requests a worker.
  int market_threads = 16;
};

// HttpRequest (the parser's output) is in server/http_parser.h.

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Runs one command: gpuplan::run_command in the real server, a fake in tests.
using Runner = std::function<Result<Json>(std::string_view command, const Json& request)>;

class ComputePool;

class Router {
 public:
  // `commands`: the names the runner knows (gpuplan::command_names()).
  Router(Runner runner, std::vector<std::string> commands, Options options);
  ~Router();
  Router(Router&&) noexcept;
  Router& operator=(Router&&) noexcept;

  // The whole request on the calling thread's behalf: what needs a command runs on the pool, and the
  // call waits up to options().request_deadline for it (then cancels it and answers 503 `timeout`).
  HttpResponse handle(const HttpRequest& request) const;

  // The pieces the event-driven Server uses instead of handle(), so that its I/O thread never waits:
  // Which worker lane a command request goes to. Light: reads of the catalog and MIG tables, which cost
  // well under a millisecond; they have their own workers so that they answer at once while heavy
  // commands (fit, plan, mig.pack, bodies to parse) fill theirs.
  // Market: the market's endpoints, on workers of their own (they wait on the store, not the CPU).
  enum class Lane { kLight, kHeavy, kMarket };
  struct Plan {
    std::optional<HttpResponse> now;  // the answer when no command is needed (pages, health, refusals)
    Lane lane = Lane::kHeavy;
  };
  // Cheap: headers, route and method only; the body is not parsed here.
  Plan plan(const HttpRequest& request) const;
  // The rest, on the calling thread (a worker): body, command under `token`, bounded serialisation.
  HttpResponse respond(const HttpRequest& request, const CancelToken& token) const;
  // Queues `job` on a lane's workers; false when that queue is full.
  bool submit(Lane lane, std::function<void()> job) const;
  // Commands queued or running now, on both lanes (a cancelled command counts until it returns).
  std::size_t jobs() const;

  const Options& options() const { return options_; }

 private:
  HttpResponse api(const HttpRequest& request, std::string_view route, const CancelToken* token) const;
  // The command a route names; path parameters go into `request`.
  std::string command_for(const std::vector<std::string>& segs, Json& request) const;
  bool has_command(std::string_view name) const;
  HttpResponse run(std::string_view command, const Json& request, const CancelToken& token) const;
  HttpResponse asset(const HttpRequest& request) const;
  HttpResponse finish(const HttpRequest& request, HttpResponse response) const;

  std::shared_ptr<const Runner> runner_;
  std::vector<std::string> commands_;
  Options options_;
  std::unique_ptr<ComputePool> heavy_;
  std::unique_ptr<ComputePool> light_;
  std::unique_ptr<ComputePool> market_;
};

// A Router over the library's commands and `ctx`.
Router make_router(const Context& ctx, const Options& options);

// The JSON error body for errors the server itself finds (bad route, size, content type).
HttpResponse error_response(int status, std::string_view code, std::string_view message, std::string_view field = {});

// Headers on every response: a strict Content-Security-Policy (everything from this server, nothing
// inline), no framing, no sniffing. No Access-Control-* headers: no cross-origin access.
const std::vector<std::pair<std::string, std::string>>& security_headers();

// The 503 answers: the worker queue is full (`busy`, Retry-After) or the deadline passed (`timeout`).
HttpResponse busy_response();
HttpResponse timeout_response(const Options& options);

// A Router behind the event-driven HTTP/1.1 server (see server.cc and docs/server.md).
class Server {
 public:
  explicit Server(Router router);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds to options.host:options.port and returns the port (useful with port 0).
  Result<int> bind();
  // Serves until stop(). Call after bind(), from one thread.
  void run();
  // From any thread (or a signal-free context): run() returns soon after.
  void stop();
  // From any thread: commands queued or running (Router::jobs()).
  std::size_t jobs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// `gpuplan serve`: binds, prints the URL, serves until killed. Returns the process exit status.
int serve(const Context& ctx, const Options& options);

}  // namespace gpuplan::server
