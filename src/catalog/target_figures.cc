#include "core/format.h"
#include "gpuplan/target.h"

namespace gpuplan {

std::vector<Figure> target_figures(const Catalog& catalog, const TargetRef& ref) {
  if (!ref.profile) return ref.gpu->specs;
  const Gpu& g = *ref.gpu;
  const MigProfile& p = *ref.profile;
  const MigTable& t = *ref.mig_table;
  std::vector<Figure> out;
  auto add = [&](const std::string& key, double value, const std::string& source, const std::string& derived) {
    const SpecKey* sk = catalog.find_spec_key(key);
    Figure f;
    f.key = key;
    f.number = value;
    f.text = format_g(value);
    f.unit = sk ? sk->unit : "";
    f.source_id = source;
    const Source* src = catalog.find_source(source);
    f.checked = src ? src->checked : "";
    f.derived = derived;
    out.push_back(std::move(f));
  };
  const double full_sms = g.number("sm_count", 0);
  const double sm_share =
      full_sms > 0 ? p.sm_count / full_sms : static_cast<double>(p.compute_slices) / t.compute_slices;
  const std::string share_text =
      full_sms > 0 ? format_g(p.sm_count) + "/" + format_g(full_sms) + " SMs"
                   : std::to_string(p.compute_slices) + "/" + std::to_string(t.compute_slices) + " compute slices";
  for (const auto& f : g.specs) {
    const SpecKey* sk = catalog.find_spec_key(f.key);
    if (f.key == "memory_gb") {
      add("memory_gb", p.memory_mib * kBytesPerMib / kBytesPerGb, p.source_id,
          "the instance's " + format_g(p.memory_mib) + " MiB (NVML memorySizeMB) in GB");
    } else if (f.key == "memory_total_mib") {
      add("memory_total_mib", p.memory_mib, p.source_id, "");
    } else if (f.key == "memory_bandwidth_gbps" && f.number) {
      add(f.key, *f.number * p.memory_slices / t.memory_slices, f.source_id,
          format_g(*f.number) + " GB/s x " + std::to_string(p.memory_slices) + "/" + std::to_string(t.memory_slices) +
              " memory slices");
    } else if (f.key == "sm_count") {
      add("sm_count", p.sm_count, p.source_id, "");
    } else if (sk && sk->group == "throughput" && f.number) {
      add(f.key, *f.number * sm_share, f.source_id, format_g(*f.number) + " x " + share_text + " of the full GPU");
    } else if (f.key == "tdp_w" && f.number) {
      add(f.key, *f.number * sm_share, f.source_id,
          "board power charged by SM share (" + share_text + "); a MIG instance has no power figure of its own");
    } else if ((f.key == "cuda_cores" || f.key == "tensor_cores") && f.number && full_sms > 0) {
      add(f.key, *f.number * sm_share, f.source_id, format_g(*f.number) + " x " + share_text);
    } else if (f.key == "release_year" || f.key == "memory_type" || f.key == "ecc" || f.key == "boost_clock_mhz" ||
               f.key == "pcie_gen") {
      out.push_back(f);
    }
  }
  return out;
}

}  // namespace gpuplan
