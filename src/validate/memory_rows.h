// The "memory" kind of `gpuplan validate`: predicts one row of validation/memory.yaml (a published
// memory measurement or fits / out-of-memory verdict) with the memory model, in bytes, tokens or 0/1.
#pragma once

#include "validate/validation.h"

namespace gpuplan::validate {

RowPrediction predict_memory_row(const Catalog& catalog, const Json& row);

}  // namespace gpuplan::validate
