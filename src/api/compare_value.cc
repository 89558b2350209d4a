#include "api/compare_value.h"

#include <algorithm>
#include <cmath>

#include "api/fit_common.h"
#include "api/offer_request.h"
#include "core/format.h"
#include "gpuplan/refusal.h"
#include "perf/perf_request.h"

namespace gpuplan::api {

namespace {

// The cheapest usable offer per target (per GPU-hour, under the filter); nullptr where none.
std::vector<const Offer*> cheapest_offers(const OfferSet& offers, const OfferFilter& filter,
                                          const std::vector<TargetRef>& refs) {
  std::vector<const Offer*> cheapest(refs.size(), nullptr);
  for (const auto& o : offers.offers) {
    if (!offer_rejection(o, filter).empty()) continue;
    for (size_t i = 0; i < refs.size(); ++i) {
      if (o.target.id() != refs[i].id()) continue;
      if (!cheapest[i] || *o.price_per_gpu_hour(filter.spot) < *cheapest[i]->price_per_gpu_hour(filter.spot)) {
        cheapest[i] = &o;
      }
    }
  }
  return cheapest;
}

// The request's workload: every key but `gpu` and the offers' keys, read as perf reads it.
Result<perf::PerfSetup> value_setup(const Json& body) {
  Json perf_req = Json::object();
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it.key() != "gpu" && !is_offer_key(it.key())) perf_req[it.key()] = it.value();
  }
  return perf::parse_perf_setup(perf_req);
}

// The speed the workload is compared by: serving tokens (inference) or training tokens per second,
// samples for a CNN.
std::string value_metric(const perf::PerfSetup& s) {
  const bool infer = s.workload.task == Task::kInfer;
  return infer ? (s.arch.cnn ? "samples_per_second" : "serving_tokens_per_second")
               : (s.arch.cnn ? "train_samples_per_second" : "train_tokens_per_second");
}

// The price metrics of one target on its cheapest offer (nullptr: none): price per GPU-hour, and bf16
// TFLOPS and memory GB per dollar-hour.
void add_price_metrics(const TargetRef& ref, const Offer* cheapest, bool spot, Json& v) {
  if (!cheapest) {
    v["offer"] = nullptr;
    v["price_per_gpu_hour"] = nullptr;
    return;
  }
  const double price = *cheapest->price_per_gpu_hour(spot);
  const Target one{ref, 1, Link::kPcie};
  v["offer"] = cheapest->id();
  v["price_per_gpu_hour"] = sig(price);
  v["captured_at"] = cheapest->captured_at;
  if (auto bf16 = one.peak_tflops(Precision::kBf16)) v["bf16_tflops_per_dollar_hour"] = sig(*bf16 / price);
  v["memory_gb_per_dollar_hour"] = sig(bytes_to_gb(one.memory_total_bytes()) / price);
}

// The workload's speed per GPU on `t` in the setup's metric (0 where it does not run), with "fits"
// and, when it does not fit, the refusal or the memory it lacks, in `v`.
Result<double> speed_per_gpu(const perf::PerfSetup& setup, perf::MemoryCache& memory, const Target& t, Json& v) {
  GPUPLAN_TRY(verdict, memory.verdict(t));
  const PerfDevice device = perf_device(t);
  const PerfRun run = perf::run_for(setup, device, t.count);
  if (!verdict.fits) {
    // Why, as fit and perf say it: a refusal (no engine runs it) or the memory it lacks.
    v["fits"] = false;
    if (verdict.refusal) {
      v["refusal"] = refusal_code_name(verdict.refusal->code);
      v["reason"] = verdict.refusal->message;
    } else {
      v["reason"] = out_of_memory_reason(verdict.total_bytes, verdict.limit_bytes);
    }
    return 0.0;
  }
  if (setup.workload.task == Task::kInfer && !setup.arch.cnn) {
    const ServingPerf sp =
        predict_serving(setup.arch, device, setup.workload, run, setup.efficiency, verdict.serving_max_batch, 0);
    v["fits"] = verdict.serving_max_batch > 0;
    return sp.max_throughput_tokens_per_second / t.count;
  }
  v["fits"] = true;
  if (setup.workload.task == Task::kInfer) {
    const InferencePerf inf = predict_inference(setup.arch, device, setup.workload, run, setup.efficiency);
    return static_cast<double>(setup.workload.batch) / inf.total_seconds / t.count;
  }
  const TrainPerf tr = predict_training(setup.arch, device, setup.workload, run, setup.efficiency);
  return (setup.arch.cnn ? tr.samples_per_second : tr.tokens_per_second) / t.count;
}

// What the value metrics are measured against: the prices and, with a workload, its metric.
Json value_basis(const OfferFilter& filter, const perf::PerfSetup* setup, const std::string& metric) {
  Json basis{{"prices", filter.spot ? "spot, per GPU-hour, cheapest usable offer"
                                    : "on demand, per GPU-hour, cheapest usable offer"},
             {"now", filter.now}};
  if (setup) {
    basis["workload"] = workload_json(setup->workload);
    basis["metric"] = metric;
    basis["units_per_dollar"] =
        metric.find("samples") != std::string::npos ? "samples per dollar" : "tokens per dollar";
  }
  return basis;
}

}  // namespace

Status add_value_metrics(const Context& ctx, const Json& body, const std::vector<TargetRef>& refs, Json& out) {
  const bool with_offers = body.contains("offers") || body.contains("spot") || body.contains("provider") ||
                           body.contains("region") || body.contains("max_age") || body.contains("source");
  const bool with_workload = body.contains("model");
  if (!with_offers && !with_workload) return Status::Ok();
  const Request req(body);
  // Cheapest usable offer per target (per GPU-hour): the shipped snapshot unless offers are given, and
  // the market's live rows where the server passed them (`market`).
  GPUPLAN_TRY(offers, offers_from_request(ctx, req));
  GPUPLAN_TRY(filter, offer_filter_from_request(req));
  const std::vector<const Offer*> cheapest = cheapest_offers(offers, filter, refs);
  // The workload's speed per device on each target: serving throughput at the largest batch memory
  // allows (inference), or training tokens (samples) per second per GPU.
  std::optional<perf::PerfSetup> setup;
  if (with_workload) {
    GPUPLAN_TRY(s, value_setup(body));
    setup = s;
  }
  const std::string metric = setup ? value_metric(*setup) : "";
  std::optional<perf::MemoryCache> memory;
  if (setup) memory.emplace(*setup);
  for (size_t i = 0; i < refs.size(); ++i) {
    Json v = Json::object();
    const Target t = Target::linked(refs[i], std::max(1, setup ? setup->workload.gpus() : 1));
    add_price_metrics(refs[i], cheapest[i], filter.spot, v);
    if (setup) {
      GPUPLAN_TRY(per_gpu, speed_per_gpu(*setup, *memory, t, v));
      const double watts = t.tdp_w();
      // No throughput for a target that does not run it (0 would read as a measured rate).
      v[metric + "_per_gpu"] = v["fits"].get<bool>() ? sig(per_gpu) : Json(nullptr);
      if (watts > 0 && per_gpu > 0) v[metric + "_per_w"] = sig(per_gpu / watts);
      if (cheapest[i] && per_gpu > 0) {
        v["units_per_dollar"] = sig(per_gpu * kSecondsPerHour / *cheapest[i]->price_per_gpu_hour(filter.spot));
      }
    }
    out["targets"][i]["value"] = std::move(v);
  }
  out["value_basis"] = value_basis(filter, setup ? &*setup : nullptr, metric);
  return Status::Ok();
}

}  // namespace gpuplan::api
