// Strict decimal number text, for numbers people type or files hold (request strings, CSV fields).
// std::strtod alone also reads hexadecimal ("0x10"), "inf", "nan" and leading blanks: all refused here.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace gpuplan {

// [+-] digits [. digits] [(e|E) [+-] digits], at least one digit before the exponent; a finite value.
// nullopt for anything else, including values that overflow a double (1e999).
inline std::optional<double> parse_decimal(std::string_view s) {
  auto digit = [&](size_t i) { return i < s.size() && s[i] >= '0' && s[i] <= '9'; };
  size_t i = 0, digits = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  while (digit(i)) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (digit(i)) ++i, ++digits;
  }
  if (digits == 0) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exponent_digits = 0;
    while (digit(i)) ++i, ++exponent_digits;
    if (exponent_digits == 0) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  const std::string text(s);
  const double d = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(d)) return std::nullopt;
  return d;
}

// Money as integer micro-units from decimal text, exactly ("0.35" -> 350000, "2" -> 2000000, "1e-6" -> 1):
// digits [. digits] [(e|E) [+-] digits], no sign, at most 6 significant fractional digits after the
// exponent is applied (more is refused: it would not be a whole micro), at most `max_micros`.
inline std::optional<int64_t> parse_micros(std::string_view s, int64_t max_micros) {
  constexpr int kMicroDigits = 6;   // 1 unit = 10^6 micro-units
  constexpr int kMaxExponent = 40;  // beyond any price or limit; keeps the shift arithmetic bounded
  std::string digits;               // all mantissa digits, leading zeros dropped later
  int point = -1;                   // digits before the decimal point
  size_t i = 0;
  while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) {
    if (s[i] == '.') {
      if (point >= 0) return std::nullopt;
      point = static_cast<int>(digits.size());
    } else {
      digits += s[i];
    }
    ++i;
  }
  if (digits.empty()) return std::nullopt;
  if (point < 0) point = static_cast<int>(digits.size());
  int exponent = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool negative = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
    if (i == s.size()) return std::nullopt;
    for (; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') return std::nullopt;
      exponent = exponent * 10 + (s[i] - '0');
      if (exponent > kMaxExponent) return std::nullopt;
    }
    if (negative) exponent = -exponent;
  }
  if (i != s.size()) return std::nullopt;
  // value = 0.digits x 10^(point + exponent); in micros the integer part has point + exponent + 6 digits.
  const int int_digits = point + exponent + kMicroDigits;
  int64_t micros = 0;
  for (int k = 0; k < static_cast<int>(digits.size()); ++k) {
    const int d = digits[static_cast<size_t>(k)] - '0';
    if (k >= int_digits) {
      if (d != 0) return std::nullopt;  // a fraction of a micro
      continue;
    }
    if (micros > (max_micros - d) / 10) return std::nullopt;
    micros = micros * 10 + d;
  }
  for (int k = static_cast<int>(digits.size()); k < int_digits; ++k) {
    if (micros > max_micros / 10) return std::nullopt;
    micros *= 10;
  }
  if (micros > max_micros) return std::nullopt;
  return micros;
}

// A JSON number (already a double) as micro-units: its shortest round-trip decimal text ("0.35", not
// 0.34999999999999997), then parse_micros. nullopt for negatives, non-finite values, fractions of a micro.
inline std::optional<int64_t> micros_from_double(double d, int64_t max_micros) {
  if (!std::isfinite(d) || d < 0) return std::nullopt;
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  if (ec != std::errc()) return std::nullopt;
  return parse_micros(std::string_view(buf, static_cast<size_t>(end - buf)), max_micros);
}

}  // namespace gpuplan
