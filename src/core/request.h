// Typed access to a request object, with usage errors that name the field.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/api.h"

namespace gpuplan {

class Request {
 public:
  explicit Request(const Json& j) : j_(j) {}

  // Fails on a key outside `allowed` (a typo must not be silently ignored).
  Status check_keys(std::initializer_list<std::string_view> allowed) const;
  bool has(const char* key) const { return j_.is_object() && j_.contains(key) && !j_.at(key).is_null(); }
  const Json& raw(const char* key) const { return j_.at(key); }

  Result<std::string> string(const char* key, std::string fallback = {}) const;
  // A finite number: a JSON number, or a string of decimal digits ("2.5", "1e3"; not "0x10", "inf").
  Result<std::optional<double>> number(const char* key) const;
  Result<double> number(const char* key, double fallback) const;
  // A whole number in [min, max].
  Result<long long> integer(const char* key, long long fallback, long long min, long long max) const;
  Result<bool> flag(const char* key, bool fallback) const;
  // A list of strings; a single string counts as a list of one; "a,b" is split on commas.
  Result<std::vector<std::string>> strings(const char* key) const;

 private:
  const Json& j_;
};

}  // namespace gpuplan
