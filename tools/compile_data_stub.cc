// What the compile tool (tools/compile_data.cc) links in place of the generated files: no compiled
// images (the loaders parse YAML) and no embedded files (the tool reads data/ from the source tree).
#include "catalog/compiled.h"
#include "gpuplan/embedded.h"

namespace gpuplan {

std::span<const EmbeddedFile> embedded_files() { return {}; }

namespace compiled {

std::string_view catalog_image() { return {}; }
std::string_view options_image() { return {}; }
std::string_view zoo_image() { return {}; }

}  // namespace compiled
}  // namespace gpuplan
