// The real server on an ephemeral 127.0.0.1 port, in-process, over the embedded catalog: every
// endpoint, good and bad input, and hostile connections that must not stop it from answering.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "raw_http.h"
#include "server/server.h"

namespace gpuplan::server {
namespace {

using namespace std::chrono_literals;

class Loopback : public ::testing::Test {
 protected:
  // The server's request deadline and the client's read timeout. An empty validate request predicts every
  // row: 1.7 s in Release, 13 s under the ASan+UBSan Debug build, past the default 10 s sized for Release.
#ifdef GPUPLAN_SANITIZED_BUILD
  static constexpr std::chrono::seconds kDeadline{60};
#else
  static constexpr std::chrono::seconds kDeadline{10};
#endif
  static void SetUpTestSuite() {
    ctx_ = new Context{Catalog::embedded()};
    Options o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.threads = 4;
    o.header_timeout = std::chrono::seconds(1);
    o.request_deadline = kDeadline;
    server_ = new Server(make_router(*ctx_, o));
    auto port = server_->bind();
    ASSERT_TRUE(port.ok());
    port_ = *port;
    thread_ = new std::thread([] { server_->run(); });
    httplib::Client c("127.0.0.1", port_);
    for (int i = 0; i < 100 && !c.Get("/api/v1/health"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  static void TearDownTestSuite() {
    server_->stop();
    thread_->join();
    delete thread_;
    delete server_;
    delete ctx_;
  }
  static httplib::Client client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(kDeadline);
    return c;
  }
  static Json json(const httplib::Result& r) { return Json::parse(r->body); }
  static bool has(const std::string& command) {
    const auto names = command_names();
    return std::find(names.begin(), names.end(), command) != names.end();
  }
  // Sends raw bytes and returns what came back (empty when the server closed without answering).
  static std::string raw(const std::string& bytes) { return test_http::roundtrip(port_, bytes, 5s); }

  static inline Context* ctx_ = nullptr;
  static inline Server* server_ = nullptr;
  static inline std::thread* thread_ = nullptr;
  static inline int port_ = 0;
};

TEST_F(Loopback, Health) {
  auto r = client().Get("/api/v1/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json(r)["status"], "ok");
  EXPECT_EQ(json(r)["commands"].size(), command_names().size());
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
}

TEST_F(Loopback, CatalogListIsTheSameDocumentAsTheLibrary) {
  auto r = client().Get("/api/v1/gpus");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  auto direct = run_command(*ctx_, "catalog.list", Json::object());
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(json(r), *direct);
  bool a100 = false;
  const Json list = json(r);
  for (const auto& g : list["gpus"]) a100 = a100 || g["id"] == "a100-40gb-sxm4";
  EXPECT_TRUE(a100);
}

TEST_F(Loopback, CatalogListFilters) {
  auto r = client().Get("/api/v1/gpus?min-memory-gb=80&include_mig=true");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const Json list = json(r);
  for (const auto& g : list["gpus"]) EXPECT_GE(g["memory_gb"].get<double>(), 80) << g["id"];
  auto bad = client().Get("/api/v1/gpus?min_memory_gb=lots");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json(bad)["error"]["field"], "min_memory_gb");
  auto typo = client().Get("/api/v1/gpus?vendr=nvidia");
  ASSERT_TRUE(typo);
  EXPECT_EQ(typo->status, 400);
  EXPECT_EQ(json(typo)["error"]["code"], "usage");
}

TEST_F(Loopback, ShowGpuAndMigProfile) {
  auto r = client().Get("/api/v1/gpus/a100-40gb-sxm4?explain=true");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(json(r)["id"], "a100-40gb-sxm4");
  EXPECT_TRUE(json(r)["specs"]["memory_bandwidth_gbps"].contains("explain"));
  EXPECT_TRUE(json(r)["specs"]["memory_bandwidth_gbps"]["source"].contains("url"));
  auto mig = client().Get("/api/v1/gpus/a100-40gb-sxm4/3g.20gb");
  ASSERT_TRUE(mig);
  ASSERT_EQ(mig->status, 200);
  EXPECT_EQ(json(mig)["id"], "a100-40gb-sxm4/3g.20gb");
  EXPECT_EQ(json(mig)["parent"], "a100-40gb-sxm4");
  auto encoded = client().Get("/api/v1/gpus/a100-40gb-sxm4%2F3g.20gb");
  ASSERT_TRUE(encoded);
  EXPECT_EQ(encoded->status, 200);
}

TEST_F(Loopback, UnknownAndAmbiguousGpus) {
  auto r = client().Get("/api/v1/gpus/no-such-gpu-9000");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json(r)["error"]["code"], "not_found");
  EXPECT_NE(json(r)["error"]["message"].get<std::string>().find("no-such-gpu-9000"), std::string::npos);
  auto a = client().Get("/api/v1/gpus/a100");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 409);
  EXPECT_EQ(json(a)["error"]["code"], "ambiguous");
  auto p = client().Get("/api/v1/gpus/a100-40gb-sxm4/9g.99gb");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->status, 404);
}

TEST_F(Loopback, CompareByPostAndGet) {
  const Json req{{"gpu", {"a100-40gb-sxm4", "a40"}}};
  auto r = client().Post("/api/v1/compare", req.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  auto direct = run_command(*ctx_, "compare", req);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(json(r), *direct);
  auto g = client().Get("/api/v1/compare?gpu=a100-40gb-sxm4&gpu=a40");
  ASSERT_TRUE(g);
  EXPECT_EQ(json(g), *direct);
}

TEST_F(Loopback, CompareBadInput) {
  struct Case {
    std::string body;
    int status;
    std::string code;
  };
  for (const auto& c : std::vector<Case>{{R"({"gpu": []})", 400, "usage"},
                                         {R"({"gpu": 5})", 400, "usage"},
                                         {R"({"gpu": [{"a": 1}]})", 400, "usage"},
                                         {R"({"gpus": ["a40"]})", 400, "usage"},
                                         {R"({"gpu": ["a40", "no-such-gpu"]})", 404, "not_found"},
                                         {R"({"gpu": ["a40")", 400, "usage"}}) {
    auto r = client().Post("/api/v1/compare", c.body, "application/json");
    ASSERT_TRUE(r) << c.body;
    EXPECT_EQ(r->status, c.status) << c.body << " -> " << r->body;
    EXPECT_EQ(json(r)["error"]["code"], c.code) << c.body;
    EXPECT_FALSE(json(r)["error"]["message"].get<std::string>().empty());
  }
}

TEST_F(Loopback, HugeBodyIs413) {
  const std::string big = "{\"gpu\": \"" + std::string(2 << 20, 'a') + "\"}";
  auto r = client().Post("/api/v1/compare", big, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(json(r)["error"]["code"], "payload_too_large");
  EXPECT_TRUE(client().Get("/api/v1/health"));
}

TEST_F(Loopback, WrongContentTypeIs415) {
  auto r = client().Post("/api/v1/compare", R"({"gpu": ["a40"]})", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 415);
  auto form = client().Post("/api/v1/compare", "gpu=a40", "application/x-www-form-urlencoded");
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 415);
}

TEST_F(Loopback, UnknownRoutesAndMissingCommands) {
  auto r = client().Get("/api/v1/frobnicate");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json(r)["error"]["code"], "not_found");
  auto page = client().Get("/no-such-page.html");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 404);
  for (const std::string command : {"fit", "perf", "plan", "mig/check", "mig/pack", "validate"}) {
    std::string name = command;
    std::replace(name.begin(), name.end(), '/', '.');
    auto res = client().Post("/api/v1/" + command, "{}", "application/json");
    ASSERT_TRUE(res) << command;
    if (!has(name)) {
      EXPECT_EQ(res->status, 404) << command;
      EXPECT_EQ(json(res)["error"]["code"], "unknown_command") << command;
    } else {
      // Present: an empty request is answered, with a result or a 4xx that says what is missing.
      EXPECT_LT(res->status, 500) << command << ": " << res->body;
      EXPECT_TRUE(json(res).is_object()) << command;
    }
  }
  for (const std::string what : {"profiles", "layouts"}) {
    auto res = client().Get("/api/v1/mig/a100-40gb-sxm4/" + what);
    ASSERT_TRUE(res);
    if (!has("mig." + what)) {
      EXPECT_EQ(res->status, 404);
    } else {
      EXPECT_EQ(res->status, 200) << res->body;
      auto unknown = client().Get("/api/v1/mig/no-such-gpu/" + what);
      ASSERT_TRUE(unknown);
      EXPECT_EQ(unknown->status, 404) << unknown->body;
    }
  }
}

TEST_F(Loopback, FitWhenPresent) {
  if (!has("fit")) GTEST_SKIP() << "fit is not in this build";
  auto unknown =
      client().Post("/api/v1/fit", R"({"model": "no-such-model-xyz", "gpu": ["a100-40gb-sxm4"]})", "application/json");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404) << unknown->body;
  auto wrong = client().Post("/api/v1/fit", R"({"model": "llama-2-7b", "gpu": ["a100-40gb-sxm4"], "batch": "many"})",
                             "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 400) << wrong->body;
}

TEST_F(Loopback, FitIsTheLibrarysDocument) {
  if (!has("fit")) GTEST_SKIP() << "fit is not in this build";
  const Json req{{"model", "llama-2-7b"}, {"weights", "bf16"}, {"gpu", {"a100-40gb-sxm4"}}, {"batch", 1}};
  auto r = client().Post("/api/v1/fit", req.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto direct = run_command(*ctx_, "fit", req);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(json(r), *direct);
  // An uploaded config.json goes inline as 'config'.
  const Json config{{"architectures", {"LlamaForCausalLM"}},
                    {"model_type", "llama"},
                    {"hidden_size", 2048},
                    {"intermediate_size", 5632},
                    {"num_attention_heads", 32},
                    {"num_hidden_layers", 22},
                    {"num_key_value_heads", 4},
                    {"vocab_size", 32000},
                    {"max_position_embeddings", 2048},
                    {"rms_norm_eps", 1e-5},
                    {"tie_word_embeddings", false},
                    {"torch_dtype", "bfloat16"}};
  auto up = client().Post("/api/v1/fit", Json{{"model", "tiny"}, {"config", config}, {"gpu", "l4"}}.dump(),
                          "application/json");
  ASSERT_TRUE(up);
  EXPECT_EQ(up->status, 200) << up->body;
  // A path is not read: models come from the zoo or inline.
  auto path = client().Post("/api/v1/fit", R"({"model": "/etc/hostname", "gpu": "l4"})", "application/json");
  ASSERT_TRUE(path);
  EXPECT_EQ(path->status, 404) << path->body;
  auto bad = client().Post("/api/v1/fit", R"({"model": "x", "config": [1, 2]})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  EXPECT_EQ(json(bad)["error"]["field"], "config");
}

TEST_F(Loopback, MigEndpointsWhenPresent) {
  if (!has("mig.check")) GTEST_SKIP() << "mig is not in this build";
  auto profiles = client().Get("/api/v1/mig/a100-40gb-sxm4/profiles");
  ASSERT_TRUE(profiles);
  EXPECT_EQ(profiles->status, 200) << profiles->body;
  auto layouts = client().Get("/api/v1/mig/a100-40gb-sxm4/layouts?maximal=true");
  ASSERT_TRUE(layouts);
  EXPECT_EQ(layouts->status, 200) << layouts->body;
  auto valid = client().Post("/api/v1/mig/check", R"({"gpu": "a100-40gb-sxm4", "layout": "3g.20gb@4,4g.20gb@0"})",
                             "application/json");
  ASSERT_TRUE(valid);
  ASSERT_EQ(valid->status, 200) << valid->body;
  EXPECT_EQ(json(valid)["valid"], true);
  auto invalid = client().Post("/api/v1/mig/check", R"({"gpu": "a100-40gb-sxm4", "layout": "3g.20gb@4,3g.20gb@5"})",
                               "application/json");
  ASSERT_TRUE(invalid);
  ASSERT_LT(invalid->status, 500) << invalid->body;
  if (invalid->status == 200) {
    EXPECT_EQ(json(invalid)["valid"], false);
    EXPECT_FALSE(json(invalid)["reason"].get<std::string>().empty());
  }
  auto wrong = client().Post("/api/v1/mig/check", R"({"gpu": "a100-40gb-sxm4", "layout": {"profile": "3g.20gb"}})",
                             "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 400) << wrong->body;
  auto no_mig = client().Post("/api/v1/mig/check", R"({"gpu": "a40", "layout": "1g.6gb"})", "application/json");
  ASSERT_TRUE(no_mig);
  EXPECT_GE(no_mig->status, 400);
  EXPECT_LT(no_mig->status, 500);
  if (!has("mig.pack")) return;
  const Json pack{{"fleet", "nodes:\n  - name: n1\n    gpus:\n      - {target: a100-40gb-sxm4, count: 2}\n"},
                  {"requests", "requests:\n  - {name: chat, count: 3, profile: 3g.20gb}\n"},
                  {"export", "mig-parted"}};
  auto packed = client().Post("/api/v1/mig/pack", pack.dump(), "application/json");
  ASSERT_TRUE(packed);
  ASSERT_EQ(packed->status, 200) << packed->body;
  EXPECT_EQ(json(packed)["gpus_used"], 2);
  EXPECT_FALSE(json(packed)["export"]["text"].get<std::string>().empty());
  auto broken =
      client().Post("/api/v1/mig/pack", R"({"fleet": "nodes: [", "requests": "requests: []"})", "application/json");
  ASSERT_TRUE(broken);
  EXPECT_GE(broken->status, 400) << broken->body;
  EXPECT_LT(broken->status, 500) << broken->body;
}

// `gpuplan serve --offers FILE`: the file's offers stand in for the shipped snapshot, unless a
// request brings its own.
TEST_F(Loopback, ServerOffersFileIsTheDefault) {
  if (!has("offers.list")) GTEST_SKIP() << "offers are not in this build";
  const std::string csv =
      "provider,region,offer,gpu,gpus,interconnect,vcpus,ram_gb,price_hour,spot_price_hour,currency,available,"
      "captured_at,source\n"
      "testcloud,lab-1,box-a40,a40,1,pcie,8,64,0.5,,USD,yes,2026-11-01,https://example.com/prices\n";
  Options o;
  o.threads = 2;
  o.default_offers = Json::array({Json{{"name", "mine.csv"}, {"text", csv}}});
  Router router = make_router(*ctx_, o);
  HttpRequest req;
  req.method = "GET";
  req.path = "/api/v1/offers";
  req.query = {{"now", "2026-11-30"}};
  auto res = router.handle(req);
  ASSERT_EQ(res.status, 200) << res.body;
  const Json list = Json::parse(res.body);
  ASSERT_EQ(list["offers"].size(), 1U) << res.body;
  EXPECT_EQ(list["offers"][0]["provider"], "testcloud");
  // A request's own offers win.
  req.method = "POST";
  req.content_type = "application/json";
  req.body =
      Json{{"offers", csv + "testcloud,lab-2,box-l4,l4,1,pcie,8,64,0.3,,USD,yes,2026-11-01,https://example.com/p\n"},
           {"now", "2026-11-30"}}
          .dump();
  req.path = "/api/v1/offers/list";
  res = router.handle(req);
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(Json::parse(res.body)["offers"].size(), 2U);
  // compare prices with the file when asked for value metrics.
  req.path = "/api/v1/compare";
  req.body = Json{{"gpu", {"a40"}}, {"spot", false}, {"now", "2026-11-30"}}.dump();
  res = router.handle(req);
  ASSERT_EQ(res.status, 200) << res.body;
  const Json cmp = Json::parse(res.body);
  if (cmp["targets"][0].contains("value")) EXPECT_EQ(cmp["targets"][0]["value"]["offer"], "testcloud/lab-1/box-a40");
}

TEST_F(Loopback, TheSecurityHeadersAndNoCors) {
  httplib::Headers h = {{"Origin", "http://evil.example"}};
  auto r = client().Get("/api/v1/gpus", h);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
  EXPECT_EQ(r->get_header_value_count("Content-Security-Policy"), 1U);
  auto opt = client().Options("/api/v1/fit", h);
  ASSERT_TRUE(opt);
  EXPECT_EQ(opt->status, 405);
  EXPECT_FALSE(opt->has_header("Access-Control-Allow-Origin"));
  httplib::Headers rebinding = {{"Host", "attacker.example"}};
  auto reb = client().Get("/api/v1/health", rebinding);
  ASSERT_TRUE(reb);
  EXPECT_EQ(reb->status, 403);
}

TEST_F(Loopback, GarbageConnectionsDoNotStopTheServer) {
  EXPECT_NE(raw("GARBAGE\r\n\r\n").find("400"), std::string::npos);
  raw("GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{");  // body never finishes
  raw(std::string(10000, 'A'));
  EXPECT_NE(raw("GET /" + std::string(10000, 'a') + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").find("414"),
            std::string::npos);
  EXPECT_NE(raw("POST /api/v1/compare HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                "Content-Length: 99999999999\r\n\r\n{")
                .find("413"),
            std::string::npos);
  EXPECT_NE(raw("POST /api/v1/compare HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n\r\nzz\r\n")
                .find("HTTP/1.1 4"),
            std::string::npos);
  auto r = client().Get("/api/v1/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(Loopback, ConcurrentGoodAndBadRequests) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      auto c = client();
      for (int i = 0; i < 30; ++i) {
        const int kind = (i + t) % 3;
        httplib::Result r =
            kind == 0   ? c.Get("/api/v1/gpus")
            : kind == 1 ? c.Post("/api/v1/compare", "{\"gpu\": [", "application/json")
                        : c.Post("/api/v1/compare", R"({"gpu": ["a40", "a100-40gb-sxm4"]})", "application/json");
        const int want = kind == 1 ? 400 : 200;
        if (!r || r->status != want) {
          ++wrong;
          ADD_FAILURE() << "kind " << kind << ": "
                        << (r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error()));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace gpuplan::server
