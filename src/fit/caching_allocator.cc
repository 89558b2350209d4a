// PyTorch's CUDA caching allocator replayed over what transformers' generate() allocates (caching_allocator.h).
#include "fit/caching_allocator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpuplan/formats.h"
#include "gpuplan/units.h"

namespace gpuplan {

namespace {

// c10/cuda/CUDACachingAllocator.cpp (pytorch/pytorch@001074d25084fdb87a799823e395a50f5ec044d3, the same
// values since PyTorch 1.x): "all sizes are rounded to at least 512 bytes", "largest 'small' allocation is
// 1 MiB", "'small' allocations are packed in 2 MiB blocks", "allocations between 1 and 10 MiB may use
// kLargeBuffer", "round up large allocations to 2 MiB", "'large' allocations may be packed in 20 MiB blocks".
constexpr uint64_t kMinBlockSize = 512;
constexpr uint64_t kSmallSize = 1048576;
constexpr uint64_t kSmallBuffer = 2097152;
constexpr uint64_t kMinLargeAlloc = 10485760;
constexpr uint64_t kRoundLarge = 2097152;
constexpr uint64_t kLargeBuffer = 20971520;

uint64_t round_size(uint64_t size) {
  return size < kMinBlockSize ? kMinBlockSize : kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

// get_allocation_size: the segment cudaMalloc'd for a request no free block holds.
uint64_t allocation_size(uint64_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

// should_split: a small block splits when >= kMinBlockSize remains, a large one when more than kSmallSize does
// (max_split_size unset).
bool should_split(bool small, uint64_t remaining) {
  return small ? remaining >= kMinBlockSize : remaining > kSmallSize;
}

uint64_t to_bytes(double bytes) { return bytes <= 0 ? 0 : static_cast<uint64_t>(std::llround(bytes)); }

}  // namespace

CachingAllocatorSim::CachingAllocatorSim(double limit_bytes)
    : limit_(limit_bytes >= 1.8e19 ? std::numeric_limits<uint64_t>::max() : to_bytes(limit_bytes)) {}

int32_t CachingAllocatorSim::new_block(uint64_t size, bool small) {
  int32_t i;
  if (!recycled_.empty()) {
    i = recycled_.back();
    recycled_.pop_back();
    blocks_[static_cast<size_t>(i)] = Block{};
  } else {
    i = static_cast<int32_t>(blocks_.size());
    blocks_.emplace_back();
  }
  Block& b = blocks_[static_cast<size_t>(i)];
  b.size = size;
  b.small = small;
  return i;
}

void CachingAllocatorSim::insert_free(int32_t i) {
  Block& b = blocks_[static_cast<size_t>(i)];
  b.free = true;
  (b.small ? free_small_ : free_large_).insert({b.size, i});
}

void CachingAllocatorSim::erase_free(int32_t i) {
  const Block& b = blocks_[static_cast<size_t>(i)];
  (b.small ? free_small_ : free_large_).erase({b.size, i});
}

void CachingAllocatorSim::release_free_segments() {
  for (std::set<Key>* pool : {&free_small_, &free_large_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      const Block& b = blocks_[static_cast<size_t>(it->second)];
      if (b.prev < 0 && b.next < 0) {  // the whole segment is free: cudaFree it
        reserved_ -= b.size;
        recycled_.push_back(it->second);
        it = pool->erase(it);
      } else {
        ++it;
      }
    }
  }
}

CachingAllocatorSim::Handle CachingAllocatorSim::allocate(double bytes) {
  const uint64_t size = round_size(to_bytes(bytes));
  const bool small = size <= kSmallSize;
  std::set<Key>& pool = small ? free_small_ : free_large_;
  int32_t i;
  auto it = pool.lower_bound({size, -1});
  if (it != pool.end()) {
    i = it->second;
    pool.erase(it);
  } else {
    const uint64_t segment = allocation_size(size);
    // cudaMalloc failing: the allocator frees its cached segments and retries (malloc's
    // release_cached_blocks path); past that it would raise out-of-memory, which the verdict decides.
    if (limit_ - std::min(limit_, reserved_) < segment) release_free_segments();
    i = new_block(segment, small);
    reserved_ += segment;
    peak_reserved_ = std::max(peak_reserved_, reserved_);
  }
  const uint64_t remaining = blocks_[static_cast<size_t>(i)].size - size;
  if (should_split(small, remaining)) {
    const int32_t j = new_block(remaining, small);
    Block& b = blocks_[static_cast<size_t>(i)];
    Block& rest = blocks_[static_cast<size_t>(j)];
    b.size = size;
    rest.prev = i;
    rest.next = b.next;
    if (b.next >= 0) blocks_[static_cast<size_t>(b.next)].prev = j;
    b.next = j;
    insert_free(j);
  }
  blocks_[static_cast<size_t>(i)].free = false;
  return i;
}

void CachingAllocatorSim::release(Handle h) {
  int32_t i = h;
  const int32_t prev = blocks_[static_cast<size_t>(i)].prev;
  if (prev >= 0 && blocks_[static_cast<size_t>(prev)].free) {
    erase_free(prev);
    Block& p = blocks_[static_cast<size_t>(prev)];
    const Block b = blocks_[static_cast<size_t>(i)];
    p.size += b.size;
    p.next = b.next;
    if (b.next >= 0) blocks_[static_cast<size_t>(b.next)].prev = prev;
    recycled_.push_back(i);
    i = prev;
  }
  const int32_t next = blocks_[static_cast<size_t>(i)].next;
  if (next >= 0 && blocks_[static_cast<size_t>(next)].free) {
    erase_free(next);
    const Block n = blocks_[static_cast<size_t>(next)];
    Block& b = blocks_[static_cast<size_t>(i)];
    b.size += n.size;
    b.next = n.next;
    if (n.next >= 0) blocks_[static_cast<size_t>(n.next)].prev = i;
    recycled_.push_back(next);
  }
  insert_free(i);
}

// ---- transformers' generate() ----------------------------------------------------------------------------
// The allocations of one generate() call of a Llama-like model in transformers (modeling_llama.py /
// modeling_mistral.py, LlamaAttention.forward and LlamaMLP of 4.3x; generation/utils.py greedy loop), in the
// order they happen. Tensors of a few KiB (one token's hidden state, rotary tables) are left out: they live in
// the small pool and do not move the large pool's segments.
// Prefill, per layer: the RMSNorm's fp32 upcast of the hidden states; q, k, v projections (k and v become the
// cache); repeat_kv's copies of k and v for grouped-query attention (`hidden_states[:, :, None].expand(...)
// .reshape(...)`, 4.3x and the SDPA path after); eager attention's scores, their fp32 softmax and its 16-bit
// cast (kTransformersLlamaEagerScoreBytes of memory.cc); the attention output; the MLP's gate, up, act(gate) and
// act(gate) x up; down. bitsandbytes 4-bit layers dequantize their matrix to 16 bits for every call with more
// than one row (bitsandbytes matmul_4bit: the gemv kernel serves one token only), so each projection allocates
// and frees a 16-bit copy of its weight in prefill and, at batch > 1, in every decode step. Then the head: the
// logits of every prompt token in 16 bits and their fp32 upcast when the release computes them
// (p.prompt_logit_bytes), held by the first step's outputs until the second step returns before 4.42.
// Decode step with a cache of t tokens, per layer: torch.cat's new k and v of t tokens; before 4.42 the previous
// step's cache stays referenced (model_kwargs, the previous outputs) until the step returns
// (kv_concat_copy, memory.cc kTransformersSingleCacheSince), from 4.42 DynamicCache drops each old tensor as
// the new one replaces it; repeat_kv copies; eager scores b x heads x t with their fp32 softmax.

bool generate_reserve_applies(const PreparedWorkload& p) {
  const Workload& w = p.workload;
  const Model& m = *w.model;
  const bool llama_like = m.architecture == "llama" || m.architecture == "mistral" || m.architecture == "qwen2";
  return w.engine == Engine::kTransformers && w.task == Task::kInfer && m.kind == ModelKind::kDecoder && llama_like &&
         m.experts == 0 && w.tp == 1 && w.pp == 1 && w.gpus() == 1 && w.output_tokens >= 2 && !p.preallocated_kv;
}

GenerateReserve generate_reserve(const PreparedWorkload& p, double limit_bytes) {
  const Workload& w = p.workload;
  const Model& m = *w.model;
  CachingAllocatorSim a(limit_bytes);
  using H = CachingAllocatorSim::Handle;
  const double b = static_cast<double>(w.batch);
  const int64_t prompt = w.prompt_tokens();
  const int64_t steps = std::min<int64_t>(w.output_tokens, std::max<int64_t>(1, w.context - prompt + 1));
  const double e = p.activation_bytes;
  const double ekv = kv_bytes_per_element(w.kv_cache);
  const double hidden = static_cast<double>(m.hidden);
  const double heads = static_cast<double>(m.heads);
  const double kvh = static_cast<double>(m.kv_heads);
  const double d = static_cast<double>(m.head_dim);
  const double inter = static_cast<double>(m.intermediate);
  const double vocab = static_cast<double>(m.vocab);
  const bool gqa = m.kv_heads < m.heads;
  const bool eager = p.eager_inference;
  const bool dequant = weight_format_info(w.weights).family == FormatFamily::kBitsAndBytes &&
                       weight_format_info(w.weights).bits_per_weight < 8;
  const double w16 = k16BitBytes;
  // A projection's output, with a bitsandbytes 4-bit layer's dequantized weight beside it while it runs.
  auto project = [&](double out_bytes, double in_features, double out_features, bool rows) {
    if (!(dequant && rows)) return a.allocate(out_bytes);
    const H wt = a.allocate(in_features * out_features * w16);
    const H out = a.allocate(out_bytes);
    a.release(wt);
    return out;
  };
  const double tokens = b * static_cast<double>(prompt);
  const double pp = static_cast<double>(prompt);
  std::vector<H> cache_k(static_cast<size_t>(m.layers)), cache_v(static_cast<size_t>(m.layers));
  for (int64_t l = 0; l < m.layers; ++l) {
    const H x = a.allocate(tokens * hidden * kFp32Bytes);
    const H q = project(tokens * heads * d * e, hidden, heads * d, true);
    cache_k[static_cast<size_t>(l)] = project(tokens * kvh * d * ekv, hidden, kvh * d, true);
    cache_v[static_cast<size_t>(l)] = project(tokens * kvh * d * ekv, hidden, kvh * d, true);
    H rk = -1, rv = -1;
    if (gqa) {
      rk = a.allocate(tokens * heads * d * e);
      rv = a.allocate(tokens * heads * d * e);
    }
    H s3 = -1;
    if (eager) {
      const double scores = b * heads * pp * pp;
      const H s1 = a.allocate(scores * e);
      const H s2 = a.allocate(scores * kFp32Bytes);
      s3 = a.allocate(scores * e);
      a.release(s1);
      a.release(s2);
    }
    const H o = project(tokens * hidden * e, heads * d, hidden, true);
    if (s3 >= 0) a.release(s3);
    a.release(q);
    if (gqa) {
      a.release(rk);
      a.release(rv);
    }
    const H g = project(tokens * inter * e, hidden, inter, true);
    const H u = project(tokens * inter * e, hidden, inter, true);
    const H act = a.allocate(tokens * inter * e);
    const H prod = a.allocate(tokens * inter * e);
    a.release(g);
    a.release(u);
    a.release(act);
    const H down = project(tokens * hidden * e, inter, hidden, true);
    a.release(prod);
    a.release(down);
    a.release(o);
    a.release(x);
  }
  // The head: every prompt position before 4.45 (16-bit logits and their fp32 upcast), else the last one.
  const double logit_rows = p.prompt_logit_bytes > 0 ? tokens : b;
  const H logits16 = a.allocate(logit_rows * vocab * w16);
  H prompt_logits = a.allocate(logit_rows * vocab * kFp32Bytes);
  a.release(logits16);
  if (!p.kv_concat_copy) {
    a.release(prompt_logits);
    prompt_logits = -1;
  }
  const bool rows = w.batch > 1;
  std::vector<H> new_k(cache_k.size()), new_v(cache_v.size());
  for (int64_t s = 1; s < steps; ++s) {
    const double t = static_cast<double>(prompt + s);
    for (size_t l = 0; l < cache_k.size(); ++l) {
      if (dequant && rows) {  // q, k, v projections dequantized before the cache grows
        for (double out : {heads * d, kvh * d, kvh * d}) a.release(a.allocate(hidden * out * w16));
      }
      new_k[l] = a.allocate(b * kvh * t * d * ekv);
      new_v[l] = a.allocate(b * kvh * t * d * ekv);
      if (!p.kv_concat_copy) {
        a.release(cache_k[l]);
        a.release(cache_v[l]);
      }
      H rk = -1, rv = -1;
      if (gqa) {
        rk = a.allocate(b * heads * t * d * e);
        rv = a.allocate(b * heads * t * d * e);
      }
      if (eager) {
        const double scores = b * heads * t;
        const H s1 = a.allocate(scores * e);
        const H s2 = a.allocate(scores * e);  // + the attention mask
        a.release(s1);
        const H sm = a.allocate(scores * kFp32Bytes);
        a.release(s2);
        const H s3 = a.allocate(scores * e);
        a.release(sm);
        a.release(s3);
      }
      if (gqa) {
        a.release(rk);
        a.release(rv);
      }
      if (dequant && rows) {  // o, gate, up, down
        for (double n : {heads * d * hidden, hidden * inter, hidden * inter, inter * hidden}) {
          a.release(a.allocate(n * w16));
        }
      }
    }
    const H step16 = a.allocate(b * vocab * w16);
    const H step32 = a.allocate(b * vocab * kFp32Bytes);
    a.release(step16);
    if (prompt_logits >= 0) {
      a.release(prompt_logits);
      prompt_logits = -1;
    }
    if (p.kv_concat_copy) {
      for (size_t l = 0; l < cache_k.size(); ++l) {
        a.release(cache_k[l]);
        a.release(cache_v[l]);
      }
    }
    a.release(step32);
    std::swap(cache_k, new_k);
    std::swap(cache_v, new_v);
  }
  return {a.peak_reserved_bytes(), a.reserved_bytes()};
}

}  // namespace gpuplan
