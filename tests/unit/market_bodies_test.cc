// The market's request bodies are read through the one typed reader (core/request.h) by their
// declaration in data/options.yaml (issue #12): strictly ("3" is not a number, strings bounded by their
// max_length with kLimit naming field and limit), keys a body does not declare ignored (issue #13's
// "more keys are welcome"), and every key the routes read is a declared one.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "core/request.h"
#include "gpuplan/market.h"
#include "gpuplan/options.h"
#include "market_fixture.h"
#include "server/market_routes.h"
#include "server/server.h"

namespace gpuplan::server {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Json openapi() { return Json::parse(read_text(std::string(GPUPLAN_SOURCE_DIR) + "/web/openapi.json")); }

const OptionTable& table() {
  auto t = option_table();
  EXPECT_TRUE(t.ok()) << (t ? "" : t.error().message);
  static OptionTable empty;
  return t ? **t : empty;
}

// The market's operations with a request body: command (operationId with '.' for '_') -> (method,
// path, documented example).
struct BodyOperation {
  std::string command, method, path;
  Json example;
};
std::vector<BodyOperation> body_operations() {
  std::vector<BodyOperation> out;
  const Json doc = openapi();
  for (const auto& [path, item] : doc["paths"].items()) {
    for (const auto& [method, op] : item.items()) {
      if (!op.is_object() || !op.value("x-gpuplan-market", false) || !op.contains("requestBody")) continue;
      std::string command = op.value("operationId", "");
      std::replace(command.begin(), command.end(), '_', '.');
      const Json& content = op["requestBody"]["content"]["application/json"];
      out.push_back({command, method, path, content.value("example", Json::object())});
    }
  }
  return out;
}

class MarketBodies : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string skip;
    auto db = market::testing::make_store("sqlite", &skip);
    ASSERT_NE(db, nullptr) << skip;
    ASSERT_TRUE(world_.init(std::move(db)));
    auto token = world_.market->create_token(world_.platform, world_.platform.user_id);
    ASSERT_TRUE(token.ok()) << token.error().message;
    platform_ = "Bearer " + token->token;
  }

  // One call of the routes as the platform admin.
  HttpResponse call(const std::string& method, std::string path, const Json& body) {
    if (const size_t id = path.find("{id}"); id != std::string::npos) path.replace(id, 4, world_.a_id);
    HttpRequest req;
    req.method = method;
    req.path = "/api/v1" + path;
    req.authorization = platform_;
    std::vector<std::string> segs;
    for (size_t start = 1; start <= path.size();) {
      size_t slash = path.find('/', start);
      if (slash == std::string::npos) slash = path.size();
      segs.push_back(path.substr(start, slash - start));
      start = slash + 1;
    }
    return market_response(*world_.market, req, segs, body);
  }
  static Json error_of(const HttpResponse& r) {
    const Json j = Json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"] : Json::object();
  }

  market::testing::World world_;
  std::string platform_;
};

// The reproduction: a count written as a string is refused, naming the field (the planner's
// commands still read "3" as 3: their requests come from forms and the CLI).
TEST_F(MarketBodies, AStringIsNotANumber) {
  const HttpResponse r = call("POST", "/rentals", Json{{"offer", "off_x"}, {"count", "3"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(error_of(r)["code"], "usage");
  EXPECT_EQ(error_of(r)["field"], "count");
  EXPECT_NE(error_of(r)["message"].get<std::string>().find("whole number"), std::string::npos) << r.body;
  for (const Json& bad : {Json("3"), Json(3.0), Json(true), Json::array({3})}) {
    auto count = Request(Json{{"count", bad}}, "market.rent").whole("count");
    ASSERT_FALSE(count.ok()) << bad.dump();
    EXPECT_EQ(count.error().code, ErrorCode::kUsage);
    EXPECT_EQ(count.error().field, "count");
  }
  auto hours = Request(Json{{"hours", "2"}}, "market.rent").real("hours");
  ASSERT_FALSE(hours.ok());
  EXPECT_EQ(hours.error().field, "hours");
  auto name = Request(Json{{"name", 7}}, "market.create.tenant").text("name");
  ASSERT_FALSE(name.ok());
  EXPECT_EQ(name.error().field, "name");
  EXPECT_EQ(*Request(Json{{"batch", "3"}}, "fit").whole("batch"), 3);
}

// An over-long name is kLimit (413), naming the field and the limit.
TEST_F(MarketBodies, AnOverLongNameIsRefusedWithTheLimit) {
  const std::string long_name(market::kMaxNameBytes + 1, 'a');
  const HttpResponse r = call("POST", "/tenants", Json{{"name", long_name}});
  EXPECT_EQ(r.status, 413) << r.body;
  const Json e = error_of(r);
  EXPECT_EQ(e["code"], "limit");
  EXPECT_EQ(e["field"], "name");
  EXPECT_NE(e["message"].get<std::string>().find(std::to_string(market::kMaxNameBytes)), std::string::npos) << r.body;
  auto direct = Request(Json{{"name", long_name}}, "market.create.tenant").text("name");
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(direct.error().code, ErrorCode::kLimit);
  // At the limit it passes.
  EXPECT_TRUE(Request(Json{{"name", long_name.substr(1)}}, "market.create.tenant").text("name").ok());
  // A GPU's item is bounded too, its field the item's path.
  const Json node{{"name", "n1"},
                  {"region", "eu-west"},
                  {"gpus", Json::array({Json{{"target", "a100-80gb-sxm4"}, {"uuid", long_name}}})}};
  const HttpResponse g = call("POST", "/nodes", node);
  EXPECT_EQ(g.status, 413) << g.body;
  EXPECT_EQ(error_of(g)["field"], "gpus[0].uuid");
  // Too many GPUs: kLimit on gpus.
  Json many = node;
  many["gpus"] = Json::array();
  for (int i = 0; i <= market::kMaxGpusPerNode; ++i) many["gpus"].push_back(Json{{"target", "x"}, {"uuid", "u"}});
  const HttpResponse m = call("POST", "/nodes", many);
  EXPECT_EQ(m.status, 413) << m.body;
  EXPECT_EQ(error_of(m)["field"], "gpus");
}

// Required keys are refused when absent, naming the key; null reads as absent.
TEST_F(MarketBodies, RequiredKeysAreRefusedWhenAbsent) {
  const HttpResponse r = call("POST", "/offers", Json{{"target", "a100-80gb-sxm4"}, {"region", "eu-west"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(error_of(r)["field"], "price_per_hour");
  const HttpResponse n = call("POST", "/tenants", Json{{"name", nullptr}});
  EXPECT_EQ(n.status, 400) << n.body;
  EXPECT_EQ(error_of(n)["field"], "name");
  const HttpResponse g = call("POST", "/nodes", Json{{"name", "n1"}, {"region", "eu-west"}});
  EXPECT_EQ(g.status, 400) << g.body;
  EXPECT_EQ(error_of(g)["field"], "gpus");
}

// As before the fold, a body's other keys are ignored (issue #13: "more keys are welcome").
TEST_F(MarketBodies, KeysABodyDoesNotDeclareAreIgnored) {
  const HttpResponse r = call("POST", "/tenants", Json{{"name", "extra"}, {"kind", "renter"}, {"colour", "red"}});
  EXPECT_EQ(r.status, 201) << r.body;
}

// Every key of every market body is read by its route through the declaration: each declared key, given
// a value of no declared type, is refused naming that key (so the route reads it, by the declaration), and
// the documented example goes through every read without an internal error (reading an undeclared key
// is one: a strict command has no fallback declaration).
TEST_F(MarketBodies, EveryKeyTheRoutesReadIsDeclared) {
  const auto ops = body_operations();
  EXPECT_GE(ops.size(), 6u);
  std::set<std::string> walked;
  for (const auto& op : ops) {
    std::string method = op.method;  // "post", "put" (/agent/inventory)
    for (char& ch : method) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    const auto keys = table().of_command(op.command);
    ASSERT_FALSE(keys.empty()) << op.command << " (" << op.path << ") has no declaration in data/options.yaml";
    EXPECT_TRUE(table().strict(op.command)) << op.command;
    walked.insert(op.command);
    const HttpResponse ok = call(method, op.path, op.example);
    EXPECT_LT(ok.status, 500) << op.command << ": " << ok.body;
    for (const OptionSpec* o : keys) {
      Json body = op.example;
      body[o->name] = Json::object({{"not", "a value"}});
      const HttpResponse bad = call(method, op.path, body);
      EXPECT_EQ(bad.status, 400) << op.command << " " << o->name << ": " << bad.body;
      EXPECT_EQ(error_of(bad)["field"], o->name) << op.command << ": " << bad.body;
      if (o->items.empty()) continue;
      // The items' keys, in the example's first item.
      for (const OptionSpec* item_key : table().of_command(o->items)) {
        Json nested = op.example;
        ASSERT_FALSE(nested[o->name].empty()) << op.command << ": the example has no " << o->name;
        nested[o->name][0][item_key->name] = Json::object({{"not", "a value"}});
        const HttpResponse r = call(method, op.path, nested);
        EXPECT_EQ(r.status, 400) << o->items << " " << item_key->name << ": " << r.body;
        EXPECT_EQ(error_of(r)["field"], o->name + "[0]." + item_key->name) << r.body;
        if (item_key->items.empty()) continue;
        // A list inside the items (an inventory GPU's instances): its keys, in the first item's first.
        for (const OptionSpec* inner : table().of_command(item_key->items)) {
          Json deep = op.example;
          ASSERT_FALSE(deep[o->name][0][item_key->name].empty()) << op.command << ": no " << item_key->name;
          deep[o->name][0][item_key->name][0][inner->name] = Json::object({{"not", "a value"}});
          const HttpResponse d = call(method, op.path, deep);
          EXPECT_EQ(d.status, 400) << item_key->items << " " << inner->name << ": " << d.body;
          EXPECT_EQ(error_of(d)["field"], o->name + "[0]." + item_key->name + "[0]." + inner->name) << d.body;
        }
        walked.insert(item_key->items);
      }
      walked.insert(o->items);
    }
  }
  // Every declared market command is a body some route reads.
  for (const auto& c : table().commands()) {
    if (table().strict(c)) EXPECT_TRUE(walked.count(c)) << c << " is declared but no documented body reads it";
  }
}

// The routes have no typed reader of their own: each body is a Request of its declared command.
TEST_F(MarketBodies, TheRoutesReadBodiesOnlyThroughTheDeclaration) {
  // The market's routes and the node agent's (issue #15).
  const std::string routes = read_text(std::string(GPUPLAN_SOURCE_DIR) + "/src/server/market_routes.cc") +
                             read_text(std::string(GPUPLAN_SOURCE_DIR) + "/src/server/agent_routes.cc");
  ASSERT_FALSE(routes.empty());
  for (const auto& op : body_operations()) {
    EXPECT_NE(routes.find("(body, \"" + op.command + "\")"), std::string::npos)
        << "market_routes.cc does not read " << op.path << " as Request(body, \"" << op.command << "\")";
  }
  for (const char* other :
       {"body[", "body.contains(", "body.at(", "body.value(", "text_field", "int_field", "number_field"}) {
    EXPECT_EQ(routes.find(other), std::string::npos) << "market_routes.cc reads a body with " << other;
  }
}

// The declared bounds are the market's own constants (data/options.yaml says which).
TEST(MarketBodiesDeclaration, BoundsAreTheMarketsConstants) {
  for (const auto& o : table().all()) {
    if (!o.commands.empty() && o.commands.front().starts_with("market.") && o.max_length > 0) {
      // The agent's bench carries a calibration file's text: bounded by the server's body cap (server.h
      // Options::max_body_bytes, 1 MiB); a heartbeat's failure message by kMaxFailureMessageBytes; every
      // other string by the market's name bound.
      const size_t bound = o.name == "calibration" ? size_t{1} << 20
                           : o.name == "message"   ? market::kMaxFailureMessageBytes
                                                   : market::kMaxNameBytes;
      EXPECT_EQ(o.max_length, bound) << o.name;
    }
  }
  const OptionSpec* gpus = table().find("gpus", "market.add.node");
  ASSERT_NE(gpus, nullptr);
  EXPECT_EQ(gpus->max_items, static_cast<size_t>(market::kMaxGpusPerNode));
  const OptionSpec* count = table().find("count", "market.rent");
  ASSERT_NE(count, nullptr);
  EXPECT_EQ(count->range.max.value_or(-1), market::kMaxRentCount);
  const OptionSpec* min_s = table().find("min_billable_seconds", "market.create.offer");
  ASSERT_NE(min_s, nullptr);
  EXPECT_EQ(min_s->range.max.value_or(-1), static_cast<double>(market::kMaxMinBillableSeconds));
  const OptionSpec* price = table().find("price_per_hour", "market.create.offer");
  ASSERT_NE(price, nullptr);
  constexpr double kMicrosPerUnit = 1e6;  // prices travel in units, the store keeps micro-units
  EXPECT_EQ(price->range.max.value_or(-1), static_cast<double>(market::kMaxPriceMicrosPerHour) / kMicrosPerUnit);
}

}  // namespace
}  // namespace gpuplan::server
