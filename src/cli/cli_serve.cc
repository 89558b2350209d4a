// `gpuplan serve`: the HTTP API and the web page (see server/server.h).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/cli.h"
#include "server/server.h"

namespace gpuplan::cli {

struct ServeCommand {
  CLI::App* app = nullptr;
  server::Options options;
  std::string offers_file;
  long long timeout_ms = 10000;
};

namespace {
ServeCommand& serve_command() {
  static ServeCommand command;
  return command;
}
}  // namespace

void add_serve_command(CLI::App& app) {
  ServeCommand& c = serve_command();
  c.app = app.add_subcommand("serve", "Serve the HTTP API (/api/v1) and the web page from this binary");
  c.app->add_option("--host", c.options.host, "Address to listen on (loopback unless told otherwise)")
      ->capture_default_str();
  c.app->add_option("--port", c.options.port, "Port to listen on (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  c.app->add_option("--offers", c.offers_file, "Offers file (CSV or JSON) that plan uses when a request has none")
      ->check(CLI::ExistingFile);
  c.app->add_option("--max-body-bytes", c.options.max_body_bytes, "Largest request body accepted (413 beyond)")
      ->capture_default_str()
      ->check(CLI::Range(1024, 64 << 20));
  c.app->add_option("--timeout-ms", c.timeout_ms, "Longest a command may run before the request gets 503")
      ->capture_default_str()
      ->check(CLI::Range(10, 600000));
  c.app->add_option("--threads", c.options.threads, "Workers that run commands (0: one per core)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  c.app->add_option("--connections", c.options.connections, "Connections served at once (a thread each)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
}

bool serve_requested() { return serve_command().app && serve_command().app->parsed(); }

int run_serve(const Context& ctx) {
  ServeCommand& c = serve_command();
  server::Options options = c.options;
  options.command_timeout = std::chrono::milliseconds(c.timeout_ms);
  if (!c.offers_file.empty()) {
    // Read once at start-up: no file is read on a request's behalf.
    std::ifstream in(c.offers_file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      std::cerr << "gpuplan: error: cannot read offers file " << c.offers_file << "\n";
      return exit_code(ErrorCode::kNotFound);
    }
    // Inline, as the API takes files: [{name, text}] (the library parses CSV or YAML by name).
    const std::string name = std::filesystem::path(c.offers_file).filename().string();
    options.default_offers = Json::array({Json{{"name", name}, {"text", text.str()}}});
  }
  const std::string& h = options.host;
  if (h != "127.0.0.1" && h != "localhost" && h != "::1") {
    std::cerr << "gpuplan: warning: serving on " << h
              << ", beyond this machine; the API has no authentication (put a proxy with TLS and access control in "
                 "front of it)\n";
  }
  return server::serve(ctx, options);
}

}  // namespace gpuplan::cli
