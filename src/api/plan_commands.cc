// `plan`: the cheapest way to get the work done on the offers, with reasons. Formulas: docs/model.md,
// "Planning".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "api/commands.h"
#include "api/offer_request.h"
#include "core/decimal.h"
#include "core/format.h"
#include "core/request.h"
#include "plan/plan_model.h"

namespace gpuplan::api {

namespace {

// Serving rate: a million requests per second, ~1000x what the largest plan (1024 GPUs) serves of even
// a small model; past it no offer could carry the rate and the counts leave the range of an int.
constexpr double kMaxRateRequestsPerSecond = 1e6;
// Training tokens: 10^15, ~25x the largest published pretraining runs (Qwen3, 36T tokens).
constexpr double kMaxTrainTokens = 1e15;

// "36h", "2d", "90m", "3600s" or a plain number of hours.
Result<std::optional<double>> duration_seconds(const Request& req, const char* key) {
  if (!req.has(key)) return std::optional<double>();
  GPUPLAN_TRY(text, req.string(key));
  std::string s = text;
  double unit = kSecondsPerHour;
  if (!s.empty()) {
    switch (s.back()) {
      case 's':
        unit = 1;
        s.pop_back();
        break;
      case 'm':
        unit = kSecondsPerMinute;
        s.pop_back();
        break;
      case 'h':
        unit = kSecondsPerHour;
        s.pop_back();
        break;
      case 'd':
        unit = kSecondsPerDay;
        s.pop_back();
        break;
      default:
        break;
    }
  }
  // Decimal digits only: strtod would also read "0x10" and "inf".
  const auto parsed = parse_decimal(s);
  const double v = parsed.value_or(0);
  if (!parsed || v <= 0) {
    return usage_error(std::string("'") + key + "' must be a duration like 36h, 2d, 90m or a number of hours", key);
  }
  return std::optional<double>(v * unit);
}

Json plan_json(const Plan& p, bool spot, const OfferFilter& filter) {
  const Offer& o = *p.offer;
  Json j{{"offer", o.id()},
         {"provider", o.provider},
         {"region", o.region},
         {"target", o.target.id()},
         {"instances", p.instances},
         {"gpus", p.gpus},
         {"tp", p.tp},
         {"pp", p.pp},
         {"replicas", p.replicas},
         {"batch", p.batch},
         {"spot", spot},
         {"cost_per_hour", money(p.cost_per_hour)},
         {"cost_total", money(p.cost_total)},
         {"cost_per_million_tokens", money(p.cost_per_million_tokens)},
         {"seconds_total", sig(p.seconds_total)},
         {"capacity_requests_per_second", sig(p.capacity_requests_per_second)},
         {"ttft_seconds", sig(p.ttft_seconds)},
         {"tpot_seconds", sig(p.tpot_seconds)},
         {"tokens_per_second", sig(p.tokens_per_second)},
         // Start-up and billing (issue #18): provisioning + weights load; training bills each instance
         // billed_seconds (start-up + run, rounded up to the billing step, at least the minimum).
         {"startup_seconds", sig(p.startup_seconds)},
         {"provisioning_seconds", sig(p.provisioning_seconds)},
         {"load_seconds", sig(p.load_seconds)},
         {"run_seconds", sig(p.run_seconds)},
         {"billed_seconds", sig(p.billed_seconds)},
         {"billing", std::string(billing_name(o.billing))},
         {"min_billable_seconds", o.min_billable_seconds},
         {"billing_source", o.billing_source.empty() && o.is_market()
                                ? std::string("market: per second from running (docs/market.md)")
                                : o.billing_source},
         {"fabric", std::string(fabric_name(o.fabric))},
         {"currency", o.currency},
         {"captured_at", o.captured_at},
         {"source", o.source},
         {"meets_goal", p.meets_goal},
         {"reason", p.reason}};
  if (const std::string w = price_age_warning(o, filter); !w.empty()) j["price_warning"] = w;
  if (o.is_proxy()) {  // a stand-in priced from another product (issue #18), ranked after real offers
    j["proxy"] = true;
    j["proxy_reason"] = o.proxy;
  }
  if (o.is_market()) {
    // A market offer (source "market"): the instances free now, and whether it is demo data.
    j["available"] = o.available_count.value_or(0);
    j["demo"] = o.demo;
    // What its GPUs measured (gpuplan bench), which the prediction used unless `measured: false`.
    if (!o.measured_json.empty()) j["measured"] = Json::parse(o.measured_json, nullptr, false);
  }
  return j;
}

// The request's workload keys (those of perf, less `gpu`), after refusing a key plan does not declare
// (data/options.yaml).
Result<Json> perf_keys_of(const Json& body) {
  GPUPLAN_CHECK(Request(body, "plan").check_keys());
  const auto& perf_keys = perf::perf_request_keys();
  Json perf_req = Json::object();
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it.key() != "gpu" && std::find(perf_keys.begin(), perf_keys.end(), it.key()) != perf_keys.end()) {
      perf_req[it.key()] = it.value();
    }
  }
  return perf_req;
}

// A plan request, read and checked.
struct PlanRequest {
  perf::PerfSetup setup;
  OfferSet offers;
  OfferFilter filter;
  std::string objective;
  int64_t top = 0;
  std::optional<double> ttft_slo, tpot_slo, deadline_seconds, budget;
  std::vector<std::string> gpu_ids;  // resolved catalog ids; empty = every GPU
  PlanOptions options;
  bool use_measured = true;  // market offers with measured figures are predicted with them
};

// Reads every key of a plan request; an out-of-range or unknown value is a usage error naming its key.
Result<PlanRequest> read_plan_request(const Context& ctx, const Json& body) {
  GPUPLAN_TRY(perf_req, perf_keys_of(body));
  const Request req(body, "plan");
  GPUPLAN_TRY(setup, perf::parse_perf_setup(perf_req));
  GPUPLAN_TRY(offers, offers_from_request(ctx, req));
  GPUPLAN_TRY(filter, offer_filter_from_request(req));
  GPUPLAN_TRY(objective, req.text("objective"));
  GPUPLAN_TRY(top, req.whole("top"));
  GPUPLAN_TRY(max_instances, req.whole("max_instances"));
  GPUPLAN_TRY(max_gpus, req.whole("max_gpus"));
  GPUPLAN_TRY(ttft, req.real("ttft_slo"));
  GPUPLAN_TRY(tpot, req.real("tpot_slo"));
  GPUPLAN_TRY(deadline, duration_seconds(req, "deadline"));
  GPUPLAN_TRY(budget, req.real("budget"));
  GPUPLAN_TRY(gpus, req.words("gpu"));
  GPUPLAN_TRY(use_measured, req.boolean("measured", true));
  PlanRequest pr{setup, offers, filter, objective, top, ttft, tpot, deadline, budget, {}, {}, use_measured};
  pr.options.spot = filter.spot;
  pr.options.max_instances = static_cast<int>(max_instances);
  pr.options.max_gpus = static_cast<int>(max_gpus);
  // The declaration allows cost and time only (req.text checked it).
  pr.options.objective = objective == "time" ? PlanObjective::kTime : PlanObjective::kCost;
  for (const auto& g : gpus) {
    GPUPLAN_TRY(ref, ctx.catalog->resolve(g));
    pr.gpu_ids.push_back(ref.id());
  }
  return pr;
}

// The offers the search may use (on the requested GPUs and passing the filter); the filter's
// rejections go to `rejected` with their reason.
std::vector<const Offer*> usable_offers(const PlanRequest& pr, Json& rejected) {
  std::vector<const Offer*> usable;
  for (const auto& o : pr.offers.offers) {
    if (!pr.gpu_ids.empty() && std::find(pr.gpu_ids.begin(), pr.gpu_ids.end(), o.target.id()) == pr.gpu_ids.end())
      continue;
    const std::string why = offer_rejection(o, pr.filter);
    if (why.empty())
      usable.push_back(&o);
    else
      rejected.push_back(Json{{"offer", o.id()}, {"target", o.target.id()}, {"reason", why}});
  }
  return usable;
}

// Serving: checks the rate, plans, and writes the goal as the answer states it.
Result<PlanResult> plan_for_serving(const WorkloadPlanModel& model, const std::vector<const Offer*>& usable,
                                    const PlanRequest& pr, Json& goal) {
  const double rate = pr.setup.rate;
  if (rate <= 0) return usage_error("serving needs --rate (requests per second) > 0", "rate");
  if (rate > kMaxRateRequestsPerSecond) {
    return usage_error("'rate' " + format_g(rate) +
                           " is over the bound of 1e6 requests per second (1000x what the largest plan, 1024 GPUs, "
                           "serves); give a rate above 0 and at most 1e6",
                       "rate");
  }
  ServeGoal g;
  g.rate_requests_per_second = rate;
  g.input_tokens = static_cast<int>(perf_input_tokens(pr.setup.workload));
  g.output_tokens = static_cast<int>(perf_output_tokens(pr.setup.workload));
  if (pr.ttft_slo) g.ttft_slo_seconds = *pr.ttft_slo;
  if (pr.tpot_slo) g.tpot_slo_seconds = *pr.tpot_slo;
  goal = Json{{"kind", "serve"},
              {"rate_requests_per_second", g.rate_requests_per_second},
              {"input_tokens", g.input_tokens},
              {"output_tokens", g.output_tokens},
              {"ttft_slo_seconds", pr.ttft_slo ? Json(*pr.ttft_slo) : Json(nullptr)},
              {"tpot_slo_seconds", pr.tpot_slo ? Json(*pr.tpot_slo) : Json(nullptr)}};
  return plan_serving(model, usable, g, pr.options);
}

// Training: checks the token count, plans, and writes the goal as the answer states it.
Result<PlanResult> plan_for_training(const WorkloadPlanModel& model, const std::vector<const Offer*>& usable,
                                     const PlanRequest& pr, Json& goal) {
  if (pr.setup.train_tokens <= 0) return usage_error("training needs --train-tokens > 0", "train_tokens");
  if (pr.setup.train_tokens > kMaxTrainTokens) {
    return usage_error(
        "'train_tokens' is over the bound of 1e15 tokens (25x the largest published pretraining "
        "run); give from above 0 to 1e15",
        "train_tokens");
  }
  TrainGoal g;
  g.train_tokens = pr.setup.train_tokens;
  g.deadline_seconds = pr.deadline_seconds;
  if (pr.budget) g.budget = *pr.budget;
  goal = Json{{"kind", "train"},
              {"train_tokens", g.train_tokens},
              {"deadline_seconds", pr.deadline_seconds ? Json(*pr.deadline_seconds) : Json(nullptr)},
              {"budget", pr.budget ? Json(*pr.budget) : Json(nullptr)}};
  return plan_training(model, usable, g, pr.options);
}

// The answer: the best plan, the top plans, the Pareto front, and every rejected or skipped offer.
Json plan_answer(const PlanRequest& pr, const PlanResult& result, size_t considered, Json goal, Json rejected) {
  const bool spot = pr.options.spot;
  Json plans = Json::array();
  for (size_t i = 0; i < result.plans.size() && i < static_cast<size_t>(pr.top); ++i) {
    plans.push_back(plan_json(result.plans[i], spot, pr.filter));
  }
  Json pareto = Json::array();
  for (const auto& p : result.pareto) pareto.push_back(plan_json(p, spot, pr.filter));
  for (const auto& p : result.rejected) {
    rejected.push_back(Json{{"offer", p.offer->id()}, {"target", p.offer->target.id()}, {"reason", p.reason}});
  }
  Json skipped = Json::array();
  for (const auto& s : pr.offers.skipped)
    skipped.push_back(Json{{"file", s.file}, {"line", s.line}, {"reason", s.reason}});
  const bool has_best = !result.plans.empty() && result.plans.front().meets_goal;
  return Json{{"model", pr.setup.workload.model->id},
              {"task", task_name(pr.setup.workload.task)},
              {"engine", std::string(engine_name(pr.setup.workload.engine))},
              {"goal", std::move(goal)},
              {"objective", pr.objective},
              {"now", pr.filter.now},
              {"configurations", result.configurations},
              {"offers_considered", considered},
              {"best", has_best ? plan_json(result.plans.front(), spot, pr.filter) : Json(nullptr)},
              {"plans", std::move(plans)},
              {"pareto", std::move(pareto)},
              {"rejected", std::move(rejected)},
              {"skipped", std::move(skipped)}};
}

// `plan`: read the request, filter the offers, search (serving or training), answer.
Result<Json> plan_command(const Context& ctx, const Json& body) {
  GPUPLAN_TRY(pr, read_plan_request(ctx, body));
  Json rejected = Json::array();
  const std::vector<const Offer*> usable = usable_offers(pr, rejected);
  const WorkloadPlanModel model(pr.setup, pr.use_measured);
  Json goal;
  const bool serving = pr.setup.workload.task == Task::kInfer;
  GPUPLAN_TRY(result, serving ? plan_for_serving(model, usable, pr, goal) : plan_for_training(model, usable, pr, goal));
  return plan_answer(pr, result, usable.size(), std::move(goal), std::move(rejected));
}

}  // namespace

void register_plan_commands(CommandTable& table) {
  table.push_back({"plan", "Where to rent it: the cheapest offer, count and layout that meets the goal", plan_command});
}

}  // namespace gpuplan::api
