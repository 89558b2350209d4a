// Hugging Face config.json -> Model. One builder per family; every tensor the published checkpoint
// holds is listed with its shape, so that parameter counts come out of the shapes.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "gpuplan/model.h"

namespace gpuplan {

namespace {

using Json = nlohmann::json;

// ---- bounds on config.json numbers ------------------------------------------------------------
// Generous (several times the largest published model) but finite: a typo or a hostile file must not
// allocate without bound, divide by zero or overflow the 64-bit counts into negative answers.

// Layers: 8x the deepest published decoder (Llama-3.1-405B, 126 layers); one AttentionLayer each.
constexpr int64_t kMaxLayers = 1024;
// Hidden size: 8x Llama-3.1-405B's 16384.
constexpr int64_t kMaxHidden = int64_t{1} << 17;
// MLP inner size (per expert): ~20x Llama-3.1-405B's 53248.
constexpr int64_t kMaxIntermediate = int64_t{1} << 20;
// Vocabulary: 16x Gemma's 256000, the largest published.
constexpr int64_t kMaxVocab = int64_t{1} << 22;
// Attention heads (query or KV): 32x Llama-3.1-405B's 128.
constexpr int64_t kMaxHeads = int64_t{1} << 12;
// Head size: 16x the largest published (Gemma, 256).
constexpr int64_t kMaxHeadDim = int64_t{1} << 12;
// Routed experts per layer: 16x DeepSeek-V3's 256.
constexpr int64_t kMaxExperts = int64_t{1} << 12;
// Positions and attention windows: 2^26 = 67M tokens, 6x the longest published context (Llama-4
// Scout, 10M), and 4x the largest context a workload takes (2^24).
constexpr int64_t kMaxPositions = int64_t{1} << 26;
// MPT's MLP width over hidden: published MPTs use 4.
constexpr double kMaxExpansionRatio = 64;
// Parameters: 10^14, 50x the largest published models (~2T); keeps the bytes of weights, gradients
// and optimizer states (<= 20 B per parameter) below 2^53, where doubles still count bytes exactly.
constexpr int64_t kMaxParameters = 100'000'000'000'000;

// The integer keys the builders read, with their allowed ranges. Every one present (not null) must be
// a whole JSON number in range: "4096" (a string), 4096.5 and -1 are refused before any arithmetic.
struct IntKey {
  const char* name;
  int64_t min;
  int64_t max;
};
constexpr IntKey kIntKeys[] = {
    {"hidden_size", 1, kMaxHidden},
    {"n_embd", 1, kMaxHidden},
    {"n_embed", 1, kMaxHidden},
    {"d_model", 1, kMaxHidden},
    {"word_embed_proj_dim", 1, kMaxHidden},
    {"num_hidden_layers", 1, kMaxLayers},
    {"n_layer", 1, kMaxLayers},
    {"n_layers", 1, kMaxLayers},
    {"num_attention_heads", 1, kMaxHeads},
    {"n_head", 1, kMaxHeads},
    {"n_heads", 1, kMaxHeads},
    {"num_key_value_heads", 1, kMaxHeads},
    {"num_kv_heads", 1, kMaxHeads},
    {"n_head_kv", 1, kMaxHeads},
    {"kv_n_heads", 1, kMaxHeads},  // MPT attn_config
    {"head_dim", 1, kMaxHeadDim},
    {"vocab_size", 1, kMaxVocab},
    {"type_vocab_size", 0, kMaxVocab},
    {"intermediate_size", 1, kMaxIntermediate},
    {"moe_intermediate_size", 1, kMaxIntermediate},
    {"ffn_dim", 1, kMaxIntermediate},
    {"ffn_hidden_size", 1, kMaxIntermediate},
    {"n_inner", 1, kMaxIntermediate},
    {"shared_expert_intermediate_size", 0, kMaxIntermediate},
    {"max_position_embeddings", 1, kMaxPositions},
    {"n_positions", 1, kMaxPositions},
    {"max_seq_len", 1, kMaxPositions},
    {"sliding_window", 0, kMaxPositions},
    {"max_window_layers", 0, kMaxLayers},
    {"num_local_experts", 0, kMaxExperts},
    {"num_experts", 0, kMaxExperts},
    {"num_experts_per_tok", 0, kMaxExperts},
};

// Messages name config keys unquoted: they are keys of the file, not request keys the CLI would print
// as --options.
std::string prefix(const std::string& id) { return "config.json of '" + id + "': "; }

// Checks every key of kIntKeys present in `obj` (one level: the top, or MPT's attn_config).
Status check_numbers(const Json& obj, const std::string& id) {
  for (const IntKey& key : kIntKeys) {
    if (!obj.contains(key.name) || obj.at(key.name).is_null()) continue;
    const Json& v = obj.at(key.name);
    const std::string range = "a whole number from " + std::to_string(key.min) + " to " + std::to_string(key.max);
    bool ok = false;
    if (v.is_number_unsigned()) {
      ok = v.get<uint64_t>() <= static_cast<uint64_t>(key.max) && static_cast<int64_t>(v.get<uint64_t>()) >= key.min;
    } else if (v.is_number_integer()) {
      ok = v.get<int64_t>() >= key.min && v.get<int64_t>() <= key.max;
    } else if (v.is_number_float()) {
      const double d = v.get<double>();
      ok = std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(key.min) &&
           d <= static_cast<double>(key.max);
    }
    if (!ok) {
      return invalid_data_error(prefix(id) + key.name + " is " + v.dump() + "; it must be " + range +
                                    " (gpuplan bounds each dimension at several times the largest published model)",
                                key.name);
    }
  }
  return Status::Ok();
}

// Reads integer keys, collecting the names of the ones that are missing so that one error names all.
class Keys {
 public:
  explicit Keys(const Json& j) : j_(j) {}
  // The first of `names` present with a number; records the first name as missing otherwise.
  int64_t need(std::initializer_list<const char*> names) {
    for (const char* n : names) {
      if (j_.contains(n) && j_.at(n).is_number()) return j_.at(n).get<int64_t>();
    }
    missing_.emplace_back(*names.begin());
    return 0;
  }
  int64_t get(std::initializer_list<const char*> names, int64_t fallback) const {
    for (const char* n : names) {
      if (j_.contains(n) && j_.at(n).is_number()) return j_.at(n).get<int64_t>();
    }
    return fallback;
  }
  bool flag(const char* name, bool fallback) const {
    if (j_.contains(name) && j_.at(name).is_boolean()) return j_.at(name).get<bool>();
    return fallback;
  }
  std::string str(const char* name) const {
    return j_.contains(name) && j_.at(name).is_string() ? j_.at(name).get<std::string>() : std::string();
  }
  Status check(const std::string& id, const std::string& type) const {
    if (missing_.empty()) return Status::Ok();
    std::string list;
    for (const auto& m : missing_) list += (list.empty() ? "" : ", ") + m;
    return invalid_data_error("config.json of '" + id + "' (model_type '" + type + "') lacks " + list, list);
  }

 private:
  const Json& j_;
  std::vector<std::string> missing_;
};

struct Builder {
  Model& m;
  void add(std::string name, TensorRole role, int64_t rows, int64_t cols, bool per_layer = true, int64_t copies = 1,
           bool expert = false) {
    if (rows <= 0 || cols <= 0 || copies <= 0) return;
    const int64_t count = (per_layer ? m.layers : 1) * copies;
    m.tensors.push_back(TensorGroup{std::move(name), role, rows, cols, count, per_layer, expert});
  }
  void linear(const std::string& name, TensorRole role, int64_t out, int64_t in, bool bias, int64_t copies = 1,
              bool expert = false) {
    add(name, role, out, in, true, copies, expert);
    if (bias) add(name + ".bias", TensorRole::kBias, out, 1, true, copies, expert);
  }
  // LayerNorm (weight + bias) or RMSNorm (weight).
  void norm(const std::string& name, int64_t width, bool with_bias, bool per_layer = true) {
    add(name, TensorRole::kNorm, width, with_bias ? 2 : 1, per_layer);
  }
  void embeddings(const std::string& name) { add(name, TensorRole::kEmbedding, m.vocab, m.hidden, false); }
  void head(const std::string& name, bool bias = false) {
    if (m.tied_embeddings) return;
    add(name, TensorRole::kHead, m.vocab, m.hidden, false);
    if (bias) add(name + ".bias", TensorRole::kBias, m.vocab, 1, false);
  }
  // Q, K and V projections (heads and kv_heads head vectors) and the output projection of every layer.
  void attention(const std::string& q, const std::string& k, const std::string& v, const std::string& out,
                 bool qkv_bias, bool out_bias) {
    const int64_t q_rows = m.heads * m.head_dim, kv_rows = m.kv_heads * m.head_dim;
    linear(q, TensorRole::kAttnQ, q_rows, m.hidden, qkv_bias);
    linear(k, TensorRole::kAttnK, kv_rows, m.hidden, qkv_bias);
    linear(v, TensorRole::kAttnV, kv_rows, m.hidden, qkv_bias);
    linear(out, TensorRole::kAttnOut, m.hidden, q_rows, out_bias);
  }
  // The up and down projections of an MLP (`copies` per layer, e.g. MoE experts): up to
  // m.intermediate, down to m.hidden. A gated MLP adds its gate with linear().
  void mlp(const std::string& up, const std::string& down, bool bias, int64_t copies = 1, bool expert = false) {
    linear(up, TensorRole::kMlpUp, m.intermediate, m.hidden, bias, copies, expert);
    linear(down, TensorRole::kMlpDown, m.hidden, m.intermediate, bias, copies, expert);
  }
  void uniform_attention(int64_t window) {
    m.attention.assign(static_cast<size_t>(m.layers), AttentionLayer{m.kv_heads, m.head_dim, window});
  }
};

// The head size hidden / heads, when the heads divide the hidden size (the families without head_dim).
// Runs after check_numbers and Keys::check, so heads >= 1.
Result<int64_t> split_heads(const Model& m, const char* heads_key) {
  if (m.heads < 1 || m.hidden % m.heads != 0) {
    return invalid_data_error(prefix(m.id) + heads_key + " " + std::to_string(m.heads) +
                                  " does not divide the hidden size " + std::to_string(m.hidden) +
                                  "; heads must divide it (or give head_dim, for the families that read it)",
                              heads_key);
  }
  return m.hidden / m.heads;
}

// Parameter counts from the shapes, in checked 64-bit arithmetic bounded by kMaxParameters.
Status finish(Model& m) {
  int64_t total = 0, expert_params = 0;
  for (const auto& t : m.tensors) {
    int64_t n = 0;
    const bool overflow = __builtin_mul_overflow(t.rows, t.cols, &n) || __builtin_mul_overflow(n, t.count, &n) ||
                          __builtin_add_overflow(total, n, &total) || total > kMaxParameters;
    if (overflow) {
      return invalid_data_error(prefix(m.id) + "the shapes give more than " + std::to_string(kMaxParameters) +
                                    " parameters (at tensor " + t.name +
                                    "), over gpuplan's bound of 50x the largest published model; check the sizes",
                                "config");
    }
    if (t.expert) expert_params += n;
  }
  m.parameters = total;
  m.active_parameters = m.parameters;
  if (m.experts > 0 && m.experts_per_token > 0) {
    m.active_parameters = m.parameters - expert_params + expert_params / m.experts * m.experts_per_token;
  }
  return Status::Ok();
}

// The context a RoPE model supports, as vLLM derives max_model_len (vllm/config.py
// _get_and_verify_max_len): rope_scaling of type linear, dynamic or yarn multiplies the positions by its
// factor (yarn: original_max_position_embeddings x factor); llama3, longrope/su and mrope configs already
// state the extended length in max_position_embeddings.
int64_t rope_scaled_positions(const Json& j, int64_t max_positions) {
  if (max_positions <= 0 || !j.contains("rope_scaling") || !j["rope_scaling"].is_object()) return max_positions;
  const Json& r = j["rope_scaling"];
  std::string type;
  if (r.contains("rope_type") && r["rope_type"].is_string()) type = r["rope_type"].get<std::string>();
  if (type.empty() && r.contains("type") && r["type"].is_string()) type = r["type"].get<std::string>();
  if (type != "linear" && type != "dynamic" && type != "yarn") return max_positions;
  if (!r.contains("factor") || !r["factor"].is_number()) return max_positions;
  const double factor = r["factor"].get<double>();
  // A factor outside [1, 1024] is not a context extension anyone ships: keep the stated positions.
  constexpr double kMaxRopeFactor = 1024;
  if (!(factor >= 1 && factor <= kMaxRopeFactor)) return max_positions;
  int64_t base = max_positions;
  if (type == "yarn" && r.contains("original_max_position_embeddings") &&
      r["original_max_position_embeddings"].is_number_integer()) {
    const int64_t original = r["original_max_position_embeddings"].get<int64_t>();
    if (original > 0 && original <= max_positions) base = original;
  }
  return static_cast<int64_t>(static_cast<double>(base) * factor);
}

// Llama and its descendants: llama, mistral, mixtral, qwen2, qwen2_moe, gemma, gemma2, phi3.
Result<Model> llama_like(const Json& j, Model m, const std::string& type) {
  Keys k(j);
  m.hidden = k.need({"hidden_size"});
  m.layers = k.need({"num_hidden_layers"});
  m.heads = k.need({"num_attention_heads"});
  m.vocab = k.need({"vocab_size"});
  const bool qwen_moe = type == "qwen2_moe";
  m.intermediate = qwen_moe ? k.need({"moe_intermediate_size"}) : k.need({"intermediate_size"});
  if (auto s = k.check(m.id, type); !s) return s.error();
  m.kv_heads = k.get({"num_key_value_heads"}, m.heads);
  m.head_dim = k.get({"head_dim"}, 0);
  if (m.head_dim == 0) {
    GPUPLAN_TRY(head_dim, split_heads(m, "num_attention_heads"));
    m.head_dim = head_dim;
  }
  m.max_positions = rope_scaled_positions(j, k.get({"max_position_embeddings"}, 0));
  m.gated_mlp = true;
  const bool gemma = type == "gemma" || type == "gemma2";
  // transformers' defaults when the key is absent: Gemma ties, the others do not.
  m.tied_embeddings = k.flag("tie_word_embeddings", gemma);
  m.fused_qkv = type == "phi3";
  const bool qkv_bias = type == "qwen2" || qwen_moe || k.flag("attention_bias", false);
  const bool o_bias = k.flag("attention_bias", false);
  const bool mlp_bias = k.flag("mlp_bias", false);
  Builder b{m};
  b.embeddings("model.embed_tokens");
  b.norm("layers.*.input_layernorm", m.hidden, false);
  b.attention("layers.*.self_attn.q_proj", "layers.*.self_attn.k_proj", "layers.*.self_attn.v_proj",
              "layers.*.self_attn.o_proj", qkv_bias, o_bias);
  b.norm("layers.*.post_attention_layernorm", m.hidden, false);
  if (type == "gemma2") {
    b.norm("layers.*.pre_feedforward_layernorm", m.hidden, false);
    b.norm("layers.*.post_feedforward_layernorm", m.hidden, false);
  }
  if (type == "mixtral") {
    m.experts = k.get({"num_local_experts"}, 0);
    m.experts_per_token = k.get({"num_experts_per_tok"}, 0);
    if (m.experts <= 0 || m.experts_per_token <= 0) {
      return invalid_data_error("config.json of '" + m.id + "' (mixtral) lacks num_local_experts, num_experts_per_tok",
                                "num_local_experts");
    }
    b.add("layers.*.block_sparse_moe.gate", TensorRole::kRouter, m.experts, m.hidden);
    b.linear("layers.*.block_sparse_moe.experts.*.w1", TensorRole::kMlpGate, m.intermediate, m.hidden, false, m.experts,
             true);
    b.mlp("layers.*.block_sparse_moe.experts.*.w3", "layers.*.block_sparse_moe.experts.*.w2", false, m.experts, true);
  } else if (qwen_moe) {
    m.experts = k.get({"num_experts"}, 0);
    m.experts_per_token = k.get({"num_experts_per_tok"}, 0);
    const int64_t shared = k.get({"shared_expert_intermediate_size"}, 0);
    m.shared_experts = shared > 0 ? 1 : 0;
    b.add("layers.*.mlp.gate", TensorRole::kRouter, m.experts, m.hidden);
    b.linear("layers.*.mlp.experts.*.gate_proj", TensorRole::kMlpGate, m.intermediate, m.hidden, false, m.experts,
             true);
    b.linear("layers.*.mlp.experts.*.up_proj", TensorRole::kMlpUp, m.intermediate, m.hidden, false, m.experts, true);
    b.linear("layers.*.mlp.experts.*.down_proj", TensorRole::kMlpDown, m.hidden, m.intermediate, false, m.experts,
             true);
    b.linear("layers.*.mlp.shared_expert.gate_proj", TensorRole::kMlpGate, shared, m.hidden, false);
    b.linear("layers.*.mlp.shared_expert.up_proj", TensorRole::kMlpUp, shared, m.hidden, false);
    b.linear("layers.*.mlp.shared_expert.down_proj", TensorRole::kMlpDown, m.hidden, shared, false);
    b.add("layers.*.mlp.shared_expert_gate", TensorRole::kRouter, 1, m.hidden);
  } else {
    b.linear("layers.*.mlp.gate_proj", TensorRole::kMlpGate, m.intermediate, m.hidden, mlp_bias);
    b.mlp("layers.*.mlp.up_proj", "layers.*.mlp.down_proj", mlp_bias);
  }
  b.norm("model.norm", m.hidden, false, false);
  b.head("lm_head");

  // Sliding windows. Mistral/Phi-3: every layer when sliding_window is set. Qwen2: only with
  // use_sliding_window, for layers from max_window_layers on. Gemma-2: even layers local, odd global
  // (transformers Gemma2DecoderLayer: is_sliding = not bool(layer_idx % 2)).
  const int64_t window = k.get({"sliding_window"}, 0);
  b.uniform_attention(0);
  if (window > 0) {
    if (type == "gemma2") {
      for (size_t i = 0; i < m.attention.size(); i += 2) m.attention[i].window_tokens = window;
    } else if (type == "qwen2" || qwen_moe) {
      if (k.flag("use_sliding_window", false)) {
        const int64_t from = k.get({"max_window_layers"}, 0);
        if (from < 0 || from > m.layers) {
          return invalid_data_error(prefix(m.id) + "max_window_layers " + std::to_string(from) +
                                        " is outside [0, num_hidden_layers = " + std::to_string(m.layers) +
                                        "]: it is the first layer with a sliding window",
                                    "max_window_layers");
        }
        for (int64_t i = from; i < m.layers; ++i) m.attention[static_cast<size_t>(i)].window_tokens = window;
      }
    } else if (type != "llama" && type != "gemma") {
      for (auto& a : m.attention) a.window_tokens = window;
    }
  }
  return m;
}

Result<Model> falcon(const Json& j, Model m, const std::string& type) {
  Keys k(j);
  m.hidden = k.need({"hidden_size", "n_embed"});
  m.layers = k.need({"num_hidden_layers", "n_layer"});
  m.heads = k.need({"num_attention_heads", "n_head"});
  m.vocab = k.need({"vocab_size"});
  if (auto s = k.check(m.id, type); !s) return s.error();
  {
    GPUPLAN_TRY(head_dim, split_heads(m, "num_attention_heads"));
    m.head_dim = head_dim;
  }
  // Old RefinedWeb configs: "RefinedWeb" (40B) is the new decoder architecture with n_head_kv groups,
  // "RefinedWebModel" (7B) the multi-query one.
  const bool new_arch = k.flag("new_decoder_architecture", type == "RefinedWeb");
  const bool multi_query = k.flag("multi_query", true);
  if (new_arch) {
    m.kv_heads = k.get({"num_kv_heads", "n_head_kv"}, m.heads);
  } else {
    m.kv_heads = multi_query ? 1 : m.heads;
  }
  m.parallel_attn = new_arch || k.flag("parallel_attn", true);
  m.intermediate = k.get({"ffn_hidden_size"}, 4 * m.hidden);
  m.tied_embeddings = k.flag("tie_word_embeddings", true);
  m.fused_qkv = true;
  m.max_positions = k.get({"max_position_embeddings"}, 2048);
  const bool bias = k.flag("bias", false);
  Builder b{m};
  b.embeddings("transformer.word_embeddings");
  if (new_arch) {
    b.norm("h.*.ln_attn", m.hidden, true);
    b.norm("h.*.ln_mlp", m.hidden, true);
  } else {
    b.norm("h.*.input_layernorm", m.hidden, true);
    if (!m.parallel_attn) b.norm("h.*.post_attention_layernorm", m.hidden, true);
  }
  // The fused query_key_value holds heads + 2 x kv_heads head vectors.
  b.attention("h.*.self_attention.query_key_value.q", "h.*.self_attention.query_key_value.k",
              "h.*.self_attention.query_key_value.v", "h.*.self_attention.dense", bias, bias);
  b.mlp("h.*.mlp.dense_h_to_4h", "h.*.mlp.dense_4h_to_h", bias);
  b.norm("transformer.ln_f", m.hidden, true, false);
  b.head("lm_head");
  b.uniform_attention(0);
  return m;
}

Result<Model> bloom(const Json& j, Model m, const std::string& type) {
  Keys k(j);
  m.hidden = k.need({"n_embed", "hidden_size"});
  m.layers = k.need({"n_layer", "num_hidden_layers"});
  m.heads = k.need({"num_attention_heads", "n_head"});
  m.vocab = k.need({"vocab_size"});
  if (auto s = k.check(m.id, type); !s) return s.error();
  m.kv_heads = m.heads;
  {
    GPUPLAN_TRY(head_dim, split_heads(m, "num_attention_heads"));
    m.head_dim = head_dim;
  }
  m.intermediate = 4 * m.hidden;
  m.tied_embeddings = k.flag("tie_word_embeddings", true);
  m.fused_qkv = true;
  m.eager_fp32_softmax = true;
  Builder b{m};
  b.embeddings("transformer.word_embeddings");
  b.norm("transformer.word_embeddings_layernorm", m.hidden, true, false);
  b.norm("h.*.input_layernorm", m.hidden, true);
  b.attention("h.*.self_attention.query_key_value.q", "h.*.self_attention.query_key_value.k",
              "h.*.self_attention.query_key_value.v", "h.*.self_attention.dense", true, true);
  b.norm("h.*.post_attention_layernorm", m.hidden, true);
  b.mlp("h.*.mlp.dense_h_to_4h", "h.*.mlp.dense_4h_to_h", true);
  b.norm("transformer.ln_f", m.hidden, true, false);
  b.head("lm_head");
  b.uniform_attention(0);
  return m;
}

// gpt_bigcode (StarCoder, SantaCoder), gpt2 and gptj share the GPT-2 naming.
Result<Model> gpt_family(const Json& j, Model m, const std::string& type) {
  Keys k(j);
  m.hidden = k.need({"n_embd", "hidden_size"});
  m.layers = k.need({"n_layer", "num_hidden_layers"});
  m.heads = k.need({"n_head", "num_attention_heads"});
  m.vocab = k.need({"vocab_size"});
  if (auto s = k.check(m.id, type); !s) return s.error();
  {
    GPUPLAN_TRY(head_dim, split_heads(m, "n_head"));
    m.head_dim = head_dim;
  }
  m.intermediate = k.get({"n_inner"}, 4 * m.hidden);
  m.max_positions = k.get({"n_positions", "max_position_embeddings"}, 0);
  Builder b{m};
  b.embeddings("transformer.wte");
  if (type == "gptj") {
    m.kv_heads = m.heads;
    m.parallel_attn = true;
    m.tied_embeddings = k.flag("tie_word_embeddings", false);
    b.norm("h.*.ln_1", m.hidden, true);
    b.attention("h.*.attn.q_proj", "h.*.attn.k_proj", "h.*.attn.v_proj", "h.*.attn.out_proj", false, false);
    b.mlp("h.*.mlp.fc_in", "h.*.mlp.fc_out", true);
    b.norm("transformer.ln_f", m.hidden, true, false);
    b.head("lm_head", true);
  } else {
    // gpt_bigcode / gpt2: learned positions, fused c_attn, tied head.
    m.kv_heads = type == "gpt_bigcode" && k.flag("multi_query", true) ? 1 : m.heads;
    m.tied_embeddings = k.flag("tie_word_embeddings", true);
    m.fused_qkv = true;
    m.eager_fp32_softmax = k.flag("attention_softmax_in_fp32", false);
    b.add("transformer.wpe", TensorRole::kPositionEmbedding, m.max_positions, m.hidden, false);
    b.norm("h.*.ln_1", m.hidden, true);
    b.attention("h.*.attn.c_attn.q", "h.*.attn.c_attn.k", "h.*.attn.c_attn.v", "h.*.attn.c_proj", true, true);
    b.norm("h.*.ln_2", m.hidden, true);
    b.mlp("h.*.mlp.c_fc", "h.*.mlp.c_proj", true);
    b.norm("transformer.ln_f", m.hidden, true, false);
    b.head("lm_head");
  }
  b.uniform_attention(0);
  return m;
}

Result<Model> opt(const Json& j, Model m, const std::string& type) {
  Keys k(j);
  m.hidden = k.need({"hidden_size"});
  m.layers = k.need({"num_hidden_layers"});
  m.heads = k.need({"num_attention_heads"});
  m.intermediate = k.need({"ffn_dim"});
  m.vocab = k.need({"vocab_size"});
  if (auto s = k.check(m.id, type); !s) return s.error();
  m.kv_heads = m.heads;
  {
    GPUPLAN_TRY(head_dim, split_heads(m, "num_attention_heads"));
    m.head_dim = head_dim;
  }
  m.max_positions = k.get({"max_position_embeddings"}, 2048);
  m.tied_embeddings = k.flag("tie_word_embeddings", true);
  const bool bias = k.flag("enable_bias", true);
  const int64_t proj = k.get({"word_embed_proj_dim"}, m.hidden);
  Builder b{m};
  // The embedding table is vocab x word_embed_proj_dim; OPT offsets learned positions by 2.
  b.add("model.decoder.embed_tokens", TensorRole::kEmbedding, m.vocab, proj, false);
  b.add("model.decoder.embed_positions", TensorRole::kPositionEmbedding, m.max_positions + 2, m.hidden, false);
  if (proj != m.hidden) {
    b.add("model.decoder.project_in", TensorRole::kLinear, m.hidden, proj, false);
    b.add("model.decoder.project_out", TensorRole::kLinear, proj, m.hidden, false);
  }
  b.attention("layers.*.self_attn.q_proj", "layers.*.self_attn.k_proj", "layers.*.self_attn.v_proj",
              "layers.*.self_attn.out_proj", bias, bias);
  b.norm("layers.*.self_attn_layer_norm", m.hidden, true);
  b.mlp("layers.*.fc1", "layers.*.fc2", bias);
  b.norm("layers.*.final_layer_norm", m.hidden, true);
  if (k.flag("do_layer_norm_before", true) && !k.flag("_remove_final_layer_norm", false)) {
    b.norm("model.decoder.final_layer_norm", m.hidden, true, false);
  }
  if (!m.tied_embeddings) b.add("lm_head", TensorRole::kHead, m.vocab, proj, false);
  b.uniform_attention(0);
  return m;
}

// MPT (MosaicML): fused Wqkv, optional GQA via attn_config.kv_n_heads, ALiBi (no position table),
// LayerNorms without bias when no_bias, 4x (expansion_ratio) plain MLP, tied head.
Result<Model> mpt(const Json& j, Model m, const std::string& type) {
  Keys k(j);
  m.hidden = k.need({"d_model"});
  m.layers = k.need({"n_layers"});
  m.heads = k.need({"n_heads"});
  m.vocab = k.need({"vocab_size"});
  if (auto s = k.check(m.id, type); !s) return s.error();
  {
    GPUPLAN_TRY(head_dim, split_heads(m, "n_heads"));
    m.head_dim = head_dim;
  }
  m.kv_heads = m.heads;
  if (j.contains("attn_config") && j["attn_config"].is_object()) {
    const Json& a = j["attn_config"];
    if (a.contains("kv_n_heads") && a["kv_n_heads"].is_number())
      m.kv_heads = a["kv_n_heads"].get<int64_t>();
    else if (a.contains("attn_type") && a["attn_type"].is_string() &&  // value() throws on a non-string
             a["attn_type"].get<std::string>() == "multiquery_attention")
      m.kv_heads = 1;
  }
  double ratio = 4.0;
  if (j.contains("expansion_ratio") && !j["expansion_ratio"].is_null()) {
    const Json& r = j["expansion_ratio"];
    ratio = r.is_number() ? r.get<double>() : -1.0;
    if (!std::isfinite(ratio) || ratio <= 0 || ratio > kMaxExpansionRatio ||
        ratio * static_cast<double>(m.hidden) < 1) {
      return invalid_data_error(prefix(m.id) + "expansion_ratio is " + r.dump() +
                                    "; it must be a number above 0 and at most " +
                                    std::to_string(static_cast<int>(kMaxExpansionRatio)) +
                                    " (the MLP width over d_model; published MPTs use 4)",
                                "expansion_ratio");
    }
  }
  m.intermediate = static_cast<int64_t>(ratio * static_cast<double>(m.hidden));
  m.max_positions = k.get({"max_seq_len"}, 2048);
  m.tied_embeddings = true;
  m.fused_qkv = true;
  const bool bias = !k.flag("no_bias", true);
  Builder b{m};
  b.embeddings("transformer.wte");
  b.norm("blocks.*.norm_1", m.hidden, bias);
  b.attention("blocks.*.attn.Wqkv.q", "blocks.*.attn.Wqkv.k", "blocks.*.attn.Wqkv.v", "blocks.*.attn.out_proj", bias,
              bias);
  b.norm("blocks.*.norm_2", m.hidden, bias);
  b.mlp("blocks.*.ffn.up_proj", "blocks.*.ffn.down_proj", bias);
  b.norm("transformer.norm_f", m.hidden, bias, false);
  b.uniform_attention(0);
  return m;
}

Result<Model> bert(const Json& j, Model m, const std::string& type, const std::string& arch_class) {
  Keys k(j);
  m.hidden = k.need({"hidden_size"});
  m.layers = k.need({"num_hidden_layers"});
  m.heads = k.need({"num_attention_heads"});
  m.intermediate = k.need({"intermediate_size"});
  m.vocab = k.need({"vocab_size"});
  if (auto s = k.check(m.id, type); !s) return s.error();
  m.kind = ModelKind::kEncoder;
  m.kv_heads = m.heads;
  {
    GPUPLAN_TRY(head_dim, split_heads(m, "num_attention_heads"));
    m.head_dim = head_dim;
  }
  m.max_positions = k.get({"max_position_embeddings"}, 512);
  m.tied_embeddings = true;
  Builder b{m};
  b.embeddings("bert.embeddings.word_embeddings");
  b.add("bert.embeddings.position_embeddings", TensorRole::kPositionEmbedding, m.max_positions, m.hidden, false);
  b.add("bert.embeddings.token_type_embeddings", TensorRole::kPositionEmbedding, k.get({"type_vocab_size"}, 2),
        m.hidden, false);
  b.norm("bert.embeddings.LayerNorm", m.hidden, true, false);
  b.attention("layer.*.attention.self.query", "layer.*.attention.self.key", "layer.*.attention.self.value",
              "layer.*.attention.output.dense", true, true);
  b.norm("layer.*.attention.output.LayerNorm", m.hidden, true);
  b.mlp("layer.*.intermediate.dense", "layer.*.output.dense", true);
  b.norm("layer.*.output.LayerNorm", m.hidden, true);
  // Heads per transformers class: BertModel has the pooler; the MLM head (transform + tied decoder +
  // bias) belongs to *ForMaskedLM and *ForPreTraining; NSP to *ForPreTraining.
  const bool mlm =
      arch_class.find("MaskedLM") != std::string::npos || arch_class.find("PreTraining") != std::string::npos;
  const bool pooler = arch_class.empty() || arch_class == "BertModel" ||
                      arch_class.find("PreTraining") != std::string::npos ||
                      arch_class.find("Classification") != std::string::npos;
  if (pooler) {
    b.add("bert.pooler.dense", TensorRole::kLinear, m.hidden, m.hidden, false);
    b.add("bert.pooler.dense.bias", TensorRole::kBias, m.hidden, 1, false);
  }
  if (mlm) {
    b.add("cls.predictions.transform.dense", TensorRole::kLinear, m.hidden, m.hidden, false);
    b.add("cls.predictions.transform.dense.bias", TensorRole::kBias, m.hidden, 1, false);
    b.norm("cls.predictions.transform.LayerNorm", m.hidden, true, false);
    b.add("cls.predictions.bias", TensorRole::kBias, m.vocab, 1, false);
  }
  if (arch_class.find("PreTraining") != std::string::npos) {
    b.add("cls.seq_relationship", TensorRole::kLinear, 2, m.hidden, false);
    b.add("cls.seq_relationship.bias", TensorRole::kBias, 2, 1, false);
  }
  b.uniform_attention(0);
  return m;
}

// The deepest nesting of arrays and objects in `j`, walked with an explicit stack (a recursive walk is what
// a hostile config would overflow). Stops counting past `limit`.
template <typename J>
int json_depth_of(const J& j, int limit) {
  std::vector<std::pair<const J*, int>> stack{{&j, 1}};
  int deepest = 0;
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    if (!node->is_structured()) continue;
    deepest = std::max(deepest, depth);
    if (deepest > limit) return deepest;
    for (const auto& child : *node) stack.emplace_back(&child, depth + 1);
  }
  return deepest;
}

template <typename J>
Result<Model> parse_any(const J& config, std::string id) {
  if (!config.is_object()) return invalid_data_error("config.json of '" + id + "' is not a JSON object", "config");
  if (json_depth_of(config, kMaxConfigDepth) > kMaxConfigDepth) {
    return invalid_data_error(prefix(id) + "nests arrays and objects deeper than " + std::to_string(kMaxConfigDepth) +
                                  " levels (published configs nest 3)",
                              "config");
  }
  // dump() would throw on a string that is not UTF-8 (a YAML request can bring one): replace it.
  const Json j = Json::parse(config.dump(-1, ' ', false, J::error_handler_t::replace));
  GPUPLAN_CHECK(check_numbers(j, id));
  if (j.contains("attn_config") && j["attn_config"].is_object()) GPUPLAN_CHECK(check_numbers(j["attn_config"], id));
  Model m;
  m.id = std::move(id);
  std::string type = j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
  std::string arch_class;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string()) {
    arch_class = j["architectures"][0].get<std::string>();
  }
  if (type.empty()) {
    return invalid_data_error(
        "config.json of '" + m.id +
            "' lacks model_type; gpuplan reads model_type to choose "
            "the architecture (llama, mistral, mixtral, qwen2, gemma2, phi3, falcon, gptj, bloom, "
            "gpt_bigcode, opt, bert)",
        "model_type");
  }
  m.architecture = type;
  Result<Model> r = invalid_data_error("", "");
  if (type == "llama" || type == "mistral" || type == "mixtral" || type == "qwen2" || type == "qwen2_moe" ||
      type == "gemma" || type == "gemma2" || type == "phi3") {
    r = llama_like(j, std::move(m), type);
  } else if (type == "falcon" || type == "RefinedWeb" || type == "RefinedWebModel") {
    r = falcon(j, std::move(m), type);
  } else if (type == "bloom") {
    r = bloom(j, std::move(m), type);
  } else if (type == "gpt_bigcode" || type == "gptj" || type == "gpt2") {
    r = gpt_family(j, std::move(m), type);
  } else if (type == "opt") {
    r = opt(j, std::move(m), type);
  } else if (type == "mpt") {
    r = mpt(j, std::move(m), type);
  } else if (type == "bert") {
    r = bert(j, std::move(m), type, arch_class);
  } else {
    return invalid_data_error(
        "config.json of '" + m.id + "' has model_type '" + type +
            "', an architecture gpuplan does not know; known: llama, mistral, mixtral, qwen2, "
            "qwen2_moe, gemma, gemma2, phi3, falcon, gptj, gpt2, bloom, gpt_bigcode, opt, mpt, bert",
        "model_type");
  }
  if (!r) return r;
  Model out = std::move(r).value();
  // Dropout probabilities under each family's key names (BERT, OPT, GPT-2/J, StarCoder, MPT, Falcon,
  // BLOOM, Phi-3, Llama-likes); absent means none.
  auto probability = [](const Json& obj, std::initializer_list<const char*> names) {
    for (const char* n : names) {
      if (obj.contains(n) && obj.at(n).is_number()) return std::clamp(obj.at(n).get<double>(), 0.0, 1.0);
    }
    return 0.0;
  };
  out.hidden_dropout = probability(j, {"hidden_dropout_prob", "hidden_dropout", "resid_pdrop", "dropout"});
  out.attention_dropout = probability(j, {"attention_probs_dropout_prob", "attention_dropout", "attn_pdrop"});
  if (j.contains("attn_config") && j["attn_config"].is_object()) {  // MPT
    out.attention_dropout = std::max(out.attention_dropout, probability(j["attn_config"], {"attn_pdrop"}));
  }
  if (out.heads <= 0 || out.head_dim <= 0 || out.layers <= 0) {
    return invalid_data_error("config.json of '" + out.id + "' gives zero heads, head size or layers", "config");
  }
  // Consistency of the shape, each family's values read: KV heads are groups of query heads (GQA/MQA),
  // a token picks its experts among the experts, and the MLP has a width.
  if (out.kv_heads < 1 || out.kv_heads > out.heads || out.heads % out.kv_heads != 0) {
    return invalid_data_error(prefix(out.id) + "num_key_value_heads " + std::to_string(out.kv_heads) +
                                  " must divide the " + std::to_string(out.heads) + " attention heads (1 to " +
                                  std::to_string(out.heads) + ")",
                              "num_key_value_heads");
  }
  if (out.experts > 0 && (out.experts_per_token < 1 || out.experts_per_token > out.experts)) {
    return invalid_data_error(prefix(out.id) + "num_experts_per_tok " + std::to_string(out.experts_per_token) +
                                  " must be from 1 to the " + std::to_string(out.experts) + " experts",
                              "num_experts_per_tok");
  }
  if (out.intermediate < 1 || out.intermediate > kMaxIntermediate) {
    return invalid_data_error(prefix(out.id) + "the MLP width " + std::to_string(out.intermediate) +
                                  " must be from 1 to " + std::to_string(kMaxIntermediate),
                              "intermediate_size");
  }
  GPUPLAN_CHECK(finish(out));
  return out;
}

}  // namespace

Result<Model> parse_hf_config(const nlohmann::ordered_json& config, std::string id) {
  return parse_any(config, std::move(id));
}
Result<Model> parse_hf_config(const nlohmann::json& config, std::string id) { return parse_any(config, std::move(id)); }

Status finish_model(Model& m) { return finish(m); }

int json_depth(const nlohmann::ordered_json& j, int limit) { return json_depth_of(j, limit); }
int json_depth(const nlohmann::json& j, int limit) { return json_depth_of(j, limit); }

Status check_json_depth(std::string_view text, int max_depth, const std::string& field) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return invalid_data_error("'" + field + "' nests arrays and objects deeper than " + std::to_string(max_depth) +
                                      " levels (published configs nest 3); refused before parsing",
                                  field);
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return Status::Ok();
}

}  // namespace gpuplan
