// Measured figures (issue #16, part 2; docs/market.md, "Measured figures"): the node agent's bench report
// for one of its GPUs, stored per GPU and MIG profile (gpu_bench, migration 0006), and the `measured`
// summary the live offers of that GPU carry.
#include <algorithm>
#include <cstdio>
#include <map>

#include "gpuplan/calibration.h"
#include "gpuplan/catalog.h"
#include "gpuplan/market.h"
#include "gpuplan/perf.h"
#include "market/db.h"
#include "market/market_internal.h"
#include "perf/perf_calibration.h"

namespace gpuplan::market {

namespace {

constexpr int64_t kMsPerSecond = 1000;

template <typename... A>
std::vector<Value> params(A&&... a) {
  return {Value(std::forward<A>(a))...};
}
Error conflict(std::string message, std::string field) {
  return Error{ErrorCode::kConflict, std::move(message), std::move(field)};
}
Value opt_number(double v) { return v > 0 ? Value(v) : Value(std::monostate{}); }
Value opt_int(int v) { return v > 0 ? Value(static_cast<int64_t>(v)) : Value(std::monostate{}); }

std::string num_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// The fitted curves as `--efficiency` text: the shared keys perf's parse_efficiency reads (the 16-bit and
// 8-bit curves, bandwidth, per-kernel cost), the ones the calibration set.
std::string efficiency_text(const CalibrationFit& fit) {
  const PerfEfficiency& e = fit.efficiency;
  std::string out;
  auto add = [&](const char* key, double v) { out += (out.empty() ? "" : ",") + std::string(key) + "=" + num_text(v); };
  auto has = [&](const char* key) { return std::find(fit.keys.begin(), fit.keys.end(), key) != fit.keys.end(); };
  if (has("gemm")) add("gemm", e.gemm_peak_fraction);
  if (has("gemm_half_intensity")) add("gemm_half_intensity", e.gemm_half_intensity);
  if (has("gemm_fp8")) add("gemm_fp8", e.gemm_fp8_peak_fraction);
  if (has("bandwidth")) add("bandwidth", e.bandwidth_fraction);
  if (has("kernel_us")) add("kernel_us", e.kernel_seconds * 1e6);
  return out;
}

Status check_report(const BenchReport& r) {
  if (r.gpu_uuid.empty())
    return usage_error("'gpu_uuid' is required: the GPU of this node the bench measured", "gpu_uuid");
  if (r.gpu_uuid.size() > kMaxNameBytes) {
    return limit_error("'gpu_uuid' is over " + std::to_string(kMaxNameBytes) + " bytes", "gpu_uuid");
  }
  if (r.profile.size() > kMaxNameBytes) {
    return limit_error("'profile' is over " + std::to_string(kMaxNameBytes) + " bytes", "profile");
  }
  if (r.bench_request < 0) {
    return usage_error("'bench_request' must be 0 or a request the heartbeat gave", "bench_request");
  }
  if (r.calibration_text.size() > kCalibrationMaxBytes) {
    return limit_error("'calibration' is over " + std::to_string(kCalibrationMaxBytes) + " bytes (4 MiB)",
                       "calibration");
  }
  return Status{};
}

}  // namespace

Result<BenchResult> Market::put_bench(const AgentPrincipal& a, const BenchReport& report) {
  GPUPLAN_CHECK(check_report(report));
  auto parsed = parse_calibration(report.calibration_text);
  if (!parsed) {
    Error e = parsed.error();
    e.field = "calibration." + e.field;
    return e;
  }
  const Calibration& cal = *parsed;
  if (!cal.device.uuid.empty() && cal.device.uuid != report.gpu_uuid) {
    return usage_error("the calibration measured GPU " + cal.device.uuid + ", not " + report.gpu_uuid,
                       "calibration.device.uuid");
  }
  if (cal.device.mig_profile != report.profile) {
    return usage_error(
        "the calibration measured " +
            (cal.device.mig_profile.empty() ? std::string("the whole GPU") : "MIG profile " + cal.device.mig_profile) +
            ", the report says " + (report.profile.empty() ? std::string("the whole GPU") : report.profile),
        "profile");
  }
  const Catalog& catalog = internal::catalog(*impl_);
  const int64_t now = internal::now(*impl_);
  BenchResult out;
  Status s = with_tx(internal::db(*impl_), TxMode::kWrite, [&](Tx& tx) -> Status {
    out = BenchResult{};
    GPUPLAN_TRY(gpus, tx.query("SELECT id, catalog_id FROM gpus WHERE node_id = ?1 AND uuid = ?2",
                               params(a.node_id, report.gpu_uuid)));
    if (gpus.empty()) {
      return not_found_error("no GPU " + report.gpu_uuid +
                                 " on this node (PUT /agent/inventory lists the node's GPUs; an agent reports its own)",
                             "gpu_uuid");
    }
    const std::string gpu_id = gpus[0].text(0);
    const std::string catalog_id = gpus[0].text(1);
    if (!cal.device.catalog_id.empty() && cal.device.catalog_id != catalog_id) {
      return usage_error(
          "the calibration measured a " + cal.device.catalog_id + ", GPU " + report.gpu_uuid + " is a " + catalog_id,
          "calibration.device.catalog_id");
    }
    // Fencing of a bench that answers a request: never a request the node was not asked, never a second
    // answer of this GPU to the same (or an older) request.
    GPUPLAN_TRY(node, tx.query("SELECT bench_request FROM nodes WHERE id = ?1", params(a.node_id)));
    const int64_t latest = node.empty() ? 0 : node[0].integer(0);
    if (report.bench_request > latest) {
      return conflict("bench request " + std::to_string(report.bench_request) + " was never made; node " + a.node_id +
                          "'s latest is " + std::to_string(latest),
                      "bench_request");
    }
    GPUPLAN_TRY(prev, tx.query("SELECT bench_request FROM gpu_bench WHERE gpu_id = ?1 AND profile = ?2",
                               params(gpu_id, report.profile)));
    const int64_t answered = prev.empty() ? 0 : prev[0].integer(0);
    if (report.bench_request > 0 && report.bench_request <= answered) {
      return conflict("stale bench: GPU " + report.gpu_uuid + " answered bench request " + std::to_string(answered) +
                          " already; this report answers " + std::to_string(report.bench_request),
                      "bench_request");
    }
    auto ref = catalog.resolve(report.profile.empty() ? catalog_id : catalog_id + "/" + report.profile);
    if (!ref || (!report.profile.empty() && !ref->is_mig())) {
      return usage_error("'" + report.profile + "' is not a MIG profile of " + catalog_id, "profile");
    }
    const PerfDevice device = perf_device(Target::linked(*ref, 1));
    auto fit = fit_calibration(cal, device, default_efficiency());
    if (!fit) {
      Error e = fit.error();
      e.field = "calibration." + e.field;
      return e;
    }
    OfferMeasured& m = out.measured;
    for (const auto& g : cal.gemm) {
      if (g.precision == Precision::kBf16) m.bf16_dense_tflops = std::max(m.bf16_dense_tflops, g.tflops_sustained);
    }
    const double bf16_peak = device.peak(Precision::kBf16);
    m.ratio_to_datasheet = m.bf16_dense_tflops > 0 && bf16_peak > 0 ? m.bf16_dense_tflops * 1e12 / bf16_peak : 0;
    m.memory_gbps = fit->memory_gbps;
    m.ratio = m.memory_gbps > 0 && device.bandwidth_bytes_per_second > 0
                  ? m.memory_gbps * 1e9 / device.bandwidth_bytes_per_second
                  : 0;
    m.pcie_gen = cal.device.pcie_gen;
    m.pcie_width = cal.device.pcie_width;
    m.measured_at = cal.created_at;
    m.method = std::string(kCalibrationMethod);
    m.efficiency = efficiency_text(*fit);
    m.gpus_measured = 1;
    GPUPLAN_TRY(agent, tx.query("SELECT driver_version FROM node_agents WHERE node_id = ?1", params(a.node_id)));
    const std::string driver = agent.empty() ? std::string() : agent[0].text(0);
    out.warnings = perf::calibration_warnings(cal, "of " + report.gpu_uuid, driver, now / kMsPerSecond);
    out.gpu_uuid = report.gpu_uuid;
    out.target = ref->id();
    GPUPLAN_TRY(d, tx.exec("DELETE FROM gpu_bench WHERE gpu_id = ?1 AND profile = ?2", params(gpu_id, report.profile)));
    (void)d;
    const std::vector<Value> row = {
        Value(gpu_id),
        Value(report.profile),
        Value(cal.created_at),
        Value(cal.created_unix_seconds * kMsPerSecond),
        Value(now),
        opt_number(m.bf16_dense_tflops),
        opt_number(m.ratio_to_datasheet),
        opt_number(m.memory_gbps),
        opt_number(m.ratio),
        opt_int(m.pcie_gen),
        opt_int(m.pcie_width),
        cal.device.driver_version.empty() ? Value(std::monostate{}) : Value(cal.device.driver_version),
        Value(m.efficiency),
        Value(report.calibration_text),
        Value(std::max(answered, report.bench_request))};
    GPUPLAN_TRY(n, tx.exec("INSERT INTO gpu_bench (gpu_id, profile, measured_at, measured_at_ms, received_at, "
                           "bf16_dense_tflops, bf16_ratio, memory_gbps, memory_ratio, pcie_gen, pcie_width, "
                           "driver_version, efficiency, calibration, bench_request) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
                           "?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
                           row));
    (void)n;
    if (report.bench_request > 0) {
      GPUPLAN_TRY(u, tx.exec("UPDATE nodes SET bench_answered = ?2 WHERE id = ?1 AND bench_answered < ?2",
                             params(a.node_id, report.bench_request)));
      (void)u;
    }
    out.bench_request = report.bench_request;
    return Status::Ok();
  });
  if (!s) return s.error();
  return out;
}

namespace internal {

Status attach_measured(Market::Impl& m, std::vector<Offer>& offers) {
  if (offers.empty()) return Status::Ok();
  return with_tx(db(m), TxMode::kRead, [&](Tx& tx) -> Status {
    for (Offer& o : offers) o.measured.reset();
    GPUPLAN_TRY(rows, tx.query("SELECT n.provider_id, n.region, g.catalog_id, b.profile, b.bf16_dense_tflops, "
                               "b.bf16_ratio, b.memory_gbps, b.memory_ratio, b.pcie_gen, b.pcie_width, "
                               "b.measured_at, b.efficiency FROM gpu_bench b JOIN gpus g ON g.id = b.gpu_id "
                               "JOIN nodes n ON n.id = g.node_id ORDER BY b.gpu_id, b.profile LIMIT ?1",
                               params(static_cast<int64_t>(kMaxListRows))));
    for (const Row& r : rows) {
      OfferMeasured x;
      x.bf16_dense_tflops = r.number(4);
      x.ratio_to_datasheet = r.number(5);
      x.memory_gbps = r.number(6);
      x.ratio = r.number(7);
      x.pcie_gen = static_cast<int>(r.integer(8));
      x.pcie_width = static_cast<int>(r.integer(9));
      x.measured_at = r.text(10);
      x.method = std::string(kCalibrationMethod);
      x.efficiency = r.text(11);
      // How far below the datasheet: the bf16 ratio, else the bandwidth ratio (lower is worse).
      auto worse = [](const OfferMeasured& a, const OfferMeasured& b) {
        const double ra = a.ratio_to_datasheet > 0 ? a.ratio_to_datasheet : a.ratio;
        const double rb = b.ratio_to_datasheet > 0 ? b.ratio_to_datasheet : b.ratio;
        return ra < rb;
      };
      for (Offer& o : offers) {
        if (o.provider_id != r.text(0) || o.region != r.text(1) || o.gpu != r.text(2) || o.profile != r.text(3))
          continue;
        if (!o.measured) {
          o.measured = x;
          o.measured->gpus_measured = 1;
          continue;
        }
        const int64_t count = o.measured->gpus_measured + 1;
        if (worse(x, *o.measured)) o.measured = x;
        o.measured->gpus_measured = count;
      }
    }
    return Status::Ok();
  });
}

}  // namespace internal

}  // namespace gpuplan::market
