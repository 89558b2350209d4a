// Fuzzes the market's HTTP API through the real routes: server::Router::handle (the JSON body limits,
// the route table, market_routes.cc, gpuplan::market::Market) over a SQLite store. Each input starts from
// the same store: a template made once per process through the API (a platform admin, a provider with a
// node of two A100-80GB (dynamic MIG) and two offers, a renter with an admin and a viewer, one rental),
// copied to a fresh file for every input, so inputs do not see each other's rows.
//
// Input: up to kMaxRequestsPerInput requests separated by a line "~~~". Each request is a first line
// "<auth><if-match> METHOD /api/v1/PATH[?QUERY]" and the body after it. <auth> picks the token by its
// value mod 8 (none, platform admin, provider admin, renter admin, renter viewer, a malformed token,
// an unknown well-formed token, "Bearer" alone); <if-match> picks the If-Match header likewise (none,
// 4, 6, 10, 0, -1, x, 99999999999999999999). In the path and body, $PROVIDER, $RENTER, $NODE, $OFFER1
// (a 1g.10gb slice), $OFFER2 (a whole GPU), $RENTAL, $USER, $TOKEN_ID are replaced by the template's ids.
//
// Oracles (an abort is a libFuzzer crash): no 500 (an exception or an internal error reached the
// client), a status in 100..599, a JSON body that parses and holds finite numbers only; after the
// requests, an independent read of the store finds no orphaned claim (a claim of a missing or released
// rental), claims equal to the live rentals' placements, and at most one open usage segment a rental.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "gpuplan/market.h"
#include "market/db.h"
#include "server/server.h"

namespace {

namespace fz = gpuplan::fuzz;
namespace srv = gpuplan::server;
namespace mk = gpuplan::market;
namespace fs = std::filesystem;
using gpuplan::Json;

// A request's deadline, far under libFuzzer's -timeout=10 s.
constexpr std::chrono::milliseconds kRequestDeadline{2000};
// Requests from one input: enough for a short story (rent, stop, start, delete), not a slow input.
constexpr int kMaxRequestsPerInput = 4;
// Request bytes an input may bring (the server's own body bound is larger; bigger inputs are not a
// different code path here, only slower).
constexpr size_t kMaxInputBytes = size_t{64} * 1024;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz oracle: market api: %s\n", what.c_str());
  std::abort();
}

struct Template {
  std::string dir;                                       // the process's folder under /tmp
  std::string db_file;                                   // the template store, made once
  std::string tokens[8];                                 // by <auth>: "" is no header
  std::vector<std::pair<std::string, std::string>> ids;  // placeholder -> id
};

srv::Options router_options(const std::shared_ptr<mk::Market>& market) {
  srv::Options o;
  o.request_deadline = kRequestDeadline;
  o.threads = 1;
  o.market_threads = 1;
  o.market = market;
  return o;
}

srv::HttpRequest make_request(const std::string& method, const std::string& target, const std::string& token,
                              const std::string& body, const std::string& if_match = {}) {
  srv::HttpRequest r;
  r.method = method;
  const size_t q = target.find('?');
  r.path = target.substr(0, q);
  if (q != std::string::npos) {
    std::string_view rest = std::string_view(target).substr(q + 1);
    while (!rest.empty()) {
      const size_t amp = rest.find('&');
      const std::string_view pair = rest.substr(0, amp);
      const size_t eq = pair.find('=');
      r.query.emplace_back(std::string(pair.substr(0, eq)),
                           eq == std::string_view::npos ? std::string() : std::string(pair.substr(eq + 1)));
      if (amp == std::string_view::npos) break;
      rest.remove_prefix(amp + 1);
    }
  }
  r.host = "127.0.0.1";
  if (!body.empty()) r.content_type = "application/json";
  if (!token.empty()) r.authorization = token == "Bearer" ? token : "Bearer " + token;
  r.if_match = if_match;
  r.body = body;
  return r;
}

// A setup call that must succeed: its "id" (and "token" when asked).
Json setup_call(const srv::Router& router, const std::string& method, const std::string& path, const std::string& token,
                const Json& body) {
  const srv::HttpResponse res = router.handle(make_request(method, "/api/v1" + path, token, body.dump()));
  if (res.status != 201 && res.status != 200) fail("template: " + method + " " + path + ": " + res.body);
  return Json::parse(res.body);
}

const Template& the_template() {
  static const Template* t = [] {
    auto* out = new Template;
    // On tmpfs when there is one: the store's fsyncs (synchronous=FULL) cost nothing there, ~10x the
    // inputs a second of a disk's.
    std::error_code ec;
    std::string pattern =
        fs::is_directory("/dev/shm", ec) ? "/dev/shm/gpuplan-fuzz-market-XXXXXX" : "/tmp/gpuplan-fuzz-market-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) fail("mkdtemp");
    out->dir = pattern;
    // Removed when the process exits normally (replay.sh runs one process per file); a crash keeps it.
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(the_template().dir, ignored);
    });
    auto db = mk::open_store(out->dir + "/template");
    if (!db) fail("template store: " + db.error().message);
    out->db_file = out->dir + "/template/gpuplan.db";
    auto opened = mk::Market::open(std::move(*db));
    if (!opened) fail("template market: " + opened.error().message);
    std::shared_ptr<mk::Market> market(std::move(*opened));
    auto admin = market->init_platform();
    if (!admin) fail("init_platform: " + admin.error().message);
    {
      const srv::Router router = srv::make_router(fz::context(), router_options(market));
      const std::string& a = admin->token;
      auto tenant = [&](const std::string& name, const std::string& kind) {
        return setup_call(router, "POST", "/tenants", a, Json{{"name", name}, {"kind", kind}})["id"].get<std::string>();
      };
      auto user_token = [&](const std::string& tenant_id, const std::string& name, const std::string& role) {
        const Json u =
            setup_call(router, "POST", "/tenants/" + tenant_id + "/users", a, Json{{"name", name}, {"role", role}});
        return setup_call(router, "POST", "/tokens", a, Json{{"user_id", u["id"]}});
      };
      const std::string provider = tenant("prov", "provider");
      const std::string renter = tenant("rent", "renter");
      const Json prov_token = user_token(provider, "pat", "admin");
      const Json rent_token = user_token(renter, "ann", "admin");
      const Json view_token = user_token(renter, "vic", "viewer");
      Json gpus = Json::array();
      for (int i = 0; i < 2; ++i) {
        gpus.push_back(Json{{"target", "a100-80gb-sxm4"}, {"uuid", "GPU-F-" + std::to_string(i)}, {"mig", "dynamic"}});
      }
      const std::string p = prov_token["token"];
      const Json node = setup_call(router, "POST", "/nodes", p,
                                   Json{{"name", "n1"},
                                        {"region", "eu-west"},
                                        {"interconnect", "nvlink"},
                                        {"vcpus", 64},
                                        {"ram_gb", 512},
                                        {"disk_gb", 2000},
                                        {"gpus", gpus}});
      const Json slice =
          setup_call(router, "POST", "/offers", p,
                     Json{{"target", "a100-80gb-sxm4/1g.10gb"}, {"region", "eu-west"}, {"price_per_hour", 0.35}});
      const Json whole = setup_call(router, "POST", "/offers", p,
                                    Json{{"target", "a100-80gb-sxm4"}, {"region", "eu-west"}, {"price_per_hour", 1.5}});
      const std::string r = rent_token["token"];
      const Json rental =
          setup_call(router, "POST", "/rentals", r, Json{{"offer", slice["id"]}, {"idempotency_key", "k"}});
      out->tokens[0] = "";
      out->tokens[1] = a;
      out->tokens[2] = p;
      out->tokens[3] = r;
      out->tokens[4] = view_token["token"];
      out->tokens[5] = "gpl_not-a-token";
      out->tokens[6] = "gpl_" + std::string(43, 'A');
      out->tokens[7] = "Bearer";
      // Longest names first: $RENTAL before $RENTER would not matter ($RENTAL is not a prefix of it),
      // but $OFFER1 and $OFFER2 must not be read as $OFFER.
      out->ids = {{"$PROVIDER", provider},
                  {"$RENTER", renter},
                  {"$NODE", node["id"]},
                  {"$OFFER1", slice["id"]},
                  {"$OFFER2", whole["id"]},
                  {"$RENTAL", rental["id"]},
                  {"$USER", rent_token["user_id"]},
                  {"$TOKEN_ID", rent_token["id"]}};
    }
    market.reset();  // the last connection closes: the WAL is checkpointed into the file
    return out;
  }();
  return *t;
}

std::string substitute(std::string s, const Template& t) {
  for (const auto& [name, id] : t.ids) {
    for (size_t at = s.find(name); at != std::string::npos; at = s.find(name, at + id.size())) {
      s.replace(at, name.size(), id);
    }
  }
  return s;
}

// The independent read: claims against the live rentals' placements, open usage segments.
void check_store(const std::string& dir) {
  auto db = mk::open_store(dir);
  if (!db) fail("reopening the store: " + db.error().message);
  const gpuplan::Status s = mk::with_tx(**db, mk::TxMode::kRead, [&](mk::Tx& tx) -> gpuplan::Status {
    GPUPLAN_TRY(orphans, tx.query("SELECT COUNT(*) FROM slice_claims c LEFT JOIN rentals r ON r.id = c.rental_id "
                                  "WHERE r.id IS NULL OR r.state IN ('stopped', 'terminated', 'failed')"));
    if (orphans[0].integer(0) != 0) fail(std::to_string(orphans[0].integer(0)) + " orphaned claims");
    GPUPLAN_TRY(held, tx.query("SELECT COALESCE(SUM(p.size_slices), 0) FROM rental_placements p "
                               "JOIN rentals r ON r.id = p.rental_id "
                               "WHERE r.state NOT IN ('stopped', 'terminated', 'failed')"));
    GPUPLAN_TRY(claims, tx.query("SELECT COUNT(*) FROM slice_claims"));
    if (held[0].integer(0) != claims[0].integer(0)) {
      fail("claims (" + std::to_string(claims[0].integer(0)) + ") differ from live placements (" +
           std::to_string(held[0].integer(0)) + ")");
    }
    GPUPLAN_TRY(open, tx.query("SELECT rental_id FROM usage_segments WHERE ended_at IS NULL "
                               "GROUP BY rental_id HAVING COUNT(*) > 1"));
    if (!open.empty()) fail("a rental with two open usage segments");
    return gpuplan::Status::Ok();
  });
  if (!s.ok()) fail("reading the store: " + s.error().message);
}

void check_response(const srv::HttpRequest& req, const srv::HttpResponse& res) {
  const std::string what = req.method + " " + req.path + " -> " + std::to_string(res.status);
  if (res.status == 500) fail(what + ": " + res.body);
  if (res.status < 100 || res.status > 599) fail(what);
  if (res.content_type.rfind("application/json", 0) != 0 || res.body.empty()) return;
  Json body;
  try {
    body = Json::parse(res.body);
  } catch (const Json::exception&) {
    fail(what + ": a body that is not JSON: " + res.body.substr(0, 200));
  }
  fz::require_finite(body, "market api");
}

// GPUPLAN_FUZZ_VERBOSE=1: each request's status and the start of its answer on stderr (to see what a
// seed reaches).
bool verbose() {
  static const bool v = std::getenv("GPUPLAN_FUZZ_VERBOSE") != nullptr;
  return v;
}

// By <if-match>: none, the versions the template's rental has in a story (4 running, 6 after a stop, 10
// after a start again), a stale one, a negative one, one that is not a number and one beyond int64.
constexpr const char* kIfMatch[8] = {"", "4", "6", "10", "0", "-1", "x", "99999999999999999999"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInputBytes) return 0;
  const Template& t = the_template();
  // The input's requests, before any store is opened (an input with none costs nothing).
  std::vector<srv::HttpRequest> requests;
  std::string_view rest = fz::as_text(data, size);
  while (!rest.empty() && static_cast<int>(requests.size()) < kMaxRequestsPerInput) {
    const size_t sep = rest.find("\n~~~\n");
    std::string_view one = rest.substr(0, sep);
    rest = sep == std::string_view::npos ? std::string_view() : rest.substr(sep + 5);
    const size_t nl = one.find('\n');
    const std::string_view line = one.substr(0, nl);
    const std::string body =
        nl == std::string_view::npos ? std::string() : substitute(std::string(one.substr(nl + 1)), t);
    if (line.size() < 3) continue;
    const auto auth = static_cast<unsigned char>(line[0]) % 8;
    const auto if_match = static_cast<unsigned char>(line[1]) % 8;
    std::string_view words = line.substr(2);
    while (!words.empty() && words.front() == ' ') words.remove_prefix(1);
    const size_t space = words.find(' ');
    if (space == std::string_view::npos) continue;
    const std::string method(words.substr(0, space));
    const std::string target = substitute(std::string(words.substr(space + 1)), t);
    requests.push_back(make_request(method, target, t.tokens[auth], body, kIfMatch[if_match]));
  }
  if (requests.empty()) return 0;

  const std::string work = t.dir + "/work";
  std::error_code ec;
  fs::remove_all(work, ec);
  fs::create_directories(work, ec);
  fs::copy_file(t.db_file, work + "/gpuplan.db", ec);
  if (ec) fail("copying the template store: " + ec.message());
  {
    auto db = mk::open_store(work);
    if (!db) fail("opening the store: " + db.error().message);
    auto opened = mk::Market::open(std::move(*db));
    if (!opened) fail("opening the market: " + opened.error().message);
    std::shared_ptr<mk::Market> market(std::move(*opened));
    const srv::Router router = srv::make_router(fz::context(), router_options(market));
    for (const auto& req : requests) {
      const srv::HttpResponse res = router.handle(req);
      if (verbose())
        std::fprintf(stderr, "%s %s -> %d %s\n", req.method.c_str(), req.path.c_str(), res.status,
                     res.body.substr(0, 160).c_str());
      check_response(req, res);
    }
  }
  check_store(work);
  return 0;
}
