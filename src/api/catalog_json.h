// JSON of catalog entities shared by several commands (catalog.show, mig.profiles).
#pragma once

#include <string>

#include "gpuplan/api.h"

namespace gpuplan::api {

// {id, title, url, revision?, kind} of a source id (just {id} when the catalog lacks it).
Json source_json(const Catalog& catalog, const std::string& id);
// A figure's value as JSON: a whole number as an integer, other numbers as doubles, flags, text.
Json value_json(const Figure& f);
// A MIG table with every profile: slices, memory, SMs, engines, max count, placements, the Kubernetes
// resource name under the mixed strategy, and sources.
Json mig_table_json(const Catalog& catalog, const MigTable& t);

}  // namespace gpuplan::api
