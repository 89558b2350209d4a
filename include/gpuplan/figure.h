// A Figure is a catalog value with its unit, its source, the date it was checked, how it was derived
// (if it was not read directly from the source), and the conflicting claims seen elsewhere. Nothing
// else in gpuplan holds a raw spec number.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpuplan {

// Where figures come from. `kind` is vendor | guide | measurement | third_party | seed.
struct Source {
  std::string id;
  std::string title;
  std::string url;
  std::string revision;
  std::string checked;  // ISO date the figures citing it were checked
  std::string kind;
  // A figure is "verified" when its source is the vendor's own document or guide.
  bool authoritative() const { return kind == "vendor" || kind == "guide"; }
};

// A value stated elsewhere that disagrees with the figure. Shown to users, never used.
struct Conflict {
  std::string value;  // as stated, e.g. "2039" or "HBM2e"
  std::string source_id;
  std::string note;
};

enum class SpecKind { kNumber, kInteger, kString, kBoolean };

// One entry of data/spec_keys.yaml: the contract of a spec key.
struct SpecKey {
  std::string key;
  std::string unit;
  std::string group;
  std::string explain;
  SpecKind kind = SpecKind::kNumber;
  double min = 0;
  double max = 0;
  bool has_sparse_twin = false;  // a throughput key whose `<key>_sparse` twin is allowed
  bool is_sparse = false;        // this key is itself a `_sparse` twin
  std::string dense_key;         // for a sparse twin: the dense key it doubles
};

struct Figure {
  std::string key;
  std::optional<double> number;  // numeric and integer figures
  std::optional<bool> flag;      // boolean figures
  std::string text;              // the value as written (strings: the value itself)
  std::string unit;
  std::string source_id;
  std::string checked;
  std::string derived;  // how it was computed; empty when read directly from the source
  std::vector<Conflict> conflicts;

  bool is_derived() const { return !derived.empty(); }
};

}  // namespace gpuplan
