// Shared pieces of the libFuzzer targets: the embedded catalog, a per-input deadline, and the oracle
// that an accepted input never produces a number that is not an answer (NaN or infinity).
#pragma once

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gpuplan/api.h"
#include "gpuplan/cancel.h"
#include "gpuplan/catalog.h"

namespace gpuplan::fuzz {

// Per-input deadline of the work a target runs after parsing (packing, planning): long enough for every
// seed, short enough that slow inputs do not stall the fuzzer (libFuzzer's -timeout=10 s is the hard
// stop; a target that ignores its token is still reported there).
inline constexpr std::chrono::milliseconds kWorkDeadline{100};

// The catalog of the binary, loaded once per process (every target resolves names against it).
inline const Catalog& catalog() {
  static const std::shared_ptr<const Catalog> c = Catalog::embedded();
  return *c;
}

inline const Context& context() {
  static const Context ctx{Catalog::embedded()};
  return ctx;
}

// A CancelToken kWorkDeadline from now, current on this thread while the object lives.
class Deadline {
 public:
  Deadline() : token_(CancelToken::Clock::now() + kWorkDeadline), scope_(&token_) {}

 private:
  CancelToken token_;
  CancelScope scope_;
};

// Aborts (a libFuzzer crash) when `j` holds a NaN or an infinite number: an accepted input must give
// finite answers (the project's rule: "no number that is not an answer"). `where` names the caller.
inline void require_finite(const Json& j, std::string_view where, std::string path = "") {
  if (j.is_number_float()) {
    const double v = j.get<double>();
    if (!std::isfinite(v)) {
      std::fprintf(stderr, "fuzz oracle: %.*s: non-finite number %f at '%s'\n", static_cast<int>(where.size()),
                   where.data(), v, path.c_str());
      std::abort();
    }
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) require_finite(it.value(), where, path + "/" + it.key());
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) require_finite(j[i], where, path + "/" + std::to_string(i));
  }
}

inline void require_finite(double v, std::string_view where, std::string_view what) {
  if (!std::isfinite(v)) {
    std::fprintf(stderr, "fuzz oracle: %.*s: non-finite %.*s = %f\n", static_cast<int>(where.size()), where.data(),
                 static_cast<int>(what.size()), what.data(), v);
    std::abort();
  }
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace gpuplan::fuzz
