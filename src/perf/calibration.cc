// The calibration reader (schema gpuplan.calibration/1) and the fit of the performance model's
// efficiency curves to its points. docs/model.md, "Calibration".
#include "gpuplan/calibration.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "gpuplan/model.h"  // check_json_depth
#include "perf/constants.h"

namespace gpuplan {

namespace {

// The file is read with std::map objects (nlohmann::json), not ordered_json: an object of many keys
// costs n log n, not n^2, so a 4 MiB file of keys is refused in linear time.
using JsonDoc = nlohmann::json;

// Nesting of a calibration file: 3 levels (file, array, point); 8 leaves room for additions.
constexpr int kMaxDepth = 8;
// Bytes of one string field (names, versions, ids).
constexpr size_t kMaxStringBytes = 256;
// Bounds of the figures: far beyond any device (the largest, B200, is 2.25 dense bf16 PFLOPS and 8 TB/s)
// yet finite, so that a value is a measurement and not a typo or an overflow.
constexpr double kMaxTflops = 1e5;
constexpr double kMaxGbps = 1e5;
constexpr double kMaxBytes = 1125899906842624.0;  // 2^50 bytes: 1 PiB
constexpr double kMaxGemmDim = 1048576;           // 2^20 rows or columns of one GEMM
constexpr double kMaxSamples = 1e9;
constexpr double kMaxSpread = 10;         // relative spread of a point's samples
constexpr double kMaxLaunchMicros = 1e6;  // one second per launch
constexpr double kMaxSeconds = 1e7;       // a power window or the budget (~4 months)
constexpr double kMaxWatts = 1e5;         // board power
constexpr double kMaxCount = 1e6;         // SMs, processes, device index
constexpr double kMaxPcieGen = 16;        // PCIe generations (6 is current)
constexpr double kMaxPcieWidth = 64;      // lanes (x16 is the widest slot)
constexpr double kMaxClockMhz = 1e5;
constexpr double kMaxTemperatureC = 1000;
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

std::string at(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }
std::string item(const char* array, size_t i) { return std::string(array) + "[" + std::to_string(i) + "]"; }

std::string num_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// A number field: finite, in [lo, hi]. Absent (or null where nullable) gives `fallback`.
Result<double> number(const JsonDoc& obj, const char* key, const std::string& path, double lo, double hi, bool required,
                      double fallback = 0) {
  const auto it = obj.find(key);
  const std::string field = at(path, key);
  if (it == obj.end() || it->is_null()) {
    if (required)
      return usage_error(field + " is missing: a calibration file names it (schema gpuplan.calibration/1)", field);
    return fallback;
  }
  if (!it->is_number()) return usage_error(field + " must be a number", field);
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    return usage_error(field + " = " + num_text(v) + " is out of range [" + num_text(lo) + ", " + num_text(hi) +
                           "]; re-run gpuplan bench",
                       field);
  }
  return v;
}

// A positive figure (a rate, a size): > 0 and at most hi.
Result<double> positive(const JsonDoc& obj, const char* key, const std::string& path, double hi, bool required) {
  GPUPLAN_TRY(v, number(obj, key, path, 0, hi, required));
  const auto it = obj.find(key);
  if (it != obj.end() && !it->is_null() && !(v > 0)) {
    return usage_error(at(path, key) + " must be above 0; re-run gpuplan bench", at(path, key));
  }
  return v;
}

// A string field of at most kMaxStringBytes; null or absent is empty unless required.
Result<std::string> text(const JsonDoc& obj, const char* key, const std::string& path, bool required) {
  const auto it = obj.find(key);
  const std::string field = at(path, key);
  if (it == obj.end() || it->is_null()) {
    if (required)
      return usage_error(field + " is missing: a calibration file names it (schema gpuplan.calibration/1)", field);
    return std::string();
  }
  if (!it->is_string()) return usage_error(field + " must be a string", field);
  std::string v = it->get<std::string>();
  if (v.size() > kMaxStringBytes) {
    return limit_error(
        field + " is " + std::to_string(v.size()) + " bytes, over the limit of " + std::to_string(kMaxStringBytes),
        field);
  }
  return v;
}

// One of `words`.
Result<std::string> word(const JsonDoc& obj, const char* key, const std::string& path,
                         std::initializer_list<std::string_view> words, bool required) {
  GPUPLAN_TRY(v, text(obj, key, path, required));
  if (v.empty() && !required) return v;
  std::string list;
  for (auto w : words) {
    if (v == w) return v;
    list += (list.empty() ? "" : ", ") + std::string(w);
  }
  return usage_error(at(path, key) + " '" + v + "' is not one of " + list, at(path, key));
}

Result<bool> boolean(const JsonDoc& obj, const char* key, const std::string& path) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return false;
  if (!it->is_boolean()) return usage_error(at(path, key) + " must be true or false", at(path, key));
  return it->get<bool>();
}

// An array of objects, at most kCalibrationMaxPoints; absent or null is empty.
Result<const JsonDoc*> points(const JsonDoc& obj, const char* key) {
  static const JsonDoc kEmpty = JsonDoc::array();
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return &kEmpty;
  if (!it->is_array()) return usage_error(std::string(key) + " must be a list of points", key);
  if (it->size() > kCalibrationMaxPoints) {
    return limit_error(std::string(key) + " has " + std::to_string(it->size()) + " points, over the limit of " +
                           std::to_string(kCalibrationMaxPoints),
                       key);
  }
  for (size_t i = 0; i < it->size(); ++i) {
    if (!(*it)[i].is_object()) return usage_error(item(key, i) + " must be an object", item(key, i));
  }
  return &*it;
}

// The precisions the schema names (gpuplan's vocabulary, without int4: no GEMM library has an int4 path).
Result<Precision> gemm_precision(const JsonDoc& p, const std::string& path) {
  GPUPLAN_TRY(name, word(p, "precision", path, {"fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"}, true));
  return parse_precision(name);
}

Status read_device(const JsonDoc& j, Calibration& c) {
  const auto it = j.find("device");
  if (it == j.end() || !it->is_object()) {
    return usage_error("device is missing: a calibration file says which GPU it measured", "device");
  }
  const JsonDoc& d = *it;
  const std::string path = "device";
  CalibrationDevice& dev = c.device;
  GPUPLAN_TRY(name, text(d, "name", path, true));
  GPUPLAN_TRY(catalog_id, text(d, "catalog_id", path, false));
  GPUPLAN_TRY(mig, text(d, "mig_profile", path, false));
  GPUPLAN_TRY(uuid, text(d, "uuid", path, false));
  GPUPLAN_TRY(bus, text(d, "pci_bus_id", path, false));
  GPUPLAN_TRY(driver, text(d, "driver_version", path, false));
  GPUPLAN_TRY(cuda, text(d, "cuda_runtime_version", path, false));
  GPUPLAN_TRY(mem, number(d, "memory_bytes", path, 0, kMaxBytes, false));
  GPUPLAN_TRY(sms, number(d, "sm_count", path, 0, kMaxCount, false));
  GPUPLAN_TRY(gen, number(d, "pcie_gen", path, 0, kMaxPcieGen, false));
  GPUPLAN_TRY(width, number(d, "pcie_width", path, 0, kMaxPcieWidth, false));
  GPUPLAN_TRY(index, number(d, "index", path, 0, kMaxCount, false));
  (void)index;
  dev.name = name, dev.catalog_id = catalog_id, dev.mig_profile = mig, dev.uuid = uuid, dev.pci_bus_id = bus;
  dev.driver_version = driver, dev.cuda_runtime_version = cuda, dev.memory_bytes = mem;
  dev.sm_count = static_cast<int>(sms), dev.pcie_gen = static_cast<int>(gen), dev.pcie_width = static_cast<int>(width);
  return Status{};
}

Status read_tool_and_conditions(const JsonDoc& j, Calibration& c) {
  if (const auto it = j.find("tool"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return usage_error("tool must be an object", "tool");
    GPUPLAN_TRY(backend, word(*it, "backend", "tool", {"cuda", "fake"}, false));
    GPUPLAN_TRY(version, text(*it, "gpuplan_version", "tool", false));
    GPUPLAN_TRY(budget, number(*it, "budget_seconds", "tool", 0, kMaxSeconds, false));
    GPUPLAN_TRY(quick, boolean(*it, "quick", "tool"));
    GPUPLAN_TRY(partial, boolean(*it, "partial", "tool"));
    (void)version, (void)budget;
    c.backend = backend, c.quick = quick, c.partial = partial;
  }
  if (const auto it = j.find("conditions"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return usage_error("conditions must be an object", "conditions");
    const std::string path = "conditions";
    GPUPLAN_TRY(shared, boolean(*it, "shared", path));
    GPUPLAN_TRY(procs, number(*it, "other_processes", path, 0, kMaxCount, false));
    GPUPLAN_TRY(watts, number(*it, "power_limit_watts", path, 0, kMaxWatts, false));
    GPUPLAN_TRY(clock, number(*it, "sm_clock_mhz_median", path, 0, kMaxClockMhz, false));
    GPUPLAN_TRY(temp, number(*it, "temperature_c_max", path, -kMaxTemperatureC, kMaxTemperatureC, false));
    (void)procs, (void)watts, (void)clock, (void)temp;
    for (const char* list : {"throttle_reasons", "features_off"}) {
      const auto l = it->find(list);
      if (l == it->end() || l->is_null()) continue;
      const std::string field = at(path, list);
      if (!l->is_array()) return usage_error(field + " must be a list of strings", field);
      if (l->size() > kCalibrationMaxPoints)
        return limit_error(field + " is over " + std::to_string(kCalibrationMaxPoints) + " items", field);
      for (const auto& s : *l) {
        if (!s.is_string() || s.get_ref<const std::string&>().size() > kMaxStringBytes) {
          return usage_error(field + " must be strings of at most " + std::to_string(kMaxStringBytes) + " bytes",
                             field);
        }
      }
    }
    c.shared = shared;
  }
  return Status{};
}

// The fields every measured point has besides its figure: samples, spread, why it stopped.
Status read_point_common(const JsonDoc& p, const std::string& path) {
  GPUPLAN_TRY(samples, number(p, "samples", path, 0, kMaxSamples, false));
  GPUPLAN_TRY(spread, number(p, "spread", path, 0, kMaxSpread, false));
  GPUPLAN_TRY(stop, word(p, "stop", path, {"converged", "noise_stable", "time_budget", "sample_cap"}, false));
  (void)samples, (void)spread, (void)stop;
  return Status{};
}

Status read_points(const JsonDoc& j, Calibration& c) {
  GPUPLAN_TRY(gemm, points(j, "gemm"));
  c.gemm.reserve(gemm->size());
  for (size_t i = 0; i < gemm->size(); ++i) {
    const JsonDoc& p = (*gemm)[i];
    const std::string path = item("gemm", i);
    CalibrationGemmPoint g;
    GPUPLAN_TRY(prec, gemm_precision(p, path));
    GPUPLAN_TRY(shape, word(p, "shape", path, {"square", "decode"}, false));
    GPUPLAN_TRY(m, number(p, "m", path, 1, kMaxGemmDim, true));
    GPUPLAN_TRY(n, number(p, "n", path, 1, kMaxGemmDim, true));
    GPUPLAN_TRY(k, number(p, "k", path, 1, kMaxGemmDim, true));
    GPUPLAN_TRY(sustained, positive(p, "tflops_sustained", path, kMaxTflops, true));
    GPUPLAN_TRY(burst, positive(p, "tflops_burst", path, kMaxTflops, false));
    GPUPLAN_TRY(checked, boolean(p, "checked", path));
    (void)checked;
    GPUPLAN_CHECK(read_point_common(p, path));
    if (burst > 0 && burst < sustained) {
      return usage_error(path + ".tflops_burst (the best sample) is below tflops_sustained (the median)",
                         path + ".tflops_burst");
    }
    g.precision = prec, g.decode = shape == "decode", g.m = m, g.n = n, g.k = k;
    g.tflops_sustained = sustained, g.tflops_burst = burst;
    c.gemm.push_back(g);
  }
  GPUPLAN_TRY(memory, points(j, "memory"));
  c.memory.reserve(memory->size());
  for (size_t i = 0; i < memory->size(); ++i) {
    const JsonDoc& p = (*memory)[i];
    const std::string path = item("memory", i);
    GPUPLAN_TRY(kernel, word(p, "kernel", path, {"read", "copy", "triad"}, true));
    GPUPLAN_TRY(bytes, positive(p, "bytes", path, kMaxBytes, true));
    GPUPLAN_TRY(sustained, positive(p, "gbps_sustained", path, kMaxGbps, true));
    GPUPLAN_TRY(burst, positive(p, "gbps_burst", path, kMaxGbps, false));
    (void)burst;
    GPUPLAN_CHECK(read_point_common(p, path));
    c.memory.push_back(CalibrationMemoryPoint{kernel, bytes, sustained});
  }
  GPUPLAN_TRY(transfer, points(j, "transfer"));
  c.transfer.reserve(transfer->size());
  for (size_t i = 0; i < transfer->size(); ++i) {
    const JsonDoc& p = (*transfer)[i];
    const std::string path = item("transfer", i);
    GPUPLAN_TRY(direction, word(p, "direction", path, {"h2d", "d2h"}, true));
    GPUPLAN_TRY(pinned, boolean(p, "pinned", path));
    GPUPLAN_TRY(bytes, positive(p, "bytes", path, kMaxBytes, true));
    GPUPLAN_TRY(gbps, positive(p, "gbps", path, kMaxGbps, true));
    GPUPLAN_CHECK(read_point_common(p, path));
    c.transfer.push_back(CalibrationTransferPoint{direction, pinned, bytes, gbps});
  }
  if (const auto it = j.find("launch"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return usage_error("launch must be an object", "launch");
    GPUPLAN_TRY(eager, positive(*it, "eager_micros", "launch", kMaxLaunchMicros, false));
    GPUPLAN_TRY(graph, positive(*it, "graph_micros", "launch", kMaxLaunchMicros, false));
    c.launch_eager_micros = eager, c.launch_graph_micros = graph;
  }
  GPUPLAN_TRY(power, points(j, "power"));
  for (size_t i = 0; i < power->size(); ++i) {
    const JsonDoc& p = (*power)[i];
    const std::string path = item("power", i);
    GPUPLAN_TRY(phase, word(p, "phase", path, {"compute", "memory"}, true));
    GPUPLAN_TRY(watts, positive(p, "watts", path, kMaxWatts, true));
    GPUPLAN_TRY(tpw, number(p, "tflops_per_watt", path, 0, kMaxTflops, false));
    GPUPLAN_TRY(gpw, number(p, "gbps_per_watt", path, 0, kMaxGbps, false));
    GPUPLAN_TRY(seconds, number(p, "seconds", path, 0, kMaxSeconds, false));
    (void)phase, (void)watts, (void)tpw, (void)gpw, (void)seconds;
  }
  return Status{};
}

// Days from 1970-01-01 to y-m-d (proleptic Gregorian; H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

}  // namespace

std::optional<int64_t> parse_rfc3339_seconds(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)
  auto digits = [&](size_t pos, size_t n) -> std::optional<int64_t> {
    if (pos + n > s.size()) return std::nullopt;
    int64_t v = 0;
    for (size_t i = pos; i < pos + n; ++i) {
      if (s[i] < '0' || s[i] > '9') return std::nullopt;
      v = v * 10 + (s[i] - '0');
    }
    return v;
  };
  constexpr size_t kDateTimeChars = 19;  // "YYYY-MM-DDTHH:MM:SS"
  if (s.size() < kDateTimeChars + 1 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' ||
      s[16] != ':') {
    return std::nullopt;
  }
  const auto y = digits(0, 4), mo = digits(5, 2), d = digits(8, 2), h = digits(11, 2), mi = digits(14, 2),
             se = digits(17, 2);
  if (!y || !mo || !d || !h || !mi || !se) return std::nullopt;
  constexpr std::array<int64_t, 12> kMonthDays = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (*mo < 1 || *mo > 12 || *d < 1 || *d > kMonthDays[static_cast<size_t>(*mo - 1)] || *h > 23 || *mi > 59 ||
      *se > 60) {
    return std::nullopt;
  }
  size_t pos = kDateTimeChars;
  if (s[pos] == '.') {
    ++pos;
    const size_t start = pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') ++pos;
    if (pos == start) return std::nullopt;
  }
  int64_t offset_seconds = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    const int64_t sign = s[pos] == '-' ? -1 : 1;
    const auto oh = digits(pos + 1, 2), om = digits(pos + 4, 2);
    if (!oh || !om || pos + 3 >= s.size() || s[pos + 3] != ':' || *oh > 23 || *om > 59) return std::nullopt;
    offset_seconds = sign * (*oh * 3600 + *om * 60);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  return days_from_civil(*y, *mo, *d) * 86400 + *h * 3600 + *mi * 60 + *se - offset_seconds;
}

Result<Calibration> parse_calibration(std::string_view text_in) {
  if (text_in.size() > kCalibrationMaxBytes) {
    return limit_error("the calibration file is " + std::to_string(text_in.size()) + " bytes, over the limit of " +
                           std::to_string(kCalibrationMaxBytes) + " (4 MiB)",
                       "calibration");
  }
  GPUPLAN_CHECK(check_json_depth(text_in, kMaxDepth, "calibration"));
  JsonDoc j;
  try {
    j = JsonDoc::parse(text_in.begin(), text_in.end(), nullptr, false);
  } catch (const JsonDoc::exception&) {
    j = JsonDoc(JsonDoc::value_t::discarded);
  }
  if (j.is_discarded() || !j.is_object()) {
    return usage_error("the calibration file is not a JSON object (schema gpuplan.calibration/1, from gpuplan bench)",
                       "calibration");
  }
  Calibration c;
  GPUPLAN_TRY(schema, text(j, "schema", "", true));
  if (schema != kCalibrationSchema) {
    return usage_error(
        "schema '" + schema + "' is not " + std::string(kCalibrationSchema) + "; this gpuplan reads that version only",
        "schema");
  }
  GPUPLAN_TRY(created, text(j, "created_at", "", true));
  const auto seconds = parse_rfc3339_seconds(created);
  if (!seconds) {
    return usage_error("created_at '" + created + "' is not an RFC 3339 time (2026-12-01T22:00:00Z)", "created_at");
  }
  c.created_at = created;
  c.created_unix_seconds = *seconds;
  GPUPLAN_CHECK(read_tool_and_conditions(j, c));
  GPUPLAN_CHECK(read_device(j, c));
  GPUPLAN_CHECK(read_points(j, c));
  return c;
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
