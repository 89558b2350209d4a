#include "gpuplan/catalog.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "catalog/compiled.h"
#include "catalog/image.h"
#include "catalog/yaml_util.h"
#include "gpuplan/cancel.h"
#include "gpuplan/embedded.h"

namespace gpuplan {

namespace fs = std::filesystem;
using yaml::check_keys;
using yaml::data_error;

const MigProfile* MigTable::find(std::string_view profile_name) const {
  for (const auto& p : profiles) {
    if (p.name == profile_name) return &p;
  }
  return nullptr;
}

const Figure* Gpu::spec(std::string_view key) const {
  for (const auto& f : specs) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

double Gpu::number(std::string_view key, double fallback) const {
  const Figure* f = spec(key);
  return f && f->number ? *f->number : fallback;
}

std::string TargetRef::id() const {
  if (!gpu) return {};
  return profile ? gpu->id + "/" + profile->name : gpu->id;
}

// --- loading ------------------------------------------------------------------------------------

Status Catalog::add_file(const std::string& file, std::string_view text) {
  auto doc = yaml::parse(file, text);
  if (!doc) return doc.error();
  const YAML::Node& root = *doc;
  if (!root || root.IsNull()) return Status::Ok();  // an empty file adds nothing
  if (auto s = check_keys(file, root, "", {"sources", "spec_keys", "gpus", "mig_tables"}); !s) return s;
  if (root["sources"]) {
    if (auto s = add_sources(file, root["sources"]); !s) return s;
  }
  if (root["spec_keys"]) {
    if (auto s = add_spec_keys(file, root["spec_keys"]); !s) return s;
  }
  if (root["mig_tables"]) {
    if (auto s = add_mig_tables(file, root["mig_tables"]); !s) return s;
  }
  if (root["gpus"]) {
    if (auto s = add_gpus(file, root["gpus"]); !s) return s;
  }
  finalized_ = false;
  return Status::Ok();
}

Status Catalog::add_sources(const std::string& file, const YAML::Node& node) {
  if (!node.IsMap()) return data_error(file, node, "sources", "", "expected a mapping of source ids to sources");
  for (const auto& kv : node) {
    Source src;
    src.id = kv.first.as<std::string>();
    const std::string entry = "source '" + src.id + "'";
    const YAML::Node& m = kv.second;
    if (auto s = check_keys(file, m, entry, {"title", "url", "revision", "checked", "kind"}); !s) return s;
    auto title = yaml::get_string(file, m, entry, "title", true);
    auto url = yaml::get_string(file, m, entry, "url", true);
    auto revision = yaml::get_string(file, m, entry, "revision", false);
    auto checked = yaml::get_string(file, m, entry, "checked", true);
    auto kind = yaml::get_string(file, m, entry, "kind", false);
    for (const auto* r : {&title, &url, &revision, &checked, &kind}) {
      if (!*r) return r->error();
    }
    src.title = *title;
    src.url = *url;
    src.revision = *revision;
    src.checked = *checked;
    src.kind = kind->empty() ? "third_party" : *kind;
    static const std::set<std::string> kKinds = {"vendor", "guide", "measurement", "third_party", "seed"};
    if (!kKinds.count(src.kind)) {
      return data_error(file, m, entry, "kind",
                        "'" + src.kind + "' is not one of vendor, guide, measurement, third_party, seed");
    }
    auto it = sources_.find(src.id);
    if (it != sources_.end() && (it->second.url != src.url || it->second.title != src.title)) {
      return data_error(file, kv.first, entry, "",
                        "defined twice with different contents; give the second one another id");
    }
    sources_[src.id] = std::move(src);
  }
  return Status::Ok();
}

Status Catalog::add_spec_keys(const std::string& file, const YAML::Node& node) {
  if (!node.IsSequence()) return data_error(file, node, "spec_keys", "", "expected a list");
  for (const auto& m : node) {
    SpecKey k;
    auto key = yaml::get_string(file, m, "spec key", "key", true);
    if (!key) return key.error();
    k.key = *key;
    const std::string entry = "spec key '" + k.key + "'";
    if (auto s = check_keys(file, m, entry, {"key", "unit", "kind", "min", "max", "group", "explain", "sparse"}); !s)
      return s;
    auto unit = yaml::get_string(file, m, entry, "unit", false);
    auto kind = yaml::get_string(file, m, entry, "kind", true);
    auto min = yaml::get_number(file, m, entry, "min", false, -1e300);
    auto max = yaml::get_number(file, m, entry, "max", false, 1e300);
    auto group = yaml::get_string(file, m, entry, "group", true);
    auto explain = yaml::get_string(file, m, entry, "explain", true);
    auto sparse = yaml::get_bool(file, m, entry, "sparse", false, false);
    if (!unit) return unit.error();
    if (!kind) return kind.error();
    if (!min) return min.error();
    if (!max) return max.error();
    if (!group) return group.error();
    if (!explain) return explain.error();
    if (!sparse) return sparse.error();
    k.unit = *unit;
    k.group = *group;
    k.explain = *explain;
    k.min = *min;
    k.max = *max;
    if (*kind == "number")
      k.kind = SpecKind::kNumber;
    else if (*kind == "integer")
      k.kind = SpecKind::kInteger;
    else if (*kind == "string")
      k.kind = SpecKind::kString;
    else if (*kind == "boolean")
      k.kind = SpecKind::kBoolean;
    else
      return data_error(file, m, entry, "kind", "'" + *kind + "' is not one of number, integer, string, boolean");
    // Throughput keys (group "throughput") have a sparse twin unless `sparse: false`.
    k.has_sparse_twin = m["sparse"] ? *sparse : false;
    spec_keys_.push_back(k);
    if (k.has_sparse_twin) {
      SpecKey twin = k;
      twin.key = k.key + "_sparse";
      twin.has_sparse_twin = false;
      twin.is_sparse = true;
      twin.dense_key = k.key;
      twin.max = k.max * 2;
      twin.explain =
          "The same rate with NVIDIA's 2:4 structured sparsity: twice the dense rate, and only for "
          "models pruned to that pattern. Dense models never see it.";
      spec_keys_.push_back(twin);
    }
  }
  return Status::Ok();
}

namespace {

Result<Figure> parse_figure(const std::string& file, const YAML::Node& node, const std::string& entry,
                            const SpecKey& key) {
  Figure f;
  f.key = key.key;
  f.unit = key.unit;
  const std::string field = "specs." + key.key;
  // yaml-cpp nodes have reference semantics: assigning one to another overwrites the target, so the
  // value node is bound once, never reassigned.
  if (!node.IsMap()) {
    return data_error(file, node, entry, field, "expected {value: ..., source: ...}; every figure needs a source");
  }
  const YAML::Node value_node = node["value"];
  {
    if (auto s = check_keys(file, node, entry, {"value", "source", "checked", "derived", "conflicts", "note"}); !s) {
      return s.error();
    }
    auto source = yaml::get_string(file, node, entry, "source", true);
    if (!source) return data_error(file, node, entry, field + ".source", "every figure needs a source id");
    f.source_id = *source;
    auto checked = yaml::get_string(file, node, entry, "checked", false);
    if (!checked) return checked.error();
    f.checked = *checked;
    auto derived = yaml::get_string(file, node, entry, "derived", false);
    if (!derived) return derived.error();
    f.derived = *derived;
    if (node["conflicts"]) {
      if (!node["conflicts"].IsSequence())
        return data_error(file, node["conflicts"], entry, field + ".conflicts", "expected a list");
      for (const auto& c : node["conflicts"]) {
        if (auto s = check_keys(file, c, entry, {"value", "source", "note"}); !s) return s.error();
        auto v = yaml::get_string(file, c, entry, "value", true);
        auto src = yaml::get_string(file, c, entry, "source", true);
        auto note = yaml::get_string(file, c, entry, "note", false);
        if (!v) return v.error();
        if (!src) return src.error();
        if (!note) return note.error();
        f.conflicts.push_back(Conflict{*v, *src, *note});
      }
    }
  }
  if (!value_node || !value_node.IsScalar())
    return data_error(file, node, entry, field + ".value", "required value is missing");
  f.text = value_node.Scalar();
  switch (key.kind) {
    case SpecKind::kString:
      break;
    case SpecKind::kBoolean: {
      bool b = false;
      if (!YAML::convert<bool>::decode(value_node, b))
        return data_error(file, value_node, entry, field, "expected true or false");
      f.flag = b;
      break;
    }
    case SpecKind::kNumber:
    case SpecKind::kInteger: {
      double v = 0;
      if (!YAML::convert<double>::decode(value_node, v) || !std::isfinite(v)) {
        return data_error(file, value_node, entry, field,
                          "expected a number in " + key.unit + ", got '" + f.text + "'");
      }
      if (key.kind == SpecKind::kInteger && v != std::floor(v)) {
        return data_error(file, value_node, entry, field, "expected a whole number, got '" + f.text + "'");
      }
      if (v < key.min || v > key.max) {
        std::ostringstream os;
        os << "value " << f.text << " " << key.unit << " is outside the plausible range [" << key.min << ", " << key.max
           << "] " << key.unit << "; check the unit";
        return data_error(file, value_node, entry, field, os.str());
      }
      f.number = v;
      break;
    }
  }
  return f;
}

}  // namespace

Status Catalog::add_gpus(const std::string& file, const YAML::Node& node) {
  if (!node.IsSequence()) return data_error(file, node, "gpus", "", "expected a list of GPUs");
  if (spec_keys_.empty()) return data_error(file, node, "gpus", "", "spec keys must be loaded before GPUs");
  for (const auto& m : node) {
    Gpu g;
    g.file = file;
    auto id = yaml::get_string(file, m, "gpu", "id", true);
    if (!id) return id.error();
    g.id = *id;
    const std::string entry = "gpu '" + g.id + "'";
    if (g.id.empty() || !std::all_of(g.id.begin(), g.id.end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
        })) {
      return data_error(file, m, entry, "id", "ids are lowercase letters, digits, '-' and '.'");
    }
    if (auto s = check_keys(file, m, entry,
                            {"id", "vendor", "name", "aliases", "architecture", "chip", "form_factor", "interface",
                             "lifecycle", "mig", "specs"});
        !s) {
      return s;
    }
    struct StrField {
      const char* key;
      std::string* out;
      bool required;
    };
    for (StrField sf : {StrField{"vendor", &g.vendor, true}, StrField{"name", &g.name, true},
                        StrField{"architecture", &g.architecture, true}, StrField{"chip", &g.chip, false},
                        StrField{"form_factor", &g.form_factor, true}, StrField{"interface", &g.interface, false},
                        StrField{"lifecycle", &g.lifecycle, false}, StrField{"mig", &g.mig_table, false}}) {
      auto v = yaml::get_string(file, m, entry, sf.key, sf.required);
      if (!v) return v.error();
      *sf.out = *v;
    }
    auto aliases = yaml::get_string_list(file, m, entry, "aliases");
    if (!aliases) return aliases.error();
    g.aliases = *aliases;
    const YAML::Node specs = m["specs"];
    if (!specs || !specs.IsMap())
      return data_error(file, m, entry, "specs", "required mapping of spec keys to figures is missing");
    for (const auto& kv : specs) {
      const std::string key = kv.first.as<std::string>();
      const SpecKey* sk = find_spec_key(key);
      if (!sk) {
        return data_error(file, kv.first, entry, "specs." + key,
                          "unknown spec key; the keys are listed in data/spec_keys.yaml (throughput keys are dense, "
                          "their sparse twins end in _sparse)");
      }
      auto fig = parse_figure(file, kv.second, entry, *sk);
      if (!fig) return fig.error();
      g.specs.push_back(std::move(*fig));
    }
    // Keep the contract's order so that every printer shows figures the same way.
    std::sort(g.specs.begin(), g.specs.end(),
              [this](const Figure& a, const Figure& b) { return find_spec_key(a.key) < find_spec_key(b.key); });
    // Dense never exceeds its sparse twin.
    for (const auto& f : g.specs) {
      const SpecKey* sk = find_spec_key(f.key);
      if (!sk->is_sparse) continue;
      const Figure* dense = g.spec(sk->dense_key);
      if (dense && dense->number && f.number && *dense->number > *f.number) {
        return data_error(file, specs[f.key], entry, "specs." + f.key,
                          "the sparse figure is below the dense figure " + dense->text +
                              "; a dense value was probably filed as sparse or the other way round");
      }
    }
    auto existing = std::find_if(gpus_.begin(), gpus_.end(), [&](const Gpu& x) { return x.id == g.id; });
    if (existing != gpus_.end()) {
      if (existing->file == file) return data_error(file, m, entry, "id", "defined twice in the same file");
      *existing = std::move(g);  // a later file (the user's --catalog) overrides
    } else {
      gpus_.push_back(std::move(g));
    }
  }
  return Status::Ok();
}

Status Catalog::add_mig_tables(const std::string& file, const YAML::Node& node) {
  if (!node.IsSequence()) return data_error(file, node, "mig_tables", "", "expected a list of MIG tables");
  for (const auto& m : node) {
    MigTable t;
    t.file = file;
    auto id = yaml::get_string(file, m, "mig table", "id", true);
    if (!id) return id.error();
    t.id = *id;
    const std::string entry = "mig table '" + t.id + "'";
    if (auto s = check_keys(
            file, m, entry,
            {"id", "source", "memory_slices", "compute_slices", "max_instances", "min_driver", "profiles", "note"});
        !s) {
      return s;
    }
    auto source = yaml::get_string(file, m, entry, "source", true);
    auto mem = yaml::get_int(file, m, entry, "memory_slices", true);
    auto comp = yaml::get_int(file, m, entry, "compute_slices", true);
    auto maxi = yaml::get_int(file, m, entry, "max_instances", true);
    auto drv = yaml::get_string(file, m, entry, "min_driver", false);
    if (!source) return source.error();
    if (!mem) return mem.error();
    if (!comp) return comp.error();
    if (!maxi) return maxi.error();
    if (!drv) return drv.error();
    t.source_id = *source;
    t.memory_slices = *mem;
    t.compute_slices = *comp;
    t.max_instances = *maxi;
    t.min_driver = *drv;
    if (t.memory_slices < 1 || t.memory_slices > 16)
      return data_error(file, m, entry, "memory_slices", "expected 1 to 16");
    if (t.compute_slices < 1 || t.compute_slices > 16)
      return data_error(file, m, entry, "compute_slices", "expected 1 to 16");
    const YAML::Node profiles = m["profiles"];
    if (!profiles || !profiles.IsSequence()) return data_error(file, m, entry, "profiles", "required list is missing");
    for (const auto& pm : profiles) {
      MigProfile p;
      auto name = yaml::get_string(file, pm, entry, "name", true);
      if (!name) return name.error();
      p.name = *name;
      const std::string pentry = entry + ": profile '" + p.name + "'";
      if (auto s = check_keys(
              file, pm, pentry,
              {"name", "profile_id", "memory_slices", "compute_slices", "memory_mib", "sm_count", "copy_engines",
               "decoders", "jpeg", "ofa", "max_count", "placement_starts", "media_extensions", "source", "note"});
          !s) {
        return s;
      }
      struct IntField {
        const char* key;
        int* out;
        bool required;
      };
      for (IntField f : {IntField{"profile_id", &p.profile_id, true}, IntField{"memory_slices", &p.memory_slices, true},
                         IntField{"compute_slices", &p.compute_slices, true}, IntField{"sm_count", &p.sm_count, true},
                         IntField{"copy_engines", &p.copy_engines, false}, IntField{"decoders", &p.decoders, false},
                         IntField{"jpeg", &p.jpeg, false}, IntField{"ofa", &p.ofa, false},
                         IntField{"max_count", &p.max_count, true}}) {
        auto v = yaml::get_int(file, pm, pentry, f.key, f.required);
        if (!v) return v.error();
        *f.out = *v;
      }
      auto mib = yaml::get_number(file, pm, pentry, "memory_mib", true);
      auto starts = yaml::get_int_list(file, pm, pentry, "placement_starts");
      auto me = yaml::get_bool(file, pm, pentry, "media_extensions", false, false);
      auto psrc = yaml::get_string(file, pm, pentry, "source", false);
      auto note = yaml::get_string(file, pm, pentry, "note", false);
      if (!mib) return mib.error();
      if (!starts) return starts.error();
      if (!me) return me.error();
      if (!psrc) return psrc.error();
      if (!note) return note.error();
      p.memory_mib = *mib;
      p.placement_starts = *starts;
      p.media_extensions = *me;
      p.source_id = psrc->empty() ? t.source_id : *psrc;
      p.note = *note;
      if (p.memory_slices < 1 || p.memory_slices > t.memory_slices) {
        return data_error(file, pm, pentry, "memory_slices",
                          "must be between 1 and the table's " + std::to_string(t.memory_slices));
      }
      if (p.compute_slices < 1 || p.compute_slices > t.compute_slices) {
        return data_error(file, pm, pentry, "compute_slices",
                          "must be between 1 and the table's " + std::to_string(t.compute_slices));
      }
      if (p.placement_starts.empty())
        return data_error(file, pm, pentry, "placement_starts", "at least one placement is required");
      for (int s : p.placement_starts) {
        if (s < 0 || s + p.memory_slices > t.memory_slices) {
          return data_error(file, pm, pentry, "placement_starts",
                            "start " + std::to_string(s) + " + " + std::to_string(p.memory_slices) +
                                " memory slices runs past the table's " + std::to_string(t.memory_slices));
        }
      }
      if (p.max_count < 1) return data_error(file, pm, pentry, "max_count", "must be at least 1");
      if (p.memory_mib <= 0) return data_error(file, pm, pentry, "memory_mib", "must be positive");
      if (t.find(p.name)) return data_error(file, pm, pentry, "name", "profile defined twice");
      t.profiles.push_back(std::move(p));
    }
    mig_tables_[t.id] = std::move(t);
  }
  return Status::Ok();
}

Status Catalog::finalize() {
  // The error of a source id no `sources:` block defines; `entry` and `field` are built only then (the
  // embedded catalog, checked at build time, never needs them).
  auto source_error = [](const std::string& file, const std::string& entry, const std::string& field,
                         const std::string& id) -> Status {
    return Error{ErrorCode::kInvalidData,
                 file + ": " + entry + ": field '" + field + "': source '" + id +
                     "' is not defined; add it to a `sources:` block",
                 file + ": " + entry + ": " + field};
  };
  auto defined = [&](const std::string& id) { return sources_.count(id) > 0; };
  for (auto& [id, t] : mig_tables_) {
    if (!defined(t.source_id)) return source_error(t.file, "mig table '" + id + "'", "source", t.source_id);
    for (const auto& p : t.profiles) {
      if (!defined(p.source_id)) {
        return source_error(t.file, "mig table '" + id + "': profile '" + p.name + "'", "source", p.source_id);
      }
    }
  }
  for (auto& g : gpus_) {
    if (!g.mig_table.empty() && !mig_tables_.count(g.mig_table)) {
      const std::string entry = "gpu '" + g.id + "'";
      return Error{
          ErrorCode::kInvalidData,
          g.file + ": " + entry + ": field 'mig': MIG table '" + g.mig_table + "' is not defined under data/mig/",
          g.file + ": " + entry + ": mig"};
    }
    for (auto& f : g.specs) {
      if (!defined(f.source_id))
        return source_error(g.file, "gpu '" + g.id + "'", "specs." + f.key + ".source", f.source_id);
      if (f.checked.empty()) f.checked = sources_.at(f.source_id).checked;
      for (const auto& c : f.conflicts) {
        if (!defined(c.source_id)) {
          return source_error(g.file, "gpu '" + g.id + "'", "specs." + f.key + ".conflicts.source", c.source_id);
        }
      }
    }
  }
  // Catalog order: by architecture generation, then release year, then id (stable across files).
  auto generation = [](const std::string& arch) {
    static const char* kOrder[] = {"kepler", "maxwell", "pascal", "volta",    "turing",
                                   "ampere", "ada",     "hopper", "blackwell"};
    for (size_t i = 0; i < std::size(kOrder); ++i) {
      if (arch == kOrder[i]) return static_cast<int>(i);
    }
    return static_cast<int>(std::size(kOrder));
  };
  std::stable_sort(gpus_.begin(), gpus_.end(), [&](const Gpu& a, const Gpu& b) {
    const int ga = generation(a.architecture), gb = generation(b.architecture);
    if (ga != gb) return ga < gb;
    const double ya = a.number("release_year", 0), yb = b.number("release_year", 0);
    if (ya != yb) return ya < yb;
    return a.id < b.id;
  });
  // Name index: exact names first, then per-GPU tokens.
  exact_index_.clear();
  gpu_tokens_.clear();
  for (size_t i = 0; i < gpus_.size(); ++i) {
    const Gpu& g = gpus_[i];
    std::vector<std::string> names = {g.id, g.name};
    names.insert(names.end(), g.aliases.begin(), g.aliases.end());
    std::set<std::string> tokens;
    for (const auto& n : names) {
      const std::string key = normalize_name(n);
      auto it = exact_index_.find(key);
      if (it != exact_index_.end() && it->second != i) {
        return Error{ErrorCode::kInvalidData,
                     g.file + ": gpu '" + g.id + "': name '" + n + "' is also a name of '" + gpus_[it->second].id +
                         "'; a name must identify one GPU",
                     g.file + ": gpu '" + g.id + "': aliases"};
      }
      exact_index_[key] = i;
      // Tokens: alphanumeric runs, lowercase; also adjacent pairs joined ("rtx" + "4090").
      const std::vector<std::string> words = name_words(n);
      for (size_t w = 0; w < words.size(); ++w) {
        tokens.insert(words[w]);
        if (w + 1 < words.size()) tokens.insert(words[w] + words[w + 1]);
      }
    }
    gpu_tokens_.emplace_back(tokens.begin(), tokens.end());
  }
  finalized_ = true;
  return Status::Ok();
}

// --- queries --------------------------------------------------------------------------------------

const Gpu* Catalog::find_gpu(std::string_view id) const {
  for (const auto& g : gpus_) {
    if (g.id == id) return &g;
  }
  return nullptr;
}

const MigTable* Catalog::find_mig_table(std::string_view id) const {
  auto it = mig_tables_.find(id);
  return it == mig_tables_.end() ? nullptr : &it->second;
}

const Source* Catalog::find_source(std::string_view id) const {
  auto it = sources_.find(id);
  return it == sources_.end() ? nullptr : &it->second;
}

const SpecKey* Catalog::find_spec_key(std::string_view key) const {
  for (const auto& k : spec_keys_) {
    if (k.key == key) return &k;
  }
  return nullptr;
}

std::vector<TargetRef> Catalog::all_targets(bool include_mig) const {
  std::vector<TargetRef> out;
  for (const auto& g : gpus_) {
    const MigTable* t = g.mig_table.empty() ? nullptr : find_mig_table(g.mig_table);
    out.push_back(TargetRef{&g, t, nullptr});
    if (include_mig && t) {
      for (const auto& p : t->profiles) out.push_back(TargetRef{&g, t, &p});
    }
  }
  return out;
}

// --- the compiled image ---------------------------------------------------------------------------

namespace {

// "GPCT": the catalog image's tag (src/catalog/image.h).
constexpr uint32_t kCatalogImageTag = 0x54435047;

void write_source(image::Writer& w, const Source& s) {
  for (const auto* f : {&s.id, &s.title, &s.url, &s.revision, &s.checked, &s.kind}) w.str(*f);
}

void read_source(image::Reader& r, Source& s) {
  for (auto* f : {&s.id, &s.title, &s.url, &s.revision, &s.checked, &s.kind}) *f = r.str();
}

void write_spec_key(image::Writer& w, const SpecKey& k) {
  for (const auto* f : {&k.key, &k.unit, &k.group, &k.explain}) w.str(*f);
  w.u8(static_cast<uint8_t>(k.kind));
  w.f64(k.min);
  w.f64(k.max);
  w.boolean(k.has_sparse_twin);
  w.boolean(k.is_sparse);
  w.str(k.dense_key);
}

void read_spec_key(image::Reader& r, SpecKey& k) {
  for (auto* f : {&k.key, &k.unit, &k.group, &k.explain}) *f = r.str();
  const uint8_t kind = r.u8();
  k.kind = kind <= static_cast<uint8_t>(SpecKind::kBoolean) ? static_cast<SpecKind>(kind) : SpecKind::kNumber;
  k.min = r.f64();
  k.max = r.f64();
  k.has_sparse_twin = r.boolean();
  k.is_sparse = r.boolean();
  k.dense_key = r.str();
}

void write_figure(image::Writer& w, const Figure& f) {
  w.str(f.key);
  w.opt_f64(f.number);
  w.opt_bool(f.flag);
  for (const auto* s : {&f.text, &f.unit, &f.source_id, &f.checked, &f.derived}) w.str(*s);
  w.count(f.conflicts.size());
  for (const auto& c : f.conflicts) {
    w.str(c.value);
    w.str(c.source_id);
    w.str(c.note);
  }
}

void read_figure(image::Reader& r, Figure& f) {
  f.key = r.str();
  f.number = r.opt_f64();
  f.flag = r.opt_bool();
  for (auto* s : {&f.text, &f.unit, &f.source_id, &f.checked, &f.derived}) *s = r.str();
  f.conflicts.resize(r.count());
  for (auto& c : f.conflicts) {
    c.value = r.str();
    c.source_id = r.str();
    c.note = r.str();
  }
}

void write_gpu(image::Writer& w, const Gpu& g) {
  for (const auto* f : {&g.id, &g.vendor, &g.name}) w.str(*f);
  w.strings(g.aliases);
  for (const auto* f : {&g.architecture, &g.chip, &g.form_factor, &g.interface, &g.lifecycle, &g.mig_table, &g.file})
    w.str(*f);
  w.count(g.specs.size());
  for (const auto& f : g.specs) write_figure(w, f);
}

void read_gpu(image::Reader& r, Gpu& g) {
  for (auto* f : {&g.id, &g.vendor, &g.name}) *f = r.str();
  g.aliases = r.strings();
  for (auto* f : {&g.architecture, &g.chip, &g.form_factor, &g.interface, &g.lifecycle, &g.mig_table, &g.file})
    *f = r.str();
  g.specs.resize(r.count());
  for (auto& f : g.specs) read_figure(r, f);
}

void write_profile(image::Writer& w, const MigProfile& p) {
  w.str(p.name);
  for (int v : {p.profile_id, p.memory_slices, p.compute_slices}) w.i32(v);
  w.f64(p.memory_mib);
  for (int v : {p.sm_count, p.copy_engines, p.decoders, p.jpeg, p.ofa, p.max_count}) w.i32(v);
  w.count(p.placement_starts.size());
  for (int s : p.placement_starts) w.i32(s);
  w.boolean(p.media_extensions);
  w.str(p.source_id);
  w.str(p.note);
}

void read_profile(image::Reader& r, MigProfile& p) {
  p.name = r.str();
  for (int* v : {&p.profile_id, &p.memory_slices, &p.compute_slices}) *v = r.i32();
  p.memory_mib = r.f64();
  for (int* v : {&p.sm_count, &p.copy_engines, &p.decoders, &p.jpeg, &p.ofa, &p.max_count}) *v = r.i32();
  p.placement_starts.resize(r.count());
  for (int& s : p.placement_starts) s = r.i32();
  p.media_extensions = r.boolean();
  p.source_id = r.str();
  p.note = r.str();
}

void write_mig_table(image::Writer& w, const MigTable& t) {
  for (const auto* f : {&t.id, &t.source_id, &t.file}) w.str(*f);
  for (int v : {t.memory_slices, t.compute_slices, t.max_instances}) w.i32(v);
  w.str(t.min_driver);
  w.count(t.profiles.size());
  for (const auto& p : t.profiles) write_profile(w, p);
}

void read_mig_table(image::Reader& r, MigTable& t) {
  for (auto* f : {&t.id, &t.source_id, &t.file}) *f = r.str();
  for (int* v : {&t.memory_slices, &t.compute_slices, &t.max_instances}) *v = r.i32();
  t.min_driver = r.str();
  t.profiles.resize(r.count());
  for (auto& p : t.profiles) read_profile(r, p);
}

}  // namespace

std::string Catalog::to_image(bool with_index) const {
  image::Writer w;
  w.u32(kCatalogImageTag);
  w.u32(image::kFormatVersion);
  w.count(spec_keys_.size());
  for (const auto& k : spec_keys_) write_spec_key(w, k);
  w.count(sources_.size());
  for (const auto& [id, s] : sources_) write_source(w, s);
  w.count(gpus_.size());
  for (const auto& g : gpus_) write_gpu(w, g);
  w.count(mig_tables_.size());
  for (const auto& [id, t] : mig_tables_) write_mig_table(w, t);
  if (with_index) {
    w.boolean(finalized_);
    w.count(exact_index_.size());
    for (const auto& [name, i] : exact_index_) {
      w.str(name);
      w.u64(i);
    }
    w.count(gpu_tokens_.size());
    for (const auto& tokens : gpu_tokens_) w.strings(tokens);
  }
  return w.bytes();
}

Result<std::unique_ptr<Catalog>> Catalog::from_image(std::string_view bytes) {
  image::Reader r(bytes);
  auto c = std::make_unique<Catalog>();
  if (r.u32() != kCatalogImageTag || r.u32() != image::kFormatVersion) {
    return Error{ErrorCode::kInternal, "the compiled catalog image is of another format; rebuild gpuplan", ""};
  }
  c->spec_keys_.resize(r.count());
  for (auto& k : c->spec_keys_) read_spec_key(r, k);
  for (size_t n = r.count(), i = 0; i < n && r.ok(); ++i) {
    Source s;
    read_source(r, s);
    std::string id = s.id;
    c->sources_.emplace(std::move(id), std::move(s));
  }
  c->gpus_.resize(r.count());
  for (auto& g : c->gpus_) read_gpu(r, g);
  for (size_t n = r.count(), i = 0; i < n && r.ok(); ++i) {
    MigTable t;
    read_mig_table(r, t);
    std::string id = t.id;
    c->mig_tables_.emplace(std::move(id), std::move(t));
  }
  GPUPLAN_CHECK(r.finish("catalog"));
  return c;
}

// --- loading entry points -------------------------------------------------------------------------

namespace {

// Spec keys first (GPUs are validated against them), then sources, MIG tables and GPUs.
int load_rank(std::string_view path) {
  if (path.find("spec_keys") != std::string_view::npos) return 0;
  if (path.find("/mig/") != std::string_view::npos) return 1;
  return 2;
}

bool is_catalog_file(std::string_view path) {
  auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.substr(path.size() - suffix.size()) == suffix;
  };
  return path.rfind("data/", 0) == 0 && ends_with(".yaml") &&
         (path.find("data/gpus/") == 0 || path.find("data/mig/") == 0 || path == "data/spec_keys.yaml" ||
          path == "data/sources.yaml");
}

}  // namespace

Status Catalog::add_data_files(std::span<const EmbeddedFile> all) {
  std::vector<EmbeddedFile> files;
  for (const auto& f : all) {
    if (is_catalog_file(f.path)) files.push_back(f);
  }
  std::stable_sort(files.begin(), files.end(),
                   [](const EmbeddedFile& a, const EmbeddedFile& b) { return load_rank(a.path) < load_rank(b.path); });
  for (const auto& f : files) {
    if (auto s = add_file(std::string(f.path), f.contents); !s) return s;
  }
  return Status::Ok();
}

Result<std::shared_ptr<const Catalog>> Catalog::load(const std::vector<std::string>& extra_dirs, EmbeddedForm form) {
  std::unique_ptr<Catalog> c;
  // The tool that compiles the image (tools/compile_data.cc) links an empty one: it reads the YAML.
  if (form == EmbeddedForm::kCompiled && !compiled::catalog_image().empty()) {
    auto from = from_image(compiled::catalog_image());
    if (!from) return from.error();
    c = std::move(from).value();
  } else {
    c = std::make_unique<Catalog>();
    if (auto s = c->add_data_files(embedded_files()); !s) return s.error();
  }
  for (const auto& dir : extra_dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      return usage_error("--catalog '" + dir + "' is not a folder; pass a folder of *.yaml files", "catalog");
    }
    std::vector<fs::path> paths;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_regular_file() && it->path().extension() == ".yaml") paths.push_back(it->path());
    }
    std::sort(paths.begin(), paths.end(), [](const fs::path& a, const fs::path& b) {
      int ra = load_rank(a.generic_string()), rb = load_rank(b.generic_string());
      return ra != rb ? ra < rb : a < b;
    });
    for (const auto& p : paths) {
      std::ifstream in(p, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      if (!in) return invalid_data_error(p.string() + ": cannot be read", p.string());
      if (auto s = c->add_file(p.string(), ss.str()); !s) return s.error();
    }
  }
  if (auto s = c->finalize(); !s) return s.error();
  return std::shared_ptr<const Catalog>(std::move(c));
}

std::shared_ptr<const Catalog> Catalog::embedded() {
  static std::once_flag once;
  static std::shared_ptr<const Catalog> catalog;
  std::call_once(once, [] {
    // Shared by every later command: the first command's deadline must not cut its load short.
    const CancelScope uncancellable(nullptr);
    auto c = load();
    if (!c) {
      // The embedded data is tested at build time; reaching this is a packaging bug.
      throw std::runtime_error("embedded catalog is invalid: " + c.error().message);
    }
    catalog = *c;
  });
  return catalog;
}

}  // namespace gpuplan
