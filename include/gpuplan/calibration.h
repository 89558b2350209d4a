// A GPU's measurements (`gpuplan bench`'s calibration file, schema "gpuplan.calibration/1") and what the
// performance model takes from them: per precision the GEMM efficiency curve eff_max x I / (I + I_half)
// fitted to the measured points against the catalog's dense peak, the streaming-bandwidth fraction of
// the large memory points, and the per-kernel cost from the launch floor. docs/model.md, "Calibration",
// explains the fit and what it replaces; docs/bench.md the measurement.
//
// The file has one parser, the bench's (bench::read_calibration, gpuplan/bench.h: every field checked,
// arrays and size bounded, a refusal an error value naming the field); parse_calibration projects its
// result onto what the model reads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/bench.h"
#include "gpuplan/perf.h"
#include "gpuplan/status.h"
#include "gpuplan/target.h"

namespace gpuplan {

// The schema word of the files the reader reads (the bench's).
using bench::kCalibrationSchema;
// A calibration file is at most 4 MiB (the schema's bound; a full bench run writes ~100 KB).
inline constexpr std::size_t kCalibrationMaxBytes = bench::kMaxCalibrationBytes;
// Points per array (gemm, memory, transfer, power): the schema's bound.
inline constexpr std::size_t kCalibrationMaxPoints = bench::kMaxPointsPerArray;
// The `method` the measured figures of an offer name: the bench and its schema version.
inline constexpr std::string_view kCalibrationMethod = "gpuplan bench 1";

struct CalibrationGemmPoint {
  Precision precision = Precision::kBf16;
  bool decode = false;  // shape "decode" (skinny M) or "square"
  double m = 0, n = 0, k = 0;
  double tflops_sustained = 0;  // median rate, dense TFLOPS (TOPS for int8)
  double tflops_burst = 0;      // best rate (0 = not given)
};

struct CalibrationMemoryPoint {
  std::string kernel;  // read | copy | triad
  double bytes = 0;
  double gbps_sustained = 0;
};

struct CalibrationTransferPoint {
  std::string direction;  // h2d | d2h
  bool pinned = true;
  double bytes = 0;
  double gbps = 0;
};

struct CalibrationDevice {
  std::string name;
  std::string catalog_id;   // empty when the bench did not know it (null)
  std::string mig_profile;  // empty for a whole GPU
  std::string uuid;
  std::string pci_bus_id;
  std::string driver_version;
  std::string cuda_runtime_version;
  double memory_bytes = 0;
  int sm_count = 0;
  int pcie_gen = 0;    // 0 = not given
  int pcie_width = 0;  // 0 = not given
  // "h100-80gb-sxm5" or "a100-40gb-sxm4:3g.20gb": how a calibration directory names this device's file.
  std::string key() const { return mig_profile.empty() ? catalog_id : catalog_id + ":" + mig_profile; }
};

struct Calibration {
  std::string created_at;  // as written (RFC 3339, UTC)
  int64_t created_unix_seconds = 0;
  std::string backend;  // cuda | fake
  bool quick = false;
  bool partial = false;
  bool shared = false;  // measured beside other processes (--allow-shared)
  CalibrationDevice device;
  std::vector<CalibrationGemmPoint> gemm;
  std::vector<CalibrationMemoryPoint> memory;
  std::vector<CalibrationTransferPoint> transfer;
  double launch_eager_micros = 0;  // 0 = not measured
  double launch_graph_micros = 0;  // 0 = not measured
};

// What the model reads of a file the bench's reader accepted.
Calibration project_calibration(const bench::Calibration& c);

// Reads a calibration file given in a request (bench::read_calibration, then project_calibration). A
// refusal is a usage error (the file is the request's; kLimit over a bound) whose field is the JSON path
// of the bad value ("gemm[3].tflops_sustained").
Result<Calibration> parse_calibration(std::string_view text);

using bench::parse_rfc3339_seconds;

// One precision's fitted GEMM curve.
struct CalibrationCurve {
  Precision precision = Precision::kBf16;
  double peak_fraction = 0;   // eff_max: achieved / catalog dense peak of a GEMM of infinite intensity
  double half_intensity = 0;  // I_half
  int points = 0;             // the compute-bound points the fit used
  double rms_error = 0;       // relative RMS residual of the fitted rates at those points
  double best_tflops = 0;     // the highest sustained rate measured
  double peak_tflops = 0;     // the catalog's dense peak it is compared with
};

// What a calibration sets in the model for one device.
struct CalibrationFit {
  PerfEfficiency efficiency;      // the base with the measured figures in place
  std::vector<std::string> keys;  // the efficiency keys set ("gemm_bf16", "gemm", "bandwidth", "kernel_us", ...)
  std::vector<CalibrationCurve> curves;
  double memory_gbps = 0;         // large-size streaming rate (0 = no memory points)
  double bandwidth_fraction = 0;  // memory_gbps / the catalog's peak bandwidth
};

// Fits the measured points of `cal` against `device`'s catalog peaks (perf_device of the target) on top
// of `base`. A figure above the catalog's peak (beyond kCalibrationPeakTolerance) is an error naming the
// point: a timing bug, not a fast GPU.
Result<CalibrationFit> fit_calibration(const Calibration& cal, const PerfDevice& device, const PerfEfficiency& base);

// A measured rate may exceed the datasheet by this much (boost clocks above the base the peak is quoted
// at, rounding of the datasheet) before the reader calls it a timing bug.
inline constexpr double kCalibrationPeakTolerance = 1.05;

}  // namespace gpuplan
