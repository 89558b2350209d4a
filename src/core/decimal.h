// Strict decimal number text, for numbers people type or files hold (request strings, CSV fields).
// std::strtod alone also reads hexadecimal ("0x10"), "inf", "nan" and leading blanks: all refused here.
#pragma once

#include <cmath>
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

}  // namespace gpuplan
