// Units, named once: bytes per binary and decimal unit, seconds per hour, and the conversions the
// library, the CLI and validation use (issue #12: one home instead of a converter each way and a
// hard-coded 1024.0 * 1024.0 * 1024.0). Formatting of numbers for answers lives in src/core/format.h.
#pragma once

#include <optional>
#include <string_view>

namespace gpuplan {

// Bytes per unit: binary (MiB, GiB: what allocators and nvidia-smi count) and decimal (MB, GB: what
// datasheets and clouds print).
inline constexpr double kBytesPerMib = 1024.0 * 1024.0;
inline constexpr double kBytesPerGib = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kBytesPerMb = 1e6;
inline constexpr double kBytesPerGb = 1e9;
// Bytes of one element of a tensor: fp32, and bf16 / fp16.
inline constexpr double kFp32Bytes = 4;
inline constexpr double k16BitBytes = 2;

// Time: clouds price by the hour, training runs are stated in days.
inline constexpr double kSecondsPerMinute = 60.0;
inline constexpr double kSecondsPerHour = 3600.0;
inline constexpr double kSecondsPerDay = 86400.0;
inline constexpr double kSecondsPerMillisecond = 1e-3;
inline constexpr double kMicrosPerSecond = 1e6;

// Rates: catalog throughputs are TFLOPS (10^12 FLOP/s) and bandwidths GB/s (10^9 B/s).
inline constexpr double kFlopPerTflop = 1e12;

constexpr double bytes_to_gib(double bytes) { return bytes / kBytesPerGib; }
constexpr double bytes_to_mib(double bytes) { return bytes / kBytesPerMib; }
constexpr double bytes_to_gb(double bytes) { return bytes / kBytesPerGb; }
constexpr double gib_to_bytes(double gib) { return gib * kBytesPerGib; }
constexpr double gb_to_bytes(double gb) { return gb * kBytesPerGb; }
constexpr double seconds_to_hours(double seconds) { return seconds / kSecondsPerHour; }

// The factor that turns a quantity stated in `unit` (the units of validation/*.yaml: bytes, tokens,
// bool, GiB, GB, MiB, MB, seconds, ms, rates, TFLOPS, GB/s, percent) into the model's base unit
// (bytes, tokens, seconds, a fraction; rates and TFLOPS as stated); nullopt for a unit it does not know.
constexpr std::optional<double> base_unit_factor(std::string_view unit) {
  if (unit == "bytes" || unit == "tokens" || unit == "bool") return 1.0;
  if (unit == "GiB") return kBytesPerGib;
  if (unit == "GB") return kBytesPerGb;
  if (unit == "MiB") return kBytesPerMib;
  if (unit == "MB") return kBytesPerMb;
  if (unit == "seconds" || unit == "tokens_per_second" || unit == "samples_per_second" || unit == "TFLOPS" ||
      unit == "GB/s") {
    return 1.0;
  }
  if (unit == "ms") return kSecondsPerMillisecond;
  if (unit == "percent") return 0.01;
  return std::nullopt;
}

}  // namespace gpuplan
