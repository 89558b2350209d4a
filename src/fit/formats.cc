#include "gpuplan/formats.h"

#include <algorithm>
#include <array>
#include <iterator>

#include "gpuplan/vocabulary.h"

namespace gpuplan {

namespace {

// ---- constants, each with its source --------------------------------------------------------

// GPTQ/AWQ default group: 128 weights share one scale and one zero point (AutoGPTQ/AutoAWQ defaults).
constexpr int kDefaultQuantGroup = 128;
// GPTQ/AWQ per group: one fp16 scale (16 bits) + one 4-bit zero packed eight to an int32 (qzeros).
constexpr double kGroupScaleBits = 16.0;
constexpr double kGroupZeroBits = 4.0;
// GPTQ g_idx: one int32 per input feature (act-order permutation), AutoGPTQ QuantLinear.
constexpr double kGptqGidxBitsPerInput = 32.0;
// bitsandbytes 4-bit: blocksize 64 with an fp32 absmax per block (bnb.functional.quantize_4bit).
constexpr double kBnb4BlockWeights = 64.0;
constexpr double kBnbAbsmaxBits = 32.0;
// Double quantization: absmax stored as 8 bits, plus one fp32 scale per 256 absmax values
// (Dettmers et al. 2023, QLoRA, section 3 "Double Quantization": 0.127 bits per parameter).
constexpr double kBnbDqAbsmaxBits = 8.0;
constexpr double kBnbDqSecondBlock = 256.0;
// LLM.int8(): int8 weights + one fp32 absmax per output row (bnb Int8Params SCB).
constexpr double kRowScaleBits = 32.0;

// GGUF block layouts (ggml-common.h): bytes per block / weights per block.
constexpr double kQ8_0Bits = 34.0 * 8 / 32;    // 32 int8 + fp16 scale
constexpr double kQ4_0Bits = 18.0 * 8 / 32;    // 32 x 4 bit + fp16 scale
constexpr double kQ5_0Bits = 22.0 * 8 / 32;    // 32 x 5 bit + fp16 scale
constexpr double kQ5_1Bits = 24.0 * 8 / 32;    // 32 x 5 bit + fp16 scale + fp16 min
constexpr double kQ4_KBits = 144.0 * 8 / 256;  // super-block of 256: 2 fp16 + 12 B scales + 128 B quants
constexpr double kQ5_KBits = 176.0 * 8 / 256;  // 2 fp16 + 12 B scales + 32 B high bits + 128 B quants
constexpr double kQ6_KBits = 210.0 * 8 / 256;  // 128 B low + 64 B high + 16 B scales + fp16
constexpr double kF16Bits = 16.0;
constexpr double kF32Bits = 32.0;
// K-quants need rows whose length is a multiple of the 256-weight super-block (QK_K, ggml-common.h).
constexpr int64_t kGgufSuperBlock = 256;

// Bits per weight of a matrix in each GGUF type, with llama.cpp's fallback when a row is not a
// multiple of 256 (llama-quant.cpp: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0).
enum class GgufType { kF32, kF16, kQ8_0, kQ6_K, kQ5_K, kQ4_K, kQ4_0 };
double gguf_bits(GgufType t, int64_t cols) {
  const bool k_ok = cols % kGgufSuperBlock == 0;
  switch (t) {
    case GgufType::kF32:
      return kF32Bits;
    case GgufType::kF16:
      return kF16Bits;
    case GgufType::kQ8_0:
      return kQ8_0Bits;
    case GgufType::kQ6_K:
      return k_ok ? kQ6_KBits : kQ8_0Bits;
    case GgufType::kQ5_K:
      return k_ok ? kQ5_KBits : kQ5_1Bits;
    case GgufType::kQ4_K:
      return k_ok ? kQ4_KBits : kQ5_0Bits;
    case GgufType::kQ4_0:
      return kQ4_0Bits;
  }
  return kF16Bits;
}

// llama.cpp use_more_bits(i, n): the first and last eighth of the layers and every third one between.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }
int64_t more_bits_layers(int64_t n) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) c += use_more_bits(i, n) ? 1 : 0;
  return c;
}

// The weight-format vocabulary (vocabulary.h): name, family, bits, what stays unquantized, help, aliases.
// "tf32" is fp32 storage computed on TF32 tensor cores: fp32 for memory, TF32 for the perf model (perf.h).
// constexpr: no static-initialization order for a caller that lists the vocabularies while starting up.
constexpr WeightFormatInfo kFormats[] = {
    {WeightFormat::kFp32, FormatFamily::kFloat, "fp32", 32, 4, "IEEE fp32, 4 bytes per weight", "float32 f32 tf32"},
    {WeightFormat::kBf16, FormatFamily::kFloat, "bf16", 16, 2, "bfloat16, 2 bytes per weight", "bfloat16"},
    {WeightFormat::kFp16, FormatFamily::kFloat, "fp16", 16, 2, "IEEE fp16, 2 bytes per weight", "float16 half f16"},
    {WeightFormat::kFp8, FormatFamily::kWeightOnlyInt, "fp8", 8 + kRowScaleBits / 4096, 2,
     "fp8 e4m3 linear layers with per-channel fp32 scales; embeddings, head and norms bf16 (vLLM fp8, "
     "llm-compressor FP8 checkpoints)",
     "fp8-e4m3"},
    {WeightFormat::kInt8, FormatFamily::kWeightOnlyInt, "int8", 8 + kRowScaleBits / 4096, 2,
     "weight-only int8 with per-row scales; embeddings and norms 16-bit (DeepSpeed-Inference, TensorRT-LLM)",
     "int8-weight-only"},
    {WeightFormat::kLlmInt8, FormatFamily::kBitsAndBytes, "llm-int8", 8 + kRowScaleBits / 4096, 2,
     "bitsandbytes LLM.int8(): int8 + fp32 row absmax; embeddings and lm_head stay fp16 (Dettmers et al. 2022)",
     "bnb-int8 llm.int8"},
    {WeightFormat::kW8A8, FormatFamily::kWeightOnlyInt, "w8a8", 8 + kRowScaleBits / 4096, 2,
     "int8 weights and int8 activations (SmoothQuant W8A8): per-channel weight scales, each input quantized "
     "per token, the matmul on int8 tensor cores; embeddings, head and norms 16-bit (TensorRT-LLM SmoothQuant, "
     "vLLM/llm-compressor INT8 W8A8, torchao int8_dynamic_activation_int8_weight)",
     "smoothquant int8-sq w8a8-int8 int8-w8a8"},
    {WeightFormat::kInt4Gptq, FormatFamily::kGptq, "int4-gptq",
     4 + (kGroupScaleBits + kGroupZeroBits) / kDefaultQuantGroup + kGptqGidxBitsPerInput / 4096, 2,
     "GPTQ 4-bit, group 128: fp16 scale + 4-bit zero per group, int32 g_idx per input; embeddings, lm_head "
     "fp16 (AutoGPTQ QuantLinear)",
     "gptq int4"},
    {WeightFormat::kInt4Awq, FormatFamily::kAwq, "int4-awq",
     4 + (kGroupScaleBits + kGroupZeroBits) / kDefaultQuantGroup, 2,
     "AWQ 4-bit GEMM, group 128: fp16 scale + 4-bit zero per group; embeddings, lm_head fp16 (AutoAWQ WQLinear)",
     "awq"},
    {WeightFormat::kNf4, FormatFamily::kBitsAndBytes, "nf4", 4 + kBnbAbsmaxBits / kBnb4BlockWeights, 2,
     "bitsandbytes NF4, blocks of 64 with fp32 absmax; embeddings, lm_head, norms fp16/bf16", "bnb-nf4"},
    {WeightFormat::kNf4Dq, FormatFamily::kBitsAndBytes, "nf4-dq",
     4 + kBnbDqAbsmaxBits / kBnb4BlockWeights + kBnbAbsmaxBits / (kBnb4BlockWeights * kBnbDqSecondBlock), 2,
     "NF4 with double quantization (QLoRA): 8-bit absmax + fp32 per 256 absmax", "nf4-double-quant"},
    {WeightFormat::kFp4, FormatFamily::kBitsAndBytes, "fp4", 4 + kBnbAbsmaxBits / kBnb4BlockWeights, 2,
     "bitsandbytes FP4 (default 4-bit type of load_in_4bit), blocks of 64 with fp32 absmax", "bnb-fp4"},
    {WeightFormat::kFp4Dq, FormatFamily::kBitsAndBytes, "fp4-dq",
     4 + kBnbDqAbsmaxBits / kBnb4BlockWeights + kBnbAbsmaxBits / (kBnb4BlockWeights * kBnbDqSecondBlock), 2,
     "bitsandbytes FP4 with double quantization", ""},
    {WeightFormat::kQ8_0, FormatFamily::kGguf, "q8_0", kQ8_0Bits, 4,
     "GGUF Q8_0: blocks of 32 int8 + fp16 scale (8.5 bits); norms f32", ""},
    {WeightFormat::kQ6_K, FormatFamily::kGguf, "q6_k", kQ6_KBits, 4,
     "GGUF Q6_K: 256-weight super-blocks, 6.5625 bits; norms f32", ""},
    {WeightFormat::kQ5_K_M, FormatFamily::kGguf, "q5_k_m", kQ5_KBits, 4,
     "GGUF Q5_K_M: Q5_K (5.5 bits), Q6_K for attn_v/ffn_down of use_more_bits layers and the output", ""},
    {WeightFormat::kQ4_K_M, FormatFamily::kGguf, "q4_k_m", kQ4_KBits, 4,
     "GGUF Q4_K_M: Q4_K (4.5 bits), Q6_K for attn_v/ffn_down of use_more_bits layers and the output", "q4-k"},
    {WeightFormat::kQ4_0, FormatFamily::kGguf, "q4_0", kQ4_0Bits, 4,
     "GGUF Q4_0: blocks of 32 x 4 bit + fp16 scale (4.5 bits); output Q6_K", ""},
};

}  // namespace

const std::vector<WeightFormatInfo>& weight_formats() {
  static const std::vector<WeightFormatInfo> formats(std::begin(kFormats), std::end(kFormats));
  return formats;
}

const WeightFormatInfo& weight_format_info(WeightFormat f) {
  for (const auto& i : kFormats) {
    if (i.format == f) return i;
  }
  return kFormats[1];
}

Result<WeightFormat> parse_weight_format(std::string_view name) {
  GPUPLAN_TRY(v, parse_word(*vocabulary("weights"), name));
  return static_cast<WeightFormat>(v);
}

bool is_quantized(WeightFormat f) {
  return f != WeightFormat::kFp32 && f != WeightFormat::kBf16 && f != WeightFormat::kFp16;
}

std::string_view kv_format_name(KvFormat f) { return word_name(kv_formats(), static_cast<int>(f)); }

double kv_bytes_per_element(KvFormat f) {
  switch (f) {
    case KvFormat::kFp32:
      return 4;
    case KvFormat::kBf16:
    case KvFormat::kFp16:
      return 2;
    case KvFormat::kFp8:
    case KvFormat::kInt8:
      return 1;
  }
  return 2;
}

Result<KvFormat> parse_kv_format(std::string_view name) {
  GPUPLAN_TRY(v, parse_word(*vocabulary("kv_cache"), name));
  return static_cast<KvFormat>(v);
}

std::span<const VocabEntry> weight_format_words() {
  static const std::vector<VocabEntry> words = [] {
    std::vector<VocabEntry> w;
    for (const auto& f : kFormats) w.push_back({static_cast<int>(f.format), f.name, f.aliases, f.description});
    return w;
  }();
  return words;
}

std::span<const VocabEntry> kv_formats() {
  // KV-cache element types, with the spellings engines use for them (vLLM --kv-cache-dtype auto/fp8_e4m3/
  // fp8_e5m2, TGI fp8_e5m2). "auto" is the model's 16-bit dtype, counted as fp16.
  static constexpr VocabEntry kWords[] = {
      {static_cast<int>(KvFormat::kFp32), "fp32", "float32", "fp32 KV cache, 4 bytes per element"},
      {static_cast<int>(KvFormat::kBf16), "bf16", "bfloat16", "bfloat16 KV cache, 2 bytes per element"},
      {static_cast<int>(KvFormat::kFp16), "fp16", "float16 auto", "fp16 KV cache, 2 bytes per element"},
      {static_cast<int>(KvFormat::kFp8), "fp8", "fp8-e4m3 fp8-e5m2", "fp8 KV cache (e4m3 or e5m2), 1 byte per element"},
      {static_cast<int>(KvFormat::kInt8), "int8", "", "int8 KV cache (llama.cpp q8_0, TensorRT-LLM int8), 1 byte"},
  };
  return kWords;
}

double matrix_bits_per_weight(WeightFormat f, int64_t rows, int64_t cols, int group_size) {
  const double g = group_size > 0 ? group_size : kDefaultQuantGroup;
  const double r = static_cast<double>(std::max<int64_t>(rows, 1));
  switch (f) {
    case WeightFormat::kFp32:
      return 32;
    case WeightFormat::kBf16:
    case WeightFormat::kFp16:
      return 16;
    case WeightFormat::kFp8:
    case WeightFormat::kInt8:
    case WeightFormat::kLlmInt8:
    case WeightFormat::kW8A8:
      return 8 + kRowScaleBits / static_cast<double>(std::max<int64_t>(cols, 1));
    case WeightFormat::kInt4Gptq:
      return 4 + (kGroupScaleBits + kGroupZeroBits) / g + kGptqGidxBitsPerInput / r;
    case WeightFormat::kInt4Awq:
      return 4 + (kGroupScaleBits + kGroupZeroBits) / g;
    case WeightFormat::kNf4:
    case WeightFormat::kFp4:
      return 4 + kBnbAbsmaxBits / kBnb4BlockWeights;
    case WeightFormat::kNf4Dq:
    case WeightFormat::kFp4Dq:
      return 4 + kBnbDqAbsmaxBits / kBnb4BlockWeights + kBnbAbsmaxBits / (kBnb4BlockWeights * kBnbDqSecondBlock);
    case WeightFormat::kQ8_0:
      return gguf_bits(GgufType::kQ8_0, cols);
    case WeightFormat::kQ6_K:
      return gguf_bits(GgufType::kQ6_K, cols);
    case WeightFormat::kQ5_K_M:
      return gguf_bits(GgufType::kQ5_K, cols);
    case WeightFormat::kQ4_K_M:
      return gguf_bits(GgufType::kQ4_K, cols);
    case WeightFormat::kQ4_0:
      return gguf_bits(GgufType::kQ4_0, cols);
  }
  return 16;
}

namespace {

// GGUF: the type llama.cpp's quantizer gives each tensor (llama-quant.cpp llama_tensor_get_type).
GgufType gguf_base(WeightFormat f) {
  switch (f) {
    case WeightFormat::kQ8_0:
      return GgufType::kQ8_0;
    case WeightFormat::kQ6_K:
      return GgufType::kQ6_K;
    case WeightFormat::kQ5_K_M:
      return GgufType::kQ5_K;
    case WeightFormat::kQ4_K_M:
      return GgufType::kQ4_K;
    default:
      return GgufType::kQ4_0;
  }
}

// Records a tensor's bytes in the non-layer totals a pipeline split needs.
void note_edges(WeightBytes& w, const TensorGroup& t, double bytes) {
  if (t.per_layer) return;
  w.non_layer_bytes += bytes;
  if (t.role == TensorRole::kEmbedding || t.role == TensorRole::kHead) {
    w.largest_edge_bytes = std::max(w.largest_edge_bytes, bytes);
  }
}

// Adds one tensor group's bytes to the totals, as quantized or as kept in its original precision.
void add_tensor_bytes(WeightBytes& w, const Model& m, const TensorGroup& t, double n, double bytes, bool quantized) {
  note_edges(w, t, bytes);
  if (t.role == TensorRole::kHead || (t.role == TensorRole::kEmbedding && m.tied_embeddings)) {
    w.head_bytes += bytes;
    w.head_parameters += n;
  }
  w.total_bytes += bytes;
  if (quantized) {
    w.quantized_bytes += bytes;
    w.quantized_parameters += n;
  } else {
    w.other_bytes += bytes;
    w.other_parameters += n;
  }
}

WeightBytes gguf_bytes(const Model& m, WeightFormat f) {
  WeightBytes w;
  const GgufType base = gguf_base(f);
  const bool k_m = f == WeightFormat::kQ4_K_M || f == WeightFormat::kQ5_K_M;
  const int64_t more = more_bits_layers(m.layers);
  // The output tensor (or a tied token_embd standing in for it): Q6_K unless the base is Q8_0; Q8_0 for
  // Falcon and for rows that are not a multiple of 256.
  auto output_type = [&](int64_t cols) {
    if (base == GgufType::kQ8_0) return GgufType::kQ8_0;
    if (m.architecture == "falcon" || cols % kGgufSuperBlock != 0) return GgufType::kQ8_0;
    return GgufType::kQ6_K;
  };
  for (const auto& t : m.tensors) {
    const double n = static_cast<double>(t.elements());
    double bits = 0;
    bool quantized = true;
    if (t.role == TensorRole::kNorm || t.role == TensorRole::kBias || t.cols == 1) {
      bits = kF32Bits;  // 1-D tensors stay f32
      quantized = false;
    } else if (t.role == TensorRole::kHead || (t.role == TensorRole::kEmbedding && m.tied_embeddings)) {
      bits = gguf_bits(output_type(t.cols), t.cols);
    } else if (k_m && (t.role == TensorRole::kAttnV || t.role == TensorRole::kMlpDown) && t.per_layer) {
      // use_more_bits layers get Q6_K; on 80-layer (70B) llama models attn_v of the others gets Q5_K.
      const double per_layer = n / static_cast<double>(m.layers);
      const double more_n = per_layer * static_cast<double>(more);
      GgufType rest = base;
      if (t.role == TensorRole::kAttnV && m.layers == 80 && base == GgufType::kQ4_K) rest = GgufType::kQ5_K;
      bits = (more_n * gguf_bits(GgufType::kQ6_K, t.cols) + (n - more_n) * gguf_bits(rest, t.cols)) / n;
    } else {
      bits = gguf_bits(base, t.cols);
    }
    const double bytes = n * bits / 8;
    add_tensor_bytes(w, m, t, n, bytes, quantized);
  }
  return w;
}

}  // namespace

namespace {
WeightBytes weight_bytes_all(const Model& m, WeightFormat f, int group_size);
}  // namespace

WeightBytes model_weight_bytes(const Model& m, WeightFormat f, int group_size) {
  WeightBytes w = weight_bytes_all(m, f, group_size);
  w.active_bytes = w.total_bytes;
  if (m.experts > 0 && m.experts_per_token > 0) {
    // The experts' share of the bytes, at the format's bits for expert matrices.
    double expert_bytes = 0;
    for (const auto& t : m.tensors) {
      if (!t.expert) continue;
      const double n = static_cast<double>(t.elements());
      const double bits = is_quantized(f) ? matrix_bits_per_weight(f, t.rows, t.cols, group_size)
                                          : weight_format_info(f).unquantized_bytes * 8;
      expert_bytes += n * bits / 8;
    }
    w.active_bytes = w.total_bytes - expert_bytes +
                     expert_bytes * static_cast<double>(m.experts_per_token) / static_cast<double>(m.experts);
  }
  return w;
}

namespace {
WeightBytes weight_bytes_all(const Model& m, WeightFormat f, int group_size) {
  const WeightFormatInfo& info = weight_format_info(f);
  WeightBytes w;
  for (const auto& t : m.tensors) {
    if (is_linear_role(t.role) || t.role == TensorRole::kConv) {
      w.largest_matrix_parameters = std::max(w.largest_matrix_parameters, static_cast<double>(t.rows * t.cols));
    }
  }
  if (info.family == FormatFamily::kGguf) {
    const double largest = w.largest_matrix_parameters;
    w = gguf_bytes(m, f);
    w.largest_matrix_parameters = largest;
    return w;
  }
  for (const auto& t : m.tensors) {
    const double n = static_cast<double>(t.elements());
    // Quantized formats convert linear layers (and conv kernels) only; the rest stays 16-bit.
    const bool quantized = is_quantized(f) && (is_linear_role(t.role) || t.role == TensorRole::kConv);
    const double bytes =
        quantized ? n * matrix_bits_per_weight(f, t.rows, t.cols, group_size) / 8 : n * info.unquantized_bytes;
    add_tensor_bytes(w, m, t, n, bytes, quantized);
  }
  return w;
}

}  // namespace

}  // namespace gpuplan
