// Number formatting for answers and messages, in one place (issue #12: `sig()` was written three
// times, `money` and `round_to` once each). Units and their conversions: include/gpuplan/units.h.
#pragma once

#include <string>

#include "gpuplan/api.h"

namespace gpuplan {

// Significant digits of a model's answer: the models are good to a few percent at best.
inline constexpr int kAnswerDigits = 4;
// Decimals of a money amount: a hundredth of a cent, finer than any list price (cents per hour) so
// that totals and per-token costs keep their digits.
inline constexpr int kMoneyDecimals = 4;

// `v` rounded to `digits` significant digits (half away from zero); 0 and non-finite values as given.
double round_sig(double v, int digits = kAnswerDigits);
// `v` rounded to `decimals` digits after the point (half away from zero).
double round_to(double v, int decimals);

// A model's answer as JSON: `kAnswerDigits` significant digits, +0.0 for zero, null when not finite
// (a number that is not an answer is never shown).
Json sig(double v);
// A money amount as JSON: `kMoneyDecimals` decimals, null when not finite.
Json money(double v);

// printf's "%g" ("8", "7.5", "1e+06") at `significant_digits` (printf's default 6; 15 shows a double
// as the user wrote it): a number in a message or a derivation.
std::string format_g(double v, int significant_digits = 6);

}  // namespace gpuplan
