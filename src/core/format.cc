#include "core/format.h"

#include <cmath>
#include <cstdio>

namespace gpuplan {

double round_sig(double v, int digits) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double scale = std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::fabs(v)))));
  return std::round(v * scale) / scale;
}

double round_to(double v, int decimals) {
  const double s = std::pow(10.0, decimals);
  return std::round(v * s) / s;
}

Json sig(double v) {
  if (!std::isfinite(v)) return nullptr;
  if (v == 0) return 0.0;
  return round_sig(v, kAnswerDigits);
}

Json money(double v) { return std::isfinite(v) ? Json(round_to(v, kMoneyDecimals)) : Json(nullptr); }

std::string format_g(double v, int significant_digits) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", significant_digits, v);
  return buf;
}

}  // namespace gpuplan
