// The calibration file `gpuplan.calibration/1` (docs/bench.md, "The file"): its writer and its bounded
// reader. The reader takes any bytes: over a bound is kLimit naming the field and the bound; a wrong type,
// a figure that is not a finite positive number, or an unknown word is kInvalidData naming the field.
#include <array>
#include <cmath>
#include <cstdio>

#include "gpuplan/bench.h"
#include "gpuplan/model.h"

namespace gpuplan::bench {

namespace {

constexpr int kMaxDepth = 8;             // the deepest the format nests is 3 (file, array, point)
constexpr size_t kMaxStringBytes = 256;  // names, ids, versions, reasons
constexpr size_t kMaxReasons = 64;       // throttle_reasons, features_off
// Bounds of the figures: far beyond any device (the largest, B200, is 2.25 dense bf16 PFLOPS and 8 TB/s)
// yet finite, so that a value is a measurement and not a typo or an overflow.
constexpr double kMaxTflops = 1e5;
constexpr double kMaxGbps = 1e5;
constexpr double kMaxSpread = 10;          // relative spread of a point's samples
constexpr double kMaxLaunchMicros = 1e6;   // one second per launch
constexpr double kMaxSeconds = 1e7;        // a power window or the budget (~4 months)
constexpr double kMaxWatts = 1e5;          // board power
constexpr double kMaxClockMhz = 1e5;       // SM clock
constexpr double kMaxTemperatureC = 1000;  // a sensor reading beyond this is a broken sensor
constexpr double kMinTemperatureC = -273;  // absolute zero

std::string figure_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

Json opt(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }
Json opt(const std::optional<std::string>& v) { return v ? Json(*v) : Json(nullptr); }

class Reader {
 public:
  explicit Reader(const Json& j, std::string where) : j_(j), where_(std::move(where)) {}
  std::string field(std::string_view key) const {
    return where_.empty() ? std::string(key) : where_ + "." + std::string(key);
  }
  const Json* find(std::string_view key) const {
    auto it = j_.find(std::string(key));
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  Error bad(std::string_view key, const std::string& what) const {
    return invalid_data_error("calibration file: " + field(key) + " " + what, field(key));
  }
  Result<std::string> str(std::string_view key, bool required = true) const {
    const Json* v = find(key);
    if (!v) return required ? Result<std::string>(bad(key, "is missing")) : Result<std::string>(std::string());
    if (!v->is_string()) return bad(key, "must be a string");
    const auto& s = v->get_ref<const std::string&>();
    if (s.size() > kMaxStringBytes) {
      return limit_error("calibration file: " + field(key) + " is longer than " + std::to_string(kMaxStringBytes) +
                             " bytes, the limit",
                         field(key));
    }
    return s;
  }
  Result<std::optional<std::string>> opt_str(std::string_view key) const {
    if (!find(key)) return std::optional<std::string>();
    GPUPLAN_TRY(s, str(key));
    return std::optional<std::string>(s);
  }
  // A finite number in [lo, hi].
  Result<double> num(std::string_view key, double lo, double hi, bool required = true) const {
    const Json* v = find(key);
    if (!v) return required ? Result<double>(bad(key, "is missing")) : Result<double>(0.0);
    if (!v->is_number()) return bad(key, "must be a number");
    const double d = v->get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) {
      return bad(key, "must be a finite number from " + figure_text(lo) + " to " + figure_text(hi) + " (is " +
                          v->dump() + "); re-run gpuplan bench");
    }
    return d;
  }
  // A measured rate or size: finite, above 0 and at most hi.
  Result<double> positive(std::string_view key, double hi, bool required = true) const {
    GPUPLAN_TRY(d, num(key, 0, hi, required));
    if (find(key) && !(d > 0)) return bad(key, "must be above 0 (a measured figure); re-run gpuplan bench");
    return d;
  }
  Result<std::optional<double>> opt_num(std::string_view key, double lo, double hi) const {
    if (!find(key)) return std::optional<double>();
    GPUPLAN_TRY(d, num(key, lo, hi));
    return std::optional<double>(d);
  }
  Result<std::optional<double>> opt_positive(std::string_view key, double hi) const {
    if (!find(key)) return std::optional<double>();
    GPUPLAN_TRY(d, positive(key, hi));
    return std::optional<double>(d);
  }
  // An integer in [lo, hi]; an integral number written with a fraction (8192.0, as a JSON writer of
  // doubles does) is that integer.
  Result<int64_t> integer(std::string_view key, int64_t lo, int64_t hi, bool required = true) const {
    const Json* v = find(key);
    if (!v) return required ? Result<int64_t>(bad(key, "is missing")) : Result<int64_t>(int64_t{0});
    if (!v->is_number()) return bad(key, "must be an integer");
    int64_t i = 0;
    if (v->is_number_float()) {
      const double d = v->get<double>();
      if (!std::isfinite(d) || d != std::floor(d) || d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
        return bad(key, "must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
      }
      i = static_cast<int64_t>(d);
    } else if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) {
      return bad(key, "must be from " + std::to_string(lo) + " to " + std::to_string(hi));
    } else {
      i = v->get<int64_t>();
    }
    if (i < lo || i > hi) return bad(key, "must be from " + std::to_string(lo) + " to " + std::to_string(hi));
    return i;
  }
  Result<bool> boolean(std::string_view key) const {
    const Json* v = find(key);
    if (!v) return false;
    if (!v->is_boolean()) return bad(key, "must be true or false");
    return v->get<bool>();
  }
  Result<std::string> word(std::string_view key, std::initializer_list<std::string_view> words) const {
    GPUPLAN_TRY(s, str(key));
    for (auto w : words) {
      if (s == w) return s;
    }
    std::string list;
    for (auto w : words) list += (list.empty() ? "" : ", ") + std::string(w);
    return bad(key, "is '" + s + "'; it must be one of " + list);
  }
  Result<std::vector<std::string>> strings(std::string_view key) const {
    std::vector<std::string> out;
    const Json* v = find(key);
    if (!v) return out;
    if (!v->is_array()) return bad(key, "must be a list of strings");
    if (v->size() > kMaxReasons) {
      return limit_error(
          "calibration file: " + field(key) + " has more than " + std::to_string(kMaxReasons) + " entries, the limit",
          field(key));
    }
    for (const auto& s : *v) {
      if (!s.is_string() || s.get_ref<const std::string&>().size() > kMaxStringBytes) {
        return bad(key, "must hold strings of at most " + std::to_string(kMaxStringBytes) + " bytes");
      }
      out.push_back(s.get<std::string>());
    }
    return out;
  }
  // The objects of array `key`, each with its field prefix ("gemm[3]").
  Result<std::vector<Reader>> array(std::string_view key) const {
    std::vector<Reader> out;
    const Json* v = find(key);
    if (!v) return out;
    if (!v->is_array()) return bad(key, "must be a list");
    if (v->size() > kMaxPointsPerArray) {
      return limit_error("calibration file: " + field(key) + " has " + std::to_string(v->size()) +
                             " points; the limit is " + std::to_string(kMaxPointsPerArray),
                         field(key));
    }
    for (size_t i = 0; i < v->size(); ++i) {
      const std::string f = field(key) + "[" + std::to_string(i) + "]";
      if (!(*v)[i].is_object()) return invalid_data_error("calibration file: " + f + " must be an object", f);
      out.emplace_back((*v)[i], f);
    }
    return out;
  }
  Result<Reader> object(std::string_view key) const {
    const Json* v = find(key);
    if (!v || !v->is_object()) return bad(key, "must be an object");
    return Reader(*v, field(key));
  }

 private:
  const Json& j_;
  std::string where_;
};

const std::initializer_list<std::string_view> kStops = {"converged", "noise_stable", "time_budget", "sample_cap"};
constexpr int64_t kMaxBytes = int64_t{1} << 50;  // 1 PiB: any working set or memory size of one GPU
constexpr int64_t kMaxDim = int64_t{1} << 20;    // 2^20 rows or columns of one GEMM
constexpr int kMaxSamples = 1000000;             // samples of one point (the stopping rules take < 1000)
constexpr int64_t kMaxCount = 1000000;           // processes on one GPU
constexpr int64_t kMaxSms = 100000;              // SMs of one GPU (B200: 148)

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

Json calibration_json(const Calibration& c) {
  Json j;
  j["schema"] = c.schema;
  j["created_at"] = c.created_at;
  j["tool"] = {{"gpuplan_version", c.tool.gpuplan_version},
               {"backend", c.tool.backend},
               {"budget_seconds", c.tool.budget_seconds},
               {"quick", c.tool.quick},
               {"partial", c.tool.partial}};
  const auto& d = c.device;
  j["device"] = {{"index", d.index},
                 {"name", d.name},
                 {"catalog_id", opt(d.catalog_id)},
                 {"mig_profile", opt(d.mig_profile)},
                 {"uuid", d.uuid},
                 {"pci_bus_id", d.pci_bus_id},
                 {"driver_version", d.driver_version},
                 {"cuda_runtime_version", d.cuda_runtime_version},
                 {"memory_bytes", d.memory_bytes},
                 {"sm_count", d.sm_count},
                 {"pcie_gen", d.pcie_gen},
                 {"pcie_width", d.pcie_width}};
  const auto& k = c.conditions;
  j["conditions"] = {{"shared", k.shared},
                     {"other_processes", k.other_processes},
                     {"power_limit_watts", opt(k.power_limit_watts)},
                     {"sm_clock_mhz_median", opt(k.sm_clock_mhz_median)},
                     {"temperature_c_max", opt(k.temperature_c_max)},
                     {"throttle_reasons", k.throttle_reasons},
                     {"features_off", k.features_off}};
  Json gemm = Json::array();
  for (const auto& g : c.gemm) {
    gemm.push_back({{"precision", g.precision},
                    {"shape", g.shape},
                    {"m", g.m},
                    {"n", g.n},
                    {"k", g.k},
                    {"tflops_sustained", g.tflops_sustained},
                    {"tflops_burst", g.tflops_burst},
                    {"samples", g.samples},
                    {"spread", g.spread},
                    {"stop", g.stop},
                    {"checked", g.checked}});
  }
  j["gemm"] = std::move(gemm);
  Json memory = Json::array();
  for (const auto& m : c.memory) {
    memory.push_back({{"kernel", m.kernel},
                      {"bytes", m.bytes},
                      {"gbps_sustained", m.gbps_sustained},
                      {"gbps_burst", m.gbps_burst},
                      {"samples", m.samples},
                      {"spread", m.spread},
                      {"stop", m.stop}});
  }
  j["memory"] = std::move(memory);
  Json transfer = Json::array();
  for (const auto& t : c.transfer) {
    transfer.push_back({{"direction", t.direction},
                        {"pinned", t.pinned},
                        {"bytes", t.bytes},
                        {"gbps", t.gbps},
                        {"samples", t.samples},
                        {"spread", t.spread},
                        {"stop", t.stop}});
  }
  j["transfer"] = std::move(transfer);
  j["launch"] = {{"eager_micros", opt(c.launch.eager_micros)}, {"graph_micros", opt(c.launch.graph_micros)}};
  Json power = Json::array();
  for (const auto& p : c.power) {
    power.push_back({{"phase", p.phase},
                     {"watts", p.watts},
                     {"tflops_per_watt", opt(p.tflops_per_watt)},
                     {"gbps_per_watt", opt(p.gbps_per_watt)},
                     {"seconds", p.seconds}});
  }
  j["power"] = std::move(power);
  return j;
}

Result<Calibration> read_calibration(std::string_view text) {
  if (text.size() > kMaxCalibrationBytes) {
    return limit_error("the calibration file has " + std::to_string(text.size()) + " bytes; the limit is " +
                           std::to_string(kMaxCalibrationBytes) + " (4 MiB)",
                       "file");
  }
  GPUPLAN_CHECK(check_json_depth(text, kMaxDepth, "file"));
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return invalid_data_error("the calibration file is not a JSON object (gpuplan bench --out writes one)", "file");
  }
  Reader r(j, "");
  Calibration c;
  GPUPLAN_TRY(schema, r.str("schema"));
  if (schema != kCalibrationSchema) {
    return invalid_data_error(
        "calibration file: schema is '" + schema + "'; this gpuplan reads " + std::string(kCalibrationSchema),
        "schema");
  }
  {
    GPUPLAN_TRY(at, r.str("created_at"));
    if (!parse_rfc3339_seconds(at)) {
      return invalid_data_error(
          "calibration file: created_at '" + at + "' is not an RFC 3339 time (2026-12-01T22:00:00Z)", "created_at");
    }
    c.created_at = at;
  }
  {
    GPUPLAN_TRY(t, r.object("tool"));
    GPUPLAN_TRY(v, t.str("gpuplan_version", false));
    GPUPLAN_TRY(b, t.word("backend", {"cuda", "fake"}));
    GPUPLAN_TRY(budget, t.num("budget_seconds", 0, kMaxSeconds));
    GPUPLAN_TRY(quick, t.boolean("quick"));
    GPUPLAN_TRY(partial, t.boolean("partial"));
    c.tool = {v, b, budget, quick, partial};
  }
  {
    GPUPLAN_TRY(d, r.object("device"));
    GPUPLAN_TRY(index, d.integer("index", 0, 1024, false));
    GPUPLAN_TRY(name, d.str("name"));
    GPUPLAN_TRY(cat, d.opt_str("catalog_id"));
    GPUPLAN_TRY(mig, d.opt_str("mig_profile"));
    GPUPLAN_TRY(uuid, d.str("uuid", false));
    GPUPLAN_TRY(pci, d.str("pci_bus_id", false));
    GPUPLAN_TRY(drv, d.str("driver_version", false));
    GPUPLAN_TRY(rt, d.str("cuda_runtime_version", false));
    GPUPLAN_TRY(mem, d.integer("memory_bytes", 0, kMaxBytes, false));
    GPUPLAN_TRY(sms, d.integer("sm_count", 0, kMaxSms, false));
    GPUPLAN_TRY(gen, d.integer("pcie_gen", 0, 16, false));
    GPUPLAN_TRY(width, d.integer("pcie_width", 0, 64, false));
    c.device = {
        static_cast<int>(index), name, cat, mig, uuid, pci, drv, rt, mem, static_cast<int>(sms), static_cast<int>(gen),
        static_cast<int>(width)};
  }
  {
    GPUPLAN_TRY(k, r.object("conditions"));
    GPUPLAN_TRY(shared, k.boolean("shared"));
    GPUPLAN_TRY(others, k.integer("other_processes", -1, kMaxCount, false));
    GPUPLAN_TRY(limit, k.opt_num("power_limit_watts", 0, kMaxWatts));
    GPUPLAN_TRY(clock, k.opt_num("sm_clock_mhz_median", 0, kMaxClockMhz));
    GPUPLAN_TRY(temp, k.opt_num("temperature_c_max", kMinTemperatureC, kMaxTemperatureC));
    GPUPLAN_TRY(reasons, k.strings("throttle_reasons"));
    GPUPLAN_TRY(off, k.strings("features_off"));
    c.conditions = {shared, static_cast<int>(others), limit, clock, temp, reasons, off};
  }
  GPUPLAN_TRY(gemm, r.array("gemm"));
  for (const Reader& g : gemm) {
    GPUPLAN_TRY(prec, g.word("precision", {"fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"}));
    GPUPLAN_TRY(shape, g.word("shape", {"square", "decode"}));
    GPUPLAN_TRY(m, g.integer("m", 1, kMaxDim));
    GPUPLAN_TRY(n, g.integer("n", 1, kMaxDim));
    GPUPLAN_TRY(kk, g.integer("k", 1, kMaxDim));
    GPUPLAN_TRY(sus, g.positive("tflops_sustained", kMaxTflops));
    GPUPLAN_TRY(burst, g.positive("tflops_burst", kMaxTflops));
    GPUPLAN_TRY(samples, g.integer("samples", 1, kMaxSamples));
    GPUPLAN_TRY(spread, g.num("spread", 0, kMaxSpread));
    GPUPLAN_TRY(stop, g.word("stop", kStops));
    GPUPLAN_TRY(checked, g.boolean("checked"));
    if (burst < sus) return g.bad("tflops_burst", "(the best sample) is below tflops_sustained (the median)");
    c.gemm.push_back({prec, shape, m, n, kk, sus, burst, static_cast<int>(samples), spread, stop, checked});
  }
  GPUPLAN_TRY(memory, r.array("memory"));
  for (const Reader& m : memory) {
    GPUPLAN_TRY(kernel, m.word("kernel", {"read", "copy", "triad"}));
    GPUPLAN_TRY(bytes, m.integer("bytes", 1, kMaxBytes));
    GPUPLAN_TRY(sus, m.positive("gbps_sustained", kMaxGbps));
    GPUPLAN_TRY(burst, m.positive("gbps_burst", kMaxGbps));
    GPUPLAN_TRY(samples, m.integer("samples", 1, kMaxSamples));
    GPUPLAN_TRY(spread, m.num("spread", 0, kMaxSpread));
    GPUPLAN_TRY(stop, m.word("stop", kStops));
    c.memory.push_back({kernel, bytes, sus, burst, static_cast<int>(samples), spread, stop});
  }
  GPUPLAN_TRY(transfer, r.array("transfer"));
  for (const Reader& t : transfer) {
    GPUPLAN_TRY(dir, t.word("direction", {"h2d", "d2h"}));
    GPUPLAN_TRY(pinned, t.boolean("pinned"));
    GPUPLAN_TRY(bytes, t.integer("bytes", 1, kMaxBytes));
    GPUPLAN_TRY(gbps, t.positive("gbps", kMaxGbps));
    GPUPLAN_TRY(samples, t.integer("samples", 1, kMaxSamples));
    GPUPLAN_TRY(spread, t.num("spread", 0, kMaxSpread));
    GPUPLAN_TRY(stop, t.word("stop", kStops));
    c.transfer.push_back({dir, pinned, bytes, gbps, static_cast<int>(samples), spread, stop});
  }
  if (r.find("launch")) {
    GPUPLAN_TRY(l, r.object("launch"));
    GPUPLAN_TRY(eager, l.opt_positive("eager_micros", kMaxLaunchMicros));
    GPUPLAN_TRY(graph, l.opt_positive("graph_micros", kMaxLaunchMicros));
    c.launch = {eager, graph};
  }
  GPUPLAN_TRY(power, r.array("power"));
  for (const Reader& p : power) {
    GPUPLAN_TRY(phase, p.word("phase", {"compute", "memory"}));
    GPUPLAN_TRY(watts, p.positive("watts", kMaxWatts));
    GPUPLAN_TRY(tpw, p.opt_num("tflops_per_watt", 0, kMaxTflops));
    GPUPLAN_TRY(gpw, p.opt_num("gbps_per_watt", 0, kMaxGbps));
    GPUPLAN_TRY(seconds, p.num("seconds", 0, kMaxSeconds));
    c.power.push_back({phase, watts, tpw, gpw, seconds});
  }
  return c;
}

}  // namespace gpuplan::bench
