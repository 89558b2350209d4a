#include "gpuplan/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "gpuplan/cancel.h"
#include "gpuplan/units.h"

namespace gpuplan {

namespace {

// 1%: the smallest cost difference worth a line on the cost/time front (list prices are rounded to
// cents per hour, and the model's own error is larger).
constexpr double kParetoCostStep = 0.01;
// Slack under a count before its ceiling: a rate / capacity of 3.0000000001 from rounding is 3
// replicas, not 4 (doubles carry ~16 digits; no count here reaches 10^6).
constexpr double kCeilSlack = 1e-9;
// Costs are quoted per million tokens, as the API providers price them.
constexpr double kTokensPerMillion = 1e6;
// Below 10^15 a double holds every integer exactly, so "%.0f" prints the count; above it "%.4g".
constexpr double kExactIntegerLimit = 1e15;
// Parallel degrees tried. Powers of two: what Megatron, vLLM and DeepSpeed accept for attention heads
// and what NVLink islands (2, 4, 8 GPUs) are built of.
constexpr int kDegrees[] = {1, 2, 4, 8, 16};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

double price_of(const Offer& o, bool spot) { return *(spot ? o.spot_price_hour : o.price_hour); }

Target target_for(const Offer& o, int devices) {
  // One GPU has no link; several within an instance use the instance's interconnect.
  return Target{o.target, devices, devices > 1 ? o.interconnect : Link::kPcie};
}

// Requests per second one replica sustains at `batch`: each of the batch's slots serves one request in
// prefill + decode time (continuous batching).
double replica_capacity(const ServePoint& p, int batch, int output_tokens) {
  const double seconds = p.ttft_seconds + output_tokens * p.tpot_seconds;
  return seconds > 0 ? batch / seconds : 0;
}

// A plan's figures are an answer only when finite and not negative: an overflowed count or an
// infinite price must never read as a plan that meets the goal.
bool is_answer(const Plan& p) {
  const double figures[] = {p.cost_per_hour, p.cost_total,   p.cost_per_million_tokens, p.seconds_total,
                            p.ttft_seconds,  p.tpot_seconds, p.tokens_per_second,       p.capacity_requests_per_second};
  for (double v : figures) {
    if (!std::isfinite(v) || v < 0) return false;
  }
  return p.instances >= 1 && p.gpus >= 1;
}

// An instance's start-up on `offer`: its provisioning, then the weights' load.
void set_startup(Plan& p, const Offer& offer, const PlanModel& model) {
  p.provisioning_seconds = offer.startup_seconds;
  p.load_seconds = model.weights_bytes() / kModelLoadBytesPerSecond;
  p.startup_seconds = p.provisioning_seconds + p.load_seconds;
}

// Whether a model-parallel group of tp x pp devices may run on `offer`: inside one instance (its
// devices a whole multiple of the group, so no group straddles two machines), or, when the offer states
// a fabric between instances, with its pipeline stages across instances (tensor parallelism stays
// inside one: its all-reduce per layer needs NVLink-class bandwidth).
bool group_placeable(const Offer& offer, int tp, int pp) {
  if (offer.gpus % tp != 0) return false;
  if (offer.fabric != Fabric::kNone) return true;
  return offer.gpus % (tp * pp) == 0;
}

bool meets_slo(const ServePoint& p, const ServeGoal& g) {
  if (g.ttft_slo_seconds && p.ttft_seconds > *g.ttft_slo_seconds) return false;
  if (g.tpot_slo_seconds && p.tpot_seconds > *g.tpot_slo_seconds) return false;
  return true;
}

// Plans that meet the goal first; among them every real offer before every proxy (a stand-in priced from
// another product, Offer::proxy), whatever their price or time, so a proxy is recommended only when no real
// offer meets the goal; then by the objective.
void rank(std::vector<Plan>& plans, PlanObjective objective) {
  std::stable_sort(plans.begin(), plans.end(), [&](const Plan& a, const Plan& b) {
    if (a.meets_goal != b.meets_goal) return a.meets_goal;
    if (a.offer->is_proxy() != b.offer->is_proxy()) return !a.offer->is_proxy();
    if (objective == PlanObjective::kTime && a.seconds_total != b.seconds_total)
      return a.seconds_total < b.seconds_total;
    if (a.cost_total != b.cost_total) return a.cost_total < b.cost_total;
    return a.offer->id() < b.offer->id();
  });
}

}  // namespace

namespace {

// Why nothing runs `on` ("2 GPU(s)", "up to 4 instances"): "refused on ...: <reason>" for a refusal
// (PlanModel's why_not starting with kRefusedPrefix), "does not fit on ...: <reason>" otherwise.
std::string failure_on(const std::string& on, std::string_view why_not) {
  if (why_not.substr(0, kRefusedPrefix.size()) == kRefusedPrefix) {
    return "refused on " + on + ": " + std::string(why_not.substr(kRefusedPrefix.size()));
  }
  return "does not fit on " + on + (why_not.empty() ? "" : ": " + std::string(why_not));
}

// The largest batch up to `max_batch` that meets the latency targets, given batch 1 does (latency
// grows with batch: bisection).
int largest_slo_batch(const PlanModel& model, const Target& t, int tp, int pp, int max_batch, const ServeGoal& goal,
                      long long& configurations) {
  int lo = 1, hi = max_batch;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    ++configurations;
    if (meets_slo(model.serve(t, tp, pp, mid), goal))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// The smallest batch up to `max_batch` at which `replicas` replicas carry the goal's rate (the latency
// users will see); `max_batch` when none smaller does.
int smallest_carrying_batch(const PlanModel& model, const Target& t, int tp, int pp, int max_batch, int replicas,
                            const ServeGoal& goal, long long& configurations) {
  int batch = max_batch;
  for (int b_lo = 1, b_hi = max_batch; b_lo <= b_hi;) {
    const int mid = b_lo + (b_hi - b_lo) / 2;
    ++configurations;
    if (replicas * replica_capacity(model.serve(t, tp, pp, mid), mid, goal.output_tokens) >=
        goal.rate_requests_per_second) {
      batch = mid;
      b_hi = mid - 1;
    } else {
      b_lo = mid + 1;
    }
  }
  return batch;
}

// A serving layout's figures: `instances` instances of the offer, `replicas` replicas of TP x PP at `batch`.
Plan serve_plan(const Offer* offer, double price, int instances, int tp, int pp, int replicas, int batch,
                const ServePoint& at, const ServeGoal& goal) {
  Plan p;
  p.offer = offer;
  p.instances = instances;
  p.gpus = instances * offer->gpus;
  p.tp = tp;
  p.pp = pp;
  p.replicas = replicas;
  p.batch = batch;
  p.cost_per_hour = instances * price;
  p.cost_total = p.cost_per_hour;
  const double tokens_per_hour =
      goal.rate_requests_per_second * (goal.input_tokens + goal.output_tokens) * kSecondsPerHour;
  p.cost_per_million_tokens = tokens_per_hour > 0 ? p.cost_per_hour / tokens_per_hour * kTokensPerMillion : 0;
  p.capacity_requests_per_second = replicas * replica_capacity(at, batch, goal.output_tokens);
  p.ttft_seconds = at.ttft_seconds;
  p.tpot_seconds = at.tpot_seconds;
  p.tokens_per_second = goal.rate_requests_per_second * goal.output_tokens;
  p.meets_goal = is_answer(p);
  return p;
}

// The plan of one offer with one TP x PP layout, or nullopt with `why` (set when empty for a layout that
// does not fit, else overwritten by the latest reason).
std::optional<Plan> serve_layout(const PlanModel& model, const Offer* offer, int tp, int pp, const ServeGoal& goal,
                                 const PlanOptions& options, long long& configurations, std::string& why) {
  const int devices = tp * pp;
  const Target t = target_for(*offer, devices);
  std::string not_fit;
  const int max_batch = model.max_serving_batch(t, tp, pp, &not_fit);
  ++configurations;
  if (max_batch < 1) {
    if (why.empty()) why = failure_on(std::to_string(devices) + " GPU(s)", not_fit);
    return std::nullopt;
  }
  const ServePoint one = model.serve(t, tp, pp, 1);
  ++configurations;
  if (!meets_slo(one, goal)) {
    why = "misses the latency target even at batch 1 on " + std::to_string(devices) + " GPU(s): TTFT " +
          fmt("%.3g s", one.ttft_seconds) + ", TPOT " + fmt("%.3g s", one.tpot_seconds);
    return std::nullopt;
  }
  const int lo = largest_slo_batch(model, t, tp, pp, max_batch, goal, configurations);
  const double cap = replica_capacity(model.serve(t, tp, pp, lo), lo, goal.output_tokens);
  if (cap <= 0) return std::nullopt;
  // Counts in doubles, checked against the limits before they become ints: a huge rate must not
  // wrap around into one replica or a negative instance count.
  const double replicas = std::max(1.0, std::ceil(goal.rate_requests_per_second / cap - kCeilSlack));
  // Whole replicas per instance: a replica never straddles two machines (a 3-GPU instance holds one
  // replica of 2 GPUs, not one and a half).
  const int replicas_per_instance = offer->gpus / devices;
  const double instances_needed = std::ceil(replicas / replicas_per_instance - kCeilSlack);
  if (!std::isfinite(instances_needed) || instances_needed > options.max_instances ||
      instances_needed * offer->gpus > options.max_gpus) {
    why = "needs " + fmt(instances_needed < kExactIntegerLimit ? "%.0f" : "%.4g", instances_needed) +
          " instances for the rate, more than the limit of " +
          (instances_needed > options.max_instances
               ? std::to_string(options.max_instances) + " instances (--max-instances)"
               : std::to_string(options.max_gpus) + " GPUs (--max-gpus)");
    return std::nullopt;
  }
  const int instances = static_cast<int>(instances_needed);
  if (offer->available_count && *offer->available_count < instances) {
    why = "needs " + std::to_string(instances) + " instances, only " + std::to_string(*offer->available_count) +
          " available";
    return std::nullopt;
  }
  // Spare GPUs in the instances become extra replicas; then the smallest batch that carries the
  // rate gives the latency users will see.
  const int total_replicas = instances * replicas_per_instance;
  const int batch = smallest_carrying_batch(model, t, tp, pp, lo, total_replicas, goal, configurations);
  const double price = price_of(*offer, options.spot);
  Plan p = serve_plan(offer, price, instances, tp, pp, total_replicas, batch, model.serve(t, tp, pp, batch), goal);
  set_startup(p, *offer, model);
  if (!p.meets_goal) {
    why = "gives no finite cost or capacity (price " + fmt("%.4g", price) + " per hour)";
    return std::nullopt;
  }
  p.reason = std::to_string(total_replicas) + " replica(s) of TP" + std::to_string(tp) + " x PP" + std::to_string(pp) +
             " at batch " + std::to_string(batch) + " carry " + fmt("%.3g", goal.rate_requests_per_second) +
             " req/s (capacity " + fmt("%.3g", p.capacity_requests_per_second) + ")";
  return p;
}

}  // namespace

PlanResult plan_serving(const PlanModel& model, const std::vector<const Offer*>& offers, const ServeGoal& goal,
                        const PlanOptions& options) {
  PlanResult result;
  for (const Offer* offer : offers) {
    if (cancel_requested()) break;  // run_command turns the command into kCancelled
    model.begin_offer(*offer);
    std::optional<Plan> best;
    std::string why;  // the most informative reason this offer fails
    for (int tp : kDegrees) {
      if (tp > offer->gpus) break;  // tensor parallel stays inside an instance
      for (int pp : kDegrees) {
        const int devices = tp * pp;
        // A serving replica stays inside one instance: engines (vLLM, TGI, TensorRT-LLM) serve across
        // nodes only with extra machinery, and cloud instances are not linked by NVLink.
        if (devices > offer->gpus || devices > options.max_gpus || !model.layout_allowed(tp, pp)) continue;
        auto p = serve_layout(model, offer, tp, pp, goal, options, result.configurations, why);
        if (p && (!best || p->cost_per_hour < best->cost_per_hour ||
                  (p->cost_per_hour == best->cost_per_hour && p->tpot_seconds < best->tpot_seconds))) {
          best = p;
        }
      }
    }
    if (best) {
      result.plans.push_back(*best);
    } else {
      Plan p;
      p.offer = offer;
      p.reason = why.empty() ? "no parallel layout fits this offer" : why;
      result.rejected.push_back(p);
    }
  }
  rank(result.plans, options.objective);
  return result;
}

PlanResult plan_training(const PlanModel& model, const std::vector<const Offer*>& offers, const TrainGoal& goal,
                         const PlanOptions& options) {
  PlanResult result;
  std::vector<Plan> points;  // every fitting configuration, for the Pareto front
  for (const Offer* offer : offers) {
    model.begin_offer(*offer);
    const double price = price_of(*offer, options.spot);
    std::optional<Plan> best;
    std::string not_fit;
    std::optional<Plan> fastest;  // for the reason when nothing meets the goal
    // The most instances this offer may use: --max-instances, --max-gpus and what is available.
    int max_n = std::min(options.max_instances, options.max_gpus / offer->gpus);
    if (offer->available_count) max_n = std::min(max_n, *offer->available_count);
    for (int n = 1; n <= max_n; ++n) {
      if (cancel_requested()) break;  // run_command turns the command into kCancelled
      const int total = n * offer->gpus;
      for (int tp : kDegrees) {
        if (tp > offer->gpus) break;
        for (int pp : kDegrees) {
          if (total % (tp * pp) != 0 || !group_placeable(*offer, tp, pp) || !model.layout_allowed(tp, pp)) continue;
          const int dp = total / (tp * pp);
          const TrainPoint tpt = model.train(target_for(*offer, total), dp, tp, pp);
          ++result.configurations;
          if (!tpt.fits || tpt.tokens_per_second <= 0) {
            if (not_fit.empty()) not_fit = tpt.why_not;
            continue;
          }
          Plan p;
          p.offer = offer;
          p.instances = n;
          p.gpus = total;
          p.tp = tp;
          p.pp = pp;
          p.replicas = dp;
          p.batch = static_cast<int>(std::min<int64_t>(tpt.global_batch, std::numeric_limits<int>::max()));
          p.cost_per_hour = n * price;
          p.tokens_per_second = tpt.tokens_per_second;
          // Time: every instance starts (provisioning, then the weights' load) and then the job runs;
          // each is billed that time rounded up to the offer's billing step, at least its minimum.
          set_startup(p, *offer, model);
          p.run_seconds = goal.train_tokens / tpt.tokens_per_second;
          p.seconds_total = p.startup_seconds + p.run_seconds;
          p.billed_seconds = offer->billed_seconds(p.seconds_total);
          p.cost_total = p.cost_per_hour * p.billed_seconds / kSecondsPerHour;
          p.cost_per_million_tokens = p.cost_total / goal.train_tokens * kTokensPerMillion;
          if (!is_answer(p)) {
            if (not_fit.empty()) not_fit = "gives no finite time or cost (price " + fmt("%.4g", price) + " per hour)";
            continue;
          }
          const bool in_time = !goal.deadline_seconds || p.seconds_total <= *goal.deadline_seconds;
          const bool in_budget = !goal.budget || p.cost_total <= *goal.budget;
          p.meets_goal = in_time && in_budget;
          p.reason = "DP" + std::to_string(dp) + " x TP" + std::to_string(tp) + " x PP" + std::to_string(pp) + " on " +
                     std::to_string(total) + " GPU(s): " + fmt("%.4g", p.seconds_total / kSecondsPerHour) +
                     " h with start-up, " + fmt("%.4g", p.cost_total) + " " + offer->currency;
          points.push_back(p);
          if (!fastest || p.seconds_total < fastest->seconds_total) fastest = p;
          if (!p.meets_goal) continue;
          const bool better =
              !best || (options.objective == PlanObjective::kCost
                            ? (p.cost_total < best->cost_total ||
                               (p.cost_total == best->cost_total && p.seconds_total < best->seconds_total))
                            : (p.seconds_total < best->seconds_total ||
                               (p.seconds_total == best->seconds_total && p.cost_total < best->cost_total)));
          if (better) best = p;
        }
      }
    }
    if (best) {
      result.plans.push_back(*best);
      continue;
    }
    Plan p;
    p.offer = offer;
    if (max_n < 1) {
      p.reason = offer->gpus > options.max_gpus
                     ? "an instance has " + std::to_string(offer->gpus) + " GPUs, more than the limit of " +
                           std::to_string(options.max_gpus) + " GPUs (--max-gpus)"
                     : "none available";
    } else if (!fastest) {
      std::string on = "up to " + std::to_string(max_n) + " instances";
      // A shortfall that more instances could have met, had the offer a fabric between them.
      const bool refused = not_fit.rfind(kRefusedPrefix, 0) == 0;
      if (!refused && max_n > 1 && offer->fabric == Fabric::kNone)
        on += " (no fabric between instances: tensor and pipeline parallel stay inside one)";
      p.reason = failure_on(on, not_fit);
    } else if (goal.deadline_seconds && fastest->seconds_total > *goal.deadline_seconds) {
      p = *fastest;
      p.meets_goal = false;
      p.reason = "too slow for the deadline: the fastest layout (" + fastest->reason + ") needs " +
                 fmt("%.4g", fastest->seconds_total / kSecondsPerHour) + " h";
    } else {
      p = *fastest;
      p.meets_goal = false;
      p.reason = "over budget: every layout that meets the deadline costs more than " + fmt("%.4g", *goal.budget);
    }
    result.rejected.push_back(p);
  }
  rank(result.plans, options.objective);
  // Pareto front of cost against time over every fitting configuration.
  std::sort(points.begin(), points.end(), [](const Plan& a, const Plan& b) {
    return a.seconds_total != b.seconds_total ? a.seconds_total < b.seconds_total : a.cost_total < b.cost_total;
  });
  // A point joins the front only when it is cheaper than every faster point by more than
  // kParetoCostStep: under near-linear data-parallel scaling dozens of layouts cost within cents of
  // each other, and listing them all hides the trade-off.
  double cheapest = std::numeric_limits<double>::infinity();
  for (const auto& p : points) {
    if (p.cost_total < cheapest * (1 - kParetoCostStep)) {
      result.pareto.push_back(p);
      cheapest = p.cost_total;
    }
  }
  return result;
}

}  // namespace gpuplan
