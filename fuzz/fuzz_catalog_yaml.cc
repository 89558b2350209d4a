// Fuzzes a user's catalog file: bytes -> one *.yaml of a `--catalog DIR` folder, loaded as
// Catalog::load does (the embedded data first, then the file, then finalize), then every name of the
// result resolved and every target's figures read. Catalog::add_file is the text entry point.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_util.h"
#include "gpuplan/embedded.h"
#include "gpuplan/target.h"

namespace {

namespace fz = gpuplan::fuzz;

// The embedded files each input is loaded over: the spec-key contract, two MIG tables and one GPU
// family. The whole embedded catalog (150 KB of YAML) costs ~0.7 s an input under ASan (1 exec/s);
// this subset keeps every cross reference a user file makes reachable (sources, spec keys, MIG tables,
// overriding a GPU) at a fraction of that.
constexpr std::string_view kBaseFiles[] = {"data/spec_keys.yaml", "data/mig/a30-24gb.yaml", "data/mig/h200-141gb.yaml",
                                           "data/gpus/a30.yaml"};

// The base files in Catalog::load's order (spec keys, then MIG tables, then the rest).
const std::vector<gpuplan::EmbeddedFile>& catalog_files() {
  static const std::vector<gpuplan::EmbeddedFile> files = [] {
    auto rank = [](std::string_view path) {
      if (path.find("spec_keys") != std::string_view::npos) return 0;
      if (path.find("/mig/") != std::string_view::npos) return 1;
      return 2;
    };
    std::vector<gpuplan::EmbeddedFile> out;
    for (const auto& f : gpuplan::embedded_files()) {
      if (std::find(std::begin(kBaseFiles), std::end(kBaseFiles), f.path) != std::end(kBaseFiles)) out.push_back(f);
    }
    std::stable_sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return rank(a.path) < rank(b.path); });
    if (out.size() != std::size(kBaseFiles)) std::abort();  // a base file was renamed
    return out;
  }();
  return files;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gpuplan::Catalog c;
  for (const auto& f : catalog_files()) {
    if (!c.add_file(std::string(f.path), f.contents)) std::abort();  // the embedded data is valid
  }
  if (!c.add_file("fuzz/catalog/extra.yaml", fz::as_text(data, size))) return 0;
  if (!c.finalize()) return 0;
  for (const auto& ref : c.all_targets()) {
    const std::string id = ref.id();
    auto again = c.resolve(id);
    if (!again) {
      std::fprintf(stderr, "fuzz oracle: target '%s' of all_targets() does not resolve: %s\n", id.c_str(),
                   again.error().message.c_str());
      std::abort();
    }
    const gpuplan::Target t = gpuplan::Target::linked(ref, 1);
    (void)t.name();
    fz::require_finite(t.memory_total_bytes(), id, "memory_total_bytes");
    fz::require_finite(t.memory_bandwidth_gbps(), id, "memory_bandwidth_gbps");
    fz::require_finite(t.compute_fraction(), id, "compute_fraction");
    fz::require_finite(t.tdp_w(), id, "tdp_w");
    fz::require_finite(t.link_gbps(), id, "link_gbps");
    (void)t.sm_count();
    (void)gpuplan::target_figures(c, ref);
  }
  (void)c.resolve("x200");
  (void)c.resolve("a30 pcie");
  (void)c.resolve("h200/3g.71gb");
  return 0;
}
