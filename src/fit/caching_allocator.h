// What PyTorch's CUDA caching allocator reserves for a sequence of allocations, and what transformers'
// generate() asks of it (docs/model.md, Part 1 section 4 "What the counters read: the caching allocator").
//
// torch.cuda.max_memory_reserved and nvidia-smi's "used" count the segments the allocator took with
// cudaMalloc, not the tensors alive. A KV cache that torch.cat grows by one token per decode step needs a block
// one token larger each step; a freed block can hold it only while its segment's rounding slack lasts, so
// every ~2 MiB of growth per tensor strands one segment per cache tensor. The stranded segments stay cached
// (reserved) and are released only when a cudaMalloc fails: they decide what the counters read, not what fits.
#pragma once

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "gpuplan/memory.h"

namespace gpuplan {

// The rules of c10/cuda/CUDACachingAllocator.cpp (pytorch/pytorch@001074d2, unchanged in these rules since
// 1.x; constants kMinBlockSize, kSmallSize, kSmallBuffer, kMinLargeAlloc, kRoundLarge, kLargeBuffer in
// caching_allocator.cc): sizes rounded to 512 B; requests up to 1 MiB from a small pool of 2 MiB segments,
// larger ones from a large pool; best fit (the smallest free block of the pool that holds the request); a
// block split when the rest is >= 512 B (small pool) or > 1 MiB (large pool); a new segment when no free
// block fits: 2 MiB (small), 20 MiB for 1-10 MiB requests, else the request rounded up to 2 MiB; freed blocks
// merge with free neighbours of their segment; no expandable segments, no max_split_size (the defaults). When
// a new segment would pass `limit_bytes` (what cudaMalloc can still give), every segment with no allocated
// block is released first (release_cached_blocks) and the allocation retried.
class CachingAllocatorSim {
 public:
  explicit CachingAllocatorSim(double limit_bytes);
  using Handle = int32_t;
  Handle allocate(double bytes);
  void release(Handle h);
  double reserved_bytes() const { return static_cast<double>(reserved_); }
  double peak_reserved_bytes() const { return static_cast<double>(peak_reserved_); }

 private:
  struct Block {
    uint64_t size = 0;
    int32_t prev = -1;  // neighbours in the segment
    int32_t next = -1;
    bool small = false;
    bool free = true;
  };
  using Key = std::pair<uint64_t, int32_t>;  // (size, block index): best fit, then the oldest block
  int32_t new_block(uint64_t size, bool small);
  void insert_free(int32_t i);
  void erase_free(int32_t i);
  void release_free_segments();
  std::vector<Block> blocks_;
  std::vector<int32_t> recycled_;
  std::set<Key> free_small_;
  std::set<Key> free_large_;
  uint64_t limit_ = 0;
  uint64_t reserved_ = 0;
  uint64_t peak_reserved_ = 0;
};

// Bytes PyTorch reserves beyond the weights over one transformers generate() call of `p` (engine transformers, a
// Llama-like decoder): the peak (torch.cuda.max_memory_reserved) and what is still reserved when the call
// returns (what NVML reads right after it). `limit_bytes` is what the allocator may take for it (the GPU's
// memory less the memory outside PyTorch and the weights).
struct GenerateReserve {
  double peak_bytes = 0;
  double end_bytes = 0;
};
// Whether generate_reserve models `p` (transformers' Llama-like models, inference with new tokens).
bool generate_reserve_applies(const PreparedWorkload& p);
GenerateReserve generate_reserve(const PreparedWorkload& p, double limit_bytes);

}  // namespace gpuplan
