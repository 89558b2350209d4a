// Typed access to a request object, with usage errors that name the field.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/options.h"

namespace gpuplan {

class Request {
 public:
  explicit Request(const Json& j) : j_(j) {}
  // A request of `command`: its keys are the ones data/options.yaml declares for it. A command the
  // declaration lists under `strict:` (the market's bodies) is read strictly: each value must be of its
  // declared JSON type ("3" is not a whole number, 3 is not a string), strings and lists are bounded by
  // their max_length / max_items (kLimit naming the field and the limit), a key the command requires is
  // refused when absent, and reading a key the command does not declare is an internal error.
  Request(const Json& j, std::string_view command) : j_(j), command_(command) {}

  // Fails on a key outside `allowed` (a typo must not be silently ignored).
  Status check_keys(std::initializer_list<std::string_view> allowed) const;
  // Fails on a key the command does not declare (data/options.yaml), naming the key and listing the
  // command's keys: the one unknown-key check of every command. A command under `open:` ignores keys
  // it does not declare: only the request's being an object is checked.
  Status check_keys() const;
  // Whether this request is read strictly (its command is under `strict:` in data/options.yaml).
  bool strict() const;

  // Values read by their declaration (data/options.yaml: for this request's command, else the first
  // declaration of the key): type, range and allowed words checked, the error naming the field, the
  // range and what to give instead. Absent keys read as the declared default, or as `fallback` where a
  // default depends on other keys; undeclared keys are an internal error (options_test finds them).
  Result<long long> whole(std::string_view key) const;
  Result<long long> whole(std::string_view key, long long fallback) const;
  Result<std::optional<double>> real(std::string_view key) const;  // nullopt: absent and no default
  Result<double> real(std::string_view key, double fallback) const;
  Result<bool> boolean(std::string_view key) const;
  Result<bool> boolean(std::string_view key, bool fallback) const;
  // string, enum (declared values checked; a vocabulary's names are checked by its parser, which also
  // knows the aliases) and every other scalar as text; "" when absent and no default.
  Result<std::string> text(std::string_view key) const;
  // A list of words (list type); declared values checked.
  Result<std::vector<std::string>> words(std::string_view key) const;
  // A list of objects (list type with `items:`), each a request of the items' command (the gpus of a
  // node): a list of JSON objects, at most max_items; empty when absent and not required. The items
  // refer into this request's JSON, which must outlive them.
  Result<std::vector<Request>> objects(std::string_view key) const;
  // The declaration this request reads `key` by.
  Result<const OptionSpec*> spec(std::string_view key) const;
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
  Result<double> checked_number(const OptionSpec& o, bool whole_number) const;
  Result<double> strict_number(const OptionSpec& o, bool whole_number) const;
  // Strict reading: the error for an absent key the command requires, or Ok.
  Status required_given(const OptionSpec& o) const;
  const Json& j_;
  std::string command_;
};

// An error read from one item of a list of objects (as objects() returns them), named by the item:
// field "gpus[2]" turns {"... is missing", "uuid"} into {"gpus[2]: ... is missing", "gpus[2].uuid"}.
inline Error item_error(const Error& e, const std::string& item) {
  return Error{e.code, item + ": " + e.message, item + "." + e.field};
}

}  // namespace gpuplan
