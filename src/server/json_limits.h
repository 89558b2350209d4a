// Bounds on a JSON request body, checked by a linear SAX scan before nlohmann builds a document, and
// a JSON writer with a size cap for responses.
//
// Why a scan first: nlohmann's ordered_json inserts a key by a linear search of its object, so an
// object of n keys costs n^2/2 comparisons (a 1 MB body of 100,000 keys was 9 s of CPU before its
// 400); its parser reports a number outside double range as an out_of_range exception, not a parse
// error. The scan stops at the first value over a bound, so a hostile body costs one pass at most.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "gpuplan/api.h"

namespace gpuplan::server {

struct JsonLimits {
  // Nesting: the parser is iterative, but the code that copies, compares and prints values recurses.
  std::size_t max_depth = 64;
  // Values and keys in the whole body: the largest request the page sends (a plan with its options
  // and an uploaded config.json) has a few hundred; fleets and offers travel as text, not as JSON.
  std::size_t max_values = 20000;
  // Keys in one object: keeps ordered_json's quadratic insert under ~0.5 M comparisons an object.
  std::size_t max_keys_per_object = 1000;
  // Characters of one number token: a double needs at most 17 significant digits and an exponent;
  // a longer token (5,000 digits) is not a number anyone means.
  std::size_t max_number_chars = 64;
};

// Scans `body` once. Ok when it is well-formed JSON within `limits`; otherwise a usage error with
// field "body" whose message says which limit (or where the syntax error is).
Status check_json_body(std::string_view body, const JsonLimits& limits);

// How a bounded dump ended.
enum class DumpStatus { kOk, kTooLarge, kCancelled };

// Writes `value` as compact JSON (invalid UTF-8 replaced) into `out` unless it would be longer than
// `max_bytes`, checked before writing by a walk that stops as soon as the size passes the cap. The
// walk and the write check cancel_requested(), so serialising counts against the request's deadline.
DumpStatus dump_bounded(const Json& value, std::size_t max_bytes, std::string& out);

}  // namespace gpuplan::server
