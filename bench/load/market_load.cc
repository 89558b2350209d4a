// HTTP load driver for the market's reservations (docs/market.md, "Speed"): against a running
// `gpuplan serve --data-dir DIR` or `--database postgresql://...`, C client threads (cpp-httplib,
// keep-alive) each loop POST /api/v1/rentals (one 1g.10gb slice) then DELETE /api/v1/rentals/{id} for a
// fixed time; prints reservations/s (201s of the POST per second) and the POST's p50/p99 latency, for each
// client count, as rows of the table in docs/market.md. The driver first writes its own provider, nodes,
// offer and renter straight into the same store through the library (names unique per run), so that it
// needs no admin token; the server sees them through market_version.
//   gpuplan_market_load --store DIR|postgresql://... --port 18240 [--clients 1,16,64] [--seconds 5]
//                       [--nodes 16]
// Not part of `make test`: bench/market_load.sh starts the server and runs it on both stores.
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpuplan/market.h"
#include "market/db.h"

namespace {

using namespace gpuplan::market;
using Clock = std::chrono::steady_clock;

constexpr int kGpusPerNode = 8;    // HGX boards
constexpr int kMaxClients = 1024;  // threads one run may start
constexpr int kMaxSeconds = 600;   // one run's length at most
constexpr int kMaxNodes = 1250;    // 10,000 GPUs: the inventory
constexpr time_t kHttpTimeoutSeconds = 30;
constexpr std::chrono::milliseconds kListPause{
    10};  // the offers lister's pause: ~100 lists/s at most  // far above any answer: a stuck server shows as errors

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "gpuplan_market_load: %s\n", what.c_str());
  std::exit(2);
}
template <typename T>
T must(gpuplan::Result<T> r, const std::string& what) {
  if (!r) die(what + ": " + r.error().message);
  return std::move(*r);
}

struct Args {
  std::string store;
  int port = 0;
  std::vector<int> clients{1, 16, 64};
  int seconds = 5;
  int nodes = 16;
};

int bounded(const std::string& text, int lo, int hi, const char* name) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || v < lo || v > hi) {
    die(std::string(name) + " must be a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  }
  return static_cast<int>(v);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--store") {
      a.store = v;
    } else if (k == "--port") {
      a.port = bounded(v, 1, 65535, "--port");
    } else if (k == "--seconds") {
      a.seconds = bounded(v, 1, kMaxSeconds, "--seconds");
    } else if (k == "--nodes") {
      a.nodes = bounded(v, 1, kMaxNodes, "--nodes");
    } else if (k == "--clients") {
      a.clients.clear();
      size_t b = 0;
      while (b <= v.size()) {
        size_t e = v.find(',', b);
        if (e == std::string::npos) e = v.size();
        a.clients.push_back(bounded(v.substr(b, e - b), 1, kMaxClients, "--clients"));
        b = e + 1;
      }
    } else {
      die("unknown option " + k);
    }
  }
  if (a.store.empty() || a.port == 0) die("--store and --port are required");
  return a;
}

struct Setup {
  std::string offer_id;
  std::string renter_token;
};

// A provider with `nodes` x 8 dynamic-MIG A100s (7 1g.10gb slices each), a 1g.10gb offer, a renter.
Setup set_up(const Args& a) {
  auto market = must(Market::open(must(open_store(a.store), "open the store")), "Market::open");
  const std::string run = std::to_string(::getpid()) + "-" +
                          std::to_string(std::chrono::system_clock::now().time_since_epoch().count() % 1'000'000);
  auto platform_token = market->init_platform();
  Principal platform;
  if (platform_token) {
    platform = must(market->authenticate(platform_token->token), "authenticate");
  } else {
    // The platform exists already (a second run on the same store): act as its admin straight through the
    // library, which is what a server operator's tooling would do.
    std::vector<Row> admins;
    const gpuplan::Status found = with_tx(market->db(), TxMode::kRead, [&](Tx& tx) -> gpuplan::Status {
      auto rows = tx.query(
          "SELECT u.id, t.id FROM users u JOIN tenants t ON t.id = u.tenant_id WHERE t.kind = 'platform' AND "
          "u.role = 'admin'");
      if (!rows) return rows.error();
      admins = *rows;
      return gpuplan::Status::Ok();
    });
    if (!found) die("platform admin: " + found.error().message);
    if (admins.empty()) die("the store has a platform tenant without an admin");
    const auto& tenants = admins;
    platform = Principal{tenants[0].text(1), TenantKind::kPlatform, tenants[0].text(0), Role::kAdmin, Scope::kFull, ""};
  }
  auto tenant = [&](const std::string& name, TenantKind kind) {
    const Tenant t = must(market->create_tenant(platform, name, kind), "create_tenant");
    const User u = must(market->create_user(platform, t.id, name + "-admin", Role::kAdmin), "create_user");
    return must(market->create_token(platform, u.id), "create_token");
  };
  const Principal provider = must(market->authenticate(tenant("load-prov-" + run, TenantKind::kProvider).token), "p");
  const IssuedToken renter = tenant("load-renter-" + run, TenantKind::kRenter);
  for (int n = 0; n < a.nodes; ++n) {
    NodeSpec spec{
        "n" + std::to_string(n), "load", Interconnect::kNvlink, 128, 2048, 8000, {}, Scheduler::kManual, {}, {}, {}};
    for (int g = 0; g < kGpusPerNode; ++g) {
      spec.gpus.push_back(GpuSpec{"a100-80gb-sxm4",
                                  "GPU-load-" + run + "-" + std::to_string(n) + "-" + std::to_string(g),
                                  MigPolicy::kDynamic, ""});
    }
    (void)must(market->add_node(provider, spec), "add_node");
  }
  const Offer o = must(market->create_offer(provider, OfferSpec{"a100-80gb-sxm4/1g.10gb", 1, "load", 200'000, 0}), "o");
  return Setup{o.id, renter.token};
}

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

struct Totals {
  std::mutex mu;
  std::vector<double> rent_ms, delete_ms;
  std::map<int, int64_t> rent_status;  // HTTP status (0: no answer) -> count
};

void run_clients(const Args& a, const Setup& s, int clients) {
  Totals totals;
  std::atomic<bool> stop{false};
  const httplib::Headers headers{{"Authorization", "Bearer " + s.renter_token}};
  const std::string body = "{\"offer\": \"" + s.offer_id + "\", \"count\": 1}";
  std::vector<std::thread> threads;
  // One more client lists the live offers all along: what GET /offers?source=market costs under load.
  std::vector<double> offers_ms;
  std::thread lister([&] {
    httplib::Client http("127.0.0.1", a.port);
    http.set_keep_alive(true);
    http.set_tcp_nodelay(true);
    http.set_read_timeout(kHttpTimeoutSeconds, 0);
    while (!stop.load()) {
      const auto b = Clock::now();
      auto r = http.Get("/api/v1/offers?source=market");
      if (r && r->status == 200)
        offers_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - b).count());
      std::this_thread::sleep_for(kListPause);
    }
  });
  const auto t0 = Clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      httplib::Client http("127.0.0.1", a.port);
      http.set_keep_alive(true);
      http.set_tcp_nodelay(true);  // headers and body leave as two writes: no Nagle wait on the second
      http.set_read_timeout(kHttpTimeoutSeconds, 0);
      std::vector<double> rent_ms, delete_ms;
      std::map<int, int64_t> status;
      while (!stop.load()) {
        const auto b = Clock::now();
        auto r = http.Post("/api/v1/rentals", headers, body, "application/json");
        rent_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - b).count());
        const int code = r ? r->status : 0;
        ++status[code];
        if (code != 201) continue;
        const size_t at = r->body.find("\"id\":");
        if (at == std::string::npos) continue;
        const size_t q1 = r->body.find('"', at + 5), q2 = r->body.find('"', q1 + 1);
        const std::string id = r->body.substr(q1 + 1, q2 - q1 - 1);
        const auto d = Clock::now();
        auto del = http.Delete(("/api/v1/rentals/" + id).c_str(), headers);
        delete_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - d).count());
        if (!del || del->status != 200) ++status[-(del ? del->status : 1)];  // negative: the DELETE's status
      }
      std::lock_guard<std::mutex> lock(totals.mu);
      totals.rent_ms.insert(totals.rent_ms.end(), rent_ms.begin(), rent_ms.end());
      totals.delete_ms.insert(totals.delete_ms.end(), delete_ms.begin(), delete_ms.end());
      for (auto [k, n] : status) totals.rent_status[k] += n;
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(a.seconds));
  stop.store(true);
  for (auto& t : threads) t.join();
  lister.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const int64_t ok = totals.rent_status.count(201) ? totals.rent_status[201] : 0;
  std::string other;
  for (auto [k, n] : totals.rent_status) {
    if (k != 201) other += (other.empty() ? "" : ", ") + std::to_string(n) + "x" + std::to_string(k);
  }
  std::printf("| %d | %.0f | %.1f | %.1f | %.1f | %.1f | %.2f / %.2f | %s |\n", clients, static_cast<double>(ok) / secs,
              percentile(totals.rent_ms, 0.50), percentile(totals.rent_ms, 0.99), percentile(totals.delete_ms, 0.50),
              percentile(totals.delete_ms, 0.99), percentile(offers_ms, 0.50), percentile(offers_ms, 0.99),
              other.empty() ? "none" : other.c_str());
  std::fflush(stdout);
}

// GET /offers?source=market, `n` times one after another on a quiet market: p50/p99 in ms.
void offers_latency(const Args& a) {
  httplib::Client http("127.0.0.1", a.port);
  http.set_keep_alive(true);
  http.set_tcp_nodelay(true);
  constexpr int kSamples = 50;  // enough for a p99 of a quiet server
  std::vector<double> ms;
  for (int i = 0; i < kSamples; ++i) {
    const auto b = Clock::now();
    auto r = http.Get("/api/v1/offers?source=market");
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - b).count());
    if (!r || r->status != 200) die("GET /offers?source=market failed");
  }
  const double p50 = percentile(ms, 0.50), p99 = percentile(ms, 0.99);
  std::printf("GET /offers?source=market on a quiet market: p50 %.2f ms, p99 %.2f ms (%d calls)\n", p50, p99, kSamples);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  const Setup s = set_up(a);
  offers_latency(a);
  std::printf(
      "\n| clients | reservations/s | POST p50 ms | POST p99 ms | DELETE p50 ms | DELETE p99 ms | "
      "GET offers p50 / p99 ms | other answers |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (int c : a.clients) run_clients(a, s, c);
  offers_latency(a);
  return 0;
}
