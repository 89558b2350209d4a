// `gpuplan bench` and `gpuplan bench check FILE` (issue #16): the tables, the --out file (written here:
// the library never writes files), SIGINT (a partial result) and bench check's exit status.
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/cli.h"
#include "gpuplan/bench.h"

namespace gpuplan::cli {

namespace {

// bench check's exit status when the file fails: distinct from every error's (status.h: 1-13).
constexpr int kBenchCheckFailedExit = 14;

extern "C" void on_bench_interrupt(int) { bench::interrupt_flag().store(true); }

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}
std::string bytes_text(int64_t b) {
  constexpr int64_t kKib = 1024, kMib = kKib * 1024, kGib = kMib * 1024;
  if (b >= kGib && b % kGib == 0) return std::to_string(b / kGib) + " GiB";
  if (b >= kMib && b % kMib == 0) return std::to_string(b / kMib) + " MiB";
  if (b >= kKib && b % kKib == 0) return std::to_string(b / kKib) + " KiB";
  return std::to_string(b) + " B";
}
std::string share(const Json& value, const Json& peak) {
  if (!peak.is_number() || peak.get<double>() <= 0) return "-";
  return fixed(100 * value.get<double>() / peak.get<double>(), 1) + " %";
}

}  // namespace

Result<Json> prepare_bench(Json request) {
  // Ctrl-C stops the run at the next sample; what it measured is returned (tool.partial) and written.
  struct sigaction sa {};
  sa.sa_handler = on_bench_interrupt;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  bench::device_access().store(true);  // the command line may measure this machine's GPU
  return request;
}

Result<Json> prepare_bench_check(Json request) {
  // FILE is a path here; the library takes the text (it never reads files). Read at most one byte over
  // the reader's bound, which then refuses it naming the limit.
  if (!request.contains("file") || !request["file"].is_string()) return request;
  const std::string path = request["file"].get<std::string>();
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found_error("cannot read " + path, "file");
  std::string text(bench::kMaxCalibrationBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  request["file"] = Json::array({Json{{"name", path}, {"text", std::move(text)}}});
  return request;
}

std::string render_bench(const Json& r, const Json&, const OutputFormat& fmt) {
  const Json& c = r["calibration"];
  const Json& d = c["device"];
  const Json& peaks = r["dense_peak_tflops"];
  std::vector<std::vector<std::string>> rows;
  for (const auto& g : c["gemm"]) {
    const std::string p = g["precision"].get<std::string>();
    rows.push_back({p, g["shape"].get<std::string>(),
                    std::to_string(g["m"].get<int64_t>()) + "x" + std::to_string(g["n"].get<int64_t>()) + "x" +
                        std::to_string(g["k"].get<int64_t>()),
                    fixed(g["tflops_sustained"].get<double>(), 2), fixed(g["tflops_burst"].get<double>(), 2),
                    share(g["tflops_sustained"], peaks.contains(p) ? peaks[p] : Json(nullptr)),
                    std::to_string(g["samples"].get<int>()), fixed(100 * g["spread"].get<double>(), 2) + " %",
                    g["stop"].get<std::string>(), g["checked"].get<bool>() ? "yes" : "no"});
  }
  const std::vector<std::string> gemm_header = {"precision", "shape",   "m x n x k", "tflops", "burst",
                                                "of peak",   "samples", "spread",    "stop",   "checked"};
  if (fmt.csv) return render_csv(gemm_header, rows);
  std::ostringstream os;
  os << "bench: " << d["name"].get<std::string>();
  if (d["catalog_id"].is_string()) os << " (" << d["catalog_id"].get<std::string>() << ")";
  os << ", backend " << c["tool"]["backend"].get<std::string>() << ", budget "
     << fixed(c["tool"]["budget_seconds"].get<double>(), 0) << " s, used "
     << fixed(r["elapsed_seconds"].get<double>(), 1) << " s"
     << (c["tool"]["partial"].get<bool>() ? " (PARTIAL: interrupted)" : "") << "\n\n";
  os << "GEMM, dense (TFLOPS; int8: TOPS; tflops = median sample, burst = best)\n";
  os << render_table(gemm_header, rows, {false, false, false, true, true, true, true, true, false, false});
  rows.clear();
  for (const auto& m : c["memory"]) {
    rows.push_back({m["kernel"].get<std::string>(), bytes_text(m["bytes"].get<int64_t>()),
                    fixed(m["gbps_sustained"].get<double>(), 1), fixed(m["gbps_burst"].get<double>(), 1),
                    share(m["gbps_sustained"], r["memory_peak_gbps"]), std::to_string(m["samples"].get<int>()),
                    fixed(100 * m["spread"].get<double>(), 2) + " %", m["stop"].get<std::string>()});
  }
  os << "\nMemory (GB/s over the working set; L2-resident sizes run above the DRAM peak)\n";
  os << render_table({"kernel", "bytes", "gbps", "burst", "of peak", "samples", "spread", "stop"}, rows,
                     {false, true, true, true, true, true, true, false});
  rows.clear();
  for (const auto& t : c["transfer"]) {
    rows.push_back({t["direction"].get<std::string>(), t["pinned"].get<bool>() ? "pinned" : "pageable",
                    bytes_text(t["bytes"].get<int64_t>()), fixed(t["gbps"].get<double>(), 2),
                    std::to_string(t["samples"].get<int>()), fixed(100 * t["spread"].get<double>(), 2) + " %",
                    t["stop"].get<std::string>()});
  }
  os << "\nHost transfers (GB/s)\n";
  os << render_table({"direction", "host memory", "bytes", "gbps", "samples", "spread", "stop"}, rows,
                     {false, false, true, true, true, true, false});
  const Json& l = c["launch"];
  os << "\nLaunch floor: eager "
     << (l["eager_micros"].is_number() ? fixed(l["eager_micros"].get<double>(), 2) + " us" : "-") << ", graph "
     << (l["graph_micros"].is_number() ? fixed(l["graph_micros"].get<double>(), 2) + " us" : "-") << "\n";
  for (const auto& p : c["power"]) {
    os << "Power, " << p["phase"].get<std::string>() << ": " << fixed(p["watts"].get<double>(), 0) << " W over "
       << fixed(p["seconds"].get<double>(), 1) << " s";
    if (p["tflops_per_watt"].is_number()) os << ", " << fixed(p["tflops_per_watt"].get<double>(), 3) << " TFLOPS/W";
    if (p["gbps_per_watt"].is_number()) os << ", " << fixed(p["gbps_per_watt"].get<double>(), 2) << " GB/s per W";
    os << "\n";
  }
  const Json& k = c["conditions"];
  const int others = k["other_processes"].get<int>();  // -1: NVML absent
  os << "Conditions: " << (k["shared"].get<bool>() ? "SHARED GPU" : "not shared") << ", other processes "
     << (others < 0 ? std::string("unknown") : std::to_string(others));
  if (k["sm_clock_mhz_median"].is_number())
    os << ", SM clock median " << fixed(k["sm_clock_mhz_median"].get<double>(), 0) << " MHz";
  if (k["temperature_c_max"].is_number()) os << ", max " << fixed(k["temperature_c_max"].get<double>(), 0) << " C";
  if (k["power_limit_watts"].is_number())
    os << ", power limit " << fixed(k["power_limit_watts"].get<double>(), 0) << " W";
  std::string throttle;
  for (const auto& t : k["throttle_reasons"]) throttle += (throttle.empty() ? "" : ", ") + t.get<std::string>();
  os << ", throttling: " << (others < 0 ? "unknown" : throttle.empty() ? "none" : throttle) << "\n";
  for (const auto& f : k["features_off"]) os << "  not measured: " << f.get<std::string>() << "\n";
  rows.clear();
  bool blamed = false;
  for (const auto& e : r["model_errors"]) {
    const bool fault = e["model_at_fault"].get<bool>();
    blamed = blamed || fault;
    const bool memory = e["what"].get<std::string>().rfind("memory", 0) == 0;
    rows.push_back({e["what"].get<std::string>(), std::to_string(e["points"].get<int>()),
                    fixed(100 * e["median_error"].get<double>(), 1) + " %",
                    fixed(100 * e["max_error"].get<double>(), 1) + " %",
                    memory ? fixed(e["emax"].get<double>(), 1) + " GB/s" : fixed(e["emax"].get<double>(), 3),
                    memory ? fixed(e["i_half"].get<double>(), 2) + " us" : fixed(e["i_half"].get<double>(), 1),
                    fault ? "operator model at fault" : "fits"});
  }
  os << "\nOperator model re-prediction of these points (GEMM: eff(I) = emax I / (I + I_half), I in FLOP/byte;"
        " memory: t = t0 + bytes / bw beyond L2)\n";
  os << render_table({"what", "points", "median error", "max error", "emax | bw", "I_half | t0", "verdict"}, rows,
                     {false, true, true, true, true, true, false});
  if (blamed) {
    os << "A large error is the operator model's (its curve cannot follow these points), not the measurement's.\n";
  }
  if (r["out"].is_string()) os << "\nwrote " << r["out"].get<std::string>() << "\n";
  return os.str();
}

int bench_status(const Json& r) {
  if (!r["out"].is_string()) return 0;
  const std::string path = r["out"].get<std::string>();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << r["calibration"].dump(2) << "\n";
    if (!f.good()) {
      std::cerr << "gpuplan: error: cannot write " << tmp << "\n";
      return exit_code(ErrorCode::kUnavailable);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::cerr << "gpuplan: error: cannot write " << path << "\n";
    return exit_code(ErrorCode::kUnavailable);
  }
  return 0;
}

std::string render_bench_check(const Json& r, const Json&, const OutputFormat& fmt) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& f : r["findings"]) rows.push_back({f["point"].get<std::string>(), f["problem"].get<std::string>()});
  if (fmt.csv) return render_csv({"point", "problem"}, rows);
  std::ostringstream os;
  if (r["ok"].get<bool>()) {
    os << r["file"].get<std::string>() << ": ok (" << r["points"].get<int>() << " points within "
       << r["catalog_id"].get<std::string>() << "'s dense peaks and the sanity floors)\n";
    return os.str();
  }
  os << r["file"].get<std::string>() << ": FAILS (" << rows.size() << " finding" << (rows.size() == 1 ? "" : "s")
     << " against " << r["catalog_id"].get<std::string>() << ")\n";
  os << render_table({"point", "problem"}, rows);
  return os.str();
}

int bench_check_status(const Json& r) { return r["ok"].get<bool>() ? 0 : kBenchCheckFailedExit; }

}  // namespace gpuplan::cli
