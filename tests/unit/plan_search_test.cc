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

}  // namespace
}  // namespace gpuplan
