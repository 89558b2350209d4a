#include "core/request.h"

#include <cmath>

#include "core/decimal.h"

namespace gpuplan {

namespace {
std::string type_name(const Json& v) {
  if (v.is_string()) return "a string";
  if (v.is_number()) return "a number";
  if (v.is_boolean()) return "true/false";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "null";
}
}  // namespace

Status Request::check_keys(std::initializer_list<std::string_view> allowed) const {
  if (!j_.is_object()) return usage_error("the request must be a JSON object, got " + type_name(j_));
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    bool known = false;
    for (auto a : allowed) known = known || a == it.key();
    if (!known) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      return usage_error(
          "unknown option '" + it.key() + "'; this command takes" + (list.empty() ? " no options" : ": " + list),
          it.key());
    }
  }
  return Status::Ok();
}

Result<std::string> Request::string(const char* key, std::string fallback) const {
  if (!has(key)) return fallback;
  const Json& v = j_.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return v.dump();
  return usage_error(std::string("'") + key + "' must be a string, got " + type_name(v), key);
}

Result<std::optional<double>> Request::number(const char* key) const {
  if (!has(key)) return std::optional<double>();
  const Json& v = j_.at(key);
  double d = 0;
  if (v.is_number()) {
    d = v.get<double>();
  } else if (v.is_string()) {
    // Decimal text only: strtod would also read "0x10", "inf", "nan" and leading blanks.
    const std::string s = v.get<std::string>();
    const auto parsed = parse_decimal(s);
    if (!parsed) return usage_error(std::string("'") + key + "' must be a number, got '" + s + "'", key);
    d = *parsed;
  } else {
    return usage_error(std::string("'") + key + "' must be a number, got " + type_name(v), key);
  }
  if (!std::isfinite(d)) return usage_error(std::string("'") + key + "' must be a finite number", key);
  return std::optional<double>(d);
}

Result<double> Request::number(const char* key, double fallback) const {
  auto v = number(key);
  if (!v) return v.error();
  return v->value_or(fallback);
}

Result<long long> Request::integer(const char* key, long long fallback, long long min, long long max) const {
  auto v = number(key);
  if (!v) return v.error();
  if (!*v) return fallback;
  const double d = **v;
  if (d != std::floor(d)) return usage_error(std::string("'") + key + "' must be a whole number", key);
  if (d < static_cast<double>(min) || d > static_cast<double>(max)) {
    return usage_error(
        std::string("'") + key + "' must be between " + std::to_string(min) + " and " + std::to_string(max), key);
  }
  return static_cast<long long>(d);
}

Result<bool> Request::flag(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  const Json& v = j_.at(key);
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "true" || s == "1" || s == "yes") return true;
    if (s == "false" || s == "0" || s == "no") return false;
  }
  return usage_error(std::string("'") + key + "' must be true or false, got " + type_name(v), key);
}

Result<std::vector<std::string>> Request::strings(const char* key) const {
  std::vector<std::string> out;
  if (!has(key)) return out;
  const Json& v = j_.at(key);
  auto add = [&](const std::string& s) {
    size_t start = 0;
    while (start <= s.size()) {
      size_t comma = s.find(',', start);
      if (comma == std::string::npos) comma = s.size();
      std::string part = s.substr(start, comma - start);
      if (!part.empty()) out.push_back(part);
      start = comma + 1;
    }
  };
  if (v.is_string()) {
    add(v.get<std::string>());
  } else if (v.is_array()) {
    for (const auto& item : v) {
      if (!item.is_string()) return usage_error(std::string("'") + key + "' must be a list of strings", key);
      add(item.get<std::string>());
    }
  } else {
    return usage_error(std::string("'") + key + "' must be a string or a list of strings, got " + type_name(v), key);
  }
  return out;
}

}  // namespace gpuplan
