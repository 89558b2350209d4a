// The zoo's index (which models the zoo holds, their files and published parameter counts), built from
// the data files: by the build's compile step (tools/compile_data.cc), which writes it as an image the
// binary reads at start-up, and by the tests, which check that image against the YAML.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/embedded.h"
#include "gpuplan/model.h"
#include "gpuplan/status.h"

namespace gpuplan {

// data/models/zoo.yaml's entries, then every model file under data/models/ that it does not list. A
// YAML error is an invalid-data error naming the file.
Result<std::vector<ZooEntry>> zoo_index(std::span<const EmbeddedFile> files);
// The index as a compact binary image (src/catalog/image.h), and back.
std::string zoo_index_image(const std::vector<ZooEntry>& entries);
Result<std::vector<ZooEntry>> zoo_index_from_image(std::string_view bytes);

}  // namespace gpuplan
