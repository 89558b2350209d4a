// The planner's search and ranking, with a PlanModel whose answers are known by construction.
#include <gtest/gtest.h>

#include "gpuplan/plan.h"

namespace gpuplan {
namespace {

// A model that fits on any GPU with at least `need_gib` per device (split evenly by tp x pp), serves a
// batch with TPOT = base x (1 + batch/64) / devices, and trains at 1000 tokens/s per GPU.
class ToyModel : public PlanModel {
 public:
  double need_gib = 30;
  int max_batch_per_spare_gib = 2;
  int max_serving_batch(const Target& t, int tp, int pp, std::string* why) const override {
    const double per_device_gib = t.memory_total_bytes() / kBytesPerGib;
    const double need = need_gib / (tp * pp);
    if (per_device_gib < need) {
      *why = "needs " + std::to_string(need) + " GiB per GPU";
      return 0;
    }
    return std::max(1, static_cast<int>((per_device_gib - need) * max_batch_per_spare_gib));
  }
  ServePoint serve(const Target&, int tp, int pp, int batch) const override {
    const double tpot = 0.02 * (1.0 + batch / 64.0) / (tp * pp);
    return ServePoint{0.1, tpot};
  }
  TrainPoint train(const Target& t, int dp, int tp, int pp) const override {
    TrainPoint p;
    p.fits = t.memory_total_bytes() / kBytesPerGib * tp * pp >= need_gib * 2;
    p.why_not = p.fits ? "" : "weights, gradients and optimizer state do not fit";
    p.tokens_per_second = 1000.0 * dp * tp * pp;
    return p;
  }
  bool layout_allowed(int tp, int pp) const override { return tp <= 8 && pp <= 8; }
};

Offer make_offer(const char* name, const char* gpu, int gpus, double price, std::optional<double> spot = {}) {
  Offer o;
  o.provider = "p";
  o.region = "r";
  o.name = name;
  o.target = *Catalog::embedded()->resolve(gpu);
  o.gpus = gpus;
  o.interconnect = gpus > 1 ? Link::kNvlink : Link::kPcie;
  o.price_hour = price;
  o.spot_price_hour = spot;
  o.currency = "USD";
  return o;
}

TEST(PlanSearch, CheapestFeasibleServingPlanWins) {
  ToyModel m;
  Offer cheap_small = make_offer("cheap-24gb", "l4", 1, 0.5);  // 24 GB: does not fit 30 GiB
  Offer a100 = make_offer("a100", "a100-80gb-sxm4", 1, 2.0);
  Offer h100 = make_offer("h100", "h100-80gb-sxm5", 1, 3.0);
  ServeGoal g{5, 512, 256, std::nullopt, std::nullopt};
  auto r = plan_serving(m, {&cheap_small, &a100, &h100}, g, PlanOptions{});
  ASSERT_EQ(r.plans.size(), 2u);
  EXPECT_EQ(r.plans[0].offer, &a100);
  ASSERT_EQ(r.rejected.size(), 1u);
  EXPECT_EQ(r.rejected[0].offer, &cheap_small);
  EXPECT_NE(r.rejected[0].reason.find("does not fit"), std::string::npos);
  EXPECT_GE(r.plans[0].capacity_requests_per_second, 5.0);
  EXPECT_GT(r.configurations, 0);
}

TEST(PlanSearch, LatencyTargetRejectsWithReason) {
  ToyModel m;
  Offer a100 = make_offer("a100", "a100-80gb-sxm4", 1, 2.0);
  ServeGoal g{1, 512, 256, std::nullopt, 0.001};  // 1 ms per token: impossible
  auto r = plan_serving(m, {&a100}, g, PlanOptions{});
  EXPECT_TRUE(r.plans.empty());
  ASSERT_EQ(r.rejected.size(), 1u);
  EXPECT_NE(r.rejected[0].reason.find("latency"), std::string::npos);
}

TEST(PlanSearch, TighterLatencyNeedsMoreGpusPerReplica) {
  ToyModel m;
  Offer node = make_offer("8x", "a100-80gb-sxm4", 8, 16.0);
  ServeGoal g{1, 512, 256, std::nullopt, 0.006};  // needs tp x pp >= 4 in the toy model
  auto r = plan_serving(m, {&node}, g, PlanOptions{});
  ASSERT_EQ(r.plans.size(), 1u);
  EXPECT_GE(r.plans[0].tp * r.plans[0].pp, 4);
  EXPECT_LE(r.plans[0].tpot_seconds, 0.006);
}

TEST(PlanSearch, OnlySpotMakesAnOfferCheapest) {
  ToyModel m;
  Offer a = make_offer("a", "a100-80gb-sxm4", 1, 2.0, 1.9);
  Offer b = make_offer("b", "a100-80gb-sxm4", 1, 2.5, 0.8);
  ServeGoal g{1, 512, 256, std::nullopt, std::nullopt};
  EXPECT_EQ(plan_serving(m, {&a, &b}, g, PlanOptions{}).plans[0].offer, &a);
  PlanOptions spot;
  spot.spot = true;
  EXPECT_EQ(plan_serving(m, {&a, &b}, g, spot).plans[0].offer, &b);
}

TEST(PlanSearch, DeadlineOnlyALargerInstanceMeets) {
  ToyModel m;
  Offer one = make_offer("1x", "a100-80gb-sxm4", 1, 1.0);
  Offer eight = make_offer("8x", "a100-80gb-sxm4", 8, 10.0);
  PlanOptions opt;
  opt.max_instances = 1;
  TrainGoal g{1e9, 3600.0 * 48, std::nullopt};  // 1e9 tokens: 1 GPU needs 278 h, 8 GPUs 35 h
  auto r = plan_training(m, {&one, &eight}, g, opt);
  ASSERT_EQ(r.plans.size(), 1u);
  EXPECT_EQ(r.plans[0].offer, &eight);
  ASSERT_EQ(r.rejected.size(), 1u);
  EXPECT_NE(r.rejected[0].reason.find("too slow for the deadline"), std::string::npos);
  // Without a deadline the single GPU is cheapest (same cost per GPU-hour, 1.0 < 10/8).
  auto free = plan_training(m, {&one, &eight}, TrainGoal{1e9, std::nullopt, std::nullopt}, opt);
  EXPECT_EQ(free.plans[0].offer, &one);
  // The Pareto front holds no plan that another beats on both cost and time.
  for (const auto& a : free.pareto) {
    for (const auto& b : free.pareto) {
      EXPECT_FALSE(b.cost_total < a.cost_total && b.seconds_total < a.seconds_total);
    }
  }
  EXPECT_GE(free.pareto.size(), 2u);
}

TEST(PlanSearch, OverBudget) {
  ToyModel m;
  Offer one = make_offer("1x", "a100-80gb-sxm4", 1, 1.0);
  auto r = plan_training(m, {&one}, TrainGoal{1e9, std::nullopt, 10.0}, PlanOptions{});
  ASSERT_EQ(r.rejected.size(), 1u);
  EXPECT_NE(r.rejected[0].reason.find("over budget"), std::string::npos);
}

// Issue #18: tensor and pipeline parallelism stay inside one instance unless the offer states a fabric.
// The toy model needs 120 GiB to train: two A100-80GB devices, never one. On single-GPU instances the old
// planner pipelined over two separately rented machines (PP2 on 2 instances); now it refuses, and takes
// the same GPUs when they sit in one instance or the offer has InfiniBand between instances.
TEST(PlanSearch, NoPipelineAcrossInstancesWithoutAFabric) {
  ToyModel m;
  m.need_gib = 60;
  Offer plain = make_offer("1x", "a100-80gb-sxm4", 1, 2.0);
  Offer ib = make_offer("1x-ib", "a100-80gb-sxm4", 1, 2.0);
  ib.fabric = Fabric::kInfiniband;
  Offer two = make_offer("2x", "a100-80gb-sxm4", 2, 4.0);
  auto r = plan_training(m, {&plain, &ib, &two}, TrainGoal{1e8, std::nullopt, std::nullopt}, PlanOptions{});
  for (const auto& p : r.plans) {
    EXPECT_NE(p.offer, &plain) << p.reason;
    if (p.offer == &ib) EXPECT_GE(p.pp * p.tp, 2);
    if (p.offer == &two) EXPECT_LE(p.tp * p.pp, 2);
  }
  for (const auto& p : r.pareto) EXPECT_NE(p.offer, &plain) << p.reason;
  ASSERT_EQ(r.plans.size(), 2u);
  ASSERT_EQ(r.rejected.size(), 1u);
  EXPECT_EQ(r.rejected[0].offer, &plain);
  EXPECT_NE(r.rejected[0].reason.find("no fabric between instances"), std::string::npos) << r.rejected[0].reason;
  // Serving keeps a replica inside one instance on any offer, and data-parallel replicas over several
  // instances stay allowed: 1-GPU instances serve a model that fits one GPU with a replica on each.
  ToyModel small;
  ServeGoal g{40, 512, 256, std::nullopt, std::nullopt};
  auto s = plan_serving(small, {&plain}, g, PlanOptions{});
  ASSERT_EQ(s.plans.size(), 1u);
  EXPECT_GT(s.plans[0].instances, 1);
  EXPECT_EQ(s.plans[0].tp * s.plans[0].pp, 1);
}

// A serving replica never straddles two instances: on 3-GPU instances, replicas of 2 GPUs go one per
// instance (the old count put 3 replicas on 2 instances, one across both).
TEST(PlanSearch, ServingReplicasStayWholeInsideAnInstance) {
  ToyModel m;
  m.need_gib = 100;  // two A100-80GB per replica
  Offer three = make_offer("3x", "a100-80gb-sxm4", 3, 6.0);
  ServeGoal g{60, 512, 256, std::nullopt, std::nullopt};
  auto r = plan_serving(m, {&three}, g, PlanOptions{});
  ASSERT_EQ(r.plans.size(), 1u) << (r.rejected.empty() ? "" : r.rejected[0].reason);
  const Plan& p = r.plans[0];
  EXPECT_EQ(p.tp * p.pp, 2);
  EXPECT_EQ(p.replicas, p.instances) << p.reason;
}

// Issue #18: start-up and billing steps count in a training job's cost and time. With the toy model's
// linear scaling every instance count costs the same without them, and the old planner broke the tie
// towards the most GPUs (16 instances for a few minutes); with 300 s of provisioning per instance the
// single instance is the cheapest, and its time and bill include the start-up.
TEST(PlanSearch, StartupMakesTheSmallestCountCheapestForAShortJob) {
  ToyModel m;
  Offer one = make_offer("1x", "a100-80gb-sxm4", 1, 3.6);
  one.startup_seconds = 300;
  one.min_billable_seconds = 60;
  auto r = plan_training(m, {&one}, TrainGoal{1e6, std::nullopt, std::nullopt}, PlanOptions{});  // 1000 s
  ASSERT_EQ(r.plans.size(), 1u);
  const Plan& p = r.plans[0];
  EXPECT_EQ(p.instances, 1);
  EXPECT_DOUBLE_EQ(p.startup_seconds, 300);
  EXPECT_DOUBLE_EQ(p.run_seconds, 1000);
  EXPECT_DOUBLE_EQ(p.seconds_total, 1300);
  EXPECT_DOUBLE_EQ(p.billed_seconds, 1300);
  EXPECT_NEAR(p.cost_total, 3.6 * 1300 / 3600, 1e-12);
  // Faster plans exist (more instances) and are dearer: the front has them, cheapest last.
  ASSERT_GE(r.pareto.size(), 2u);
  EXPECT_EQ(r.pareto.back().instances, 1);
}

TEST(PlanSearch, BillingStepRoundsUpAndTheMinimumApplies) {
  ToyModel m;
  Offer hourly = make_offer("1x", "a100-80gb-sxm4", 1, 2.0);
  hourly.billing = BillingUnit::kHour;
  PlanOptions one;
  one.max_instances = 1;
  auto r = plan_training(m, {&hourly}, TrainGoal{1e6, std::nullopt, std::nullopt}, one);  // 1000 s
  ASSERT_EQ(r.plans.size(), 1u);
  EXPECT_DOUBLE_EQ(r.plans[0].billed_seconds, 3600);
  EXPECT_DOUBLE_EQ(r.plans[0].cost_total, 2.0);
  EXPECT_DOUBLE_EQ(r.plans[0].seconds_total, 1000);
  Offer minute = make_offer("1x", "a100-80gb-sxm4", 1, 2.0);
  minute.billing = BillingUnit::kMinute;
  EXPECT_DOUBLE_EQ(minute.billed_seconds(61), 120);
  EXPECT_DOUBLE_EQ(minute.billed_seconds(120), 120);
  minute.min_billable_seconds = 300;
  EXPECT_DOUBLE_EQ(minute.billed_seconds(61), 300);
  Offer second = make_offer("1x", "a100-80gb-sxm4", 1, 2.0);
  EXPECT_DOUBLE_EQ(second.billed_seconds(9.5), 10);
}

// The weights' load counts in the start-up at kModelLoadBytesPerSecond.
TEST(PlanSearch, WeightsLoadCountsInTheStartup) {
  class Heavy : public ToyModel {
   public:
    double weights_bytes() const override { return 10 * kModelLoadBytesPerSecond; }
  } m;
  Offer one = make_offer("1x", "a100-80gb-sxm4", 1, 3.6);
  one.startup_seconds = 100;
  auto t = plan_training(m, {&one}, TrainGoal{1e6, std::nullopt, std::nullopt}, PlanOptions{});
  ASSERT_EQ(t.plans.size(), 1u);
  EXPECT_DOUBLE_EQ(t.plans[0].load_seconds, 10);
  EXPECT_DOUBLE_EQ(t.plans[0].startup_seconds, 110);
  auto s = plan_serving(m, {&one}, ServeGoal{1, 512, 256, std::nullopt, std::nullopt}, PlanOptions{});
  ASSERT_EQ(s.plans.size(), 1u);
  EXPECT_DOUBLE_EQ(s.plans[0].startup_seconds, 110);
  EXPECT_DOUBLE_EQ(s.plans[0].billed_seconds, 0);
}

// --max-gpus bounds training and serving alike, and an instance larger than the bound is rejected
// naming it (the old training reason said "does not fit on up to 16 instances").
TEST(PlanSearch, MaxGpusBoundsEveryPath) {
  ToyModel m;
  Offer eight = make_offer("8x", "a100-80gb-sxm4", 8, 16.0);
  Offer one = make_offer("1x", "a100-80gb-sxm4", 1, 2.0);
  PlanOptions opt;
  opt.max_gpus = 4;
  auto t = plan_training(m, {&eight, &one}, TrainGoal{1e9, std::nullopt, std::nullopt}, opt);
  ASSERT_EQ(t.rejected.size(), 1u);
  EXPECT_NE(t.rejected[0].reason.find("--max-gpus"), std::string::npos) << t.rejected[0].reason;
  for (const auto& p : t.pareto) EXPECT_LE(p.gpus, 4);
  for (const auto& p : t.plans) EXPECT_LE(p.gpus, 4);
  auto s = plan_serving(m, {&eight, &one}, ServeGoal{200, 512, 256, std::nullopt, std::nullopt}, opt);
  for (const auto& p : s.plans) EXPECT_LE(p.gpus, 4);
  bool eight_rejected = false;
  for (const auto& p : s.rejected)
    eight_rejected |= p.offer == &eight && p.reason.find("--max-gpus") != std::string::npos;
  EXPECT_TRUE(eight_rejected);
  EXPECT_EQ(PlanOptions{}.max_gpus, 64);
}

// Issue #18: a proxy (a stand-in priced from another product) was recommended as the cheapest; it now ranks
// after every real offer that meets the goal, however much cheaper it is, and leads only when none does.
TEST(PlanSearch, AProxyRanksAfterEveryRealOfferThatMeetsTheGoal) {
  ToyModel m;
  Offer proxy = make_offer("share", "a100-80gb-sxm4", 1, 0.5);
  proxy.proxy = "a share of another GPU";
  Offer real = make_offer("a100", "a100-80gb-sxm4", 1, 2.0);
  Offer dearer = make_offer("h100", "h100-80gb-sxm5", 1, 3.0);
  Offer too_small = make_offer("l4", "l4", 1, 0.1);  // does not fit: rejected, never ranked
  ServeGoal g{1, 512, 256, std::nullopt, std::nullopt};
  for (PlanObjective objective : {PlanObjective::kCost, PlanObjective::kTime}) {
    PlanOptions options;
    options.objective = objective;
    auto r = plan_serving(m, {&proxy, &real, &dearer, &too_small}, g, options);
    ASSERT_EQ(r.plans.size(), 3u);
    EXPECT_FALSE(r.plans[0].offer->is_proxy());
    EXPECT_FALSE(r.plans[1].offer->is_proxy());
    EXPECT_EQ(r.plans[2].offer, &proxy);
    EXPECT_TRUE(r.plans[2].meets_goal);
    TrainGoal t;
    t.train_tokens = 1e6;
    auto tr = plan_training(m, {&proxy, &real}, t, options);
    ASSERT_EQ(tr.plans.size(), 2u);
    EXPECT_EQ(tr.plans[0].offer, &real);
  }
  // Alone, the proxy is still a plan (marked in every output), the only one that meets the goal.
  auto alone = plan_serving(m, {&proxy, &too_small}, g, PlanOptions{});
  ASSERT_EQ(alone.plans.size(), 1u);
  EXPECT_EQ(alone.plans[0].offer, &proxy);
}

}  // namespace
}  // namespace gpuplan
