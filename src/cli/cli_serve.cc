// `gpuplan serve`: the HTTP API and the web page (see server/server.h).
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "cli/cli.h"
#include "gpuplan/k8s.h"
#include "market/db.h"
#include "server/server.h"

namespace gpuplan::cli {

struct ServeCommand {
  CLI::App* app = nullptr;
  server::Options options;
  std::string offers_file;
  long long deadline_ms = 10000;
  long long header_timeout_ms = 5000;
  long long keep_alive_ms = 2000;
  std::string data_dir;            // --data-dir: the market on SQLite (DIR/gpuplan.db)
  std::string database;            // --database: the market on PostgreSQL
  handoff::KubectlConfig kubectl;  // --kubeconfig, --kube-context, --kubectl: the Kubernetes target
  std::string k8s_mode = "device-plugin";
};

// The market's housekeeping (ends_at, credit limits) runs this often: a rental past its end is
// terminated within this many seconds (billing stops at ends_at itself, not at the tick).
constexpr std::chrono::seconds kMarketTickPeriod{5};
constexpr std::chrono::seconds kOutboxPeriod{1};  // a reserved rental reaches its engine within about a second

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
  c.app
      ->add_option("--max-response-bytes", c.options.max_response_bytes,
                   "Largest answer sent (413 beyond: ask for fewer results)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{64} << 10, size_t{1} << 30));
  c.app
      ->add_option("--deadline-ms,--timeout-ms", c.deadline_ms,
                   "One deadline a request, from its first byte: reading, running and answering (503 beyond)")
      ->capture_default_str()
      ->check(CLI::Range(10, 600000));
  c.app
      ->add_option("--header-timeout-ms", c.header_timeout_ms,
                   "Time from a request's first byte to the end of its headers (408 beyond)")
      ->capture_default_str()
      ->check(CLI::Range(10, 600000));
  c.app->add_option("--keep-alive-ms", c.keep_alive_ms, "An idle keep-alive connection is closed after this")
      ->capture_default_str()
      ->check(CLI::Range(10, 600000));
  c.app->add_option("--threads", c.options.threads, "Workers that run commands (0: one per core)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  c.app
      ->add_option("--max-connections,--connections", c.options.max_connections,
                   "Open connections at once (503 and close beyond); none holds a thread")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  c.app->add_option("--data-dir", c.data_dir,
                    "Serve the market from this data directory (SQLite DIR/gpuplan.db; created if missing)");
  c.app->add_option("--database", c.database, "Serve the market from PostgreSQL (postgresql://user@host/db)");
  c.app->add_option("--kubeconfig", c.kubectl.kubeconfig,
                    "Hand rentals on nodes with scheduler kubernetes to this cluster (kubectl --kubeconfig)");
  c.app->add_option("--kube-context", c.kubectl.context, "--kubeconfig: the context (default: its current one)");
  c.app->add_option("--kubectl", c.kubectl.kubectl, "--kubeconfig: the kubectl binary")->capture_default_str();
  c.app->add_option("--k8s-mode", c.k8s_mode, "--kubeconfig: how Pods get GPUs: device-plugin or dra")
      ->capture_default_str();
  c.app->add_option("--market-threads", c.options.market_threads, "Workers of the market's endpoints")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
}

bool serve_requested() { return serve_command().app && serve_command().app->parsed(); }

int run_serve(const Context& ctx) {
  ServeCommand& c = serve_command();
  server::Options options = c.options;
  options.request_deadline = std::chrono::milliseconds(c.deadline_ms);
  options.header_timeout = std::chrono::milliseconds(c.header_timeout_ms);
  options.keep_alive_timeout = std::chrono::milliseconds(c.keep_alive_ms);
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
  if (!c.data_dir.empty() && !c.database.empty()) {
    std::cerr << "gpuplan: error: give --data-dir or --database, not both\n";
    return exit_code(ErrorCode::kUsage);
  }
  if (c.data_dir.empty() && c.database.empty()) return server::serve(ctx, options);
  if (!c.database.empty() && c.database.rfind("postgres", 0) != 0) {
    std::cerr << "gpuplan: error: --database takes a postgresql:// URL (a data directory goes to --data-dir)\n";
    return exit_code(ErrorCode::kUsage);
  }
  auto db = market::open_store(c.database.empty() ? c.data_dir : c.database);
  if (!db) {
    std::cerr << "gpuplan: error: " << db.error().message << "\n";
    return exit_code(db.error().code);
  }
  market::MarketOptions market_options;
  market_options.catalog = ctx.catalog;
  // The outbox's engines: Slurm through sbatch/squeue/scancel on PATH (a row for a Slurm-managed node
  // fails its attempts with "cannot run 'squeue'" where Slurm is not installed).
  market_options.targets.push_back(std::shared_ptr<handoff::HandoffTarget>(handoff::make_slurm_target()));
  // Kubernetes only with a kubeconfig: without one, rows for Kubernetes nodes wait ("no target of its kind").
  if (!c.kubectl.kubeconfig.empty()) {
    auto mode = handoff::parse_k8s_mode(c.k8s_mode);
    if (!mode) {
      std::cerr << "gpuplan: error: --k8s-mode: " << mode.error().message << "\n";
      return exit_code(ErrorCode::kUsage);
    }
    if (!std::filesystem::is_regular_file(c.kubectl.kubeconfig)) {
      std::cerr << "gpuplan: error: --kubeconfig " << c.kubectl.kubeconfig << " is not a file\n";
      return exit_code(ErrorCode::kNotFound);
    }
    market_options.targets.push_back(std::shared_ptr<handoff::HandoffTarget>(
        handoff::make_kubernetes_target(handoff::KubernetesTargetOptions{c.kubectl, *mode, {}})));
  }
  auto opened = market::Market::open(std::move(*db), nullptr, market_options);
  if (!opened) {
    std::cerr << "gpuplan: error: " << opened.error().message << "\n";
    return exit_code(opened.error().code);
  }
  options.market = std::shared_ptr<market::Market>(std::move(*opened));
  std::cerr << "gpuplan: market on " << (c.database.empty() ? c.data_dir + "/gpuplan.db (SQLite)" : "PostgreSQL")
            << "; endpoints in /api/v1/openapi.json\n";
  // Housekeeping on a thread of its own, stopped when serve() returns.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread ticker([&, m = options.market] {
    std::unique_lock lock(mu);
    while (!cv.wait_for(lock, kMarketTickPeriod, [&] { return done; })) {
      lock.unlock();
      (void)m->tick();  // a busy store is retried at the next tick
      lock.lock();
    }
  });
  // The outbox worker (docs/market.md, "The outbox"): hands rentals to their engines every second.
  std::thread outbox([&, m = options.market] {
    std::unique_lock lock(mu);
    while (!cv.wait_for(lock, kOutboxPeriod, [&] { return done; })) {
      lock.unlock();
      (void)m->deliver_outbox();  // a failure is retried at the next pass; rows keep their own backoff
      lock.lock();
    }
  });
  const int rc = server::serve(ctx, options);
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_all();
  ticker.join();
  outbox.join();
  return rc;
}

}  // namespace gpuplan::cli
