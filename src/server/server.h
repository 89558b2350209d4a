// `gpuplan serve`: the HTTP API and the web page. A thin layer over gpuplan::run_command.
//
// The Router is a pure function from an HTTP request to an HTTP response (no sockets, no files): it
// maps routes onto command names, turns query strings and JSON bodies into request objects, runs the
// command and writes its result or its error as JSON. Commands are looked up by name at request
// time, so a command added to the library is served without a change here:
//   POST /api/v1/fit        -> "fit"           GET /api/v1/gpus           -> "catalog.list"
//   POST /api/v1/mig/check  -> "mig.check"     GET /api/v1/gpus/{id}      -> "catalog.show"
//   GET  /api/v1/mig/{gpu}/profiles|layouts -> "mig.profiles" | "mig.layouts"
// The Server puts a Router behind cpp-httplib's thread pool with body-size and time limits.
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

namespace gpuplan::server {

struct Options {
  std::string host = "127.0.0.1";
  int port = 8080;                                   // 0: any free port
  std::size_t max_body_bytes = 1 << 20;              // larger bodies get 413
  std::chrono::milliseconds command_timeout{10000};  // a command that runs longer gets 503
  std::chrono::seconds io_timeout{5};                // reading a request, writing a response
  int threads = 0;                                   // workers that run commands; 0: one per core
  int connections = 256;               // connections served at once (a thread each); more wait to be accepted
  std::optional<Json> default_offers;  // --offers FILE: used by plan when a request has none
};

struct HttpRequest {
  std::string method;
  std::string path;  // decoded, without the query string
  std::vector<std::pair<std::string, std::string>> query;
  std::string host;          // the Host header
  std::string content_type;  // the Content-Type header
  std::string if_none_match;
  std::string body;
};

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

  HttpResponse handle(const HttpRequest& request) const;
  const Options& options() const { return options_; }

 private:
  HttpResponse api(const HttpRequest& request, std::string_view route) const;
  // The command a route names; path parameters go into `request`.
  std::string command_for(const std::vector<std::string>& segs, Json& request) const;
  bool has_command(std::string_view name) const;
  HttpResponse run(std::string_view command, const Json& request) const;
  HttpResponse asset(const HttpRequest& request) const;

  std::shared_ptr<const Runner> runner_;
  std::vector<std::string> commands_;
  Options options_;
  std::unique_ptr<ComputePool> pool_;
};

// A Router over the library's commands and `ctx`.
Router make_router(const Context& ctx, const Options& options);

// The JSON error body for errors the server itself finds (bad route, size, content type).
HttpResponse error_response(int status, std::string_view code, std::string_view message, std::string_view field = {});

// Headers on every response: a strict Content-Security-Policy (everything from this server, nothing
// inline), no framing, no sniffing. No Access-Control-* headers: no cross-origin access.
const std::vector<std::pair<std::string, std::string>>& security_headers();

// A Router behind cpp-httplib.
class Server {
 public:
  explicit Server(Router router);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds to options.host:options.port and returns the port (useful with port 0).
  Result<int> bind();
  // Serves until stop(). Call after bind().
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// `gpuplan serve`: binds, prints the URL, serves until killed. Returns the process exit status.
int serve(const Context& ctx, const Options& options);

}  // namespace gpuplan::server
