#include "gpuplan/target.h"
#include <algorithm>

#include <array>

namespace gpuplan {

namespace {
struct PrecisionRow {
  Precision p;
  std::string_view name;
  std::string_view key;
};
constexpr std::array<PrecisionRow, 8> kPrecisions = {{
    {Precision::kFp64, "fp64", "fp64_tensor_tflops"},
    {Precision::kFp32, "fp32", "fp32_tflops"},
    {Precision::kTf32, "tf32", "tf32_tensor_tflops"},
    {Precision::kBf16, "bf16", "bf16_tensor_tflops"},
    {Precision::kFp16, "fp16", "fp16_tensor_tflops"},
    {Precision::kFp8, "fp8", "fp8_tensor_tflops"},
    {Precision::kInt8, "int8", "int8_tensor_tops"},
    {Precision::kInt4, "int4", "int4_tensor_tops"},
}};

// PCIe x16 payload bandwidth per direction, GB/s: 16 lanes x 16/32/64 GT/s x 128b/130b encoding.
// Source: PCI-SIG specifications (Gen4 16 GT/s, Gen5 32 GT/s, Gen6 64 GT/s with FLIT, ~same efficiency).
constexpr double kPcieGen3X16Gbps = 15.75;  // 8 GT/s x 16 x 128/130 / 8
constexpr double kPcieGen4X16Gbps = 31.5;   // 16 GT/s
constexpr double kPcieGen5X16Gbps = 63.0;   // 32 GT/s
constexpr double kPcieGen6X16Gbps = 121.0;  // 64 GT/s, FLIT mode (242 B of 256 B payload)
double pcie_x16_gbps(int gen) {
  switch (gen) {
    case 4:
      return kPcieGen4X16Gbps;
    case 5:
      return kPcieGen5X16Gbps;
    case 6:
      return kPcieGen6X16Gbps;
    default:  // Gen3, and an unknown generation: the slowest x16 link still in service
      return kPcieGen3X16Gbps;
  }
}
// The PCIe generation of a GPU whose entry states none: Gen4, the generation of the data-centre GPUs
// of 2020-2023 (A100, A10, A30, L4, L40S: NVIDIA datasheets).
constexpr int kDefaultPcieGen = 4;
// Compute slices of a MIG table that states none: 7, those of the A100, H100, H200 and B200 tables
// (NVIDIA MIG user guide, "Supported MIG profiles").
constexpr int kDefaultMigComputeSlices = 7;
// PCIe cards with an NVLink bridge link in pairs (NVLink bridge: 2-slot, 2 cards; NVIDIA A100/H100 PCIe
// product briefs); SXM boards link every GPU of the baseboard.
constexpr int kNvlinkBridgeGpus = 2;
// NVIDIA quotes NVLink bandwidth as both directions summed (900 GB/s on H100 = 450 each way).
constexpr double kNvlinkDirections = 2;
}  // namespace

std::string_view precision_name(Precision p) {
  for (const auto& r : kPrecisions) {
    if (r.p == p) return r.name;
  }
  return "?";
}

std::string_view throughput_key(Precision p) {
  for (const auto& r : kPrecisions) {
    if (r.p == p) return r.key;
  }
  return "";
}

Result<Precision> parse_precision(std::string_view name) {
  for (const auto& r : kPrecisions) {
    if (r.name == name) return r.p;
  }
  return usage_error(
      "unknown precision '" + std::string(name) + "'; use fp64, fp32, tf32, bf16, fp16, fp8, int8 or int4",
      "precision");
}

std::string Target::name() const {
  if (!ref.gpu) return {};
  return ref.profile ? ref.gpu->name + " MIG " + ref.profile->name : ref.gpu->name;
}

double Target::memory_total_bytes() const {
  if (ref.profile) return ref.profile->memory_mib * kBytesPerMib;
  const double mib = ref.gpu->number("memory_total_mib", 0);
  if (mib > 0) return mib * kBytesPerMib;
  // No nvidia-smi figure: fall back to the marketing size in GiB-as-printed, which is how NVIDIA's
  // "80 GB" parts report (81920 MiB). Derived; shown as such by the printers.
  return ref.gpu->number("memory_gb", 0) * kBytesPerGib;
}

double Target::memory_bandwidth_gbps() const {
  const double full = ref.gpu->number("memory_bandwidth_gbps", 0);
  if (ref.profile && ref.mig_table) {
    return full * ref.profile->memory_slices / ref.mig_table->memory_slices;
  }
  return full;
}

int Target::sm_count() const {
  if (ref.profile) return ref.profile->sm_count;
  return static_cast<int>(ref.gpu->number("sm_count", 0));
}

double Target::compute_fraction() const {
  if (!ref.profile) return 1.0;
  const double full_sms = ref.gpu->number("sm_count", 0);
  if (full_sms > 0 && ref.profile->sm_count > 0) return ref.profile->sm_count / full_sms;
  return static_cast<double>(ref.profile->compute_slices) /
         (ref.mig_table ? ref.mig_table->compute_slices : kDefaultMigComputeSlices);
}

std::optional<double> Target::peak_tflops(Precision p) const {
  const Figure* f = ref.gpu->spec(throughput_key(p));
  if (p == Precision::kFp64 && !f) f = ref.gpu->spec("fp64_tflops");
  if (!f || !f->number || *f->number <= 0) return std::nullopt;
  return *f->number * compute_fraction();
}

double Target::tdp_w() const { return ref.gpu->number("tdp_w", 0) * compute_fraction(); }

Target Target::linked(const TargetRef& ref, int count) {
  Target t{ref, std::max(1, count), Link::kPcie};
  if (!ref.gpu || ref.is_mig() || t.count < 2 || ref.gpu->number("nvlink_gbps", 0) <= 0) return t;
  // SXM boards sit on an NVLink/NVSwitch baseboard; PCIe cards with NVLink bridge them in pairs.
  const bool sxm = ref.gpu->form_factor.rfind("sxm", 0) == 0;
  if (sxm || t.count <= kNvlinkBridgeGpus) t.link = Link::kNvlink;
  return t;
}

double Target::link_gbps() const {
  const double nvlink = ref.gpu->number("nvlink_gbps", 0);
  if (link == Link::kNvlink && nvlink > 0) return nvlink / kNvlinkDirections;
  return pcie_x16_gbps(static_cast<int>(ref.gpu->number("pcie_gen", kDefaultPcieGen)));
}

}  // namespace gpuplan
