// One inference prediction from a perf request on one GPU, as `gpuplan perf` makes it (parse_perf_setup,
// run_for, predict_inference): the setup and the run with the figures, so tests can read what the
// engine's profile chose. One home for the perf tests that each wrote it.
#pragma once

#include <gtest/gtest.h>

#include "gpuplan/catalog.h"
#include "gpuplan/perf.h"
#include "gpuplan/workload.h"
#include "perf/perf_request.h"

namespace gpuplan::test {

struct Predicted {
  perf::PerfSetup setup;
  PerfRun run;
  InferencePerf perf;
};

inline Predicted predict_on_one(const char* gpu, const nlohmann::ordered_json& req) {
  auto ref = Catalog::embedded()->resolve(gpu);
  EXPECT_TRUE(ref.ok()) << gpu;
  if (!ref.ok()) return {};
  const Target t = Target::linked(*ref, 1);
  const PerfDevice d = perf_device(t);
  auto s = perf::parse_perf_setup(req);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  if (!s.ok()) return {};
  Predicted p{*s, perf::run_for(*s, d, 1), {}};
  p.perf = predict_inference(p.setup.arch, d, p.setup.workload, p.run, p.setup.efficiency);
  return p;
}

}  // namespace gpuplan::test
