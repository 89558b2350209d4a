// Fuzzes money parsing (src/core/decimal.h): parse_micros on the input as text, micros_from_double on
// its first 8 bytes as a double, and parse_decimal. Oracles (an abort is a libFuzzer crash):
// - an accepted amount is in [0, max]; printed back as "units.micros" it parses to the same amount;
// - plain "digits[.digits]" text (up to 12 integer and 6 fractional digits) is accepted with the value
//   that digit arithmetic gives;
// - an accepted amount agrees with parse_decimal's double to double precision;
// - micros_from_double(k / 1e6) == k for every whole number of micro-units k below 2^33 units (the
//   doubles there are closer together than a micro, so the shortest text of k / 1e6 is k's);
// - micros_from_double of a negative or non-finite double is refused; an accepted one is within a
//   double's rounding of d * 1e6.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "core/decimal.h"
#include "fuzz_util.h"

namespace {

namespace fz = gpuplan::fuzz;

constexpr int64_t kMicrosPerUnit = 1'000'000;
// The bounds tried: the market's price bound ($1M/h in micros) and the largest int64.
constexpr int64_t kPriceMaxMicros = 1'000'000'000'000;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
// Below 2^33 units the gap between doubles is under 2^-19 < 1e-6: a micro-unit is always resolved.
constexpr double kExactUnitsBound = 8589934592.0;  // 2^33

[[noreturn]] void fail(const char* what, std::string_view text) {
  std::fprintf(stderr, "fuzz oracle: decimal: %s for '%.*s'\n", what, static_cast<int>(text.size()), text.data());
  std::abort();
}

std::string print_micros(int64_t v) {
  std::string frac = std::to_string(v % kMicrosPerUnit);
  frac.insert(0, 6 - frac.size(), '0');
  return std::to_string(v / kMicrosPerUnit) + "." + frac;
}

// "digits[.digits]" with 1-12 integer and 0-6 fractional digits: its value in micros; -1 otherwise.
int64_t plain_micros(std::string_view s) {
  size_t i = 0;
  int64_t units = 0, frac = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i <= 12) units = units * 10 + (s[i++] - '0');
  if (i == 0 || i > 12) return -1;
  int frac_digits = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && frac_digits < 7) {
      frac = frac * 10 + (s[i++] - '0');
      ++frac_digits;
    }
    if (frac_digits > 6) return -1;
  }
  if (i != s.size()) return -1;
  for (int k = frac_digits; k < 6; ++k) frac *= 10;
  return units * kMicrosPerUnit + frac;
}

void check_text(std::string_view s, int64_t max) {
  const auto v = gpuplan::parse_micros(s, max);
  if (v) {
    if (*v < 0 || *v > max) fail("an amount outside [0, max]", s);
    const auto back = gpuplan::parse_micros(print_micros(*v), max);
    if (!back || *back != *v) fail("an amount that does not parse back", s);
    const auto d = gpuplan::parse_decimal(s);
    if (!d) fail("an amount parse_decimal refuses", s);
    const double expected = *d * static_cast<double>(kMicrosPerUnit);
    if (std::fabs(expected - static_cast<double>(*v)) > 1e-9 * std::fmax(1.0, expected)) {
      fail("an amount unlike parse_decimal's", s);
    }
  }
  const int64_t plain = plain_micros(s);
  if (plain >= 0 && plain <= max && (!v || *v != plain)) fail("plain decimal text not read exactly", s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fz::as_text(data, size);
  check_text(text, kPriceMaxMicros);
  check_text(text, kInt64Max);
  if (size >= sizeof(double)) {
    double d = 0;
    std::memcpy(&d, data, sizeof d);
    const auto v = gpuplan::micros_from_double(d, kInt64Max);
    if (v) {
      if (!std::isfinite(d) || d < 0) fail("a negative or non-finite double accepted", text);
      const double expected = d * static_cast<double>(kMicrosPerUnit);
      if (std::fabs(expected - static_cast<double>(*v)) > 1e-9 * std::fmax(1.0, expected)) {
        fail("a double's amount unlike d * 1e6", text);
      }
    }
    uint64_t bits = 0;
    std::memcpy(&bits, data, sizeof bits);
    const auto k = static_cast<int64_t>(bits % static_cast<uint64_t>(kExactUnitsBound * kMicrosPerUnit));
    const double units = static_cast<double>(k) / static_cast<double>(kMicrosPerUnit);
    const auto exact = gpuplan::micros_from_double(units, kInt64Max);
    if (!exact || *exact != k) fail("k / 1e6 not read back as k micros", text);
  }
  return 0;
}
