// The bench driver (issue #16): what to measure, in which order, with which share of the budget, and the
// calibration it writes. Backends only time work (backend.h); everything decided here is the same on the
// fake GPU and on CUDA, so the fake's tests test the real run's rules.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <set>

#include "bench/backend.h"
#include "bench/cuda_loader.h"
#include "bench/fake_gpu.h"
#include "bench/stopping.h"
#include "gpuplan/bench.h"
#include "gpuplan/cancel.h"
#include "gpuplan/version.h"

namespace gpuplan::bench {

namespace {

// --- the plan of a run ------------------------------------------------------------------------------
// Shares of the budget by phase, cumulative deadlines (time a phase leaves unused flows to the next).
constexpr double kGemmShare = 0.55;      // the figures perf calibrates from
constexpr double kMemoryShare = 0.20;    // the bandwidth curve
constexpr double kTransferShare = 0.08;  // PCIe
constexpr double kLaunchShare = 0.03;    // two small points
constexpr double kPowerShare = 0.14;     // two steady windows (the rest of the budget)
constexpr double kShareSum = kGemmShare + kMemoryShare + kTransferShare + kLaunchShare + kPowerShare;
static_assert(kShareSum > 1 - 1e-9 && kShareSum < 1 + 1e-9, "the phases' shares split the whole budget");
constexpr double kMaxPowerWindowSeconds = 10;  // a steady window longer than this adds nothing
constexpr double kTargetSampleSeconds = 0.01;  // queued work per sample: far above event resolution (~0.5 us)
constexpr double kPowerSampleSeconds = 0.05;   // per sample inside a power window
constexpr int kMaxReps = 100000;               // reps of one sample (tiny kernels)
// A sample is started only when this many times its predicted cost still fits: noise (the fake's
// exp(3 sigma) either way at sigma 8 % is 1.6x) and a clock drop (1.25x at 80 %) together.
constexpr double kCostMargin = 2.5;
constexpr double kHostOverheadSeconds = 1e-4;  // host side of a timed call, added to each prediction
// The first call of a point on CUDA also allocates and fills its operand pool (up to 8 GiB at ~1 TB/s),
// asks cuBLASLt for an algorithm and checks four outputs on the host: outside the GPU's timing, inside
// the budget. A point is started only when this much more still fits.
constexpr double kFirstCallSetupSeconds = 0.25;
// The first call of a point is predicted from the roofline of the catalog's peaks at this efficiency
// (no measured GPU runs below 5 % of its peaks: bench check's floor); without a catalog entry, this.
constexpr double kWorstEfficiency = 0.05;
constexpr double kUnknownFirstCallSeconds = 0.5;
constexpr int64_t kMaxCapBytes = int64_t{8} << 30;  // device memory the run may hold: min(25 % of free, 8 GiB)
constexpr double kFreeMemoryShare = 0.25;
constexpr int kLaunchesPerCall = 1000;  // empty kernels per timed launch call
constexpr int kQuickLaunchesPerCall = 200;
constexpr double kQuickDefaultBudgetSeconds = 30;  // --quick's budget when none is given
constexpr double kModelAtFaultError = 0.10;        // median re-prediction error above which the model is blamed

struct Shape {
  const char* kind;
  int64_t m, n, k;
};

std::vector<Shape> gemm_shapes(bool quick) {
  std::vector<Shape> out;
  constexpr size_t kMostShapes = 6 + 7 * 4;  // full run: 6 square, 7 token counts x 4 layers
  out.reserve(kMostShapes);
  // Square: from launch-bound to the size every vendor quotes peaks at.
  const std::vector<int64_t> square =
      quick ? std::vector<int64_t>{1024, 4096, 8192} : std::vector<int64_t>{256, 512, 1024, 2048, 4096, 8192};
  for (int64_t s : square) out.push_back({"square", s, s, s});
  // LLM decode: M tokens against real layer sizes (Llama-3-8B q/o 4096x4096 and MLP 14336x4096; Llama-3-70B
  // 8192x8192 and MLP 28672x8192).
  const std::vector<int64_t> tokens =
      quick ? std::vector<int64_t>{1, 32, 512} : std::vector<int64_t>{1, 8, 32, 128, 512, 2048, 8192};
  struct Layer {
    int64_t n, k;
  };
  const std::vector<Layer> layers = quick
                                        ? std::vector<Layer>{{4096, 4096}, {14336, 4096}}
                                        : std::vector<Layer>{{4096, 4096}, {14336, 4096}, {8192, 8192}, {28672, 8192}};
  for (const Layer& l : layers) {
    for (int64_t m : tokens) out.push_back({"decode", m, l.n, l.k});
  }
  return out;
}

// The order precisions are measured in: the ones perf and renters use most first (a short budget or a
// SIGINT keeps them).
constexpr Precision kPrecisionOrder[] = {Precision::kBf16, Precision::kFp16, Precision::kFp8, Precision::kInt8,
                                         Precision::kTf32, Precision::kFp32, Precision::kFp64};

std::vector<int64_t> memory_sizes(bool quick) {
  constexpr int64_t kMib = int64_t{1} << 20;
  if (quick) return {4 * kMib, 64 * kMib, 1024 * kMib};
  return {kMib, 4 * kMib, 16 * kMib, 64 * kMib, 256 * kMib, 1024 * kMib, 4096 * kMib};
}
std::vector<int64_t> transfer_sizes(bool quick) {
  constexpr int64_t kMib = int64_t{1} << 20;
  if (quick) return {64 * kMib};
  return {kMib, 256 * kMib};
}

std::string now_rfc3339() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

const char* kernel_name(MemKernel k) {
  switch (k) {
    case MemKernel::kRead:
      return "read";
    case MemKernel::kCopy:
      return "copy";
    case MemKernel::kTriad:
      break;
  }
  return "triad";
}

// One point's outcome.
struct Measured {
  bool ok = false;
  std::string error;  // when not ok: why (unsupported, over the cap, no time)
  PointSamples samples;
  Stop stop = Stop::kNone;
  bool checked = false;
};

class Run {
 public:
  Run(BenchBackend& backend, const BenchOptions& options, const Target* target)
      : b_(backend), o_(options), target_(target) {
    rule_.sample_cap = options.quick ? kQuickSampleCap : rule_.sample_cap;
    start_ = b_.now_seconds();
    budget_ = options.budget_seconds;
  }

  double elapsed() { return b_.now_seconds() - start_; }
  double deadline(double share_end) const { return budget_ * share_end; }
  // SIGINT (the CLI's flag) or the command's deadline (a server's cancel token).
  bool stopped() const { return (o_.stop != nullptr && o_.stop->load()) || cancel_requested(); }

  // Measures one point: `call(reps)` times reps; `work` is the work of one rep (FLOPs, bytes, launches);
  // `first_cost` predicts the first call (1 rep); `phase_end` is the phase's deadline (seconds from start).
  template <typename Call>
  Measured measure(Call call, double work, double first_cost, double point_end, double sample_seconds) {
    Measured out;
    const double run_end = budget_;
    point_end = std::min(point_end, run_end);
    if (stopped()) return fail(out, "interrupted");
    if (elapsed() + kCostMargin * first_cost + kFirstCallSetupSeconds > run_end) return fail(out, "no budget left");
    Timing warm = call(1);
    if (!warm.ok) return fail(out, warm.error);
    double per_rep = std::max(warm.seconds, 1e-9);
    const int reps = static_cast<int>(std::clamp(std::ceil(sample_seconds / per_rep), 1.0, double{kMaxReps}));
    out.checked = warm.checked;
    while (true) {
      const double cost = kCostMargin * per_rep * reps + kHostOverheadSeconds;
      // The first sample may pass the point's share (later points then get less), never the run's end.
      const double end = out.samples.count() == 0 ? run_end : point_end;
      if (stopped() || elapsed() + cost > end) {
        out.stop = Stop::kTimeBudget;
        break;
      }
      Timing t = call(reps);
      if (!t.ok) return fail(out, t.error);
      per_rep = std::max(per_rep, t.seconds / reps);
      out.samples.add(work * reps / std::max(t.seconds, 1e-12));
      out.stop = out.samples.verdict(rule_);
      if (out.stop != Stop::kNone) break;
    }
    out.ok = out.samples.count() > 0;
    if (!out.ok) out.error = "no budget left";
    note_sensors();
    return out;
  }

  // Sensors between points: clocks, temperature, throttling.
  void note_sensors() {
    Sensors s = b_.sensors();
    if (!s.available) return;
    if (s.sm_clock_mhz > 0) clocks_.push_back(s.sm_clock_mhz);
    if (s.temperature_c > temperature_max_) temperature_max_ = s.temperature_c;
    if (s.power_limit_watts > 0) power_limit_ = s.power_limit_watts;
    for (const auto& r : s.throttle_reasons) throttle_.insert(r);
  }

  BenchBackend& b_;
  const BenchOptions& o_;
  const Target* target_;
  StopRule rule_;
  double start_ = 0, budget_ = 0;
  std::vector<double> clocks_;
  double temperature_max_ = -1, power_limit_ = -1;
  std::set<std::string> throttle_;
  int skipped_ = 0;  // points the budget left no time for
  static constexpr int kQuickSampleCap = 30;

 private:
  static Measured fail(Measured& m, std::string why) {
    m.ok = false;
    m.error = std::move(why);
    return m;
  }
};

Precision precision_or_bf16(std::string_view name) {
  auto p = parse_precision(name);
  return p ? *p : Precision::kBf16;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// --- the operator model's re-prediction --------------------------------------------------------------
// eff(I) = emax I / (I + I_half) over the dense peak, fitted per precision in log space: I_half over a
// log grid, emax in closed form for each.
ModelError fit_gemm(const std::string& name, const std::vector<GemmPoint>& pts, double peak) {
  ModelError e;
  e.what = name;
  e.points = static_cast<int>(pts.size());
  if (pts.empty()) return e;
  const Precision p = precision_or_bf16(name);
  std::vector<double> intensity, logr;
  for (const auto& g : pts) {
    intensity.push_back(gemm_flops(g.m, g.n, g.k) / gemm_bytes(p, g.m, g.n, g.k));
    logr.push_back(std::log(g.tflops_sustained / peak));
  }
  constexpr int kGridSteps = 2000;  // I_half from 1e-2 to 1e5 FLOP/byte, 0.35 % apart
  constexpr double kGridLo = -2, kGridHi = 5;
  double best_sse = INFINITY;
  for (int s = 0; s <= kGridSteps; ++s) {
    const double h = std::pow(10.0, kGridLo + (kGridHi - kGridLo) * s / kGridSteps);
    double sum = 0;
    for (size_t i = 0; i < pts.size(); ++i) sum += logr[i] - std::log(intensity[i] / (intensity[i] + h));
    const double log_emax = sum / static_cast<double>(pts.size());
    double sse = 0;
    for (size_t i = 0; i < pts.size(); ++i) {
      const double d = logr[i] - log_emax - std::log(intensity[i] / (intensity[i] + h));
      sse += d * d;
    }
    if (sse < best_sse) {
      best_sse = sse;
      e.emax = std::exp(log_emax);
      e.i_half = h;
    }
  }
  std::vector<double> errs;
  for (size_t i = 0; i < pts.size(); ++i) {
    const double pred = peak * e.emax * intensity[i] / (intensity[i] + e.i_half);
    errs.push_back(std::abs(pred - pts[i].tflops_sustained) / pts[i].tflops_sustained);
  }
  e.median_error = median_of(errs);
  e.max_error = *std::max_element(errs.begin(), errs.end());
  return e;
}

// Bandwidth: t = t0 + bytes / bw by least squares over the points beyond L2; predicts those points.
ModelError fit_memory(const std::string& kernel, const std::vector<MemoryPoint>& all, int64_t l2_bytes) {
  ModelError e;
  e.what = "memory " + kernel;
  std::vector<const MemoryPoint*> pts;
  for (const auto& m : all) {
    if (m.kernel == kernel && m.bytes > l2_bytes) pts.push_back(&m);
  }
  e.points = static_cast<int>(pts.size());
  if (pts.size() < 2) return e;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto* m : pts) {
    const double x = static_cast<double>(m->bytes), y = x / (m->gbps_sustained * 1e9);
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double n = static_cast<double>(pts.size());
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  const double t0 = (sy - slope * sx) / n;
  if (!(slope > 0)) return e;
  e.emax = 1.0 / slope / 1e9;
  e.i_half = t0 * 1e6;
  std::vector<double> errs;
  for (const auto* m : pts) {
    const double x = static_cast<double>(m->bytes);
    const double pred = x / std::max(t0 + slope * x, 1e-12) / 1e9;
    errs.push_back(std::abs(pred - m->gbps_sustained) / m->gbps_sustained);
  }
  e.median_error = median_of(errs);
  e.max_error = *std::max_element(errs.begin(), errs.end());
  return e;
}

}  // namespace

Result<BenchReport> run_bench_on(const Catalog& catalog, const BenchOptions& options, BenchBackend& backend);

Result<BenchReport> run_bench(const Catalog& catalog, const BenchOptions& options) {
  if (!(options.budget_seconds > 0)) return usage_error("--budget must be above 0 seconds", "budget");
  std::unique_ptr<BenchBackend> backend;
  if (options.backend == "fake") {
    auto fake = FakeGpu::open(catalog, options.fake_gpu, options.faults, options.seed);
    if (!fake) return fake.error();
    backend = std::move(*fake);
  } else if (options.backend == "cuda") {
    if (!options.fake_gpu.empty()) return usage_error("--fake-gpu needs --backend fake", "fake_gpu");
    if (!device_access().load()) {
      return Error{ErrorCode::kUnavailable,
                   "this process may not measure its GPU: `gpuplan bench` on the GPU's machine does (a server never "
                   "hands its GPU to a request); here only --backend fake runs",
                   "backend"};
    }
    auto cuda = open_cuda_backend(options.device);
    if (!cuda) return cuda.error();
    backend = std::move(*cuda);
  } else {
    return usage_error("unknown backend '" + options.backend + "'; use cuda or fake", "backend");
  }
  return run_bench_on(catalog, options, *backend);
}

Result<BenchReport> run_bench_on(const Catalog& catalog, const BenchOptions& options, BenchBackend& backend) {
  BenchOptions o = options;
  const DeviceInfo dev = backend.device();
  Calibration c;
  c.created_at = o.created_at.empty() ? now_rfc3339() : o.created_at;
  c.tool = {std::string(kVersion), backend.name(), o.budget_seconds, o.quick, false};
  c.device.index = o.device;
  c.device.name = dev.name;
  c.device.uuid = dev.uuid;
  c.device.pci_bus_id = dev.pci_bus_id;
  c.device.driver_version = dev.driver_version;
  c.device.cuda_runtime_version = dev.cuda_runtime_version;
  c.device.memory_bytes = dev.memory_bytes;
  c.device.sm_count = dev.sm_count;
  c.device.pcie_gen = dev.pcie_gen;
  c.device.pcie_width = dev.pcie_width;
  if (!dev.mig_profile.empty()) c.device.mig_profile = dev.mig_profile;

  // The catalog entry: the fake's own target; on CUDA, the driver's product name (and MIG profile).
  std::optional<Target> target;
  {
    std::string name = dev.name;
    if (const size_t mig = name.find(" MIG "); mig != std::string::npos) name = name.substr(0, mig);
    if (!dev.mig_profile.empty()) name += "/" + dev.mig_profile;
    if (auto ref = catalog.resolve(name); ref) {
      target = Target{*ref, 1, Link::kPcie};
      c.device.catalog_id = ref->id();
    }
  }
  std::set<std::string> off;
  if (!target) off.insert("catalog: '" + dev.name + "' is not in the catalog (bench check needs a catalog_id)");

  // Safety: a GPU other processes compute on is refused unless the caller accepts a shared result.
  Sensors at_start = backend.sensors();
  c.conditions.other_processes = at_start.available ? std::max(at_start.other_processes, 0) : -1;
  if (!at_start.available) off.insert("nvml: not available (power, clocks, throttling and other processes unknown)");
  if (at_start.available && at_start.other_processes > 0) {
    if (!o.allow_shared) {
      return Error{ErrorCode::kConflict,
                   "GPU " + std::to_string(o.device) + " runs " + std::to_string(at_start.other_processes) +
                       " other compute process(es): its figures would be a share of the GPU, not the GPU. Stop them, "
                       "or pass --allow-shared (the result then says conditions.shared = true)",
                   "allow_shared"};
    }
    c.conditions.shared = true;
  }
  if (!at_start.available && o.allow_shared) c.conditions.shared = true;

  const int64_t cap =
      std::min<int64_t>(kMaxCapBytes, static_cast<int64_t>(kFreeMemoryShare * static_cast<double>(dev.free_bytes)));
  if (std::string err; !backend.set_memory_cap(cap, err)) {
    return Error{ErrorCode::kUnavailable, "bench cannot work within " + std::to_string(cap >> 20) + " MiB: " + err,
                 "device"};
  }

  Run run(backend, o, target ? &*target : nullptr);
  const double peak_bw = target ? target->memory_bandwidth_gbps() * 1e9 : 0;

  // --- GEMM ---
  std::vector<Precision> precisions;
  for (Precision p : kPrecisionOrder) {
    if (!o.precisions.empty() && std::find(o.precisions.begin(), o.precisions.end(), p) == o.precisions.end()) {
      continue;
    }
    if (std::string why = backend.unsupported(p); !why.empty()) {
      off.insert(why);
      continue;
    }
    precisions.push_back(p);
  }
  const std::vector<Shape> shapes = gemm_shapes(o.quick);
  const double gemm_end = run.deadline(kGemmShare);
  size_t left = precisions.size() * shapes.size();
  for (Precision p : precisions) {
    const double peak = target && target->peak_tflops(p) ? *target->peak_tflops(p) * 1e12 : 0;
    for (const Shape& s : shapes) {
      const double share = (gemm_end - run.elapsed()) / static_cast<double>(left--);
      const double flops = gemm_flops(s.m, s.n, s.k);
      const double roof = peak > 0 && peak_bw > 0
                              ? std::max(flops / peak, gemm_bytes(p, s.m, s.n, s.k) / peak_bw) / kWorstEfficiency
                              : kUnknownFirstCallSeconds;
      Measured r = run.measure([&](int reps) { return backend.gemm(p, s.m, s.n, s.k, reps); }, flops, roof,
                               run.elapsed() + std::max(share, 0.0), kTargetSampleSeconds);
      if (!r.ok) {
        if (r.error == "no budget left") ++run.skipped_;
        if (r.error != "no budget left" && r.error != "interrupted") {
          off.insert(std::string(precision_name(p)) + " " + s.kind + " " + std::to_string(s.m) + "x" +
                     std::to_string(s.n) + "x" + std::to_string(s.k) + ": " + r.error);
        }
        continue;
      }
      c.gemm.push_back({std::string(precision_name(p)), s.kind, s.m, s.n, s.k, r.samples.median() / 1e12,
                        r.samples.best() / 1e12, r.samples.count(), r.samples.spread(), std::string(stop_name(r.stop)),
                        r.checked});
    }
  }

  // --- memory ---
  const double memory_end = run.deadline(kGemmShare + kMemoryShare);
  std::vector<int64_t> sizes;
  for (int64_t bytes : memory_sizes(o.quick)) {
    if (bytes <= cap) sizes.push_back(bytes);
  }
  left = sizes.size() * 3;
  for (MemKernel k : {MemKernel::kRead, MemKernel::kCopy, MemKernel::kTriad}) {
    for (int64_t bytes : sizes) {
      const double share = (memory_end - run.elapsed()) / static_cast<double>(left--);
      const double first =
          peak_bw > 0 ? static_cast<double>(bytes) / peak_bw / kWorstEfficiency : kUnknownFirstCallSeconds;
      Measured r = run.measure([&](int reps) { return backend.memory(k, bytes, reps); }, static_cast<double>(bytes),
                               first, run.elapsed() + std::max(share, 0.0), kTargetSampleSeconds);
      if (!r.ok) {
        run.skipped_ += r.error == "no budget left" ? 1 : 0;
        continue;
      }
      c.memory.push_back({kernel_name(k), bytes, r.samples.median() / 1e9, r.samples.best() / 1e9, r.samples.count(),
                          r.samples.spread(), std::string(stop_name(r.stop))});
    }
  }

  // --- transfers ---
  const double transfer_end = run.deadline(kGemmShare + kMemoryShare + kTransferShare);
  const std::vector<int64_t> tsizes = transfer_sizes(o.quick);
  left = tsizes.size() * 4;
  // PCIe Gen1 x1 payload (250 MB/s): a first copy is never slower than this.
  constexpr double kSlowestLinkBytesPerSecond = 0.25e9;
  for (bool h2d : {true, false}) {
    for (bool pinned : {true, false}) {
      for (int64_t bytes : tsizes) {
        const double share = (transfer_end - run.elapsed()) / static_cast<double>(left--);
        Measured r = run.measure([&](int reps) { return backend.transfer(h2d, pinned, bytes, reps); },
                                 static_cast<double>(bytes), static_cast<double>(bytes) / kSlowestLinkBytesPerSecond,
                                 run.elapsed() + std::max(share, 0.0), kTargetSampleSeconds);
        if (!r.ok) {
          run.skipped_ += r.error == "no budget left" ? 1 : 0;
          continue;
        }
        c.transfer.push_back({h2d ? "h2d" : "d2h", pinned, bytes, r.samples.median() / 1e9, r.samples.count(),
                              r.samples.spread(), std::string(stop_name(r.stop))});
      }
    }
  }

  // --- launch floor --- (rate: launches per second; the floor is 1 / the median rate)
  const double launch_end = run.deadline(kGemmShare + kMemoryShare + kTransferShare + kLaunchShare);
  const int launches = o.quick ? kQuickLaunchesPerCall : kLaunchesPerCall;
  constexpr double kSlowestLaunchSeconds = 1e-3;  // bench check's ceiling on the floor
  for (bool graph : {false, true}) {
    const double share = (launch_end - run.elapsed()) / (graph ? 1.0 : 2.0);
    Measured r =
        run.measure([&](int reps) { return backend.launch(graph, launches * reps); }, static_cast<double>(launches),
                    kSlowestLaunchSeconds * launches, run.elapsed() + std::max(share, 0.0), kTargetSampleSeconds);
    if (!r.ok) {
      run.skipped_ += r.error == "no budget left" ? 1 : 0;
      continue;
    }
    (graph ? c.launch.graph_micros : c.launch.eager_micros) = 1e6 / r.samples.median();
  }

  // --- power: NVML's energy counter over a steady window at a compute-bound and a bandwidth-bound point ---
  const GemmPoint* best_gemm = nullptr;
  for (const auto& g : c.gemm) {
    if (g.shape == "square" && (!best_gemm || g.tflops_sustained > best_gemm->tflops_sustained)) best_gemm = &g;
  }
  const MemoryPoint* best_mem = nullptr;
  for (const auto& m : c.memory) {
    if (m.kernel == "read" && (!best_mem || m.bytes > best_mem->bytes)) best_mem = &m;
  }
  Sensors s0 = backend.sensors();
  if (!s0.available || s0.energy_joules < 0) {
    off.insert("power: NVML's energy counter is not available");
  } else {
    for (int phase = 0; phase < 2; ++phase) {
      const bool compute = phase == 0;
      if (compute ? !best_gemm : !best_mem) continue;
      const double end =
          std::min(run.deadline(1.0), run.elapsed() + (run.deadline(1.0) - run.elapsed()) / (compute ? 2 : 1));
      const double window = std::min(end - run.elapsed(), kMaxPowerWindowSeconds);
      if (window <= 0 || run.stopped()) continue;
      const Precision p = compute ? precision_or_bf16(best_gemm->precision) : Precision::kBf16;
      const double work =
          compute ? gemm_flops(best_gemm->m, best_gemm->n, best_gemm->k) : static_cast<double>(best_mem->bytes);
      const double rate = compute ? best_gemm->tflops_sustained * 1e12 : best_mem->gbps_sustained * 1e9;
      const int reps =
          static_cast<int>(std::clamp(std::ceil(kPowerSampleSeconds * rate / work), 1.0, double{kMaxReps}));
      const double sample_cost = kCostMargin * reps * work / rate + kHostOverheadSeconds;
      const double t_end = run.elapsed() + window;
      const Sensors before = backend.sensors();
      const double t0 = backend.now_seconds();
      double done = 0;
      // The window's first call sets its shape up again (kFirstCallSetupSeconds).
      for (bool first_call = true;
           !run.stopped() && run.elapsed() + sample_cost + (first_call ? kFirstCallSetupSeconds : 0) <= t_end;
           first_call = false) {
        Timing t = compute ? backend.gemm(p, best_gemm->m, best_gemm->n, best_gemm->k, reps)
                           : backend.memory(MemKernel::kRead, best_mem->bytes, reps);
        if (!t.ok) break;
        done += work * reps;
      }
      const Sensors after = backend.sensors();
      const double seconds = backend.now_seconds() - t0;
      run.note_sensors();
      if (seconds <= 0 || done <= 0 || after.energy_joules < before.energy_joules) continue;
      const double watts = (after.energy_joules - before.energy_joules) / seconds;
      if (!(watts > 0)) continue;
      PowerPoint pp{compute ? "compute" : "memory", watts, std::nullopt, std::nullopt, seconds};
      if (compute) {
        pp.tflops_per_watt = done / seconds / 1e12 / watts;
      } else {
        pp.gbps_per_watt = done / seconds / 1e9 / watts;
      }
      c.power.push_back(pp);
    }
  }

  // --- conditions ---
  if (!run.clocks_.empty()) c.conditions.sm_clock_mhz_median = median_of(run.clocks_);
  if (run.temperature_max_ >= 0) c.conditions.temperature_c_max = run.temperature_max_;
  if (run.power_limit_ > 0) c.conditions.power_limit_watts = run.power_limit_;
  c.conditions.throttle_reasons.assign(run.throttle_.begin(), run.throttle_.end());
  if (run.skipped_ > 0) {
    off.insert("budget: " + std::to_string(run.skipped_) + " point(s) not measured, no budget left (raise --budget)");
  }
  c.conditions.features_off.assign(off.begin(), off.end());
  c.tool.partial = run.stopped();

  BenchReport report;
  report.elapsed_seconds = run.elapsed();
  // --- the operator model's re-prediction of the run's own points ---
  for (Precision p : precisions) {
    std::vector<GemmPoint> pts;
    for (const auto& g : c.gemm) {
      if (g.precision == precision_name(p)) pts.push_back(g);
    }
    if (pts.empty()) continue;
    const double peak = target && target->peak_tflops(p) ? *target->peak_tflops(p) : 1.0;
    report.model_errors.push_back(fit_gemm(std::string(precision_name(p)), pts, peak));
  }
  for (const char* k : {"read", "copy", "triad"}) {
    ModelError e = fit_memory(k, c.memory, dev.l2_bytes);
    if (e.points >= 2 && e.emax > 0) report.model_errors.push_back(e);
  }
  report.calibration = std::move(c);
  return report;
}

std::atomic<bool>& interrupt_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}

std::atomic<bool>& device_access() {
  static std::atomic<bool> allowed{false};
  return allowed;
}

bool model_at_fault(const ModelError& e) { return e.median_error > kModelAtFaultError; }

double quick_default_budget_seconds() { return kQuickDefaultBudgetSeconds; }

}  // namespace gpuplan::bench
