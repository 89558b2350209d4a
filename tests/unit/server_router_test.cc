// The Router without sockets: how routes map onto commands and requests, and every error the server
// finds itself (content type, malformed JSON, unknown routes, time limit). A fake runner records
// what it was asked, so routes for commands this build may not have yet are tested too.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/catalog.h"
#include "gpuplan/version.h"
#include "gpuplan/workload.h"
#include "server/server.h"

namespace gpuplan::server {
namespace {

struct Call {
  std::string command;
  Json request;
};

class RouterTest : public ::testing::Test {
 protected:
  Router make(std::vector<std::string> commands, Options options = {}) {
    options.threads = 2;
    return Router(
        [this](std::string_view command, const Json& request) -> Result<Json> {
          {
            std::lock_guard<std::mutex> lock(mu_);
            last_ = Call{std::string(command), request};
          }
          if (request.contains("fail")) {
            const std::string kind = request["fail"].get<std::string>();
            if (kind == "usage") return usage_error("bad option", "batch");
            if (kind == "not_found") return not_found_error("unknown model 'x'", "model");
            if (kind == "ambiguous") return Error{ErrorCode::kAmbiguous, "a100 is ambiguous", "gpu"};
            if (kind == "layout") return Error{ErrorCode::kInvalidLayout, "overlap", "layout"};
            if (kind == "throw") throw std::runtime_error("boom");
          }
          if (request.contains("spin_until_cancelled")) {
            // A command that checks cancel_requested() like the library's long loops do.
            while (!cancel_requested()) std::this_thread::yield();
            spun_out_.fetch_add(1);
            return cancelled_error();
          }
          if (request.contains("results")) {
            Json list = Json::array();
            for (int i = 0; i < request["results"].get<int>(); ++i) list.push_back(std::string(100, 'x'));
            return Json{{"results", std::move(list)}};
          }
          if (request.contains("sleep_ms")) {
            std::this_thread::sleep_for(std::chrono::milliseconds(request["sleep_ms"].get<int>()));
          }
          return Json{{"ok", true}, {"command", command}};
        },
        std::move(commands), options);
  }
  Call last() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }
  static HttpRequest get(std::string path, std::vector<std::pair<std::string, std::string>> query = {}) {
    HttpRequest r;
    r.method = "GET";
    r.path = std::move(path);
    r.query = std::move(query);
    r.host = "127.0.0.1:8080";
    return r;
  }
  static HttpRequest post(std::string path, std::string body, std::string type = "application/json") {
    HttpRequest r;
    r.method = "POST";
    r.path = std::move(path);
    r.body = std::move(body);
    r.content_type = std::move(type);
    r.host = "localhost:8080";
    return r;
  }
  static Json body(const HttpResponse& r) { return Json::parse(r.body); }
  static std::string header(const HttpResponse& r, std::string_view name) {
    for (const auto& [k, v] : r.headers) {
      if (k == name) return v;
    }
    return {};
  }

  std::mutex mu_;
  Call last_;
  std::atomic<int> spun_out_{0};
};

// Every command of the library's one table (a smaller list is a build that lacks some).
const std::vector<std::string> kAll = gpuplan::command_names();

TEST_F(RouterTest, PostRoutesMapOntoCommandNames) {
  Router r = make(kAll);
  for (const auto& [path, command] :
       std::vector<std::pair<std::string, std::string>>{{"/api/v1/fit", "fit"},
                                                        {"/api/v1/perf", "perf"},
                                                        {"/api/v1/plan", "plan"},
                                                        {"/api/v1/compare", "compare"},
                                                        {"/api/v1/mig/check", "mig.check"},
                                                        {"/api/v1/mig/pack", "mig.pack"},
                                                        {"/api/v1/validate", "validate"}}) {
    auto res = r.handle(post(path, R"({"model": "llama-2-7b", "batch": 4})"));
    EXPECT_EQ(res.status, 200) << path << ": " << res.body;
    EXPECT_EQ(last().command, command);
    EXPECT_EQ(last().request, (Json{{"model", "llama-2-7b"}, {"batch", 4}}));
    EXPECT_EQ(res.content_type, "application/json");
  }
}

TEST_F(RouterTest, GetRoutesTakeQueryAndPathParameters) {
  Router r = make(kAll);
  EXPECT_EQ(r.handle(get("/api/v1/gpus", {{"vendor", "nvidia"}, {"min-memory-gb", "40"}, {"mig", ""}})).status, 200);
  EXPECT_EQ(last().command, "catalog.list");
  EXPECT_EQ(last().request, (Json{{"vendor", "nvidia"}, {"min_memory_gb", "40"}, {"mig", true}}));

  EXPECT_EQ(r.handle(get("/api/v1/gpus/a100-40gb-sxm4", {{"explain", "true"}})).status, 200);
  EXPECT_EQ(last().command, "catalog.show");
  EXPECT_EQ(last().request, (Json{{"explain", "true"}, {"gpu", "a100-40gb-sxm4"}}));

  EXPECT_EQ(r.handle(get("/api/v1/gpus/a100-40gb-sxm4/3g.20gb")).status, 200);
  EXPECT_EQ(last().request["gpu"], "a100-40gb-sxm4/3g.20gb");

  EXPECT_EQ(r.handle(get("/api/v1/mig/h100-80gb-sxm5/profiles")).status, 200);
  EXPECT_EQ(last().command, "mig.profiles");
  EXPECT_EQ(last().request, (Json{{"gpu", "h100-80gb-sxm5"}}));
  EXPECT_EQ(r.handle(get("/api/v1/mig/h100-80gb-sxm5/layouts")).status, 200);
  EXPECT_EQ(last().command, "mig.layouts");

  // Any command can be read with GET and query parameters; a repeated key is a list.
  EXPECT_EQ(r.handle(get("/api/v1/compare", {{"gpu", "a100-40gb-sxm4"}, {"gpu", "a40"}})).status, 200);
  EXPECT_EQ(last().command, "compare");
  EXPECT_EQ(last().request, (Json{{"gpu", {"a100-40gb-sxm4", "a40"}}}));
}

TEST_F(RouterTest, AFamilyAnswersWithItsListCommand) {
  Router r = make({"catalog.list", "offers.list"});
  EXPECT_EQ(r.handle(get("/api/v1/offers", {{"provider", "vast"}})).status, 200);
  EXPECT_EQ(last().command, "offers.list");
  EXPECT_EQ(last().request, (Json{{"provider", "vast"}}));
}

// /api/v1/models is the generic route of the models.list command (issue #12): the router has no zoo
// listing of its own, and a build without the command says so.
TEST_F(RouterTest, ModelsRunsTheModelsListCommand) {
  Router r = make(kAll);
  EXPECT_EQ(r.handle(get("/api/v1/models")).status, 200);
  EXPECT_EQ(last().command, "models.list");
  EXPECT_EQ(last().request, Json::object());
  Router without = make({"catalog.list"});
  auto res = without.handle(get("/api/v1/models"));
  EXPECT_EQ(res.status, 404);
  EXPECT_EQ(body(res)["error"]["code"], "unknown_command");
  EXPECT_NE(body(res)["error"]["message"].get<std::string>().find("'models.list'"), std::string::npos) << res.body;
}

TEST_F(RouterTest, EmptyBodyIsAnEmptyRequest) {
  Router r = make(kAll);
  EXPECT_EQ(r.handle(post("/api/v1/fit", "", "")).status, 200);
  EXPECT_EQ(last().request, Json::object());
}

TEST_F(RouterTest, CommandsThisBuildLacksAre404WithJson) {
  Router r = make({"catalog.list", "catalog.show", "compare"});
  for (const std::string path : {"/api/v1/fit", "/api/v1/mig/check", "/api/v1/plan"}) {
    auto res = r.handle(post(path, "{}"));
    EXPECT_EQ(res.status, 404);
    EXPECT_EQ(body(res)["error"]["code"], "unknown_command");
    EXPECT_NE(body(res)["error"]["message"].get<std::string>().find("not available in this build"), std::string::npos);
  }
  auto res = r.handle(get("/api/v1/mig/a100-40gb-sxm4/profiles"));
  EXPECT_EQ(res.status, 404);
  EXPECT_EQ(body(res)["error"]["code"], "unknown_command");
}

TEST_F(RouterTest, UnknownRoutesAre404WithJson) {
  Router r = make(kAll);
  for (const std::string path : {"/api/v1/nope", "/api/v2/fit", "/api/v1/mig/x/y/z", "/nope.html", "/api"}) {
    auto res = r.handle(get(path));
    EXPECT_EQ(res.status, 404) << path;
    EXPECT_EQ(body(res)["error"]["code"], "not_found") << path;
    EXPECT_EQ(body(res)["error"]["field"], "path") << path;
  }
}

TEST_F(RouterTest, LibraryErrorsKeepTheirCodeFieldAndStatus) {
  Router r = make(kAll);
  const std::vector<std::tuple<std::string, int, std::string>> cases = {{"usage", 400, "usage"},
                                                                        {"not_found", 404, "not_found"},
                                                                        {"ambiguous", 409, "ambiguous"},
                                                                        {"layout", 422, "invalid_layout"},
                                                                        {"throw", 500, "internal"}};
  for (const auto& [fail, status, code] : cases) {
    auto res = r.handle(post("/api/v1/fit", Json{{"fail", fail}}.dump()));
    EXPECT_EQ(res.status, status) << fail;
    EXPECT_EQ(body(res)["error"]["code"], code) << fail;
  }
  auto res = r.handle(post("/api/v1/fit", R"({"fail": "usage"})"));
  EXPECT_EQ(body(res), (Json{{"error", {{"code", "usage"}, {"message", "bad option"}, {"field", "batch"}}}}));
}

TEST_F(RouterTest, MalformedJsonIs400WithWhere) {
  Router r = make(kAll);
  for (const std::string text : {"{", "{\"a\": }", "nul", "{\"a\": 1,}", "\xff\xfe", "{\"a\": \"\xc3\"}"}) {
    auto res = r.handle(post("/api/v1/fit", text));
    EXPECT_EQ(res.status, 400) << text;
    EXPECT_EQ(body(res)["error"]["code"], "usage");
    EXPECT_EQ(body(res)["error"]["field"], "body");
    EXPECT_EQ(body(res)["error"]["message"].get<std::string>().rfind("malformed JSON", 0), 0U) << res.body;
  }
}

TEST_F(RouterTest, BodyMustBeAnObject) {
  Router r = make(kAll);
  for (const std::string text : {"[1, 2]", "42", "\"fit\"", "null", "true"}) {
    auto res = r.handle(post("/api/v1/fit", text));
    EXPECT_EQ(res.status, 400) << text;
    EXPECT_NE(body(res)["error"]["message"].get<std::string>().find("must be a JSON object"), std::string::npos);
  }
}

TEST_F(RouterTest, DeepNestingIsRefusedBeforeParsing) {
  Router r = make(kAll);
  const std::string deep = "{\"a\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto res = r.handle(post("/api/v1/fit", deep));
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(body(res)["error"]["message"].get<std::string>().find("nested deeper"), std::string::npos);
  // Brackets inside strings do not count.
  EXPECT_EQ(r.handle(post("/api/v1/fit", "{\"a\": \"" + std::string(1000, '[') + "\"}")).status, 200);
}

TEST_F(RouterTest, WrongContentTypeIs415) {
  Router r = make(kAll);
  for (const std::string type : {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""}) {
    auto res = r.handle(post("/api/v1/fit", "{}", type));
    EXPECT_EQ(res.status, 415) << type;
    EXPECT_EQ(body(res)["error"]["code"], "unsupported_media_type");
  }
  EXPECT_EQ(r.handle(post("/api/v1/fit", "{}", "application/json; charset=utf-8")).status, 200);
  EXPECT_EQ(r.handle(post("/api/v1/fit", "{}", "Application/JSON")).status, 200);
}

TEST_F(RouterTest, OversizedBodyIs413) {
  Options o;
  o.max_body_bytes = 1024;
  Router r = make(kAll, o);
  auto res = r.handle(post("/api/v1/fit", "{\"a\": \"" + std::string(2000, 'x') + "\"}"));
  EXPECT_EQ(res.status, 413);
  EXPECT_EQ(body(res)["error"]["code"], "payload_too_large");
}

TEST_F(RouterTest, SlowCommandGets503AndTheServerGoesOn) {
  Options o;
  o.request_deadline = std::chrono::milliseconds(50);
  Router r = make(kAll, o);
  auto res = r.handle(post("/api/v1/fit", R"({"sleep_ms": 400})"));
  EXPECT_EQ(res.status, 503);
  EXPECT_EQ(body(res)["error"]["code"], "timeout");
  EXPECT_EQ(r.handle(post("/api/v1/fit", "{}")).status, 200);
}

TEST_F(RouterTest, OtherMethodsAre405WithoutCors) {
  Router r = make(kAll);
  for (const std::string method : {"PUT", "DELETE", "PATCH", "OPTIONS"}) {
    HttpRequest req = post("/api/v1/fit", "{}");
    req.method = method;
    auto res = r.handle(req);
    EXPECT_EQ(res.status, 405) << method;
    EXPECT_EQ(header(res, "Access-Control-Allow-Origin"), "");
    EXPECT_NE(header(res, "Allow"), "");
  }
  EXPECT_EQ(r.handle(post("/api/v1/health", "{}")).status, 405);
  EXPECT_EQ(r.handle(post("/", "{}")).status, 405);
}

TEST_F(RouterTest, ForeignHostHeaderIsRefusedOnLoopback) {
  Router r = make(kAll);
  HttpRequest req = get("/api/v1/health");
  req.host = "evil.example:8080";
  EXPECT_EQ(r.handle(req).status, 403);
  for (const std::string host : {"127.0.0.1:9", "localhost", "[::1]:8080", ""}) {
    req.host = host;
    EXPECT_EQ(r.handle(req).status, 200) << host;
  }
  Options o;
  o.host = "0.0.0.0";
  Router open = make(kAll, o);
  req.host = "gpuplan.internal:8080";
  EXPECT_EQ(open.handle(req).status, 200);
}

TEST_F(RouterTest, EveryResponseHasSecurityHeaders) {
  Router r = make(kAll);
  for (const auto& res : {r.handle(get("/")), r.handle(get("/api/v1/health")), r.handle(get("/api/v1/nope")),
                          r.handle(post("/api/v1/fit", "{"))}) {
    EXPECT_NE(header(res, "Content-Security-Policy").find("default-src 'self'"), std::string::npos);
    EXPECT_EQ(header(res, "X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(header(res, "X-Frame-Options"), "DENY");
    EXPECT_EQ(header(res, "Access-Control-Allow-Origin"), "");
  }
}

TEST_F(RouterTest, HealthListsTheCommands) {
  Router r = make({"catalog.list", "fit"});
  auto res = r.handle(get("/api/v1/health"));
  ASSERT_EQ(res.status, 200);
  EXPECT_EQ(body(res)["status"], "ok");
  EXPECT_EQ(body(res)["commands"], (Json{"catalog.list", "fit"}));
}

// The version is written once, in CMake's project(); health and the OpenAPI document (both the API
// route and the static file) carry it, never the placeholder of web/openapi.json.
TEST_F(RouterTest, HealthAndOpenApiCarryTheCMakeVersion) {
  Router r = make(kAll);
  EXPECT_EQ(body(r.handle(get("/api/v1/health")))["version"], kVersion);
  EXPECT_EQ(body(r.handle(get("/api/v1/openapi.json")))["info"]["version"], kVersion);
  EXPECT_EQ(body(r.handle(get("/openapi.json")))["info"]["version"], kVersion);
  EXPECT_EQ(r.handle(get("/openapi.json")).body.find("@GPUPLAN_VERSION@"), std::string::npos);
}

TEST_F(RouterTest, ServesThePageFromTheBinary) {
  Router r = make(kAll);
  auto page = r.handle(get("/"));
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("<html"), std::string::npos);
  const std::string etag = header(page, "ETag");
  ASSERT_FALSE(etag.empty());
  HttpRequest again = get("/");
  again.if_none_match = etag;
  EXPECT_EQ(r.handle(again).status, 304);
  EXPECT_EQ(r.handle(get("/index.html")).body, page.body);
  for (const std::string asset : {"/app.js", "/style.css"}) {
    auto res = r.handle(get(asset));
    EXPECT_EQ(res.status, 200) << asset;
  }
  EXPECT_EQ(r.handle(get("/app.js")).content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(r.handle(get("/../CMakeLists.txt")).status, 404);
  HttpRequest head = get("/");
  head.method = "HEAD";
  auto h = r.handle(head);
  EXPECT_EQ(h.status, 200);
  EXPECT_TRUE(h.body.empty());
}

TEST_F(RouterTest, OpenApiDocumentDescribesEveryRoute) {
  Router r = make(kAll);
  auto res = r.handle(get("/api/v1/openapi.json"));
  ASSERT_EQ(res.status, 200);
  Json doc = body(res);
  EXPECT_EQ(doc["openapi"].get<std::string>().substr(0, 2), "3.");
  for (const std::string path : {"/health", "/gpus", "/gpus/{id}", "/mig/{gpu}/profiles", "/mig/{gpu}/layouts", "/fit",
                                 "/perf", "/plan", "/compare", "/mig/check", "/mig/pack", "/validate", "/models"}) {
    EXPECT_TRUE(doc["paths"].contains(path)) << path;
  }
}

TEST_F(RouterTest, EveryDocumentedRouteIsServed) {
  Router r = make(kAll);
  const Json doc = body(r.handle(get("/api/v1/openapi.json")));
  for (auto it = doc["paths"].begin(); it != doc["paths"].end(); ++it) {
    std::string path = "/api/v1" + it.key();
    for (const std::string param : {"{id}", "{gpu}"}) {
      if (const size_t pos = path.find(param); pos != std::string::npos)
        path.replace(pos, param.size(), "a100-40gb-sxm4");
    }
    for (auto op = it.value().begin(); op != it.value().end(); ++op) {
      // The market's operations need a store and a token: market_loopback_test.cc walks them.
      if (op.value().value("x-gpuplan-market", false)) continue;
      auto res = op.key() == "post" ? r.handle(post(path, "{}")) : r.handle(get(path));
      EXPECT_EQ(res.status, 200) << op.key() << " " << path << ": " << res.body;
    }
  }
}

// Issue #12: the router has no command list of its own. Every command of the library's one table has
// a documented route that runs it, and a router built without it answers that route with
// unknown_command ("not in this build"), not with not_found: both read the library's table and
// web/openapi.json, so a new library command needs no router edit, only its operation in the document.
TEST_F(RouterTest, EveryLibraryCommandHasADocumentedRouteThatRunsIt) {
  Router r = make(kAll);
  Router none = make({});
  const Json doc = body(r.handle(get("/api/v1/openapi.json")));
  for (const std::string& command : gpuplan::command_names()) {
    std::string route;
    std::string method;
    for (auto it = doc["paths"].begin(); it != doc["paths"].end() && route.empty(); ++it) {
      for (auto op = it.value().begin(); op != it.value().end(); ++op) {
        std::string id = op.value().value("operationId", std::string());
        std::replace(id.begin(), id.end(), '_', '.');
        if (id != command || op.value().value("x-gpuplan-market", false)) continue;
        route = "/api/v1" + it.key();
        method = op.key();
        break;
      }
    }
    ASSERT_FALSE(route.empty()) << "the library command '" << command << "' has no operation in web/openapi.json";
    for (const std::string param : {"{id}", "{gpu}"}) {
      if (const size_t pos = route.find(param); pos != std::string::npos)
        route.replace(pos, param.size(), "a100-40gb-sxm4");
    }
    auto res = method == "post" ? r.handle(post(route, "{}")) : r.handle(get(route));
    EXPECT_EQ(res.status, 200) << method << " " << route << ": " << res.body;
    EXPECT_EQ(last().command, command) << method << " " << route;
    auto missing = method == "post" ? none.handle(post(route, "{}")) : none.handle(get(route));
    EXPECT_EQ(missing.status, 404) << route;
    EXPECT_EQ(body(missing)["error"]["code"], "unknown_command") << route << ": " << missing.body;
  }
}

// The OpenAPI document lists every workload key on the commands that take a workload, so that an
// option added to the library cannot go undocumented.
TEST_F(RouterTest, OpenApiDocumentsEveryWorkloadKey) {
  Router r = make(kAll);
  const Json doc = body(r.handle(get("/api/v1/openapi.json")));
  for (const char* path : {"/fit", "/perf", "/plan"}) {
    Json schema = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"];
    while (schema.contains("$ref")) {
      const std::string ref = schema["$ref"].get<std::string>();
      schema = doc["components"]["schemas"][ref.substr(ref.rfind('/') + 1)];
    }
    for (const auto key : gpuplan::workload_keys()) {
      EXPECT_TRUE(schema["properties"].contains(std::string(key))) << path << " lacks '" << key << "'";
    }
  }
}

// Issue #11: every operation lists the statuses the HTTP layer answers any request with (400 for
// syntax and the JSON scan, 413 for the body and the response cap, 503 busy/timeout), POSTs also 415,
// and each error response is the error schema.
TEST_F(RouterTest, OpenApiListsTheErrorStatusesOfEveryOperation) {
  Router r = make(kAll);
  const Json doc = body(r.handle(get("/api/v1/openapi.json")));
  int operations = 0;
  for (auto it = doc["paths"].begin(); it != doc["paths"].end(); ++it) {
    for (auto op = it.value().begin(); op != it.value().end(); ++op) {
      ++operations;
      const Json& responses = op.value()["responses"];
      // The market's operations answer 201 or 200 (market_loopback_test.cc checks their statuses).
      const bool market = op.value().value("x-gpuplan-market", false);
      std::vector<std::string> need = {market ? "" : "200", "400", "405", "408", "413", "414", "431", "503"};
      if (market) need.erase(need.begin());
      if (op.key() == "post") need.insert(need.end(), {"411", "415", "422"});
      if (it.key().find('{') != std::string::npos) need.insert(need.end(), {"404", "409"});
      for (const auto& code : need) {
        EXPECT_TRUE(responses.contains(code)) << op.key() << " " << it.key() << " lacks " << code;
      }
      for (auto rt = responses.begin(); rt != responses.end(); ++rt) {
        if (rt.key() == "200" || rt.key() == "201") continue;
        Json resp = rt.value();
        if (resp.contains("$ref")) {
          const std::string ref = resp["$ref"].get<std::string>();
          ASSERT_EQ(ref.rfind("#/components/responses/", 0), 0U) << ref;
          resp = doc["components"]["responses"][ref.substr(ref.rfind('/') + 1)];
        }
        EXPECT_FALSE(resp.value("description", std::string()).empty()) << it.key() << " " << rt.key();
        EXPECT_EQ(resp["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/Error")
            << op.key() << " " << it.key() << " " << rt.key();
      }
    }
  }
  EXPECT_GE(operations, 14);
  // mig.layouts answers dead_ends (src/api/mig_commands.cc).
  const Json layouts =
      doc["paths"]["/mig/{gpu}/layouts"]["get"]["responses"]["200"]["content"]["application/json"]["schema"];
  EXPECT_TRUE(layouts["properties"].contains("dead_ends")) << layouts.dump();
  // The router here runs a stand-in; the keys come from the library's command itself.
  const auto live = gpuplan::run_command(gpuplan::Context{gpuplan::Catalog::embedded()}, "mig.layouts",
                                         Json{{"gpu", "a100-40gb-sxm4"}});
  ASSERT_TRUE(live.ok()) << live.error().message;
  for (auto it = live->begin(); it != live->end(); ++it) {
    EXPECT_TRUE(layouts["properties"].contains(it.key())) << "undocumented key " << it.key();
  }
}

TEST_F(RouterTest, ManyThreadsAtOnce) {
  Router r = make(kAll);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const bool bad = (i + t) % 3 == 0;
        auto res = r.handle(post("/api/v1/fit", bad ? "{\"x\":" : "{\"x\": 1}"));
        if (res.status != (bad ? 400 : 200)) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

// Issue #11: a cross-site form never runs a command, even with an empty body.
TEST_F(RouterTest, NonJsonMediaTypeIs415EvenWithAnEmptyBody) {
  Router r = make(kAll);
  for (const std::string type : {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                                 "text/plain;charset=UTF-8"}) {
    for (const std::string text : {"", "  ", "--x--\r\n"}) {
      auto res = r.handle(post("/api/v1/fit", text, type));
      EXPECT_EQ(res.status, 415) << type << " with body '" << text << "'";
    }
  }
  EXPECT_EQ(last().command, "");  // nothing ran
  EXPECT_EQ(r.handle(post("/api/v1/fit", "", "application/json")).status, 200);
}

// Issue #11: numbers out of range were 500 (nlohmann's out_of_range escaped the parse_error catch).
TEST_F(RouterTest, NumbersOutOfRangeAre400NamingTheBody) {
  Router r = make(kAll);
  for (const std::string& number :
       std::vector<std::string>{"1e999", "-1e999", std::string(5000, '9'), "0." + std::string(5000, '0') + "1"}) {
    auto res = r.handle(post("/api/v1/fit", "{\"batch\": " + number + "}"));
    EXPECT_EQ(res.status, 400) << number.substr(0, 20);
    EXPECT_EQ(body(res)["error"]["code"], "usage");
    EXPECT_EQ(body(res)["error"]["field"], "body");
    EXPECT_LT(res.body.size(), 1000U) << "the message must not echo the number";
  }
  EXPECT_EQ(r.handle(post("/api/v1/fit", R"({"batch": 1.7976931348623157e308, "b": -12345678901234567})")).status, 200);
}

// Issue #11: a 1 MB body of 100,000 keys cost 9 s of CPU (ordered_json's linear-search insert) before
// its 400. The scan refuses it at key 1,001; a generous bound of 1 s fails the old code ninefold.
TEST_F(RouterTest, ManyKeysAreRefusedBeforeParsing) {
  Router r = make(kAll);
  std::string many = "{";
  for (int i = 0; i < 100000; ++i) many += (i ? ",\"" : "\"") + std::to_string(i) + "\":0";
  many += "}";
  ASSERT_LT(many.size(), 1U << 20);
  const auto start = std::chrono::steady_clock::now();
  auto res = r.handle(post("/api/v1/fit", many));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(res.status, 400);
  EXPECT_EQ(body(res)["error"]["field"], "body");
  EXPECT_NE(body(res)["error"]["message"].get<std::string>().find("1000 keys"), std::string::npos) << res.body;
  EXPECT_LT(took, std::chrono::seconds(1));
  // Many values in total, spread over small objects, are bounded too.
  std::string wide = "{\"a\": [";
  for (int i = 0; i < 30000; ++i) wide += i ? ",{}" : "{}";
  wide += "]}";
  auto res2 = r.handle(post("/api/v1/fit", wide));
  EXPECT_EQ(res2.status, 400);
  EXPECT_NE(body(res2)["error"]["message"].get<std::string>().find("20000 values"), std::string::npos) << res2.body;
  // Within the bounds: parsed and run.
  std::string fine = "{";
  for (int i = 0; i < 900; ++i) fine += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
  EXPECT_EQ(r.handle(post("/api/v1/fit", fine + "}")).status, 200);
}

// Issue #11: the result's size is capped (compare of 50,000 copies of one GPU returned 96 MB).
TEST_F(RouterTest, ResponsesOverTheCapAre413Limit) {
  Options o;
  o.max_response_bytes = 64 * 1024;
  Router r = make(kAll, o);
  auto res = r.handle(post("/api/v1/compare", R"({"results": 1000})"));
  EXPECT_EQ(res.status, 413);
  EXPECT_EQ(body(res)["error"]["code"], "limit");
  EXPECT_NE(body(res)["error"]["message"].get<std::string>().find("65536 bytes"), std::string::npos) << res.body;
  EXPECT_NE(body(res)["error"]["message"].get<std::string>().find("ask for fewer"), std::string::npos);
  EXPECT_EQ(r.handle(post("/api/v1/compare", R"({"results": 100})")).status, 200);
}

// Issue #11: at the deadline the command's token fires, so a command that checks cancel_requested()
// stops and its worker is free for the next request (before, it ran on after the 503).
TEST_F(RouterTest, TheDeadlineCancelsTheCommand) {
  Options o;
  o.request_deadline = std::chrono::milliseconds(100);
  Router r = make(kAll, o);  // two workers
  for (int i = 0; i < 6; ++i) {
    auto res = r.handle(post("/api/v1/plan", R"({"spin_until_cancelled": true})"));
    EXPECT_EQ(res.status, 503);
    EXPECT_EQ(body(res)["error"]["code"], "timeout");
  }
  // Without cancellation both workers would spin forever and this would time out too.
  auto res = r.handle(post("/api/v1/fit", "{}"));
  EXPECT_EQ(res.status, 200) << res.body;
  for (int i = 0; i < 100 && spun_out_.load() < 6; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(spun_out_.load(), 6);
}

TEST_F(RouterTest, LightAndHeavyLanes) {
  Router r = make(kAll);
  EXPECT_EQ(r.plan(get("/api/v1/gpus/a40")).lane, Router::Lane::kLight);
  EXPECT_EQ(r.plan(get("/api/v1/gpus")).lane, Router::Lane::kLight);
  EXPECT_EQ(r.plan(get("/api/v1/mig/a100-40gb-sxm4/profiles")).lane, Router::Lane::kLight);
  EXPECT_EQ(r.plan(post("/api/v1/fit", "{}")).lane, Router::Lane::kHeavy);
  EXPECT_EQ(r.plan(post("/api/v1/gpus/a40", std::string(10000, ' '))).lane, Router::Lane::kHeavy);
  EXPECT_TRUE(r.plan(get("/api/v1/health")).now.has_value());
  EXPECT_TRUE(r.plan(get("/")).now.has_value());
  EXPECT_FALSE(r.plan(post("/api/v1/fit", "{")).now.has_value());  // the body is parsed on a worker
  EXPECT_EQ(r.plan(post("/api/v1/fit", "{}", "text/plain")).now->status, 415);
}

}  // namespace
}  // namespace gpuplan::server
