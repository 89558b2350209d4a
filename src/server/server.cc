// The Server: a Router behind cpp-httplib's thread pool, with body-size and time limits.
#include "server/server.h"

#include <httplib.h>

#include <sys/socket.h>

#include <csignal>
#include <iostream>
#include <thread>

namespace gpuplan::server {

// Pending connections the kernel queues before the server accepts them: enough for a burst of a few
// hundred clients (the load benchmark opens 256 at once); the kernel caps it at net.core.somaxconn.
constexpr int kListenBacklog = 1024;

struct Server::Impl {
  Router router;
  httplib::Server http;
  int listen_fd = -1;
  explicit Impl(Router r) : router(std::move(r)) {}
};

Server::Server(Router router) : impl_(std::make_unique<Impl>(std::move(router))) {
  const Options& o = impl_->router.options();
  auto& http = impl_->http;
  // httplib gives each open connection a thread, so there are as many threads as connections served
  // at once; the commands themselves run on the Router's pool of one worker per core. The keep-alive
  // limits make connections take turns when there are more of them than threads.
  const size_t threads = static_cast<size_t>(std::max(1, o.connections));
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(o.max_body_bytes);
  http.set_read_timeout(o.io_timeout);
  http.set_write_timeout(o.io_timeout);
  http.set_keep_alive_timeout(2);
  http.set_keep_alive_max_count(100);
  http.set_tcp_nodelay(true);
  // httplib listens with a backlog of 5 (compiled into Debian's library), so a burst of connections
  // overflows the accept queue and waits for SYN retransmits. Keep the socket to listen again with a
  // real backlog after binding (see bind()). This replaces httplib's default, which sets SO_REUSEADDR.
  http.set_socket_options([impl = impl_.get()](int fd) {
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    impl->listen_fd = fd;
  });

  auto handler = [this](const httplib::Request& in, httplib::Response& out) {
    HttpRequest req;
    req.method = in.method;
    req.path = in.path;
    for (const auto& [k, v] : in.params) req.query.emplace_back(k, v);
    req.host = in.get_header_value("Host");
    req.content_type = in.get_header_value("Content-Type");
    req.if_none_match = in.get_header_value("If-None-Match");
    req.body = in.body;
    HttpResponse res = impl_->router.handle(req);
    out.status = res.status;
    for (auto& [k, v] : res.headers) {
      if (!out.has_header(k)) out.set_header(k, v);  // the security headers are already defaults
    }
    if (res.status == 304) return;
    out.set_content(std::move(res.body), res.content_type);
  };
  http.Get(".*", handler);
  http.Options(".*", handler);
  http.Post(".*", handler);
  http.Put(".*", handler);
  http.Patch(".*", handler);
  http.Delete(".*", handler);

  // Errors httplib finds itself (413 body too large, 414 URI too long, 400 bad request line) and
  // responses it would send empty get the same JSON error body as the rest.
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request&, httplib::Response& res) -> httplib::Server::HandlerResponse {
        if (!res.body.empty() || res.status == 304) return httplib::Server::HandlerResponse::Unhandled;
        std::string code = "bad_request";
        std::string message = "the request is not valid HTTP";
        if (res.status == 413) {
          code = "payload_too_large";
          message = "the request body is too large";
        } else if (res.status == 414) {
          code = "uri_too_long";
          message = "the request URI is too long";
        } else if (res.status == 404) {
          code = "not_found";
          message = "no such resource";
        } else if (res.status >= 500) {
          code = "internal";
          message = "internal server error";
        }
        HttpResponse e = error_response(res.status, code, message);
        res.set_content(e.body, e.content_type);
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    HttpResponse e = error_response(500, "internal", "internal server error");
    res.status = 500;
    res.set_content(e.body, e.content_type);
  });
  // Security headers on everything, including the responses httplib writes itself.
  httplib::Headers defaults;
  for (auto& [k, v] : security_headers()) defaults.emplace(k, v);
  http.set_default_headers(defaults);
}

Server::~Server() { stop(); }

Result<int> Server::bind() {
  const Options& o = impl_->router.options();
  int port = o.port;
  if (port == 0) {
    port = impl_->http.bind_to_any_port(o.host);
    if (port < 0) port = 0;
  } else if (!impl_->http.bind_to_port(o.host, port)) {
    port = 0;
  }
  if (port > 0 && impl_->listen_fd >= 0) ::listen(impl_->listen_fd, kListenBacklog);
  if (port <= 0) {
    return usage_error("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                           " (address in use, or not an address of this machine)",
                       "port");
  }
  return port;
}

void Server::run() { impl_->http.listen_after_bind(); }

void Server::stop() {
  if (impl_ && impl_->http.is_running()) impl_->http.stop();
}

int serve(const Context& ctx, const Options& options) {
  std::signal(SIGPIPE, SIG_IGN);
  Server server(make_router(ctx, options));
  auto port = server.bind();
  if (!port) {
    std::cerr << "gpuplan: error: " << port.error().message << "\n";
    return exit_code(port.error().code);
  }
  const bool v6 = options.host.find(':') != std::string::npos;
  const std::string host = v6 ? "[" + options.host + "]" : options.host;
  std::cout << "gpuplan: serving the page and the API on http://" << host << ":" << *port
            << "/  (API: /api/v1, Ctrl-C to stop)" << std::endl;
  server.run();
  return 0;
}

}  // namespace gpuplan::server
