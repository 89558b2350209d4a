// The images the build compiles from data/ (tools/compile_data.cc writes them into
// ${PROJECT_BINARY_DIR}/generated/compiled_data.cc after validating every file with the loaders that
// read YAML at run time): what the binary loads at start-up instead of parsing its embedded YAML.
// Each is empty in the compile tool itself (tools/compile_data_stub.cc), where the loaders fall back
// to parsing the YAML.
#pragma once

#include <string_view>

namespace gpuplan::compiled {

std::string_view catalog_image();  // Catalog::to_image() of the embedded data/ files, before finalize()
std::string_view options_image();  // OptionTable::to_image() of data/options.yaml
std::string_view zoo_image();      // the zoo's index (zoo_index_image()) of data/models/

}  // namespace gpuplan::compiled
