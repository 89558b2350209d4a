// A Target is what an estimate runs on: a GPU or a MIG profile of a GPU, times a count, with how the
// devices are connected. It exposes the derived per-device quantities that the fit, performance, MIG
// and planning models use, so that none of them reads raw spec figures on its own.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/catalog.h"
#include "gpuplan/units.h"  // kBytesPerGib etc.: the bytes of a target

namespace gpuplan {

// Numeric formats of the matrix units.
enum class Precision { kFp64, kFp32, kTf32, kBf16, kFp16, kFp8, kInt8, kInt4 };

std::string_view precision_name(Precision p);
Result<Precision> parse_precision(std::string_view name);
// The catalog spec key that holds the dense tensor-core rate of `p` ("bf16_tensor_tflops").
std::string_view throughput_key(Precision p);

enum class Link { kNvlink, kPcie };

struct Target {
  TargetRef ref;
  int count = 1;  // devices
  Link link = Link::kPcie;

  // `count` devices of `ref` as `--gpu NAMExN` means them: linked by NVLink when the GPU has it and
  // either sits on an SXM baseboard or is one bridged pair (PCIe cards), else by PCIe; a MIG slice never.
  static Target linked(const TargetRef& ref, int count);

  std::string id() const { return ref.id(); }
  std::string name() const;

  // Memory of one device as NVML reports it: the GPU's total, or the MIG instance's memorySizeMB.
  double memory_total_bytes() const;
  // Peak memory bandwidth of one device; a MIG instance gets its share of the memory slices.
  double memory_bandwidth_gbps() const;
  // Share of the full GPU's SMs (1 for a whole GPU; sm_count / full sm_count for a MIG instance).
  double compute_fraction() const;
  int sm_count() const;
  // Dense peak rate of one device in TFLOPS (TOPS for int), or nullopt when the GPU has no such
  // tensor-core path (fp8 before Hopper/Ada). fp32 on a GPU with TF32 stays fp32: callers choose.
  std::optional<double> peak_tflops(Precision p) const;
  // Board power of one device; a MIG instance is charged its compute share (derived).
  double tdp_w() const;
  // Bandwidth between two devices of this target, GB/s per direction: NVLink when the devices have
  // it and are linked by it, else the PCIe generation's x16 rate.
  double link_gbps() const;
};

}  // namespace gpuplan

namespace gpuplan {

// The figures of a target as the catalog shows them: a GPU's own specs, or for a MIG profile the
// instance's memory and SMs from the MIG table plus bandwidth, throughput and power derived from the
// parent GPU's figures by its share of memory slices and SMs (each marked derived, with how).
std::vector<Figure> target_figures(const Catalog& catalog, const TargetRef& ref);

}  // namespace gpuplan
