// Weight and KV-cache formats: what each costs in bits per weight, counting scales, zeros and block
// headers, and what each format's tooling keeps unquantized (embeddings, output head, norms, biases).
// Every figure is a named constant in src/fit/formats.cc with its source.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/model.h"
#include "gpuplan/status.h"

namespace gpuplan {

enum class WeightFormat {
  kFp32,
  kBf16,
  kFp16,
  kFp8,       // fp8 e4m3 linear layers, per-channel scales; embeddings and head bf16 (vLLM / llm-compressor)
  kInt8,      // weight-only int8, per-row scales (DeepSpeed-Inference, TensorRT-LLM int8 weight-only)
  kLlmInt8,   // bitsandbytes LLM.int8(): int8 + fp32 row scale; head kept fp16
  kW8A8,      // int8 weights and int8 activations (SmoothQuant W8A8): per-channel weight, per-token input scales
  kInt4Gptq,  // GPTQ 4-bit, fp16 scale + packed 4-bit zero per group, int32 g_idx per input row
  kInt4Awq,   // AWQ 4-bit, fp16 scale + packed 4-bit zero per group
  kNf4,       // bitsandbytes NF4, fp32 absmax per 64 weights
  kNf4Dq,     // NF4 with double quantization (8-bit absmax, fp32 second-level scale per 256 blocks)
  kFp4,       // bitsandbytes FP4 (same layout as NF4)
  kFp4Dq,
  kQ8_0,  // GGUF block types, as llama.cpp's quantize assigns them per tensor
  kQ6_K,
  kQ5_K_M,
  kQ4_K_M,
  kQ4_0,
};

enum class FormatFamily { kFloat, kWeightOnlyInt, kGptq, kAwq, kBitsAndBytes, kGguf };

struct WeightFormatInfo {
  WeightFormat format;
  FormatFamily family;           // (beside format: two 4-byte enums share one 8-byte slot)
  std::string_view name;         // canonical CLI name: "int4-gptq", "q4_k_m"
  double bits_per_weight;        // of a quantized matrix at the default group size, all overheads included
  double unquantized_bytes;      // bytes per element of what the format keeps unquantized
  std::string_view description;  // one line, with the source
  std::string_view aliases;      // other accepted spellings, space-separated (vocabulary.h)
};

const std::vector<WeightFormatInfo>& weight_formats();
const WeightFormatInfo& weight_format_info(WeightFormat f);
// Accepts canonical names and the table's aliases ("Q4_K_M", "gptq", "bnb-nf4", "float16", "tf32");
// the words are weight_format_words() (vocabulary.h).
Result<WeightFormat> parse_weight_format(std::string_view name);
bool is_quantized(WeightFormat f);

enum class KvFormat { kFp32, kBf16, kFp16, kFp8, kInt8 };
std::string_view kv_format_name(KvFormat f);
double kv_bytes_per_element(KvFormat f);
// Canonical names and aliases of kv_formats() (vocabulary.h): "auto" is fp16, "fp8_e5m2" fp8.
Result<KvFormat> parse_kv_format(std::string_view name);

// Bits per weight of one rows x cols matrix quantized in `f` (group_size 0 = the format's default).
double matrix_bits_per_weight(WeightFormat f, int64_t rows, int64_t cols, int group_size = 0);

// Weight bytes of a whole model stored in `f`: quantized matrices at their real bits, the rest at the
// bytes the tooling keeps. GGUF mixes types per tensor as llama.cpp's quantizer does (Q4_K_M / Q5_K_M
// give attn_v and ffn_down of some layers Q6_K; the output head is Q6_K).
struct WeightBytes {
  double total_bytes = 0;
  double quantized_bytes = 0;       // bytes of the quantized matrices (incl. scales/zeros)
  double quantized_parameters = 0;  // parameters stored quantized
  double other_bytes = 0;           // embeddings/head/norms/biases kept in higher precision
  double other_parameters = 0;
  double largest_matrix_parameters = 0;  // for dequantization workspaces
  // Bytes one token reads: all of total_bytes except the MoE experts it is not routed to
  // (experts_per_token of experts). The performance model's decode step reads this per token.
  double active_bytes = 0;
  // Tensors outside the repeated layers (embeddings, head, final norm), and the larger of the
  // embedding and the head: what a pipeline stage holds besides its layers.
  double non_layer_bytes = 0;
  double largest_edge_bytes = 0;
  // The LM head's tensor (a tied embedding standing in for it), at the bits its format stores it in: what
  // a step's logits read (GGUF: Q6_K or Q8_0; 16-bit where a format keeps the head unquantized).
  double head_bytes = 0;
  double head_parameters = 0;
};
WeightBytes model_weight_bytes(const Model& model, WeightFormat f, int group_size = 0);

}  // namespace gpuplan
