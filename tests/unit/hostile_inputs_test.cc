// Hostile and mistaken inputs (issue #11, inputs): every one is refused with an error that names the
// field, never a crash, a huge allocation or a number that is not an answer. Each test reproduces a
// report: on the code before the fix the first ones corrupted the heap or died of SIGFPE, the others
// printed negative or infinite figures that "fit" or "meet the goal".
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/request.h"
#include "gpuplan/api.h"
#include "gpuplan/model.h"
#include "gpuplan/offers.h"
#include "gpuplan/plan.h"

namespace gpuplan {
namespace {

// The issue's base config (CFG) plus 32 heads, which the reports add or replace.
Json base_config() {
  return Json{{"model_type", "llama"}, {"hidden_size", 4096},        {"num_hidden_layers", 32},
              {"vocab_size", 32000},   {"intermediate_size", 11008}, {"num_attention_heads", 32}};
}

Context context() { return Context{Catalog::embedded()}; }

Result<Json> fit_config(const Json& config, Json extra = Json::object()) {
  Json request{{"model", "hostile"}, {"config", config}, {"gpu", "a40"}};
  for (auto it = extra.begin(); it != extra.end(); ++it) request[it.key()] = it.value();
  return run_command(context(), "fit", request);
}

// A refusal with this code naming this field (and, when given, mentioning `text`).
void expect_refused(const Result<Json>& r, ErrorCode code, const std::string& field, const std::string& text = "") {
  ASSERT_FALSE(r.ok()) << r->dump();
  EXPECT_EQ(r.error().code, code) << r.error().message;
  EXPECT_EQ(r.error().field, field) << r.error().message;
  if (!text.empty()) {
    EXPECT_NE(r.error().message.find(text), std::string::npos) << r.error().message;
  }
}

// ---- config.json: heap write, division by zero, unbounded allocation --------------------------

TEST(HostileConfig, NegativeMaxWindowLayersIsRefusedNotAHeapWrite) {
  Json c = base_config();
  c["model_type"] = "qwen2";
  c["use_sliding_window"] = true;
  c["sliding_window"] = 4096;
  c["max_window_layers"] = -100;
  expect_refused(fit_config(c), ErrorCode::kInvalidData, "max_window_layers", "0 to 1024");
  c["max_window_layers"] = 33;  // in the global bound, past the 32 layers
  expect_refused(fit_config(c), ErrorCode::kInvalidData, "max_window_layers", "num_hidden_layers = 32");
  c["max_window_layers"] = 32;  // no layer slides: allowed
  EXPECT_TRUE(fit_config(c).ok());
}

TEST(HostileConfig, ZeroHeadsAreRefusedNotADivisionByZero) {
  Json c = base_config();
  c["num_attention_heads"] = 0;
  expect_refused(fit_config(c), ErrorCode::kInvalidData, "num_attention_heads");
  for (const char* type : {"gptj", "gpt_bigcode"}) {
    Json g{{"model_type", type}, {"n_embd", 4096}, {"n_layer", 28}, {"n_head", 0}, {"vocab_size", 50400}};
    expect_refused(fit_config(g), ErrorCode::kInvalidData, "n_head");
  }
  Json h = base_config();
  h["hidden_size"] = std::numeric_limits<int64_t>::min();
  h["num_attention_heads"] = -1;
  expect_refused(fit_config(h), ErrorCode::kInvalidData, "hidden_size");
}

TEST(HostileConfig, ZeroHeadsAreRefusedByEveryCommandThatReadsAModel) {
  Json c = base_config();
  c["num_attention_heads"] = 0;
  const Json config_request{{"model", "hostile"}, {"config", c}};
  Json perf = config_request;
  perf["gpu"] = "a40";
  expect_refused(run_command(context(), "perf", perf), ErrorCode::kInvalidData, "num_attention_heads");
  Json plan = config_request;
  plan["rate"] = 1;
  expect_refused(run_command(context(), "plan", plan), ErrorCode::kInvalidData, "num_attention_heads");
  const Json pack{
      {"fleet", {{"nodes", Json::array({{{"name", "n1"}, {"gpus", Json::array({{{"target", "a100-80gb-sxm4"}}})}}})}}},
      {"requests", {{"requests", Json::array({{{"name", "w"}, {"workload", config_request}}})}}}};
  const auto packed = run_command(context(), "mig.pack", pack);
  // mig.pack may refuse the request or leave it unplaced with the reason; it must not crash.
  if (packed.ok()) {
    EXPECT_NE(packed->dump().find("num_attention_heads"), std::string::npos) << packed->dump();
  } else {
    EXPECT_NE(packed.error().message.find("num_attention_heads"), std::string::npos) << packed.error().message;
  }
}

TEST(HostileConfig, DimensionsAreBoundedBeforeAnyAllocation) {
  const std::pair<const char*, Json> cases[] = {
      {"num_hidden_layers", 1e9},
      {"num_hidden_layers", 1025},
      {"hidden_size", 1e12},
      {"hidden_size", 131073},
      {"vocab_size", int64_t{1} << 40},
      {"intermediate_size", int64_t{1} << 21},
      {"num_attention_heads", 1 << 13},
      {"head_dim", 1 << 13},
      {"max_position_embeddings", -1},
      {"num_key_value_heads", -64},
      {"sliding_window", -1},
      {"hidden_size", 4096.5},
      {"hidden_size", "4096"},
      {"num_hidden_layers", true},
      {"vocab_size", 18446744073709551615ull},
  };
  for (const auto& [key, value] : cases) {
    Json c = base_config();
    c[key] = value;
    SCOPED_TRACE(std::string(key) + " = " + value.dump());
    expect_refused(fit_config(c), ErrorCode::kInvalidData, key, "a whole number from");
  }
}

TEST(HostileConfig, MoeExpertCountsAreBoundedAndConsistent) {
  Json c = base_config();
  c["model_type"] = "mixtral";
  c["num_key_value_heads"] = 8;
  c["num_local_experts"] = 8;
  c["num_experts_per_tok"] = 9;
  expect_refused(fit_config(c), ErrorCode::kInvalidData, "num_experts_per_tok", "from 1 to the 8 experts");
  c["num_experts_per_tok"] = 2;
  c["num_local_experts"] = 100000;
  expect_refused(fit_config(c), ErrorCode::kInvalidData, "num_local_experts");
  c["num_local_experts"] = 8;
  EXPECT_TRUE(fit_config(c).ok());
}

TEST(HostileConfig, ShapesMustBeConsistent) {
  Json c = base_config();
  c["num_key_value_heads"] = 5;  // 32 heads do not form 5 groups
  expect_refused(fit_config(c), ErrorCode::kInvalidData, "num_key_value_heads", "must divide");
  c["num_key_value_heads"] = 64;
  expect_refused(fit_config(c), ErrorCode::kInvalidData, "num_key_value_heads");
  c.erase("num_key_value_heads");
  c["num_attention_heads"] = 30;  // 4096 / 30 is no head size...
  expect_refused(fit_config(c), ErrorCode::kInvalidData, "num_attention_heads", "does not divide");
  c["head_dim"] = 128;  // ...unless the config gives one (Gemma's 3072 = 16 x 192 != 16 x 256)
  EXPECT_TRUE(fit_config(c).ok());
}

TEST(HostileConfig, MptExpansionRatioMustBePositiveAndBounded) {
  Json c{{"model_type", "mpt"}, {"d_model", 4096}, {"n_layers", 32}, {"n_heads", 32}, {"vocab_size", 50432}};
  for (const Json& ratio : {Json(-4), Json(0), Json(1e300), Json("4")}) {
    c["expansion_ratio"] = ratio;
    SCOPED_TRACE(ratio.dump());
    expect_refused(fit_config(c), ErrorCode::kInvalidData, "expansion_ratio");
  }
  c["expansion_ratio"] = 4;
  EXPECT_TRUE(fit_config(c).ok());
}

TEST(HostileConfig, ParameterCountsCannotOverflow) {
  // Each dimension within its bound, the product over 10^14 parameters: refused, never negative.
  Json c = base_config();
  c["model_type"] = "mixtral";
  c["hidden_size"] = 131072;
  c["num_attention_heads"] = 1024;
  c["num_hidden_layers"] = 1024;
  c["intermediate_size"] = 1 << 20;
  c["num_local_experts"] = 4096;
  c["num_experts_per_tok"] = 2;
  expect_refused(fit_config(c), ErrorCode::kInvalidData, "config", "parameters");
  // The largest dense shape the old code printed negative counts for still comes out positive.
  Json big = base_config();
  big["hidden_size"] = 65536;
  big["num_attention_heads"] = 512;
  auto r = fit_config(big);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT((*r)["model"]["parameters"].get<double>(), 0);
}

TEST(HostileConfig, DeepNestingIsRefusedWithoutRecursion) {
  constexpr int kDepth = 100000;
  std::string text;
  for (int i = 0; i < kDepth; ++i) text += "{\"a\":";
  text += "1";
  text += std::string(kDepth, '}');
  auto s = check_json_depth(text, kMaxConfigDepth, "config.json");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidData);
  EXPECT_NE(s.error().message.find("64"), std::string::npos);
  // Brackets inside strings do not count.
  EXPECT_TRUE(check_json_depth(R"({"a":"[[[[{{{{", "b":[1,[2]]})", 3, "x").ok());
  EXPECT_FALSE(check_json_depth(R"({"a":{"b":[1]}})", 2, "x").ok());
  // The library refuses an inline config that deep (nlohmann's parser itself is not recursive).
  const nlohmann::json deep = nlohmann::json::parse(text);
  auto m = parse_hf_config(deep, "deep");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().field, "config");
}

TEST(HostileConfig, DeepInlineConfigsAreRefusedByEveryCommand) {
  // run_command copies its request (a recursive copy): a 10^5-deep inline config crashed it before.
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "{\"a\":";
  text += "1" + std::string(100000, '}');
  for (const char* command : {"fit", "perf", "plan"}) {
    SCOPED_TRACE(command);
    Json request = Json::object();
    request["model"] = "deep";
    request["config"] = Json::parse(text);  // moved in: building the request must not recurse either
    auto r = run_command(context(), command, request);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kLimit) << r.error().message;
    EXPECT_EQ(r.error().field, "request");
  }
  // 64 levels inside a config are fine for the request path and refused by the config reader at 65.
  Json c = base_config();
  Json* at = &c;
  for (int i = 0; i < 64; ++i) at = &((*at)["extra"] = Json::object());
  expect_refused(fit_config(c), ErrorCode::kInvalidData, "config", "64");
}

TEST(HostileConfig, ZooModelsStillParse) {
  for (const auto& e : zoo_entries()) {
    auto m = zoo_model(e.id);
    EXPECT_TRUE(m.ok()) << e.id << ": " << m.error().message;
  }
}

// ---- workload and request numbers -------------------------------------------------------------

TEST(HostileWorkload, TokensInFlightAreBounded) {
  auto r = run_command(context(), "fit",
                       Json{{"model", "llama-2-7b"}, {"gpu", "a40"}, {"context", 16777216}, {"batch", 1048576}});
  expect_refused(r, ErrorCode::kUsage, "batch", "2^32");
  // Within the token bound but past what bytes can count: 2^32 tokens of a 1024-layer model's KV cache
  // (64 MiB per token) are 2^58 bytes, which the old code printed as a negative total.
  Json c = base_config();
  c["hidden_size"] = 16384;
  c["num_attention_heads"] = 128;
  c["num_hidden_layers"] = 1024;
  expect_refused(fit_config(c, Json{{"context", 4194304}, {"batch", 1024}}), ErrorCode::kUsage, "context", "2^53");
  auto ok = fit_config(c, Json{{"context", 4096}, {"batch", 1}});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_GT((*ok)["memory"]["total_bytes"].get<double>(), 0);
}

TEST(HostileWorkload, DeviceCountInTheGpuNameIsBounded) {
  auto r = run_command(context(), "fit", Json{{"model", "llama-2-7b"}, {"gpu", "a40x99999999999"}});
  expect_refused(r, ErrorCode::kUsage, "gpu", "1 to 1024");
  expect_refused(run_command(context(), "fit", Json{{"model", "llama-2-7b"}, {"gpu", "a40x0"}}), ErrorCode::kUsage,
                 "gpu");
  auto ok = run_command(context(), "fit", Json{{"model", "llama-2-7b"}, {"gpu", "a40x1024"}});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
}

TEST(HostileWorkload, NumbersInStringsAreDecimalAndFinite) {
  for (const char* text : {"0x10", "inf", "nan", "1e999", " 4", "4 ", "", "--4", "4e"}) {
    SCOPED_TRACE(text);
    expect_refused(run_command(context(), "fit", Json{{"model", "llama-2-7b"}, {"gpu", "a40"}, {"batch", text}}),
                   ErrorCode::kUsage, "batch");
    expect_refused(
        run_command(context(), "fit", Json{{"model", "llama-2-7b"}, {"gpu", "a40"}, {"gpu_memory_utilization", text}}),
        ErrorCode::kUsage, "gpu_memory_utilization");
  }
  EXPECT_TRUE(run_command(context(), "fit", Json{{"model", "llama-2-7b"}, {"gpu", "a40"}, {"batch", "4"}}).ok());
  // A JSON value that is not finite (built in code; JSON text cannot hold one) is refused as well.
  expect_refused(run_command(context(), "fit",
                             Json{{"model", "llama-2-7b"},
                                  {"gpu", "a40"},
                                  {"gpu_memory_utilization", std::numeric_limits<double>::infinity()}}),
                 ErrorCode::kUsage, "gpu_memory_utilization");
}

TEST(HostileWorkload, RequestNumberAndIntegerRefuseNonFiniteHexAndOutOfRange) {
  const Json j{{"hex", "0x10"},
               {"big", "1e999"},
               {"inf", std::numeric_limits<double>::infinity()},
               {"nan", std::numeric_limits<double>::quiet_NaN()},
               {"huge", 1e300},
               {"ok", "2.5e3"}};
  Request req(j);
  for (const char* key : {"hex", "big", "inf", "nan"}) {
    SCOPED_TRACE(key);
    auto n = req.number(key);
    ASSERT_FALSE(n.ok());
    EXPECT_EQ(n.error().field, key);
  }
  auto i = req.integer("huge", 0, 0, 1000);
  ASSERT_FALSE(i.ok());
  EXPECT_EQ(i.error().field, "huge");
  auto ok = req.number("ok");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(**ok, 2500);
}

// ---- plan: overflowed counts and infinite costs -----------------------------------------------

TEST(HostilePlan, RateIsBounded) {
  for (double rate : {2.5e10, 3e9, 1e6 + 1}) {
    auto r = run_command(context(), "plan", Json{{"model", "llama-2-7b"}, {"rate", rate}, {"now", "2026-11-30"}});
    expect_refused(r, ErrorCode::kUsage, "rate", "1e6");
  }
  auto r = run_command(context(), "plan", Json{{"model", "llama-2-7b"}, {"rate", "1e999"}});
  expect_refused(r, ErrorCode::kUsage, "rate");
  expect_refused(run_command(context(), "plan", Json{{"model", "llama-2-7b"}, {"rate", 1}, {"budget", -5}}),
                 ErrorCode::kUsage, "budget");
}

// A model whose replica serves 1 request per second at batch 1 (TTFT 0.5 s, TPOT 0.5 s per token).
class UnitModel : public PlanModel {
 public:
  int max_serving_batch(const Target&, int, int, std::string*) const override { return 1; }
  ServePoint serve(const Target&, int, int, int) const override { return {0.5, 0.5}; }
  TrainPoint train(const Target&, int, int, int) const override { return {true, "", 1e-300}; }
  bool layout_allowed(int tp, int pp) const override { return tp == 1 && pp == 1; }
};

Offer offer(double price, int gpus) {
  Offer o;
  o.provider = "p";
  o.region = "r";
  o.name = "o";
  o.target = *Catalog::embedded()->resolve("h100-80gb-sxm5");
  o.gpus = gpus;
  o.price_hour = price;
  return o;
}

TEST(HostilePlan, HugeRatesNeverWrapIntoOneReplicaOrNegativeInstances) {
  const UnitModel model;
  const Offer o = offer(98.32, 8);
  ServeGoal g;
  g.output_tokens = 1;
  for (double rate : {3e9, 2.5e10, 1e300}) {
    g.rate_requests_per_second = rate;
    const PlanResult r = plan_serving(model, {&o}, g, PlanOptions{});
    EXPECT_TRUE(r.plans.empty()) << rate << ": " << (r.plans.empty() ? "" : r.plans[0].reason);
    ASSERT_EQ(r.rejected.size(), 1u);
    EXPECT_NE(r.rejected[0].reason.find("instances for the rate"), std::string::npos) << r.rejected[0].reason;
  }
}

TEST(HostilePlan, NonFiniteCostsNeverMeetTheGoal) {
  const UnitModel model;
  const Offer o = offer(1e308, 8);
  ServeGoal g;
  g.rate_requests_per_second = 100;  // 100 replicas: 13 instances x 1e308 per hour = inf
  g.output_tokens = 1;
  const PlanResult serve = plan_serving(model, {&o}, g, PlanOptions{});
  for (const auto& p : serve.plans) {
    EXPECT_FALSE(p.meets_goal && !std::isfinite(p.cost_per_hour)) << p.reason;
  }
  EXPECT_TRUE(serve.plans.empty());
  TrainGoal t;
  t.train_tokens = 1e15;  // at 1e-300 tokens per second: an infinite time
  const PlanResult train = plan_training(model, {&o}, t, PlanOptions{});
  EXPECT_TRUE(train.plans.empty());
  for (const auto& p : train.pareto) EXPECT_TRUE(std::isfinite(p.cost_total)) << p.reason;
}

// ---- offers files -----------------------------------------------------------------------------

constexpr const char* kHeader =
    "provider,region,offer,gpu,gpus,interconnect,vcpus,ram_gb,price_hour,spot_price_hour,currency,available,captured_"
    "at,source\n";
constexpr const char* kGoodRow = "aws,us-east-1,p5,h100-80gb-sxm5,8,nvlink,192,2048,98.32,,USD,yes,2026-06-03,s\n";

TEST(HostileOffers, InvalidUtf8RowsAreSkippedWithTheirReason) {
  const std::string text = std::string(kHeader) + kGoodRow +
                           "aws,us-east-1,p5-\xff\xfe,h100-80gb-sxm5,8,nvlink,192,2048,98.32,,USD,yes,2026-06-03,s\n";
  auto set = parse_offers(*Catalog::embedded(), "t.csv", text);
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_EQ(set->offers.size(), 1u);
  ASSERT_EQ(set->skipped.size(), 1u);
  EXPECT_EQ(set->skipped[0].line, 3);
  EXPECT_NE(set->skipped[0].reason.find("UTF-8"), std::string::npos);
  // What the CLI's --json prints: the list must serialise.
  auto r = run_command(context(), "offers.list", Json{{"offers", text}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NO_THROW(r->dump());
}

TEST(HostileOffers, ByteOrderMarkInTheHeaderIsAccepted) {
  auto set = parse_offers(*Catalog::embedded(), "t.csv", "\xEF\xBB\xBF" + std::string(kHeader) + kGoodRow);
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_EQ(set->offers.size(), 1u);
}

TEST(HostileOffers, CountsAndPricesAreDecimalAndBounded) {
  const std::string bad[] = {
      "aws,r,a,h100-80gb-sxm5,8,nvlink,192,2048,98.32,,USD,4294967296,2026-06-03,s\n",  // read as 0 before
      "aws,r,b,h100-80gb-sxm5,8,nvlink,192,2048,0x10,,USD,yes,2026-06-03,s\n",          // hex price
      "aws,r,c,h100-80gb-sxm5,8,nvlink,192,2048,1e308,,USD,yes,2026-06-03,s\n",         // over 1e6/h
      "aws,r,d,h100-80gb-sxm5,8,nvlink,192,2048,,inf,USD,yes,2026-06-03,s\n",           // not finite
      "aws,r,e,h100-80gb-sxm5,0x8,nvlink,192,2048,98.32,,USD,yes,2026-06-03,s\n",       // hex count
      "aws,r,f,h100-80gb-sxm5,8,nvlink,1e300,2048,98.32,,USD,yes,2026-06-03,s\n",       // vcpus past an int
  };
  for (const auto& row : bad) {
    SCOPED_TRACE(row);
    auto set = parse_offers(*Catalog::embedded(), "t.csv", std::string(kHeader) + row);
    ASSERT_TRUE(set.ok());
    EXPECT_TRUE(set->offers.empty());
    ASSERT_EQ(set->skipped.size(), 1u);
  }
  auto set =
      parse_offers(*Catalog::embedded(), "t.csv",
                   std::string(kHeader) + "aws,r,a,h100-80gb-sxm5,8,nvlink,192,2048,98.32,,USD,1000000,2026-06-03,s\n");
  ASSERT_TRUE(set.ok());
  ASSERT_EQ(set->offers.size(), 1u);
  ASSERT_TRUE(set->offers[0].available_count.has_value());
  EXPECT_EQ(*set->offers[0].available_count, 1000000);
}

}  // namespace
}  // namespace gpuplan
