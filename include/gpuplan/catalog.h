// The catalog: every GPU, its MIG profile table, the spec-key contract and the sources, loaded once
// from the data embedded in the binary plus the user's --catalog folders, validated, then immutable.
// It also owns the name index that turns any name users or tools produce (nvidia-smi product names,
// cloud and marketing names) into a canonical target, or a precise error.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/embedded.h"
#include "gpuplan/figure.h"
#include "gpuplan/status.h"

namespace YAML {
class Node;
}

namespace gpuplan {

struct MigProfile {
  std::string name;  // e.g. "3g.20gb", "1g.5gb+me"
  int profile_id = 0;
  int memory_slices = 0;
  int compute_slices = 0;
  double memory_mib = 0;  // NVML memorySizeMB of the instance (MiB)
  int sm_count = 0;
  int copy_engines = 0;
  int decoders = 0;
  int jpeg = 0;
  int ofa = 0;
  int max_count = 0;
  std::vector<int> placement_starts;  // valid first memory slice; the instance spans memory_slices
  bool media_extensions = false;
  std::string source_id;
  std::string note;
};

struct MigTable {
  std::string id;
  std::string source_id;
  std::string file;
  int memory_slices = 0;
  int compute_slices = 0;
  int max_instances = 0;
  std::string min_driver;
  std::vector<MigProfile> profiles;

  const MigProfile* find(std::string_view profile_name) const;
};

struct Gpu {
  std::string id;
  std::string vendor;
  std::string name;
  std::vector<std::string> aliases;
  std::string architecture;
  std::string chip;
  std::string form_factor;
  std::string interface;
  std::string lifecycle;
  std::string mig_table;      // id in the catalog's MIG tables; empty when the GPU has no MIG
  std::string file;           // the data file it came from
  std::vector<Figure> specs;  // in the order of the spec-key contract

  const Figure* spec(std::string_view key) const;
  // The numeric value of a spec, or `fallback` when the GPU has no such figure.
  double number(std::string_view key, double fallback = 0) const;
  bool has(std::string_view key) const { return spec(key) != nullptr; }
};

// A name resolved against the catalog: a GPU, or one MIG profile of it.
struct TargetRef {
  const Gpu* gpu = nullptr;
  const MigTable* mig_table = nullptr;  // set when the GPU supports MIG
  const MigProfile* profile = nullptr;  // set when the name addresses a MIG profile
  std::string id() const;               // "a100-40gb-sxm4" or "a100-40gb-sxm4/3g.20gb"
  bool is_mig() const { return profile != nullptr; }
};

// Where Catalog::load takes the data embedded in the binary from: the image compiled from data/ at build
// time (tools/compile_data.cc validated it with this loader; no YAML is parsed), or the embedded YAML
// itself (the tests compare the two).
enum class EmbeddedForm { kCompiled, kYaml };

class Catalog {
 public:
  Catalog() = default;
  Catalog(const Catalog&) = delete;
  Catalog& operator=(const Catalog&) = delete;

  // The data embedded in the binary, plus every *.yaml under each of `extra_dirs` (the user's
  // --catalog folders), which add entries or override entries with the same id.
  // The user's folders are always parsed as YAML.
  static Result<std::shared_ptr<const Catalog>> load(const std::vector<std::string>& extra_dirs = {},
                                                     EmbeddedForm form = EmbeddedForm::kCompiled);
  // The embedded data only, loaded once per process. Never fails unless the build is broken.
  static std::shared_ptr<const Catalog> embedded();

  // Parses one data file (sources, spec keys, gpus or mig tables) into the catalog.
  Status add_file(const std::string& file_name, std::string_view text);
  // Checks cross references (sources, MIG tables, spec keys) and builds the name index.
  Status finalize();
  // Adds the catalog files among `files` (data/gpus/, data/mig/, data/spec_keys.yaml,
  // data/sources.yaml), spec keys first, then MIG tables, then the rest: what load() does with the
  // embedded YAML and the build's compile step (tools/compile_data.cc) with the files of data/.
  Status add_data_files(std::span<const EmbeddedFile> files);

  // The whole state as a compact binary image (src/catalog/image.h): spec keys, sources, GPUs with
  // every figure, MIG tables; with `with_index`, also the name index (finalize()'s), which makes two
  // images equal exactly when the catalogs are (the tests' deep equality).
  std::string to_image(bool with_index = false) const;
  // A catalog from to_image() (without the index), not finalized: as after the add_file() calls it
  // was written from. A corrupt image is an internal error.
  static Result<std::unique_ptr<Catalog>> from_image(std::string_view bytes);

  const std::vector<Gpu>& gpus() const { return gpus_; }
  const std::vector<SpecKey>& spec_keys() const { return spec_keys_; }
  const Gpu* find_gpu(std::string_view id) const;
  const MigTable* find_mig_table(std::string_view id) const;
  const Source* find_source(std::string_view id) const;
  const SpecKey* find_spec_key(std::string_view key) const;

  // Resolves any name: a canonical id, an alias, an nvidia-smi product name, a unique set of tokens
  // ("h200", "a100 sxm4 80gb"), optionally followed by "/<mig profile>". An ambiguous name is an
  // error (kAmbiguous) that lists the candidates; an unknown one (kNotFound) suggests the nearest.
  Result<TargetRef> resolve(std::string_view name) const;
  // Every GPU and every MIG profile of every MIG-capable GPU, in catalog order.
  std::vector<TargetRef> all_targets(bool include_mig = true) const;

 private:
  Status add_sources(const std::string& file, const YAML::Node& node);
  Status add_spec_keys(const std::string& file, const YAML::Node& node);
  Status add_gpus(const std::string& file, const YAML::Node& node);
  Status add_mig_tables(const std::string& file, const YAML::Node& node);

  std::vector<SpecKey> spec_keys_;
  std::map<std::string, Source, std::less<>> sources_;
  std::vector<Gpu> gpus_;
  std::map<std::string, MigTable, std::less<>> mig_tables_;
  // Normalized name -> GPU index, for exact matches of ids, names and aliases.
  std::map<std::string, size_t, std::less<>> exact_index_;
  // Per GPU: the tokens of its id, name and aliases, for token matches.
  std::vector<std::vector<std::string>> gpu_tokens_;
  bool finalized_ = false;
};

// "NVIDIA A100-SXM4-40GB" -> "a100sxm440gb": lowercase, alphanumerics only, vendor words dropped.
std::string normalize_name(std::string_view name);
// The lowercase alphanumeric runs of a name: "NVIDIA A100-SXM4-40GB" -> {"nvidia", "a100", "sxm4", "40gb"}.
std::vector<std::string> name_words(std::string_view name);
// Edit distance, for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace gpuplan
