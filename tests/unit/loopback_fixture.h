// The in-process server the loopback tests talk to: a Market on a fresh store of either kind (SQLite in a
// temporary directory, or a fresh schema of scripts/with-postgres.sh's PostgreSQL), a router over the
// embedded catalog, and the server on 127.0.0.1 with an ephemeral port, run on its own thread; plus the
// one HTTP call the tests make. One home for what market_loopback_test.cc, agent_test.cc and
// agent_bench_request_test.cc each used to set up.
#pragma once

#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "gpuplan/catalog.h"
#include "gpuplan/market.h"
#include "market/db.h"
#include "market_pg_test_util.h"
#include "server/server.h"

namespace gpuplan::test {

struct LoopbackAnswer {
  int status = 0;  // 0: no answer (connection failed or reset)
  Json body;       // discarded when the body is not JSON
};

// One request to the server on 127.0.0.1:`port` under /api/v1: GET, DELETE, PUT or (anything else) POST
// with `body` (an empty object when null), a bearer `token` and an If-Match when given.
inline LoopbackAnswer loopback_call(int port, const std::string& method, const std::string& path,
                                    const std::string& token, const Json* body = nullptr,
                                    const std::string& if_match = {}) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(30, 0);
  c.set_connection_timeout(5, 0);
  httplib::Headers h;
  if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
  if (!if_match.empty()) h.emplace("If-Match", if_match);
  const std::string full = "/api/v1" + path;
  const std::string payload = body ? body->dump() : "{}";
  httplib::Result r = method == "GET"      ? c.Get(full.c_str(), h)
                      : method == "DELETE" ? c.Delete(full.c_str(), h)
                      : method == "PUT"    ? c.Put(full.c_str(), h, payload, "application/json")
                                           : c.Post(full.c_str(), h, payload, "application/json");
  LoopbackAnswer a;
  if (!r) return a;
  a.status = r->status;
  a.body = Json::parse(r->body, nullptr, false);
  return a;
}

// A fresh directory under the system's temporary one, unique per process and call.
inline std::string unique_temp_dir(const std::string& what) {
  static std::atomic<int> n{0};
  auto d = std::filesystem::temp_directory_path() /
           ("gpuplan-" + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(n.fetch_add(1)));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

// True when a test of store `kind` cannot run here (PostgreSQL without GPUPLAN_TEST_POSTGRES): the
// fixture's SetUp GTEST_SKIPs then.
inline bool store_unavailable(const std::string& kind) {
  return kind == "postgresql" && market::test::pg_conninfo().empty();
}

// A token of a new admin user of a new tenant `name` of `kind`, made by the platform admin; empty (and
// a failed expectation) when a step fails.
inline std::string tenant_admin_token(market::Market& m, const market::Principal& platform, const std::string& name,
                                      market::TenantKind kind) {
  auto t = m.create_tenant(platform, name, kind);
  EXPECT_TRUE(t.ok());
  if (!t.ok()) return {};
  auto u = m.create_user(platform, t->id, name + "-ops", market::Role::kAdmin);
  EXPECT_TRUE(u.ok());
  if (!u.ok()) return {};
  auto tok = m.create_token(platform, u->id);
  EXPECT_TRUE(tok.ok());
  return tok.ok() ? tok->token : std::string();
}

class LoopbackServer {
 public:
  LoopbackServer() = default;
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;
  ~LoopbackServer() { stop(); }

  // Opens a Market on a fresh store of `kind` ("sqlite" or "postgresql"; `what` names the SQLite
  // directory), then starts the server; `tweak` may change the server's options (market already set).
  Status start(const std::string& kind, const std::string& what,
               const std::function<void(server::Options&)>& tweak = {}) {
    postgres_ = kind == "postgresql";
    if (postgres_) {
      GPUPLAN_TRY(schema, market::test::fresh_pg_schema());
      store_ = schema;
    } else {
      store_ = unique_temp_dir(what);
    }
    auto db = open_raw_store();
    if (!db) return db.error();
    auto m = market::Market::open(std::move(*db));
    if (!m) return m.error();
    market_ = std::shared_ptr<market::Market>(std::move(*m));
    ctx_ = std::make_unique<Context>(Context{Catalog::embedded()});
    server::Options o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.threads = 2;
    o.market = market_;
    if (tweak) tweak(o);
    server_ = std::make_unique<server::Server>(server::make_router(*ctx_, o));
    GPUPLAN_TRY(port, server_->bind());
    port_ = port;
    thread_ = std::thread([this] { server_->run(); });
    return {};
  }

  // Stops the server, closes the market and removes a SQLite store's directory; idempotent.
  void stop() {
    if (server_) {
      server_->stop();
      if (thread_.joinable()) thread_.join();
    }
    server_.reset();
    market_.reset();
    if (!postgres_ && !store_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(store_, ec);
    }
    store_.clear();
  }

  // A second, independent connection to the same store.
  Result<std::unique_ptr<market::Db>> open_raw_store() const {
    return postgres_ ? market::open_postgresql(store_) : market::open_store(store_);
  }

  const std::shared_ptr<market::Market>& market() const { return market_; }
  const std::string& store() const { return store_; }
  const Context& context() const { return *ctx_; }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  bool postgres_ = false;
  std::string store_;  // SQLite: the directory; PostgreSQL: the schema's conninfo
  std::shared_ptr<market::Market> market_;
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<server::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace gpuplan::test
