// Calibrations in a request: `calibration` (files of gpuplan bench, each for the target of its device),
// `calibration_dir` (files keyed by their name: <catalog id>.json or <catalog id>:<MIG profile>.json),
// `calibration_force` and `driver`; which one applies to a target, the efficiency it gives, what the
// answer says about it, and the warnings (an old file, another driver, another device when forced).
// docs/model.md, "Calibration".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/calibration.h"
#include "gpuplan/perf.h"
#include "gpuplan/target.h"

namespace gpuplan::perf {

// A calibration older than this is warned about: clocks, cooling, power caps and drivers change over a
// quarter (NVIDIA ships a production driver branch update about every three months).
inline constexpr int64_t kCalibrationMaxAgeDays = 90;
// Files of one request: a directory of one file per GPU and MIG profile of a fleet fits easily.
inline constexpr size_t kMaxCalibrationFiles = 64;

struct CalibrationSource {
  std::string name;  // the file's name as given (a path from the CLI)
  std::string key;   // the device it is for: the name's stem (calibration_dir) or the file's device
  bool from_dir = false;
  Calibration calibration;
};

struct CalibrationSet {
  std::vector<CalibrationSource> sources;
  bool force = false;
  std::string driver;            // what the target runs (the inventory's driver), empty = unknown
  int64_t now_unix_seconds = 0;  // the age check's clock
  bool empty() const { return sources.empty(); }
};

// "h100-80gb-sxm5", or "a100-40gb-sxm4:3g.20gb" for a MIG profile: the key a calibration names a target by.
std::string calibration_key(const TargetRef& ref);

// Reads calibration, calibration_dir, calibration_force and driver from a request (absent: an empty set).
Result<CalibrationSet> parse_calibration_set(const Json& request, int64_t now_unix_seconds);

// The calibration of one target and what it does.
struct AppliedCalibration {
  PerfEfficiency efficiency;
  Json info;  // {file, created_at, device, catalog_id, driver, keys, curves, bandwidth_gbps}
  std::vector<std::string> warnings;
};

// The source for `target` (an explicit file of its device before a directory's; the newest of several),
// fitted on top of `base`; nullopt when none applies. With `force`, an explicit file of another device
// applies to a target that has none of its own, with a warning.
Result<std::optional<AppliedCalibration>> calibrate_target(const CalibrationSet& set, const Target& target,
                                                           const PerfDevice& device, const PerfEfficiency& base);

// An explicit calibration file that matches none of `targets` is an error (unless forced): measuring one
// GPU and predicting another is a mistake the answer must not hide.
Status check_calibrations_used(const CalibrationSet& set, const std::vector<Target>& targets);

// The warnings about one calibration: older than kCalibrationMaxAgeDays, another driver than `driver`,
// measured on a shared GPU, or a partial run.
std::vector<std::string> calibration_warnings(const Calibration& c, const std::string& name, const std::string& driver,
                                              int64_t now_unix_seconds);

// What the answer says of a fit: the file, its device and driver, the keys it set and the curves.
Json calibration_info(const Calibration& c, const std::string& name, const CalibrationFit& fit);

}  // namespace gpuplan::perf
