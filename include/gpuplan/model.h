// A Model is an architecture reduced to tensors with shapes and attention layers with their KV
// geometry. It is read from a Hugging Face config.json (the file as published) or from a layer-shape
// YAML (ResNet-50). Parameter counts are computed from the shapes, never typed in. The memory model
// (memory.h) and the performance model read nothing else about a network.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/status.h"

namespace gpuplan {

// What a tensor is for. Formats decide per role what they quantize (formats.h); the performance model
// decides per role what runs on tensor cores.
enum class TensorRole {
  kEmbedding,          // token embedding table (vocab x hidden)
  kPositionEmbedding,  // learned absolute positions or token types
  kHead,               // output projection to the vocabulary (untied; a tied head shares kEmbedding)
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnOut,
  kMlpGate,
  kMlpUp,
  kMlpDown,
  kRouter,  // MoE gate (hidden x experts)
  kNorm,    // layer/RMS/batch norm scales and shifts
  kBias,    // biases of linear layers
  kConv,    // convolution kernels
  kLinear,  // any other dense matrix (BERT pooler, CNN classifier, OPT projections)
};

std::string_view tensor_role_name(TensorRole role);
// Matrices that weight formats quantize (attention, MLP and expert projections, other linears).
bool is_linear_role(TensorRole role);

// `count` copies of a rows x cols matrix (cols = 1 for vectors). `per_layer`: one copy per layer
// (count includes the layers); `experts`: copies that belong to MoE experts (only experts_per_token of
// them are active per token).
struct TensorGroup {
  std::string name;  // HF-style name with '*' for the layer index: "layers.*.self_attn.q_proj"
  TensorRole role = TensorRole::kLinear;
  int64_t rows = 0;  // output features
  int64_t cols = 1;  // input features
  int64_t count = 1;
  bool per_layer = false;
  bool expert = false;

  int64_t elements() const { return rows * cols * count; }
};

// KV geometry of one attention layer. window_tokens = 0 means global attention.
struct AttentionLayer {
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t window_tokens = 0;
};

enum class ModelKind { kDecoder, kEncoder, kCnn };

struct Model {
  std::string id;
  std::string architecture;  // HF model_type ("llama", "gpt_bigcode", ...) or "resnet"
  ModelKind kind = ModelKind::kDecoder;

  // Transformer shape (zero for CNNs).
  int64_t hidden = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate = 0;  // MLP inner size (per expert for MoE)
  int64_t vocab = 0;
  int64_t max_positions = 0;
  bool gated_mlp = false;  // SwiGLU/GeGLU: gate, up and down
  bool tied_embeddings = false;
  bool parallel_attn = false;       // attention and MLP read the same normed input (GPT-J, Falcon)
  bool fused_qkv = false;           // one matrix holds Q, K and V (Falcon, BLOOM, Phi-3)
  bool eager_fp32_softmax = false;  // eager attention upcasts scores to fp32 (BLOOM, StarCoder)
  // Dropout probabilities that training applies (config.json; 0 for most LLMs, 0.1 for BERT, OPT,
  // StarCoder): on the residual branches (after the attention output and MLP projections) and on the
  // attention probabilities.
  double hidden_dropout = 0;
  double attention_dropout = 0;
  int64_t experts = 0;  // MoE routed experts per layer (0 = dense)
  int64_t experts_per_token = 0;
  int64_t shared_experts = 0;

  std::vector<TensorGroup> tensors;
  std::vector<AttentionLayer> attention;  // one per layer, in order

  // CNN: per-sample figures from the layer shapes (zero for transformers).
  double cnn_activation_elements_per_sample = 0;  // every layer output kept for backward
  double cnn_max_layer_elements_per_sample = 0;   // largest single layer output (inference peak)
  double cnn_flops_per_sample = 0;                // forward, 2 x MACs

  int64_t parameters = 0;         // every tensor, computed
  int64_t active_parameters = 0;  // per token: experts_per_token of the routed experts

  // Parameters in linear (quantizable) matrices, and of those in MoE experts.
  int64_t linear_parameters() const;
  // KV-cache elements per token for a context of `tokens` (sum over layers of 2 x kv_heads x head_dim,
  // a sliding-window layer holding at most window_tokens).
  double kv_elements(int64_t tokens) const;
  // Forward FLOPs per token at position `context` (2 x active matmul parameters + 4 x attended tokens
  // x heads x head_dim per layer), as the performance model needs.
  double forward_flops_per_token(int64_t context) const;
};

// Nesting bound of a config.json: published configs nest 3 levels (rope_scaling, quantization_config);
// 64 keeps recursive JSON walks (dump, copy, compare) far from the end of a thread's stack.
inline constexpr int kMaxConfigDepth = 64;
// Whether the JSON text `text` nests arrays and objects deeper than `max_depth`, by a scan of its bytes
// (strings skipped), so that a hostile file is refused before anything recursive touches it. An
// invalid-data error naming `field` when it does.
Status check_json_depth(std::string_view text, int max_depth, const std::string& field);
// The nesting depth of arrays and objects in `j` (a scalar is 0, {} is 1), walked with an explicit
// stack; stops counting once past `limit`.
int json_depth(const nlohmann::ordered_json& j, int limit);
int json_depth(const nlohmann::json& j, int limit);

// Parses a Hugging Face config.json. `id` names the model in messages and results. An architecture
// the parser does not know, or a config missing a key it needs, is an invalid-data error naming them.
// Every number it reads is checked first (a whole number where a count, within generous bounds:
// layers <= 1024, hidden <= 131072, ...), then the shape's consistency (heads divide the hidden size
// unless head_dim is given, KV heads divide heads, windows within layers, experts per token within
// experts); parameter counts are bounded at 10^14. Nesting deeper than kMaxConfigDepth is refused.
Result<Model> parse_hf_config(const nlohmann::ordered_json& config, std::string id);
Result<Model> parse_hf_config(const nlohmann::json& config, std::string id);
// Parses a layer-shape YAML (data/models/resnet-50.yaml).
Result<Model> parse_layer_yaml(std::string_view yaml_text, std::string id);

// The built-in zoo: data/models/<id>.json or <id>.yaml embedded in the binary, listed in zoo.yaml.
struct ZooEntry {
  std::string id;
  std::string hf_repo;
  std::string file;  // "data/models/llama-2-7b.json"
  int64_t published_parameters = 0;
  std::string published_source;
};
std::vector<ZooEntry> zoo_entries();
// The zoo model with this id (case-insensitive), parsed once and cached. Unknown ids are kNotFound
// with the nearest id suggested.
Result<const Model*> zoo_model(std::string_view id);

}  // namespace gpuplan
