// `gpuplan bench` (issue #16): one measurement run of a GPU and its result, the calibration file
// `gpuplan.calibration/1` (docs/bench.md, "The file"). The run measures through a backend (the CUDA
// plugin, or a fake GPU on a virtual clock); every point stops by a stated rule; the run never passes
// its budget. check_calibration() holds a file against the catalog's dense peaks and sanity floors.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/catalog.h"
#include "gpuplan/status.h"
#include "gpuplan/target.h"

namespace gpuplan::bench {

inline constexpr std::string_view kCalibrationSchema = "gpuplan.calibration/1";

struct GemmPoint {
  std::string precision;  // vocabulary name: fp64, fp32, tf32, bf16, fp16, fp8, int8
  std::string shape;      // "square" | "decode"
  int64_t m = 0, n = 0, k = 0;
  double tflops_sustained = 0;  // median sample (dense rate; TOPS for int8)
  double tflops_burst = 0;      // best sample
  int samples = 0;
  double spread = 0;  // (p75 - p25) / median of the samples
  std::string stop;   // converged | noise_stable | time_budget | sample_cap
  bool checked = false;
  bool operator==(const GemmPoint&) const = default;
};
struct MemoryPoint {
  std::string kernel;  // read | copy | triad
  int64_t bytes = 0;   // working set = bytes moved per pass
  double gbps_sustained = 0, gbps_burst = 0;
  int samples = 0;
  double spread = 0;
  std::string stop;
  bool operator==(const MemoryPoint&) const = default;
};
struct TransferPoint {
  std::string direction;  // h2d | d2h
  bool pinned = false;
  int64_t bytes = 0;
  double gbps = 0;  // median
  int samples = 0;
  double spread = 0;
  std::string stop;
  bool operator==(const TransferPoint&) const = default;
};
struct PowerPoint {
  std::string phase;  // compute | memory
  double watts = 0;
  std::optional<double> tflops_per_watt;
  std::optional<double> gbps_per_watt;
  double seconds = 0;
  bool operator==(const PowerPoint&) const = default;
};
struct Calibration {
  std::string schema{kCalibrationSchema};
  std::string created_at;  // RFC 3339 UTC
  struct Tool {
    std::string gpuplan_version, backend;
    double budget_seconds = 0;
    bool quick = false, partial = false;
    bool operator==(const Tool&) const = default;
  } tool;
  struct Device {
    int index = 0;
    std::string name;
    std::optional<std::string> catalog_id, mig_profile;
    std::string uuid, pci_bus_id, driver_version, cuda_runtime_version;
    int64_t memory_bytes = 0;
    int sm_count = 0, pcie_gen = 0, pcie_width = 0;
    bool operator==(const Device&) const = default;
  } device;
  struct Conditions {
    bool shared = false;
    int other_processes = 0;  // -1: unknown (NVML absent)
    std::optional<double> power_limit_watts, sm_clock_mhz_median, temperature_c_max;
    std::vector<std::string> throttle_reasons, features_off;
    bool operator==(const Conditions&) const = default;
  } conditions;
  std::vector<GemmPoint> gemm;
  std::vector<MemoryPoint> memory;
  std::vector<TransferPoint> transfer;
  struct Launch {
    std::optional<double> eager_micros, graph_micros;
    bool operator==(const Launch&) const = default;
  } launch;
  std::vector<PowerPoint> power;
  bool operator==(const Calibration&) const = default;
};

// The bounds of a calibration file (the reader refuses beyond them, kLimit naming the field).
inline constexpr size_t kMaxCalibrationBytes = 4u << 20;  // 4 MiB: calib_schema.md
inline constexpr size_t kMaxPointsPerArray = 4096;        // calib_schema.md

Json calibration_json(const Calibration& c);
// Parses and validates a file's text: a bounded reader (size, points, string lengths, finite positive
// figures), errors as values naming the field ("gemm[3].tflops_sustained").
// This is the one parser of the format: perf's parse_calibration (gpuplan/calibration.h) is a projection
// of its result.
Result<Calibration> read_calibration(std::string_view text);

// "2026-12-01T22:00:00Z" (or with a fraction, or an offset +HH:MM) as Unix seconds; nullopt when it is
// not RFC 3339 (read_calibration refuses such a created_at).
std::optional<int64_t> parse_rfc3339_seconds(std::string_view text);

// The fake GPU's faults (docs/bench.md, "The fake GPU").
struct FakeFaults {
  double noise = 0.005;                // relative sigma of each sample's time
  double throttle_after_seconds = -1;  // the SM clock drops after this many virtual seconds (<0: never)
  double throttle_factor = 0.8;        // the clock's share after the drop
  bool no_fp8 = false, no_int8 = false;
  bool no_nvml = false;
  int other_processes = 0;  // a busy GPU
};

struct BenchOptions {
  std::string backend = "cuda";  // cuda | fake
  std::string fake_gpu;          // catalog id, or id:mig_profile (fake only)
  int device = 0;
  double budget_seconds = 170;
  bool quick = false;
  std::vector<Precision> precisions;  // empty: every precision the GPU has
  bool allow_shared = false;
  uint64_t seed = 1;
  FakeFaults faults;
  std::string created_at;                   // "" -> now (tests and goldens pin it)
  const std::atomic<bool>* stop = nullptr;  // set (SIGINT): finish with a partial result
};

// The operator model's re-prediction of the run's own points (eff(I) = emax I / (I + I_half) fitted per
// precision; bandwidth t = t0 + bytes / bw fitted per kernel beyond L2).
struct ModelError {
  std::string what;  // "bf16", "memory read"
  int points = 0;
  double median_error = 0, max_error = 0;  // |predicted - measured| / measured
  double emax = 0, i_half = 0;             // GEMM fit; bandwidth fit: emax = GB/s, i_half = t0 micros
};
struct BenchReport {
  Calibration calibration;
  std::vector<ModelError> model_errors;
  double elapsed_seconds = 0;  // on the backend's clock
};

// Opens the backend named by the options and measures. Errors: no GPU / no plugin (kUnavailable), a
// busy GPU without allow_shared (kConflict), a bad fake target (kNotFound), bad options (kUsage).
Result<BenchReport> run_bench(const Catalog& catalog, const BenchOptions& options);

// Set by the CLI's SIGINT handler: the run in progress stops and returns what it has (tool.partial).
std::atomic<bool>& interrupt_flag();

// Whether this process may measure its real GPU (--backend cuda). The CLI sets it (`gpuplan bench`); a
// server never does: an HTTP request must not take the server's GPU (only the fake runs there).
std::atomic<bool>& device_access();

// A finding of check_calibration: the point and what is wrong with it.
struct CheckFinding {
  std::string point;  // "gemm bf16 square 8192x8192x8192"
  std::string problem;
};
// Findings for figures above the catalog's dense peaks (a timing bug) or below sanity floors; empty
// when the file passes. An unknown catalog_id is kNotFound.
Result<std::vector<CheckFinding>> check_calibration(const Catalog& catalog, const Calibration& c);

}  // namespace gpuplan::bench
