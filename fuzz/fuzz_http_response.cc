// Fuzzes the HTTP client's response parser (src/core/http_client.h), which reads what any server the
// CLI or the agent is pointed at sends. Oracles (an abort is a libFuzzer crash):
// - no crash, no read past the input, no unbounded allocation (the body bound is 4 KiB here);
// - an accepted answer has a status in 100..599 and a body no larger than the bound, whether or not
//   the peer is taken to have closed the connection.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/http_client.h"

namespace {
constexpr size_t kBodyBound = 4096;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  for (bool eof : {false, true}) {
    auto r = gpuplan::http::parse_response(raw, eof, kBodyBound);
    if (r.ok() && r->has_value()) {
      const auto& resp = **r;
      if (resp.status < 100 || resp.status > 599) std::abort();
      if (resp.body.size() > kBodyBound) std::abort();
    }
  }
  return 0;
}
