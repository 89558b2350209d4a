// What the performance model reads of a calibration file (schema gpuplan.calibration/1, read by the
// bench's parser, bench::read_calibration) and the fit of the model's efficiency curves to its points.
// docs/model.md, "Calibration".
#include "gpuplan/calibration.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "perf/constants.h"

namespace gpuplan {

namespace {

// The fit: a point enters a precision's GEMM curve when its memory traffic at the measured bandwidth
// takes under this share of its measured time (a compute-bound point; a skinny decode GEMM that streams
// its weights tells the bandwidth, not the curve).
constexpr double kComputeBoundShare = 0.5;
// Memory points of at least this size are "large" (several times the largest L2: B200's 126 MB), the
// regime of the model's bandwidth fraction; smaller ones run from L2 and are faster.
constexpr double kLargeStreamBytes = 256.0 * 1024 * 1024;
// The ramp-up and tail of a small kernel (constants.h kKernelSeconds: ~1-2 us of launch gap inside a
// CUDA graph plus ~3-4 us of ramp and tail): the bench measures the launch floor, the model's per-kernel
// cost adds this share.
constexpr double kKernelRampSeconds = 3.5e-6;
// A GEMM whose partial last wave costs more than this factor of its time (a quarter of the SMs idle for a
// whole wave, or fewer waves than about four) is not a point of the curve on a pre-Hopper GPU.
constexpr double kMaxWaveFactor = 1.25;
// The lowest efficiency fraction a calibration may set: parse_efficiency's floor for gemm and bandwidth.
constexpr double kMinFraction = 0.01;
// Bytes of one element of a GEMM operand in each precision (Precision order).
constexpr std::array<double, 8> kElementBytes = {8, 4, 4, 2, 2, 1, 1, 0.5};

std::string item(const char* array, size_t i) { return std::string(array) + "[" + std::to_string(i) + "]"; }

std::string num_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

Calibration project_calibration(const bench::Calibration& b) {
  Calibration c;
  c.created_at = b.created_at;
  c.created_unix_seconds = parse_rfc3339_seconds(b.created_at).value_or(0);  // the reader checked it
  c.backend = b.tool.backend;
  c.quick = b.tool.quick;
  c.partial = b.tool.partial;
  c.shared = b.conditions.shared;
  const auto& d = b.device;
  c.device.name = d.name;
  c.device.catalog_id = d.catalog_id.value_or("");
  c.device.mig_profile = d.mig_profile.value_or("");
  c.device.uuid = d.uuid;
  c.device.pci_bus_id = d.pci_bus_id;
  c.device.driver_version = d.driver_version;
  c.device.cuda_runtime_version = d.cuda_runtime_version;
  c.device.memory_bytes = static_cast<double>(d.memory_bytes);
  c.device.sm_count = d.sm_count;
  c.device.pcie_gen = d.pcie_gen;
  c.device.pcie_width = d.pcie_width;
  c.gemm.reserve(b.gemm.size());
  for (const auto& g : b.gemm) {
    CalibrationGemmPoint p;
    const auto precision = parse_precision(g.precision);  // the reader took a name of the vocabulary
    p.precision = precision ? *precision : Precision::kBf16;
    p.decode = g.shape == "decode";
    p.m = static_cast<double>(g.m), p.n = static_cast<double>(g.n), p.k = static_cast<double>(g.k);
    p.tflops_sustained = g.tflops_sustained, p.tflops_burst = g.tflops_burst;
    c.gemm.push_back(p);
  }
  c.memory.reserve(b.memory.size());
  for (const auto& m : b.memory) {
    c.memory.push_back(CalibrationMemoryPoint{m.kernel, static_cast<double>(m.bytes), m.gbps_sustained});
  }
  c.transfer.reserve(b.transfer.size());
  for (const auto& t : b.transfer) {
    c.transfer.push_back(CalibrationTransferPoint{t.direction, t.pinned, static_cast<double>(t.bytes), t.gbps});
  }
  c.launch_eager_micros = b.launch.eager_micros.value_or(0);
  c.launch_graph_micros = b.launch.graph_micros.value_or(0);
  return c;
}

Result<Calibration> parse_calibration(std::string_view text) {
  auto b = bench::read_calibration(text);
  if (!b) {
    Error e = b.error();
    // In a request the file is the request's content: a bad one is the caller's mistake (HTTP 400).
    if (e.code == ErrorCode::kInvalidData) e.code = ErrorCode::kUsage;
    return e;
  }
  return project_calibration(*b);
}

namespace {

// One precision's curve, fitted to its compute-bound points: 1/e = a + b/I is linear in 1/I with
// a = 1/eff_max and b = I_half/eff_max (e = eff_max x I/(I + I_half)); weighted least squares with
// weights 1/y^2 minimizes the relative error of the rates. A fit with too little spread in I, or a
// negative slope (noise), keeps the base's I_half and fits eff_max alone.
struct LinePoint {
  double x;  // 1 / I
  double y;  // 1 / efficiency
};

void fit_line(const std::vector<LinePoint>& pts, double base_half, double& eff_max, double& half) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& p : pts) {
    const double w = 1.0 / (p.y * p.y);
    sw += w, sx += w * p.x, sy += w * p.y, sxx += w * p.x * p.x, sxy += w * p.x * p.y;
  }
  const double det = sw * sxx - sx * sx;
  // The x spread needed for a slope: relative variance of 1/I above 1e-6 (I differing by ~0.1 %).
  constexpr double kMinRelativeVariance = 1e-6;
  if (pts.size() >= 2 && det > kMinRelativeVariance * sx * sx) {
    const double b = (sw * sxy - sx * sy) / det;
    const double a = (sy - b * sx) / sw;
    if (b >= 0 && a > 0) {
      eff_max = 1.0 / a;
      half = b / a;
      return;
    }
  }
  // eff_max alone, at the base's I_half: y = a (1 + I_half x), a = sum(w y (1 + h x)) / sum(w (1 + h x)^2).
  double num = 0, den = 0;
  for (const auto& p : pts) {
    const double w = 1.0 / (p.y * p.y), f = 1 + base_half * p.x;
    num += w * p.y * f, den += w * f * f;
  }
  eff_max = den > 0 && num > 0 ? den / num : 0;
  half = base_half;
}

}  // namespace

Result<CalibrationFit> fit_calibration(const Calibration& cal, const PerfDevice& device, const PerfEfficiency& base) {
  CalibrationFit fit;
  fit.efficiency = base;
  PerfEfficiency& e = fit.efficiency;
  // Bandwidth first: the GEMM fit tells compute-bound points by the measured bandwidth.
  const double peak_bw = device.bandwidth_bytes_per_second;
  for (const char* kernel : {"copy", "triad", "read"}) {  // copy: the kernel kBandwidthFraction was set from
    std::vector<double> rates;
    for (size_t i = 0; i < cal.memory.size(); ++i) {
      const auto& m = cal.memory[i];
      if (peak_bw > 0 && m.gbps_sustained * 1e9 > peak_bw * kCalibrationPeakTolerance) {
        return usage_error(item("memory", i) + ".gbps_sustained " + num_text(m.gbps_sustained) +
                               " is above the catalog's peak bandwidth of " + num_text(peak_bw / 1e9) +
                               " GB/s: a timing bug (gpuplan bench check)",
                           item("memory", i) + ".gbps_sustained");
      }
      if (m.kernel == kernel && m.bytes >= kLargeStreamBytes) rates.push_back(m.gbps_sustained);
    }
    if (rates.empty() || peak_bw <= 0) continue;
    std::sort(rates.begin(), rates.end());
    const size_t mid = rates.size() / 2;
    fit.memory_gbps = rates.size() % 2 ? rates[mid] : (rates[mid - 1] + rates[mid]) / 2;
    fit.bandwidth_fraction = std::min(1.0, fit.memory_gbps * 1e9 / peak_bw);
    if (fit.bandwidth_fraction < kMinFraction) {
      return usage_error("memory: the large-size " + std::string(kernel) + " rate " + num_text(fit.memory_gbps) +
                             " GB/s is below " + num_text(kMinFraction * 100) + " % of the catalog's " +
                             num_text(peak_bw / 1e9) + " GB/s: a broken measurement (gpuplan bench check)",
                         "memory");
    }
    e.bandwidth_fraction = fit.bandwidth_fraction;
    fit.keys.emplace_back("bandwidth");
    break;
  }
  const double bandwidth = peak_bw * e.bandwidth_fraction;
  // GEMM curves, per precision.
  for (size_t pi = 0; pi < kElementBytes.size(); ++pi) {
    const auto p = static_cast<Precision>(pi);
    const double peak = device.peak(p);
    std::vector<LinePoint> pts;
    CalibrationCurve curve;
    curve.precision = p;
    curve.peak_tflops = peak / 1e12;
    for (size_t i = 0; i < cal.gemm.size(); ++i) {
      const auto& g = cal.gemm[i];
      if (g.precision != p) continue;
      if (peak <= 0) break;  // the catalog has no such tensor-core path: nothing to compare with
      const double rate = g.tflops_sustained * 1e12;
      if (rate > peak * kCalibrationPeakTolerance) {
        return usage_error(item("gemm", i) + ".tflops_sustained " + num_text(g.tflops_sustained) + " is above the " +
                               std::string(precision_name(p)) + " dense peak of " + num_text(peak / 1e12) +
                               " TFLOPS in the catalog: a timing bug, or sparse rates (gpuplan bench check)",
                           item("gemm", i) + ".tflops_sustained");
      }
      curve.best_tflops = std::max(curve.best_tflops, g.tflops_sustained);
      const double seconds = 2 * g.m * g.n * g.k / rate;
      const double bytes = (g.m * g.k + g.k * g.n + g.m * g.n) * kElementBytes[pi];
      if (bandwidth > 0 && bytes / bandwidth >= kComputeBoundShare * seconds) continue;  // memory-bound
      double efficiency = rate / peak;
      // The model idles the SMs of a partial last wave (perf.cc gemm_time): undo it to get the curve. A
      // point that loses more than kMaxWaveFactor to it tells the tile scheduling, not the curve (and the
      // model may run it on CUDA cores instead): it is left out.
      if (!device.persistent_gemm && device.sm_count > 0) {
        const double tiles = std::ceil(g.m / perf::kGemmTileRows) * std::ceil(g.n / perf::kGemmTileCols);
        const double waves = tiles / device.sm_count;
        const double factor = std::ceil(waves) / waves;
        if (factor > kMaxWaveFactor) continue;
        efficiency *= factor;
      }
      const double intensity = 1.0 / (1.0 / g.m + 1.0 / g.n + 1.0 / g.k);
      pts.push_back(LinePoint{1.0 / intensity, 1.0 / efficiency});
    }
    if (pts.empty()) continue;
    double eff_max = 0, half = 0;
    fit_line(pts, base.gemm_half_intensity, eff_max, half);
    if (!(eff_max >= kMinFraction) || !std::isfinite(eff_max) || !std::isfinite(half)) {
      return usage_error("gemm: the " + std::string(precision_name(p)) + " points fit " + num_text(eff_max * 100) +
                             " % of the catalog's dense peak, below the " + num_text(kMinFraction * 100) +
                             " % floor: a broken measurement or another GPU than the catalog's (gpuplan bench check)",
                         "gemm");
    }
    // A curve reaching the peak at infinite intensity is as far as a fraction goes (efficiency keys: <= 1).
    eff_max = std::min(eff_max, 1.0);
    constexpr double kMaxHalfIntensity = 1e6;  // parse_efficiency's bound of gemm_half_intensity
    half = std::min(half, kMaxHalfIntensity);
    double sq = 0;
    for (const auto& pt : pts) {
      const double predicted = eff_max / (1 + half * pt.x);  // = eff_max x I / (I + I_half)
      const double rel = predicted * pt.y - 1;
      sq += rel * rel;
    }
    curve.peak_fraction = eff_max;
    curve.half_intensity = half;
    curve.points = static_cast<int>(pts.size());
    curve.rms_error = std::sqrt(sq / static_cast<double>(pts.size()));
    e.precision_peak_fraction[pi] = eff_max;
    e.precision_half_intensity[pi] = half;
    const std::string name(precision_name(p));
    fit.keys.push_back("gemm_" + name);
    fit.keys.push_back("gemm_half_intensity_" + name);
    fit.curves.push_back(curve);
  }
  // The shared figures the rest of the model reads (attention's matmuls, the LM head, CUDA-core GEMVs):
  // the 16-bit curve (bf16, else fp16) and the 8-bit one (fp8, else int8).
  auto curve_of = [&](Precision p) -> const CalibrationCurve* {
    for (const auto& c : fit.curves) {
      if (c.precision == p) return &c;
    }
    return nullptr;
  };
  const CalibrationCurve* half16 = curve_of(Precision::kBf16);
  if (!half16) half16 = curve_of(Precision::kFp16);
  if (half16) {
    e.gemm_peak_fraction = half16->peak_fraction;
    e.gemm_half_intensity = half16->half_intensity;
    fit.keys.emplace_back("gemm");
    fit.keys.emplace_back("gemm_half_intensity");
  }
  const CalibrationCurve* eight = curve_of(Precision::kFp8);
  if (!eight) eight = curve_of(Precision::kInt8);
  if (eight) {
    e.gemm_fp8_peak_fraction = eight->peak_fraction;
    fit.keys.emplace_back("gemm_fp8");
  }
  if (cal.launch_graph_micros > 0) {
    e.kernel_seconds = cal.launch_graph_micros * 1e-6 + kKernelRampSeconds;
    fit.keys.emplace_back("kernel_us");
  }
  return fit;
}

}  // namespace gpuplan
