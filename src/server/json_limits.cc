// The JSON body scan and the bounded writer (see json_limits.h).
#include "server/json_limits.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gpuplan/cancel.h"

namespace gpuplan::server {

namespace {

// nlohmann's exception id for a number outside the range of a double ("number overflow").
constexpr int kNumberOverflowId = 406;
// Nodes the size walk visits between two cancel_requested() checks (a check costs ~20 ns; a node ~10).
constexpr std::size_t kNodesPerCancelCheck = 4096;

// The SAX handler: counts and depth only, nothing is stored.
class Scan {
 public:
  explicit Scan(const JsonLimits& limits) : limits_(limits) {}

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(Json::number_integer_t) { return value(); }
  bool number_unsigned(Json::number_unsigned_t) { return value(); }
  bool number_float(Json::number_float_t v, const Json::string_t& token) {
    if (!std::isfinite(v)) return out_of_range();
    if (token.size() > limits_.max_number_chars) {
      return refuse("a number in the body is " + std::to_string(token.size()) + " characters long; the limit is " +
                    std::to_string(limits_.max_number_chars));
    }
    return value();
  }
  bool string(Json::string_t&) { return value(); }
  bool binary(Json::binary_t&) { return value(); }
  bool start_object(std::size_t) { return open(); }
  bool key(Json::string_t&) {
    if (!count()) return false;
    if (++keys_.back() > limits_.max_keys_per_object) {
      return refuse("an object in the body has more than " + std::to_string(limits_.max_keys_per_object) +
                    " keys (the limit)");
    }
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    if (e.id == kNumberOverflowId) return out_of_range();
    std::string what = e.what();
    if (const std::size_t pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
    message_ = "malformed JSON: " + what;
    return false;
  }

  const std::string& message() const { return message_; }

 private:
  bool count() {
    if (++values_ > limits_.max_values) {
      return refuse("the body has more than " + std::to_string(limits_.max_values) + " values and keys (the limit)");
    }
    return true;
  }
  bool value() { return count(); }
  bool open() {
    if (!count()) return false;
    if (keys_.size() >= limits_.max_depth) {
      return refuse("malformed JSON: nested deeper than " + std::to_string(limits_.max_depth) + " levels (the limit)");
    }
    keys_.push_back(0);
    return true;
  }
  bool close() {
    if (!keys_.empty()) keys_.pop_back();
    return true;
  }
  bool out_of_range() {
    return refuse("a number in the body is outside the range of a double (e.g. 1e999); the limit is about 1.8e308");
  }
  bool refuse(std::string message) {
    message_ = std::move(message);
    return false;
  }

  const JsonLimits& limits_;
  std::size_t values_ = 0;
  std::vector<std::size_t> keys_;  // keys so far of each open object or array, outermost first
  std::string message_;
};

// A lower bound of the compact dump's length, stopping once it passes `cap`; false when cancelled.
bool size_at_least(const Json& v, std::size_t cap, std::size_t& size, std::size_t& nodes) {
  if (++nodes % kNodesPerCancelCheck == 0 && cancel_requested()) return false;
  if (size > cap) return true;
  switch (v.type()) {
    case Json::value_t::object:
      size += 2;
      for (auto it = v.begin(); it != v.end() && size <= cap; ++it) {
        size += it.key().size() + 4;  // quotes, colon, comma
        if (!size_at_least(it.value(), cap, size, nodes)) return false;
      }
      break;
    case Json::value_t::array:
      size += 2;
      for (const auto& e : v) {
        if (size > cap) break;
        size += 1;
        if (!size_at_least(e, cap, size, nodes)) return false;
      }
      break;
    case Json::value_t::string:
      size += v.get_ref<const Json::string_t&>().size() + 2;
      break;
    default:
      size += 1;
      break;
  }
  return true;
}

}  // namespace

Status check_json_body(std::string_view body, const JsonLimits& limits) {
  Scan scan(limits);
  bool ok = false;
  try {
    ok = Json::sax_parse(body, &scan, Json::input_format_t::json, true);
  } catch (const Json::exception& e) {
    return usage_error(std::string("malformed JSON: ") + e.what(), "body");
  }
  if (ok) return Status::Ok();
  return usage_error(scan.message().empty() ? "malformed JSON" : scan.message(), "body");
}

DumpStatus dump_bounded(const Json& value, std::size_t max_bytes, std::string& out) {
  std::size_t size = 0;
  std::size_t nodes = 0;
  if (!size_at_least(value, max_bytes, size, nodes)) return DumpStatus::kCancelled;
  if (size > max_bytes) return DumpStatus::kTooLarge;
  out = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (cancel_requested()) return DumpStatus::kCancelled;
  if (out.size() > max_bytes) {
    out.clear();
    return DumpStatus::kTooLarge;
  }
  return DumpStatus::kOk;
}

}  // namespace gpuplan::server
