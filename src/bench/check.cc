// `gpuplan bench check FILE`: a calibration held against the catalog (docs/bench.md, "bench check").
#include <cmath>
#include <map>
#include <sstream>

#include "gpuplan/bench.h"

namespace gpuplan::bench {

namespace {
// Datasheet peaks are rounded (NVIDIA prints 989.5 for 989.4 dense bf16): a measured figure up to 2 %
// above is rounding, more is a timing bug (an event recorded on the wrong stream, work not queued).
constexpr double kPeakTolerance = 1.02;
// Sanity floors: the best large-shape GEMM of a precision below 5 % of its dense peak, or the best
// DRAM stream below 10 % of the pin bandwidth, is a broken run (a wrong clock, a hung kernel), not a GPU.
constexpr double kGemmFloorShare = 0.05;
constexpr double kBandwidthFloorShare = 0.10;
// L2-resident streams run above the DRAM peak (2-3x on Hopper); above this many times it is a bug.
constexpr double kL2CeilingFactor = 6.0;
// Launch floors: an empty kernel costs ~2-3 us eager on every CUDA GPU since Kepler and ~1 us from a graph;
// eager under 0.5 us or either over 1 ms is a timing bug (graph nodes may legitimately go below 0.5 us).
constexpr double kEagerFloorMicros = 0.5;
constexpr double kGraphFloorMicros = 0.1;
constexpr double kLaunchCeilingMicros = 1000;
// GEMMs this large (m, n, k all at least) reach the large-shape rate the floor speaks of.
constexpr int64_t kLargeShape = 2048;

std::string num(double v) {
  std::ostringstream s;
  s.precision(4);
  s << v;
  return s.str();
}
std::string gemm_name(const GemmPoint& g) {
  return "gemm " + g.precision + " " + g.shape + " " + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" +
         std::to_string(g.k);
}
}  // namespace

Result<std::vector<CheckFinding>> check_calibration(const Catalog& catalog, const Calibration& c) {
  std::vector<CheckFinding> out;
  if (!c.device.catalog_id) {
    return not_found_error(
        "the calibration names no catalog_id: bench check needs the GPU's catalog entry "
        "(a GPU the catalog lacks: add it with --catalog DIR)",
        "device.catalog_id");
  }
  GPUPLAN_TRY(ref, catalog.resolve(*c.device.catalog_id));
  const Target target{ref, 1, Link::kPcie};
  const double bw = target.memory_bandwidth_gbps();

  std::map<std::string, double> best_large;
  for (const GemmPoint& g : c.gemm) {
    auto p = parse_precision(g.precision);
    const std::optional<double> peak = p ? target.peak_tflops(*p) : std::nullopt;
    if (!peak) {
      out.push_back({gemm_name(g), "the catalog has no dense " + g.precision + " rate for " + ref.id() +
                                       ": a figure for a path this GPU lacks is a bug"});
      continue;
    }
    for (double v : {g.tflops_sustained, g.tflops_burst}) {
      if (v > *peak * kPeakTolerance) {
        out.push_back({gemm_name(g), num(v) + " TFLOPS is above the dense " + g.precision + " peak " + num(*peak) +
                                         " of " + ref.id() + " (a timing bug; sparse peaks never apply here)"});
        break;
      }
    }
    if (g.tflops_burst + 1e-12 < g.tflops_sustained) {
      out.push_back({gemm_name(g), "burst " + num(g.tflops_burst) + " is below sustained " + num(g.tflops_sustained)});
    }
    if (g.m >= kLargeShape && g.n >= kLargeShape && g.k >= kLargeShape) {
      best_large[g.precision] = std::max(best_large[g.precision], g.tflops_sustained);
    }
  }
  for (const auto& [prec, best] : best_large) {
    const double peak = target.peak_tflops(parse_precision(prec).value()).value_or(0);
    if (peak > 0 && best < peak * kGemmFloorShare) {
      out.push_back({"gemm " + prec, "the best large GEMM reaches " + num(best) + " TFLOPS, under " +
                                         num(kGemmFloorShare * 100) + " % of the dense peak " + num(peak) +
                                         " (a broken run)"});
    }
  }
  double best_dram = 0;
  const double l2 = ref.gpu->number("l2_cache_mb", 0) * kBytesPerMib;
  for (const MemoryPoint& m : c.memory) {
    const std::string name = "memory " + m.kernel + " " + std::to_string(m.bytes) + " bytes";
    const bool dram = static_cast<double>(m.bytes) > 2 * l2;
    const double ceiling = dram ? bw * kPeakTolerance : bw * kL2CeilingFactor;
    if (bw > 0 && std::max(m.gbps_sustained, m.gbps_burst) > ceiling) {
      out.push_back({name, num(std::max(m.gbps_sustained, m.gbps_burst)) + " GB/s is above " + num(ceiling) +
                               (dram ? " (the DRAM peak of " + ref.id() + ": a timing bug)"
                                     : " (" + num(kL2CeilingFactor) + "x the DRAM peak, even for L2)")});
    }
    if (dram) best_dram = std::max(best_dram, m.gbps_sustained);
  }
  if (bw > 0 && best_dram > 0 && best_dram < bw * kBandwidthFloorShare) {
    out.push_back({"memory", "the best DRAM stream reaches " + num(best_dram) + " GB/s, under " +
                                 num(kBandwidthFloorShare * 100) + " % of the peak " + num(bw) + " (a broken run)"});
  }
  for (const TransferPoint& t : c.transfer) {
    // No PCIe generation moves more than Gen6 x16 (121 GB/s); NVLink-C2C hosts (GH200) are in the catalog's link.
    const double link = std::max(target.link_gbps(), 121.0);
    if (t.gbps > link * kPeakTolerance) {
      out.push_back({"transfer " + t.direction + (t.pinned ? " pinned " : " pageable ") + std::to_string(t.bytes),
                     num(t.gbps) + " GB/s is above any host link (" + num(link) + " GB/s)"});
    }
  }
  auto launch = [&](const char* name, const std::optional<double>& v, double floor) {
    if (!v) return;
    if (*v < floor || *v > kLaunchCeilingMicros) {
      out.push_back({std::string("launch ") + name, num(*v) + " us is outside [" + num(floor) + ", " +
                                                        num(kLaunchCeilingMicros) + "] us (a timing bug)"});
    }
  };
  launch("eager", c.launch.eager_micros, kEagerFloorMicros);
  launch("graph", c.launch.graph_micros, kGraphFloorMicros);
  return out;
}

}  // namespace gpuplan::bench
