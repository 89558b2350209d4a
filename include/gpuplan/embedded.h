// The data files compiled into the binary (data/, validation/, web/), generated at build time by
// cmake/embed_data.cmake. Paths are relative to the source tree, e.g. "data/gpus/a100.yaml".
#pragma once

#include <span>
#include <string_view>

namespace gpuplan {

struct EmbeddedFile {
  std::string_view path;
  std::string_view contents;
};

std::span<const EmbeddedFile> embedded_files();

}  // namespace gpuplan
