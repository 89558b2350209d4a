// Fuzzes an offers file (`--offers FILE`, the API's "offers"): bytes -> parse_offers as CSV and as
// YAML -> each offer's derived figures -> the offers.list and plan commands over the offers, under a
// deadline. A NaN or an infinity in an accepted answer is an oracle crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "gpuplan/offers.h"

namespace {

namespace fz = gpuplan::fuzz;
using gpuplan::Json;

// A fixed "now" so results do not depend on the day the fuzzer runs.
constexpr const char* kNow = "2026-11-30";

void check_offers(const gpuplan::OfferSet& set) {
  for (const auto& offer : set.offers) {
    (void)offer.id();
    for (bool spot : {false, true}) {
      if (auto price = offer.price_per_gpu_hour(spot))
        fz::require_finite(*price, "price_per_gpu_hour", std::string_view(offer.id()));
    }
    (void)gpuplan::age_days(offer.captured_at, kNow);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(fz::as_text(data, size));
  for (const char* name : {"fuzz/offers.csv", "fuzz/offers.yaml"}) {
    auto set = gpuplan::parse_offers(fz::catalog(), name, text);
    if (set) check_offers(*set);
  }
  // The commands read a string as CSV and {name, text} files by their extension.
  const Json offers = size % 2 == 0 ? Json(text) : Json::array({Json{{"name", "offers.yaml"}, {"text", text}}});
  {
    fz::Deadline deadline;
    auto r = gpuplan::run_command(fz::context(), "offers.list", Json{{"now", kNow}, {"offers", offers}});
    if (r) fz::require_finite(*r, "offers.list");
  }
  {
    fz::Deadline deadline;
    const Json plan{{"model", "llama-2-7b"}, {"engine", "vllm"}, {"rate", 1},       {"input_tokens", 256},
                    {"output_tokens", 128},  {"now", kNow},      {"offers", offers}};
    auto r = gpuplan::run_command(fz::context(), "plan", plan);
    if (r) fz::require_finite(*r, "plan");
  }
  return 0;
}
