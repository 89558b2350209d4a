#include "perf/perf_calibration.h"

#include <algorithm>
#include <cstdio>

#include "core/format.h"
#include "core/request.h"

namespace gpuplan::perf {

namespace {

constexpr int64_t kSecondsPerDay = 86400;

// "dir/h100-sxm5-80gb.json" -> "h100-sxm5-80gb".
std::string stem(const std::string& name) {
  const size_t slash = name.find_last_of('/');
  std::string base = slash == std::string::npos ? name : name.substr(slash + 1);
  constexpr std::string_view kExt = ".json";
  if (base.size() > kExt.size() && base.compare(base.size() - kExt.size(), kExt.size(), kExt) == 0) {
    base.resize(base.size() - kExt.size());
  }
  return base;
}

// The {name, text} files of `key` (the CLI reads them; HTTP clients send them inline).
Status read_files(const Json& request, const char* key, bool from_dir, CalibrationSet& set) {
  if (!request.contains(key)) return Status{};
  // One file's text alone (as the OpenAPI schema of a files option allows), or a list of {name, text}.
  const Json v = request[key].is_string() ? Json::array({Json{{"name", "calibration.json"}, {"text", request[key]}}})
                                          : request[key];
  if (!v.is_array()) return usage_error(std::string("'") + key + "' must be a list of {name, text} files", key);
  for (const Json& f : v) {
    if (set.sources.size() >= kMaxCalibrationFiles) {
      return limit_error(std::string(key) + ": more than " + std::to_string(kMaxCalibrationFiles) +
                             " calibration files; give the ones of the targets asked",
                         key);
    }
    if (!f.is_object() || !f.contains("text") || !f["text"].is_string() ||
        (f.contains("name") && !f["name"].is_string())) {
      return usage_error(std::string("'") + key + "' must be a list of {name, text} files", key);
    }
    CalibrationSource s;
    s.name = f.contains("name") ? f["name"].get<std::string>() : "calibration.json";
    s.from_dir = from_dir;
    auto c = parse_calibration(f["text"].get_ref<const std::string&>());
    if (!c) {
      Error e = c.error();
      e.message = key + std::string(" ") + s.name + ": " + e.message;
      e.field = std::string(key) + "." + e.field;
      return e;
    }
    s.calibration = std::move(c).value();
    s.key = from_dir ? stem(s.name) : s.calibration.device.key();
    set.sources.push_back(std::move(s));
  }
  return Status{};
}

std::string date_of(const std::string& rfc3339) { return rfc3339.substr(0, std::min<size_t>(10, rfc3339.size())); }

}  // namespace

std::string calibration_key(const TargetRef& ref) {
  if (!ref.gpu) return {};
  return ref.profile ? ref.gpu->id + ":" + ref.profile->name : ref.gpu->id;
}

Result<CalibrationSet> parse_calibration_set(const Json& request, int64_t now_unix_seconds) {
  CalibrationSet set;
  set.now_unix_seconds = now_unix_seconds;
  GPUPLAN_CHECK(read_files(request, "calibration", false, set));
  GPUPLAN_CHECK(read_files(request, "calibration_dir", true, set));
  Request req(request);
  GPUPLAN_TRY(force, req.boolean("calibration_force", false));
  GPUPLAN_TRY(driver, req.text("driver"));
  set.force = force;
  set.driver = driver;
  return set;
}

std::vector<std::string> calibration_warnings(const Calibration& c, const std::string& name, const std::string& driver,
                                              int64_t now_unix_seconds) {
  std::vector<std::string> w;
  if (now_unix_seconds - c.created_unix_seconds > kCalibrationMaxAgeDays * kSecondsPerDay) {
    w.push_back("calibration " + name + " was measured on " + date_of(c.created_at) + ", more than " +
                std::to_string(kCalibrationMaxAgeDays) +
                " days ago: clocks, cooling and drivers change; re-run gpuplan bench");
  }
  if (!driver.empty() && !c.device.driver_version.empty() && driver != c.device.driver_version) {
    w.push_back("calibration " + name + " was measured with driver " + c.device.driver_version + ", the target runs " +
                driver + ": re-run gpuplan bench after a driver change");
  }
  if (c.shared) w.push_back("calibration " + name + " was measured on a GPU shared with other processes");
  if (c.partial) w.push_back("calibration " + name + " is a partial run (interrupted): some figures are missing");
  return w;
}

Json calibration_info(const Calibration& c, const std::string& name, const CalibrationFit& fit) {
  Json curves = Json::array();
  for (const auto& cv : fit.curves) {
    curves.push_back(Json{{"precision", std::string(precision_name(cv.precision))},
                          {"peak_fraction", sig(cv.peak_fraction)},
                          {"half_intensity", sig(cv.half_intensity)},
                          {"points", cv.points},
                          {"rms_error", sig(cv.rms_error)},
                          {"best_tflops", sig(cv.best_tflops)},
                          {"peak_tflops", sig(cv.peak_tflops)}});
  }
  Json keys = Json::array();
  for (const auto& k : fit.keys) keys.push_back(k);
  return Json{{"file", name},
              {"created_at", c.created_at},
              {"device", c.device.name},
              {"catalog_id", c.device.catalog_id.empty() ? Json(nullptr) : Json(c.device.catalog_id)},
              {"mig_profile", c.device.mig_profile.empty() ? Json(nullptr) : Json(c.device.mig_profile)},
              {"driver", c.device.driver_version.empty() ? Json(nullptr) : Json(c.device.driver_version)},
              {"keys", std::move(keys)},
              {"curves", std::move(curves)},
              {"bandwidth_gbps", fit.memory_gbps > 0 ? Json(sig(fit.memory_gbps)) : Json(nullptr)}};
}

Result<std::optional<AppliedCalibration>> calibrate_target(const CalibrationSet& set, const Target& target,
                                                           const PerfDevice& device, const PerfEfficiency& base) {
  const std::string key = calibration_key(target.ref);
  const CalibrationSource* pick = nullptr;
  // An explicit file of the target's device, else a directory's file named for it; the newest of several.
  for (bool from_dir : {false, true}) {
    for (const auto& s : set.sources) {
      if (s.from_dir != from_dir || s.key != key) continue;
      if (!pick || s.calibration.created_unix_seconds > pick->calibration.created_unix_seconds) pick = &s;
    }
    if (pick) break;
  }
  bool forced = false;
  if (!pick && set.force) {
    for (const auto& s : set.sources) {
      if (!s.from_dir) pick = &s, forced = true;
    }
  }
  if (!pick) return std::optional<AppliedCalibration>{};
  const Calibration& c = pick->calibration;
  AppliedCalibration a;
  // A directory's file whose device is another GPU than its name says.
  const std::string device_key = c.device.key();
  if (pick->from_dir && device_key != key) {
    if (!set.force) {
      return usage_error("calibration_dir " + pick->name + " is named for " + key + " but measured " +
                             (device_key.empty() ? std::string("an unknown device (catalog_id null)") : device_key) +
                             " (" + c.device.name + "); rename it, or give --calibration-force",
                         "calibration_dir");
    }
    forced = true;
  }
  if (forced) {
    a.warnings.push_back("calibration " + pick->name + " measured " +
                         (device_key.empty() ? c.device.name : device_key) + ", applied to " + key +
                         " because of calibration_force: its figures are another GPU's");
  }
  auto fit = fit_calibration(c, device, base);
  if (!fit) {
    Error e = fit.error();
    e.message = "calibration " + pick->name + ": " + e.message;
    e.field = std::string(pick->from_dir ? "calibration_dir." : "calibration.") + e.field;
    return e;
  }
  for (auto& w : calibration_warnings(c, pick->name, set.driver, set.now_unix_seconds))
    a.warnings.push_back(std::move(w));
  a.efficiency = fit->efficiency;
  a.info = calibration_info(c, pick->name, *fit);
  return std::optional<AppliedCalibration>(std::move(a));
}

Status check_calibrations_used(const CalibrationSet& set, const std::vector<Target>& targets) {
  if (set.force) return Status{};
  for (const auto& s : set.sources) {
    if (s.from_dir) continue;
    const bool used =
        std::any_of(targets.begin(), targets.end(), [&](const Target& t) { return calibration_key(t.ref) == s.key; });
    if (used) continue;
    std::string asked;
    for (const auto& t : targets) {
      if (asked.size() > 200) {
        asked += ", ...";
        break;
      }
      asked += (asked.empty() ? "" : ", ") + calibration_key(t.ref);
    }
    return usage_error(
        "calibration " + s.name + " measured " +
            (s.key.empty() ? "a GPU the catalog does not know (" + s.calibration.device.name + ")" : s.key) +
            ", which is none of the targets (" + asked + "); give --gpu " +
            (s.key.empty() ? std::string("NAME") : s.key) + ", or --calibration-force to apply it anyway",
        "calibration");
  }
  return Status{};
}

}  // namespace gpuplan::perf
