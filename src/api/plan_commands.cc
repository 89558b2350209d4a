// `plan`: the cheapest way to get the work done on the offers, with reasons. Formulas: docs/model.md,
// "Planning".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "api/commands.h"
#include "api/offer_request.h"
#include "core/decimal.h"
#include "core/request.h"
#include "plan/plan_model.h"

namespace gpuplan::api {

namespace {

constexpr double kSecondsPerHour = 3600.0;
// Serving rate: a million requests per second, ~1000x what the largest plan (1024 GPUs) serves of even
// a small model; past it no offer could carry the rate and the counts leave the range of an int.
constexpr double kMaxRateRequestsPerSecond = 1e6;
// Training tokens: 10^15, ~25x the largest published pretraining runs (Qwen3, 36T tokens).
constexpr double kMaxTrainTokens = 1e15;

Json money(double v) { return std::isfinite(v) ? Json(std::round(v * 1e4) / 1e4) : Json(nullptr); }
Json sig(double v) {
  if (!std::isfinite(v) || v == 0) return v == 0 ? Json(0.0) : Json(nullptr);
  const double scale = std::pow(10.0, 3 - static_cast<int>(std::floor(std::log10(std::fabs(v)))));
  return std::round(v * scale) / scale;
}

// "36h", "2d", "90m", "3600s" or a plain number of hours.
Result<std::optional<double>> duration_seconds(const Request& req, const char* key) {
  if (!req.has(key)) return std::optional<double>();
  auto text = req.string(key);
  if (!text) return text.error();
  std::string s = *text;
  double unit = kSecondsPerHour;
  if (!s.empty()) {
    switch (s.back()) {
      case 's':
        unit = 1;
        s.pop_back();
        break;
      case 'm':
        unit = 60;
        s.pop_back();
        break;
      case 'h':
        unit = kSecondsPerHour;
        s.pop_back();
        break;
      case 'd':
        unit = 24 * kSecondsPerHour;
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

Json plan_json(const Plan& p, bool spot) {
  const Offer& o = *p.offer;
  return Json{{"offer", o.id()},
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
              {"currency", o.currency},
              {"captured_at", o.captured_at},
              {"source", o.source},
              {"meets_goal", p.meets_goal},
              {"reason", p.reason}};
}

Result<Json> plan_command(const Context& ctx, const Json& body) {
  Request req(body, "plan");
  GPUPLAN_CHECK(req.check_keys());
  // The workload and perf keys go to the performance model; the plan's own and the offers' stay here.
  const auto& perf_keys = perf::perf_request_keys();
  Json perf_req = Json::object();
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it.key() != "gpu" && std::find(perf_keys.begin(), perf_keys.end(), it.key()) != perf_keys.end()) {
      perf_req[it.key()] = it.value();
    }
  }
  auto setup = perf::parse_perf_setup(perf_req);
  if (!setup) return setup.error();
  const bool serving = setup->workload.task == Task::kInfer;
  auto offers = offers_from_request(ctx, req);
  if (!offers) return offers.error();
  auto filter = offer_filter_from_request(req);
  if (!filter) return filter.error();
  auto objective_text = req.text("objective");
  auto top = req.whole("top");
  auto max_instances = req.whole("max_instances");
  auto ttft = req.real("ttft_slo");
  auto tpot = req.real("tpot_slo");
  auto deadline = duration_seconds(req, "deadline");
  auto budget = req.real("budget");
  auto gpus = req.words("gpu");
  if (!objective_text) return objective_text.error();
  if (!top) return top.error();
  if (!max_instances) return max_instances.error();
  if (!ttft) return ttft.error();
  if (!tpot) return tpot.error();
  if (!deadline) return deadline.error();
  if (!budget) return budget.error();
  if (!gpus) return gpus.error();
  PlanOptions options;
  options.spot = filter->spot;
  options.max_instances = static_cast<int>(*max_instances);
  // The declaration allows cost and time only (req.text checked it).
  options.objective = *objective_text == "time" ? PlanObjective::kTime : PlanObjective::kCost;

  std::vector<std::string> gpu_ids;
  for (const auto& g : *gpus) {
    auto ref = ctx.catalog->resolve(g);
    if (!ref) return ref.error();
    gpu_ids.push_back(ref->id());
  }
  // Offers the filter rejects never reach the search; they are reported with their reason.
  std::vector<const Offer*> usable;
  Json rejected = Json::array();
  for (const auto& o : offers->offers) {
    if (!gpu_ids.empty() && std::find(gpu_ids.begin(), gpu_ids.end(), o.target.id()) == gpu_ids.end()) continue;
    const std::string why = offer_rejection(o, *filter);
    if (why.empty())
      usable.push_back(&o);
    else
      rejected.push_back(Json{{"offer", o.id()}, {"target", o.target.id()}, {"reason", why}});
  }

  WorkloadPlanModel model(*setup);
  PlanResult result;
  Json goal;
  if (serving) {
    if (setup->rate <= 0) return usage_error("serving needs --rate (requests per second) > 0", "rate");
    if (setup->rate > kMaxRateRequestsPerSecond) {
      char rate[32];
      std::snprintf(rate, sizeof rate, "%g", setup->rate);
      return usage_error("'rate' " + std::string(rate) +
                             " is over the bound of 1e6 requests per second (1000x what the largest plan, 1024 GPUs, "
                             "serves); give a rate above 0 and at most 1e6",
                         "rate");
    }
    ServeGoal g;
    g.rate_requests_per_second = setup->rate;
    g.input_tokens = static_cast<int>(perf_input_tokens(setup->workload));
    g.output_tokens = static_cast<int>(perf_output_tokens(setup->workload));
    if (*ttft) g.ttft_slo_seconds = **ttft;
    if (*tpot) g.tpot_slo_seconds = **tpot;
    result = plan_serving(model, usable, g, options);
    goal = Json{{"kind", "serve"},
                {"rate_requests_per_second", g.rate_requests_per_second},
                {"input_tokens", g.input_tokens},
                {"output_tokens", g.output_tokens},
                {"ttft_slo_seconds", *ttft ? Json(**ttft) : Json(nullptr)},
                {"tpot_slo_seconds", *tpot ? Json(**tpot) : Json(nullptr)}};
  } else {
    if (setup->train_tokens <= 0) return usage_error("training needs --train-tokens > 0", "train_tokens");
    if (setup->train_tokens > kMaxTrainTokens) {
      return usage_error(
          "'train_tokens' is over the bound of 1e15 tokens (25x the largest published pretraining "
          "run); give from above 0 to 1e15",
          "train_tokens");
    }
    TrainGoal g;
    g.train_tokens = setup->train_tokens;
    g.deadline_seconds = *deadline;
    if (*budget) g.budget = **budget;
    result = plan_training(model, usable, g, options);
    goal = Json{{"kind", "train"},
                {"train_tokens", g.train_tokens},
                {"deadline_seconds", *deadline ? Json(**deadline) : Json(nullptr)},
                {"budget", *budget ? Json(**budget) : Json(nullptr)}};
  }
  Json plans = Json::array();
  for (size_t i = 0; i < result.plans.size() && i < static_cast<size_t>(*top); ++i) {
    plans.push_back(plan_json(result.plans[i], options.spot));
  }
  Json pareto = Json::array();
  for (const auto& p : result.pareto) pareto.push_back(plan_json(p, options.spot));
  for (const auto& p : result.rejected) {
    Json r{{"offer", p.offer->id()}, {"target", p.offer->target.id()}, {"reason", p.reason}};
    rejected.push_back(std::move(r));
  }
  Json skipped = Json::array();
  for (const auto& s : offers->skipped)
    skipped.push_back(Json{{"file", s.file}, {"line", s.line}, {"reason", s.reason}});
  Json out{{"model", setup->workload.model->id},
           {"task", task_name(setup->workload.task)},
           {"goal", std::move(goal)},
           {"objective", *objective_text},
           {"now", filter->now},
           {"configurations", result.configurations},
           {"offers_considered", usable.size()},
           {"best", result.plans.empty() || !result.plans.front().meets_goal
                        ? Json(nullptr)
                        : plan_json(result.plans.front(), options.spot)},
           {"plans", std::move(plans)},
           {"pareto", std::move(pareto)},
           {"rejected", std::move(rejected)},
           {"skipped", std::move(skipped)}};
  return out;
}

}  // namespace

void register_plan_commands(CommandTable& table) { table.push_back({"plan", plan_command}); }

}  // namespace gpuplan::api
