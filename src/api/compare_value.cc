#include "api/compare_value.h"

#include <algorithm>
#include <cmath>

#include "api/fit_common.h"
#include "api/offer_request.h"
#include "gpuplan/refusal.h"
#include "perf/perf_request.h"

namespace gpuplan::api {

namespace {

constexpr double kSecondsPerHour = 3600.0;

Json sig(double v) {
  if (!std::isfinite(v)) return nullptr;
  if (v == 0) return 0.0;
  const double scale = std::pow(10.0, 3 - static_cast<int>(std::floor(std::log10(std::fabs(v)))));
  return std::round(v * scale) / scale;
}

}  // namespace

Status add_value_metrics(const Context& ctx, const Json& body, const std::vector<TargetRef>& refs, Json& out) {
  const bool with_offers = body.contains("offers") || body.contains("spot") || body.contains("provider") ||
                           body.contains("region") || body.contains("max_age");
  const bool with_workload = body.contains("model");
  if (!with_offers && !with_workload) return Status::Ok();
  Request req(body);

  // Cheapest usable offer per target (per GPU-hour): the shipped snapshot unless offers are given.
  std::vector<const Offer*> cheapest(refs.size(), nullptr);
  OfferSet offers;
  OfferFilter filter;
  {
    auto set = offers_from_request(ctx, req);
    if (!set) return set.error();
    offers = std::move(*set);
    auto f = offer_filter_from_request(req);
    if (!f) return f.error();
    filter = *f;
  }
  for (const auto& o : offers.offers) {
    if (!offer_rejection(o, filter).empty()) continue;
    for (size_t i = 0; i < refs.size(); ++i) {
      if (o.target.id() != refs[i].id()) continue;
      if (!cheapest[i] || *o.price_per_gpu_hour(filter.spot) < *cheapest[i]->price_per_gpu_hour(filter.spot)) {
        cheapest[i] = &o;
      }
    }
  }

  // The workload's speed per device on each target: serving throughput at the largest batch memory
  // allows (inference), or training tokens (samples) per second per GPU.
  std::optional<perf::PerfSetup> setup;
  std::string metric;
  if (with_workload) {
    Json perf_req = Json::object();
    for (auto it = body.begin(); it != body.end(); ++it) {
      if (it.key() != "gpu" && !is_offer_key(it.key())) {
        perf_req[it.key()] = it.value();
      }
    }
    auto s = perf::parse_perf_setup(perf_req);
    if (!s) return s.error();
    setup = std::move(*s);
    const bool infer = setup->workload.task == Task::kInfer;
    metric = infer ? (setup->arch.cnn ? "samples_per_second" : "serving_tokens_per_second")
                   : (setup->arch.cnn ? "train_samples_per_second" : "train_tokens_per_second");
  }
  std::optional<perf::MemoryCache> memory;
  if (setup) memory.emplace(*setup);

  for (size_t i = 0; i < refs.size(); ++i) {
    Json v = Json::object();
    Target t = Target::linked(refs[i], std::max(1, setup ? setup->workload.gpus() : 1));
    const double watts = t.tdp_w();
    if (cheapest[i]) {
      const double price = *cheapest[i]->price_per_gpu_hour(filter.spot);
      v["offer"] = cheapest[i]->id();
      v["price_per_gpu_hour"] = sig(price);
      v["captured_at"] = cheapest[i]->captured_at;
      if (auto bf16 = Target{refs[i], 1, Link::kPcie}.peak_tflops(Precision::kBf16)) {
        v["bf16_tflops_per_dollar_hour"] = sig(*bf16 / price);
      }
      v["memory_gb_per_dollar_hour"] = sig(Target{refs[i], 1, Link::kPcie}.memory_total_bytes() / kBytesPerGb / price);
    } else {
      v["offer"] = nullptr;
      v["price_per_gpu_hour"] = nullptr;
    }
    if (setup) {
      auto verdict = memory->verdict(t);
      if (!verdict) return verdict.error();
      const PerfDevice device = perf_device(t);
      const PerfRun run = perf::run_for(*setup, device, t.count);
      double per_gpu = 0;
      if (!verdict->fits) {
        // Why, as fit and perf say it: a refusal (no engine runs it) or the memory it lacks.
        v["fits"] = false;
        if (verdict->refusal) {
          v["refusal"] = refusal_code_name(verdict->refusal->code);
          v["reason"] = verdict->refusal->message;
        } else {
          v["reason"] = out_of_memory_reason(verdict->total_bytes, verdict->limit_bytes);
        }
      } else if (setup->workload.task == Task::kInfer && !setup->arch.cnn) {
        const ServingPerf sp = predict_serving(setup->arch, device, setup->workload, run, setup->efficiency,
                                               verdict->serving_max_batch, 0);
        per_gpu = sp.max_throughput_tokens_per_second / t.count;
        v["fits"] = verdict->serving_max_batch > 0;
      } else if (setup->workload.task == Task::kInfer) {
        const InferencePerf inf = predict_inference(setup->arch, device, setup->workload, run, setup->efficiency);
        per_gpu = static_cast<double>(setup->workload.batch) / inf.total_seconds / t.count;
        v["fits"] = true;
      } else {
        const TrainPerf tr = predict_training(setup->arch, device, setup->workload, run, setup->efficiency);
        per_gpu = (setup->arch.cnn ? tr.samples_per_second : tr.tokens_per_second) / t.count;
        v["fits"] = true;
      }
      // No throughput for a target that does not run it (0 would read as a measured rate).
      v[metric + "_per_gpu"] = v["fits"].get<bool>() ? sig(per_gpu) : Json(nullptr);
      if (watts > 0 && per_gpu > 0) v[metric + "_per_w"] = sig(per_gpu / watts);
      if (cheapest[i] && per_gpu > 0) {
        v["units_per_dollar"] = sig(per_gpu * kSecondsPerHour / *cheapest[i]->price_per_gpu_hour(filter.spot));
      }
    }
    out["targets"][i]["value"] = std::move(v);
  }
  Json basis{{"prices", filter.spot ? "spot, per GPU-hour, cheapest usable offer"
                                    : "on demand, per GPU-hour, cheapest usable offer"},
             {"now", filter.now}};
  if (setup) {
    basis["workload"] = workload_json(setup->workload);
    basis["metric"] = metric;
    basis["units_per_dollar"] =
        metric.find("samples") != std::string::npos ? "samples per dollar" : "tokens per dollar";
  }
  out["value_basis"] = std::move(basis);
  return Status::Ok();
}

}  // namespace gpuplan::api
