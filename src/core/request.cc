#include "core/request.h"

#include <algorithm>
#include <cmath>

#include "core/decimal.h"
#include "core/format.h"

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

namespace gpuplan {

Status Request::check_keys() const {
  if (!j_.is_object()) return usage_error("the request must be a JSON object, got " + type_name(j_));
  GPUPLAN_TRY(table, option_table());
  if (table->open(command_)) return Status::Ok();
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (table->find(it.key(), command_)) continue;
    std::string list;
    for (const OptionSpec* o : table->of_command(command_)) list += (list.empty() ? "" : ", ") + o->name;
    return usage_error("unknown option '" + it.key() + "'; " + command_ +
                           (list.empty() ? " takes no options" : " takes: " + list) + " (gpuplan " + command_ +
                           " --help; GET /api/v1/vocabulary)",
                       it.key());
  }
  return Status::Ok();
}

Result<const OptionSpec*> Request::spec(std::string_view key) const {
  GPUPLAN_TRY(table, option_table());
  const OptionSpec* o = command_.empty() ? nullptr : table->find(key, command_);
  // A strict command reads only its own keys: no other command's declaration stands in.
  const bool strict_command = table->strict(command_);
  if (!o && !strict_command) o = table->find(key);
  if (!o) {
    return Error{ErrorCode::kInternal,
                 "option '" + std::string(key) + "' is not declared" + (strict_command ? " for " + command_ : "") +
                     " in data/options.yaml",
                 std::string(key)};
  }
  return o;
}

bool Request::strict() const {
  if (command_.empty()) return false;
  auto table = option_table();
  return table && (*table)->strict(command_);
}

Status Request::required_given(const OptionSpec& o) const {
  if (has(o.name.c_str()) || !o.required_by(command_)) return Status::Ok();
  return usage_error("'" + o.name + "' is required: " + o.help, o.name);
}

namespace {
// A number echoed in a message as the user wrote it (a double's 15 significant digits).
constexpr int kEchoDigits = 15;
std::string num_text(double v) { return format_g(v, kEchoDigits); }
}  // namespace

Result<double> Request::checked_number(const OptionSpec& o, bool whole_number) const {
  const std::string key = o.name;
  GPUPLAN_TRY(v, number(key.c_str()));
  const double d = *v;  // has(key) was checked by the caller
  const std::string kind = whole_number ? "a whole number" : "a number";
  const std::string range = o.range.words();
  if (whole_number && d != std::floor(d)) {
    return usage_error("'" + key + "' must be " + kind + (range.empty() ? "" : " " + range) + ", got " + num_text(d),
                       key);
  }
  if (!o.range.contains(d)) {
    return usage_error(
        "'" + key + "' is " + num_text(d) + ", outside its range " + o.range.text() + ": give " + kind + " " + range,
        key);
  }
  return d;
}

Result<long long> Request::whole(std::string_view key) const {
  GPUPLAN_TRY(o, spec(key));
  const long long fallback = o->default_value.is_number() ? o->default_value.get<long long>() : 0;
  return whole(key, fallback);
}

// A JSON number of the declared kind (a whole number: a JSON integer, not 3.0 or "3"), in range.
Result<double> Request::strict_number(const OptionSpec& o, bool whole_number) const {
  const std::string& key = o.name;
  const Json& v = j_.at(key);
  const std::string kind = whole_number ? "a whole number" : "a number";
  const std::string range = o.range.words();
  if (whole_number ? !v.is_number_integer() : !v.is_number()) {
    const std::string got = v.is_number()   ? num_text(v.get<double>())
                            : v.is_string() ? "a string (write the number without quotes)"
                                            : type_name(v);
    return usage_error("'" + key + "' must be " + kind + (range.empty() ? "" : " " + range) + ", got " + got, key);
  }
  const double d = v.is_number_unsigned()  ? static_cast<double>(v.get<uint64_t>())
                   : v.is_number_integer() ? static_cast<double>(v.get<int64_t>())
                                           : v.get<double>();
  if (!std::isfinite(d)) return usage_error("'" + key + "' must be a finite number", key);
  if (!o.range.contains(d)) {
    return usage_error(
        "'" + key + "' is " + num_text(d) + ", outside its range " + o.range.text() + ": give " + kind + " " + range,
        key);
  }
  return d;
}

Result<long long> Request::whole(std::string_view key, long long fallback) const {
  GPUPLAN_TRY(o, spec(key));
  const bool strictly = strict();
  if (strictly) GPUPLAN_CHECK(required_given(*o));
  if (!has(o->name.c_str())) return fallback;
  GPUPLAN_TRY(d, strictly ? strict_number(*o, true) : checked_number(*o, true));
  // Declared ranges of whole numbers stay far inside long long (options_test); an unbounded end is
  // bounded here by what a double counts exactly.
  constexpr double kMaxExactWhole = 9007199254740992.0;  // 2^53
  if (std::fabs(d) > kMaxExactWhole) {
    return usage_error("'" + o->name + "' is over 2^53, the largest whole number a request carries exactly", o->name);
  }
  return static_cast<long long>(d);
}

Result<std::optional<double>> Request::real(std::string_view key) const {
  GPUPLAN_TRY(o, spec(key));
  const bool strictly = strict();
  if (strictly) GPUPLAN_CHECK(required_given(*o));
  if (!has(o->name.c_str())) {
    if (o->default_value.is_number()) return std::optional<double>(o->default_value.get<double>());
    return std::optional<double>();
  }
  GPUPLAN_TRY(d, strictly ? strict_number(*o, false) : checked_number(*o, false));
  return std::optional<double>(d);
}

Result<double> Request::real(std::string_view key, double fallback) const {
  GPUPLAN_TRY(o, spec(key));
  const bool strictly = strict();
  if (strictly) GPUPLAN_CHECK(required_given(*o));
  if (!has(o->name.c_str())) return fallback;
  return strictly ? strict_number(*o, false) : checked_number(*o, false);
}

Result<bool> Request::boolean(std::string_view key) const {
  GPUPLAN_TRY(o, spec(key));
  return boolean(key, o->default_value.is_boolean() && o->default_value.get<bool>());
}

Result<bool> Request::boolean(std::string_view key, bool fallback) const {
  GPUPLAN_TRY(o, spec(key));
  if (strict()) {
    GPUPLAN_CHECK(required_given(*o));
    if (!has(o->name.c_str())) return fallback;
    const Json& v = j_.at(o->name);
    if (!v.is_boolean()) return usage_error("'" + o->name + "' must be true or false, got " + type_name(v), o->name);
    return v.get<bool>();
  }
  return flag(o->name.c_str(), fallback);
}

namespace {
std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}
}  // namespace

namespace {
// A string of a strict request within its declared length: kLimit naming the field and the limit.
Status within_length(const OptionSpec& o, const std::string& s, const std::string& field) {
  if (o.max_length == 0 || s.size() <= o.max_length) return Status::Ok();
  return limit_error("'" + field + "' is " + std::to_string(s.size()) + " bytes, longer than its limit of " +
                         std::to_string(o.max_length) + " bytes",
                     field);
}
// A strict request's list: a JSON array (`what` it holds, for the message) within its declared items.
Status list_within_items(const OptionSpec& o, const Json& v, const char* what) {
  if (!v.is_array()) return usage_error("'" + o.name + "' must be a list of " + what + ", got " + type_name(v), o.name);
  if (o.max_items == 0 || v.size() <= o.max_items) return Status::Ok();
  return limit_error("'" + o.name + "' has " + std::to_string(v.size()) + " items, more than its limit of " +
                         std::to_string(o.max_items),
                     o.name);
}
}  // namespace

Result<std::string> Request::text(std::string_view key) const {
  GPUPLAN_TRY(o, spec(key));
  const std::string fallback = o->default_value.is_string() ? o->default_value.get<std::string>() : "";
  if (strict()) {
    // Strictly: a JSON string, within its length; "" stays "" (the caller's checks refuse it).
    GPUPLAN_CHECK(required_given(*o));
    if (!has(o->name.c_str())) return fallback;
    const Json& v = j_.at(o->name);
    if (!v.is_string()) return usage_error("'" + o->name + "' must be a string, got " + type_name(v), o->name);
    const auto& s = v.get_ref<const std::string&>();
    GPUPLAN_CHECK(within_length(*o, s, o->name));
    if (!o->values.empty() && std::find(o->values.begin(), o->values.end(), s) == o->values.end()) {
      return usage_error("'" + o->name + "' is '" + s + "'; give one of " + joined(o->values), o->name);
    }
    return s;
  }
  GPUPLAN_TRY(given, string(o->name.c_str(), fallback));
  // An empty string is the default, as an empty field of a form means.
  const std::string s = given.empty() ? fallback : given;
  if (!o->values.empty() && !s.empty() && std::find(o->values.begin(), o->values.end(), s) == o->values.end()) {
    return usage_error("'" + o->name + "' is '" + s + "'; give one of " + joined(o->values), o->name);
  }
  return s;
}

Result<std::vector<std::string>> Request::words(std::string_view key) const {
  GPUPLAN_TRY(o, spec(key));
  if (strict()) GPUPLAN_CHECK(required_given(*o));
  if (!has(o->name.c_str())) {
    std::vector<std::string> out;
    if (o->default_value.is_array()) {
      for (const auto& d : o->default_value) out.push_back(d.get<std::string>());
    }
    return out;
  }
  std::vector<std::string> list;
  if (strict()) {
    // Strictly: a JSON list of strings (no "a,b" text), within max_items and max_length.
    const Json& v = j_.at(o->name);
    GPUPLAN_CHECK(list_within_items(*o, v, "strings"));
    for (const auto& item : v) {
      if (!item.is_string()) return usage_error("'" + o->name + "' must be a list of strings", o->name);
      GPUPLAN_CHECK(within_length(*o, item.get_ref<const std::string&>(), o->name));
      list.push_back(item.get<std::string>());
    }
  } else {
    GPUPLAN_TRY(given, strings(o->name.c_str()));
    list = given;
  }
  for (const auto& w : list) {
    if (!o->values.empty() && std::find(o->values.begin(), o->values.end(), w) == o->values.end()) {
      return usage_error("'" + o->name + "' has '" + w + "'; give words of " + joined(o->values), o->name);
    }
  }
  return list;
}

Result<std::vector<Request>> Request::objects(std::string_view key) const {
  GPUPLAN_TRY(o, spec(key));
  if (o->type != OptionType::kList || o->items.empty()) {
    return Error{ErrorCode::kInternal, "option '" + o->name + "' is not declared as a list of objects (items:)",
                 o->name};
  }
  std::vector<Request> out;
  if (strict()) GPUPLAN_CHECK(required_given(*o));
  if (!has(o->name.c_str())) return out;
  const Json& v = j_.at(o->name);
  GPUPLAN_CHECK(list_within_items(*o, v, "objects"));
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string field = o->name + "[" + std::to_string(i) + "]";
    if (!v[i].is_object()) return usage_error(field + " must be an object, got " + type_name(v[i]), field);
    out.emplace_back(v[i], o->items);
  }
  return out;
}

}  // namespace gpuplan
