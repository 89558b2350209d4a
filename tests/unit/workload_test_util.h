// Test helpers shared by the memory and engine tests: a prepared workload from request keys, and a
// linked target of `count` GPUs of one catalog id. A bad key or id fails the calling test.
#pragma once

#include <gtest/gtest.h>

#include "gpuplan/api.h"
#include "gpuplan/memory.h"
#include "gpuplan/workload.h"

namespace gpuplan::testing_util {

inline PreparedWorkload prepared(const char* model, nlohmann::ordered_json extra) {
  extra["model"] = model;
  auto w = parse_workload(extra);
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message);
  auto p = prepare(*w);
  EXPECT_TRUE(p.ok());
  return *p;
}

inline Target gpus(const char* id, int count) {
  auto ref = Catalog::embedded()->resolve(id);
  EXPECT_TRUE(ref.ok());
  return Target::linked(*ref, count);
}

}  // namespace gpuplan::testing_util
