#include "plan/plan_model.h"

#include <cmath>

#include "gpuplan/formats.h"

namespace gpuplan {

namespace {
// Network between two separately rented instances with no fabric: 10 Gbit/s (1.25 GB/s) per instance,
// the "up to 10 Gigabit" of the smallest GPU instances (AWS g5.xlarge / g6.xlarge instance-type pages);
// larger instances have more, so a plan over plain instances is never predicted faster than it runs.
constexpr double kPlainInstanceNetworkBytesPerSecond = 1.25e9;
}  // namespace

WorkloadPlanModel::Layout& WorkloadPlanModel::layout(int tp, int pp) const {
  auto key = std::make_pair(tp, pp);
  auto it = layouts_.find(key);
  if (it != layouts_.end()) return it->second;
  Layout l;
  l.setup = base_;
  l.setup.workload.tp = tp;
  l.setup.workload.pp = pp;
  l.setup.workload.count = 0;
  l.setup.run.dp = 0;
  l.at_batch = l.setup.workload;
  auto& stored = layouts_.emplace(key, std::move(l)).first->second;
  // The cache keeps a reference to the setup: make it after the setup has its final address.
  stored.memory = std::make_unique<perf::MemoryCache>(stored.setup);
  return stored;
}

bool WorkloadPlanModel::layout_allowed(int tp, int pp) const {
  const Model& m = *base_.workload.model;
  if (m.kind == ModelKind::kCnn) return tp == 1 && pp == 1;
  // The refusal rules (refusal.h): heads and KV heads split evenly over tp, a layer per pipeline stage.
  return !parallel_refusal_code(m, rules_engine(base_.workload.engine, base_.workload.task), tp, pp);
}

int WorkloadPlanModel::max_serving_batch(const Target& t, int tp, int pp, std::string* why_not) const {
  Layout& l = layout(tp, pp);
  auto v = l.memory->verdict(t);
  if (!v) {
    *why_not = v.error().message;
    return 0;
  }
  if (v->refusal) {
    *why_not = std::string(kRefusedPrefix) + v->refusal->message;
    return 0;
  }
  if (v->serving_max_batch < 1) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "needs %.1f GiB per GPU for one sequence, %.1f GiB available",
                  v->total_bytes / kBytesPerGib, v->capacity_bytes / kBytesPerGib);
    *why_not = buf;
    return 0;
  }
  return static_cast<int>(std::min<int64_t>(v->serving_max_batch, 1 << 20));
}

ServePoint WorkloadPlanModel::serve(const Target& t, int tp, int pp, int batch) const {
  Layout& l = layout(tp, pp);
  const PerfDevice device = perf_device(t);
  const PerfRun run = perf::run_for(l.setup, device, t.count);
  Workload& w = l.at_batch;
  // With continuous batching a new request's first token waits for its own prefill, not the batch's.
  w.batch = 1;
  const InferencePerf first = predict_inference(l.setup.arch, device, w, run, efficiency(l));
  w.batch = batch;
  const InferencePerf at = predict_inference(l.setup.arch, device, w, run, efficiency(l));
  // Prefills of arriving requests interleave with decode steps: in steady state batch / output_tokens
  // requests finish (and as many start, each with its prefill) per decode step.
  const double prefills_per_step = static_cast<double>(batch) / static_cast<double>(perf_output_tokens(w));
  return ServePoint{first.ttft_seconds, at.tpot_seconds + prefills_per_step * first.ttft_seconds};
}

TrainPoint WorkloadPlanModel::train(const Target& t, int dp, int tp, int pp) const {
  Layout& l = layout(tp, pp);
  TrainPoint p;
  auto v = l.memory->verdict(t);
  if (!v) {
    p.why_not = v.error().message;
    return p;
  }
  if (v->refusal) {
    p.why_not = std::string(kRefusedPrefix) + v->refusal->message;
    return p;
  }
  if (!v->fits) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "needs %.1f GiB per GPU with DP%d x TP%d x PP%d, %.1f GiB available",
                  v->total_bytes / kBytesPerGib, dp, tp, pp, v->capacity_bytes / kBytesPerGib);
    p.why_not = buf;
    return p;
  }
  PerfDevice device = perf_device(t);
  // A node is one instance of the offer: data parallelism beyond it crosses the network between
  // instances, a fabric's (the performance model's per-GPU NIC) or, without one, the plain network.
  if (offer_gpus_ > 0) {
    device.devices_per_node = offer_gpus_;
    if (offer_fabric_ == Fabric::kNone)
      device.internode_bytes_per_second = kPlainInstanceNetworkBytesPerSecond / offer_gpus_;
  }
  PerfRun run = perf::run_for(l.setup, device, t.count);
  run.dp = dp;
  const TrainPerf tr = predict_training(l.setup.arch, device, l.setup.workload, run, efficiency(l));
  p.fits = true;
  p.tokens_per_second = l.setup.arch.cnn ? tr.samples_per_second : tr.tokens_per_second;
  // Sequences per optimizer step, as the performance model counts them: the global batch given, or
  // the micro-batch on every replica, in whole micro-steps.
  const int64_t micro = std::max<int64_t>(1, l.setup.workload.batch) * std::max(1, dp);
  const int64_t global = run.global_batch > 0 ? run.global_batch : micro;
  const auto steps =
      static_cast<int64_t>(std::max(1.0, std::round(static_cast<double>(global) / static_cast<double>(micro))));
  p.global_batch = steps * micro;
  return p;
}

double WorkloadPlanModel::weights_bytes() const {
  const Workload& w = base_.workload;
  return w.model ? model_weight_bytes(*w.model, w.weights).total_bytes : 0;
}

void WorkloadPlanModel::begin_offer(const Offer& offer) const {
  offer_gpus_ = offer.gpus;
  offer_fabric_ = offer.fabric;
  offer_efficiency_ = nullptr;
  if (!use_measured_ || offer.measured_efficiency.empty()) return;
  auto it = measured_.find(offer.measured_efficiency);
  if (it == measured_.end()) {
    // The market wrote the text (market_bench.cc); one it cannot read plans with the request's figures.
    auto e = parse_efficiency(offer.measured_efficiency, base_.efficiency);
    if (!e) return;
    it = measured_.emplace(offer.measured_efficiency, *e).first;
  }
  offer_efficiency_ = &it->second;
}

}  // namespace gpuplan
