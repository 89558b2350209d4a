// Model helpers, the layer-shape YAML reader (CNNs) and the built-in zoo.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <mutex>

#include "catalog/compiled.h"
#include "catalog/image.h"
#include "catalog/yaml_util.h"
#include "gpuplan/cancel.h"
#include "gpuplan/catalog.h"
#include "gpuplan/embedded.h"
#include "gpuplan/model.h"
#include "model/zoo_index.h"

namespace gpuplan {

Status finish_model(Model& m);  // hf_config.cc

std::string_view tensor_role_name(TensorRole role) {
  switch (role) {
    case TensorRole::kEmbedding:
      return "embedding";
    case TensorRole::kPositionEmbedding:
      return "position_embedding";
    case TensorRole::kHead:
      return "head";
    case TensorRole::kAttnQ:
      return "attn_q";
    case TensorRole::kAttnK:
      return "attn_k";
    case TensorRole::kAttnV:
      return "attn_v";
    case TensorRole::kAttnOut:
      return "attn_out";
    case TensorRole::kMlpGate:
      return "mlp_gate";
    case TensorRole::kMlpUp:
      return "mlp_up";
    case TensorRole::kMlpDown:
      return "mlp_down";
    case TensorRole::kRouter:
      return "router";
    case TensorRole::kNorm:
      return "norm";
    case TensorRole::kBias:
      return "bias";
    case TensorRole::kConv:
      return "conv";
    case TensorRole::kLinear:
      return "linear";
  }
  return "?";
}

bool is_linear_role(TensorRole role) {
  switch (role) {
    case TensorRole::kAttnQ:
    case TensorRole::kAttnK:
    case TensorRole::kAttnV:
    case TensorRole::kAttnOut:
    case TensorRole::kMlpGate:
    case TensorRole::kMlpUp:
    case TensorRole::kMlpDown:
    case TensorRole::kLinear:
      return true;
    default:
      return false;
  }
}

int64_t Model::linear_parameters() const {
  int64_t n = 0;
  for (const auto& t : tensors) {
    if (is_linear_role(t.role)) n += t.elements();
  }
  return n;
}

double Model::kv_elements(int64_t tokens) const {
  double n = 0;
  for (const auto& a : attention) {
    const int64_t t = a.window_tokens > 0 ? std::min(tokens, a.window_tokens) : tokens;
    n += 2.0 * static_cast<double>(a.kv_heads * a.head_dim) * static_cast<double>(t);
  }
  return n;
}

double Model::forward_flops_per_token(int64_t context) const {
  if (kind == ModelKind::kCnn) return cnn_flops_per_sample;
  double matmul = 0;
  for (const auto& t : tensors) {
    if (!is_linear_role(t.role) && t.role != TensorRole::kHead && t.role != TensorRole::kRouter) continue;
    double n = static_cast<double>(t.elements());
    if (t.expert && experts > 0) n = n / static_cast<double>(experts) * static_cast<double>(experts_per_token);
    matmul += n;
  }
  if (tied_embeddings && kind == ModelKind::kDecoder) matmul += static_cast<double>(vocab * hidden);
  double attn = 0;
  for (const auto& a : attention) {
    const int64_t t = a.window_tokens > 0 ? std::min(context, a.window_tokens) : context;
    attn += 4.0 * static_cast<double>(heads * head_dim) * static_cast<double>(t);
  }
  return 2.0 * matmul + attn;
}

// ---- layer-shape YAML (CNNs) -----------------------------------------------------------------

namespace {

// Bounds on layer-file numbers, in the spirit of hf_config's (docs/model.md "Input bounds"): several
// times the largest published network, finite so that no product overflows or allocates without bound.
// Channels and features: the MLP-width bound (2^20), 512x the widest published CNN layer (2048 ResNet).
constexpr int kMaxCnnChannels = 1 << 20;
// Kernel side: 20x the largest published (SLaK, 51x51).
constexpr int kMaxCnnKernel = 1024;
// Stride: no more than a kernel side.
constexpr int kMaxCnnStride = kMaxCnnKernel;
// Image and feature-map side in pixels: 17x a 4K frame's 3840.
constexpr int kMaxCnnSide = 1 << 16;
// Layers in one file: 100x ResNet-152's ~510 conv/batchnorm/pool/linear entries.
constexpr size_t kMaxCnnLayers = 65536;

}  // namespace

Result<Model> parse_layer_yaml(std::string_view yaml_text, std::string id) {
  const std::string file = "layer file of '" + id + "'";
  auto parsed = yaml::parse(file, yaml_text);  // bounds aliases and keys
  if (!parsed) return Error{parsed.error().code, parsed.error().message, "layers"};
  const YAML::Node root = *parsed;
  if (!root.IsMap() || !root["layers"] || !root["layers"].IsSequence()) {
    return invalid_data_error(file + " lacks a 'layers' list", "layers");
  }
  GPUPLAN_CHECK(
      yaml::check_keys(file, root, "", {"id", "kind", "published_parameters", "published_source", "input", "layers"}));
  const YAML::Node layers = root["layers"];
  if (layers.size() > kMaxCnnLayers) {
    return limit_error(file + " lists " + std::to_string(layers.size()) + " layers, over the limit of " +
                           std::to_string(kMaxCnnLayers) + " (100x ResNet-152)",
                       "layers");
  }
  Model m;
  m.id = std::move(id);
  GPUPLAN_TRY(kind, yaml::get_string(file, root, "", "kind", false));
  m.architecture = kind.empty() ? "cnn" : kind;
  m.kind = ModelKind::kCnn;
  // Input image elements count as the first activation kept for backward.
  if (const YAML::Node in = root["input"]; in && !in.IsNull()) {
    GPUPLAN_CHECK(yaml::check_keys(file, in, "input", {"channels", "height", "width"}));
    GPUPLAN_TRY(c, yaml::bounded_int(file, in, "input", "channels", true, 0, 1, kMaxCnnChannels));
    GPUPLAN_TRY(h, yaml::bounded_int(file, in, "input", "height", true, 0, 1, kMaxCnnSide));
    GPUPLAN_TRY(w, yaml::bounded_int(file, in, "input", "width", true, 0, 1, kMaxCnnSide));
    m.cnn_activation_elements_per_sample = static_cast<double>(c) * static_cast<double>(h) * static_cast<double>(w);
  }
  size_t index = 0;
  for (const auto& l : layers) {
    const std::string at = "layer " + std::to_string(++index);
    // Keys a layer may have; stride and padding are documentation (out_h/out_w already give the sizes).
    GPUPLAN_CHECK(yaml::check_keys(file, l, at,
                                   {"name", "type", "in_channels", "out_channels", "kernel", "stride", "padding",
                                    "out_h", "out_w", "bias", "channels", "in_features", "out_features"}));
    GPUPLAN_TRY(type, yaml::get_string(file, l, at, "type", true));
    GPUPLAN_TRY(given_name, yaml::get_string(file, l, at, "name", false));
    const std::string name = given_name.empty() ? "?" : given_name;
    const std::string entry = "layer '" + name + "'";
    GPUPLAN_TRY(bias, yaml::get_bool(file, l, entry, "bias", false, false));
    GPUPLAN_TRY(stride, yaml::bounded_int(file, l, entry, "stride", false, 1, 1, kMaxCnnStride));
    GPUPLAN_TRY(padding, yaml::bounded_int(file, l, entry, "padding", false, 0, 0, kMaxCnnKernel));
    (void)stride, (void)padding;
    double out = 0;
    if (type == "conv") {
      GPUPLAN_TRY(cin, yaml::bounded_int(file, l, entry, "in_channels", true, 0, 1, kMaxCnnChannels));
      GPUPLAN_TRY(cout, yaml::bounded_int(file, l, entry, "out_channels", true, 0, 1, kMaxCnnChannels));
      GPUPLAN_TRY(k, yaml::bounded_int(file, l, entry, "kernel", true, 0, 1, kMaxCnnKernel));
      GPUPLAN_TRY(oh, yaml::bounded_int(file, l, entry, "out_h", true, 0, 1, kMaxCnnSide));
      GPUPLAN_TRY(ow, yaml::bounded_int(file, l, entry, "out_w", true, 0, 1, kMaxCnnSide));
      const int64_t fan_in = cin * k * k;  // <= 2^40
      const double hw = static_cast<double>(oh) * static_cast<double>(ow);
      m.tensors.push_back(TensorGroup{name, TensorRole::kConv, cout, fan_in, 1, false, false});
      if (bias) m.tensors.push_back(TensorGroup{name + ".bias", TensorRole::kBias, cout, 1, 1, false, false});
      out = static_cast<double>(cout) * hw;
      m.cnn_flops_per_sample += 2.0 * static_cast<double>(cout) * static_cast<double>(fan_in) * hw;
    } else if (type == "batchnorm" || type == "maxpool" || type == "avgpool") {
      GPUPLAN_TRY(c, yaml::bounded_int(file, l, entry, "channels", true, 0, 1, kMaxCnnChannels));
      GPUPLAN_TRY(oh, yaml::bounded_int(file, l, entry, "out_h", false, 1, 1, kMaxCnnSide));
      GPUPLAN_TRY(ow, yaml::bounded_int(file, l, entry, "out_w", false, 1, 1, kMaxCnnSide));
      if (type == "batchnorm") m.tensors.push_back(TensorGroup{name, TensorRole::kNorm, c, 2, 1, false, false});
      out = static_cast<double>(c) * static_cast<double>(oh) * static_cast<double>(ow);
    } else if (type == "linear") {
      GPUPLAN_TRY(in, yaml::bounded_int(file, l, entry, "in_features", true, 0, 1, kMaxCnnChannels));
      GPUPLAN_TRY(o, yaml::bounded_int(file, l, entry, "out_features", true, 0, 1, kMaxCnnChannels));
      m.tensors.push_back(TensorGroup{name, TensorRole::kLinear, o, in, 1, false, false});
      if (bias) m.tensors.push_back(TensorGroup{name + ".bias", TensorRole::kBias, o, 1, 1, false, false});
      out = static_cast<double>(o);
      m.cnn_flops_per_sample += 2.0 * static_cast<double>(in) * static_cast<double>(o);
    } else {
      return yaml::data_error(file, l, entry, "type",
                              "unknown layer type '" + type + "'; known: conv, batchnorm, maxpool, avgpool, linear");
    }
    m.cnn_activation_elements_per_sample += out;
    m.cnn_max_layer_elements_per_sample = std::max(m.cnn_max_layer_elements_per_sample, out);
    if (cancel_requested()) return cancelled_error();
  }
  GPUPLAN_CHECK(finish_model(m));
  return m;
}

// ---- the zoo ----------------------------------------------------------------------------------

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view embedded(std::string_view path) {
  for (const auto& f : embedded_files()) {
    if (f.path == path) return f.contents;
  }
  return {};
}

// "GPZO": the zoo index image's tag (src/catalog/image.h).
constexpr uint32_t kZooImageTag = 0x4f5a5047;

std::vector<ZooEntry> load_zoo() {
  // The index the build compiled (tools/compile_data.cc ran zoo_index() below over data/); the compile
  // tool itself links an empty image and reads the YAML.
  if (!compiled::zoo_image().empty()) {
    auto index = zoo_index_from_image(compiled::zoo_image());
    if (index) return std::move(index).value();
  }
  auto index = zoo_index(embedded_files());
  return index ? std::move(index).value() : std::vector<ZooEntry>{};
}

}  // namespace

Result<std::vector<ZooEntry>> zoo_index(std::span<const EmbeddedFile> files) {
  std::vector<ZooEntry> out;
  std::string_view zoo;
  for (const auto& f : files) {
    if (f.path == "data/models/zoo.yaml") zoo = f.contents;
  }
  if (!zoo.empty()) {
    try {
      const YAML::Node root = YAML::Load(std::string(zoo));
      for (const auto& e : root["models"]) {
        ZooEntry z;
        z.id = e["id"].as<std::string>();
        z.hf_repo = e["hf_repo"] ? e["hf_repo"].as<std::string>() : "";
        z.file = "data/models/" + (e["config"] ? e["config"].as<std::string>() : z.id + ".json");
        z.published_parameters = e["published_parameters"] ? e["published_parameters"].as<int64_t>() : 0;
        z.published_source = e["published_source"] ? e["published_source"].as<std::string>() : "";
        out.push_back(std::move(z));
      }
    } catch (const YAML::Exception& e) {
      return invalid_data_error("data/models/zoo.yaml: " + std::string(e.what()), "model");
    }
  }
  // Every model file embedded under data/models/ is in the zoo, listed or not.
  for (const auto& f : files) {
    const std::string_view p = f.path;
    if (p.rfind("data/models/", 0) != 0 || p == "data/models/zoo.yaml") continue;
    const bool json = p.size() > 5 && p.substr(p.size() - 5) == ".json";
    const bool yaml = p.size() > 5 && p.substr(p.size() - 5) == ".yaml";
    if (!json && !yaml) continue;
    const std::string file(p);
    if (std::any_of(out.begin(), out.end(), [&](const ZooEntry& z) { return z.file == file; })) continue;
    ZooEntry z;
    z.id = std::string(p.substr(12, p.size() - 12 - 5));
    z.file = file;
    if (yaml) {
      try {
        const YAML::Node root = YAML::Load(std::string(f.contents));
        if (root["published_parameters"]) z.published_parameters = root["published_parameters"].as<int64_t>();
        if (root["published_source"]) z.published_source = root["published_source"].as<std::string>();
      } catch (const YAML::Exception& e) {
        return invalid_data_error(file + ": " + std::string(e.what()), "model");
      }
    }
    out.push_back(std::move(z));
  }
  return out;
}

std::string zoo_index_image(const std::vector<ZooEntry>& entries) {
  image::Writer w;
  w.u32(kZooImageTag);
  w.u32(image::kFormatVersion);
  w.count(entries.size());
  for (const auto& z : entries) {
    for (const auto* f : {&z.id, &z.hf_repo, &z.file}) w.str(*f);
    w.u64(static_cast<uint64_t>(z.published_parameters));
    w.str(z.published_source);
  }
  return w.bytes();
}

Result<std::vector<ZooEntry>> zoo_index_from_image(std::string_view bytes) {
  image::Reader r(bytes);
  if (r.u32() != kZooImageTag || r.u32() != image::kFormatVersion) return r.corrupt("zoo index (tag or version)");
  std::vector<ZooEntry> out(r.count());
  for (auto& z : out) {
    for (auto* f : {&z.id, &z.hf_repo, &z.file}) *f = r.str();
    z.published_parameters = static_cast<int64_t>(r.u64());
    z.published_source = r.str();
  }
  GPUPLAN_CHECK(r.finish("zoo index"));
  return out;
}

std::vector<ZooEntry> zoo_entries() {
  static const std::vector<ZooEntry> entries = load_zoo();
  return entries;
}

Result<const Model*> zoo_model(std::string_view id) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Model>, std::less<>> cache;
  const std::string key = lower(id);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return static_cast<const Model*>(it->second.get());
  const auto entries = zoo_entries();
  const ZooEntry* entry = nullptr;
  for (const auto& e : entries) {
    if (lower(e.id) == key) entry = &e;
  }
  if (!entry) {
    std::string best;
    size_t best_d = std::string::npos;
    for (const auto& e : entries) {
      const size_t d = edit_distance(key, e.id);
      if (d < best_d) best_d = d, best = e.id;
    }
    return not_found_error("no model '" + std::string(id) + "' in the zoo" +
                               (best.empty() ? std::string() : "; did you mean '" + best + "'?") +
                               " (or pass the path of a config.json)",
                           "model");
  }
  // The parsed model is cached for every later command: a request's deadline must not apply to it.
  const CancelScope uncancellable(nullptr);
  const std::string_view text = embedded(entry->file);
  if (text.empty())
    return invalid_data_error("zoo entry '" + entry->id + "' names a missing file " + entry->file, "model");
  Result<Model> m = invalid_data_error("", "");
  if (entry->file.size() > 5 && entry->file.substr(entry->file.size() - 5) == ".yaml") {
    m = parse_layer_yaml(text, entry->id);
  } else {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) return invalid_data_error(entry->file + " is not valid JSON", "model");
    m = parse_hf_config(j, entry->id);
  }
  if (!m) return m.error();
  auto owned = std::make_unique<Model>(std::move(m).value());
  const Model* ptr = owned.get();
  cache.emplace(key, std::move(owned));
  return ptr;
}

}  // namespace gpuplan
