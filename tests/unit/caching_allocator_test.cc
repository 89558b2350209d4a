// PyTorch's caching allocator as gpuplan replays it (src/fit/caching_allocator.h; docs/model.md Part 1 section 4
// "What the counters read"). The expected segment sizes are the rules of c10/cuda/CUDACachingAllocator.cpp
// (pytorch/pytorch@001074d2: get_allocation_size, should_split, best fit), not gpuplan's output.
#include "fit/caching_allocator.h"

#include <gtest/gtest.h>

#include <limits>

#include "workload_test_util.h"

namespace gpuplan {
namespace {

constexpr double kMib = 1024.0 * 1024.0;
constexpr double kNoLimit = std::numeric_limits<double>::infinity();

using testing_util::prepared;

TEST(CachingAllocatorSim, SegmentSizesFollowGetAllocationSize) {
  CachingAllocatorSim a(kNoLimit);
  a.allocate(1000);  // small pool: one 2 MiB segment
  EXPECT_DOUBLE_EQ(a.reserved_bytes(), 2 * kMib);
  a.allocate(4000);  // packed into the same segment
  EXPECT_DOUBLE_EQ(a.reserved_bytes(), 2 * kMib);
  a.allocate(5 * kMib);  // 1-10 MiB: a 20 MiB segment
  EXPECT_DOUBLE_EQ(a.reserved_bytes(), 22 * kMib);
  a.allocate(3 * kMib);  // split from that segment's 15 MiB rest
  EXPECT_DOUBLE_EQ(a.reserved_bytes(), 22 * kMib);
  a.allocate(29 * kMib + 1);  // >= 10 MiB: rounded up to 2 MiB
  EXPECT_DOUBLE_EQ(a.reserved_bytes(), 52 * kMib);
}

TEST(CachingAllocatorSim, AFreedBlockHoldsOnlyWhatItsSegmentHolds) {
  CachingAllocatorSim a(kNoLimit);
  const auto h = a.allocate(16 * kMib);  // a 16 MiB segment, no slack
  a.release(h);
  a.allocate(16 * kMib);  // reused
  EXPECT_DOUBLE_EQ(a.reserved_bytes(), 16 * kMib);
  a.allocate(16 * kMib + 128 * 1024);  // one token larger: the freed 16 MiB block cannot hold it
  EXPECT_DOUBLE_EQ(a.reserved_bytes(), 34 * kMib);
}

TEST(CachingAllocatorSim, FreedNeighboursMergeAndSplitBlocksReuseTheSegment) {
  CachingAllocatorSim a(kNoLimit);
  const auto x = a.allocate(12 * kMib);  // 12 MiB segment
  a.release(x);
  const auto y = a.allocate(4 * kMib);  // split: 8 MiB rest stays free
  const auto z = a.allocate(6 * kMib);  // from the 8 MiB rest (2 MiB left, > 1 MiB: split again)
  EXPECT_DOUBLE_EQ(a.reserved_bytes(), 12 * kMib);
  a.release(y);
  a.release(z);
  a.allocate(12 * kMib);  // the three pieces merged back into the whole segment
  EXPECT_DOUBLE_EQ(a.reserved_bytes(), 12 * kMib);
}

TEST(CachingAllocatorSim, ACudaMallocPastTheLimitReleasesTheCachedSegments) {
  CachingAllocatorSim a(100 * kMib);
  const auto h = a.allocate(60 * kMib);
  a.release(h);
  a.allocate(70 * kMib);  // 60 + 70 > 100: the free 60 MiB segment is released first
  EXPECT_DOUBLE_EQ(a.reserved_bytes(), 70 * kMib);
  EXPECT_DOUBLE_EQ(a.peak_reserved_bytes(), 70 * kMib);
}

// transformers before 4.42 holds the previous step's cache until the step returns, so two sets of growing
// cache tensors strand segments; from 4.42 DynamicCache frees each old tensor as the new one replaces it.
TEST(GenerateReserve, TheOldCacheHeldThroughTheStepStrandsMore) {
  const nlohmann::ordered_json base = {{"weights", "fp16"},   {"kv_cache", "fp16"},   {"batch", 8},
                                       {"input_tokens", 256}, {"output_tokens", 512}, {"context", 768}};
  nlohmann::ordered_json old_release = base;
  old_release["engine"] = "transformers@4.34.1";
  nlohmann::ordered_json new_release = base;
  new_release["engine"] = "transformers@4.42.0";
  const PreparedWorkload p_old = prepared("llama-2-7b", old_release);
  const PreparedWorkload p_new = prepared("llama-2-7b", new_release);
  ASSERT_TRUE(generate_reserve_applies(p_old));
  ASSERT_TRUE(generate_reserve_applies(p_new));
  const GenerateReserve r_old = generate_reserve(p_old, kNoLimit);
  const GenerateReserve r_new = generate_reserve(p_new, kNoLimit);
  // The live cache at the end is 3.2 GB (two copies before 4.42); the stranded segments are many times that.
  const double kv = 2.0 * 32 * 32 * 128 * 8 * 768 * 2;
  EXPECT_GT(r_old.peak_bytes, 5 * kv);
  EXPECT_GT(r_old.peak_bytes, 1.5 * r_new.peak_bytes);
  EXPECT_GT(r_new.peak_bytes, kv);
  // No release: what is reserved when the call returns is its peak.
  EXPECT_DOUBLE_EQ(r_old.end_bytes, r_old.peak_bytes);
  // A GPU that cannot hold the stranded segments: cudaMalloc fails, the cache is released, the peak stops at
  // the limit and the reading after the call is below it.
  const double limit = 0.5 * r_old.peak_bytes;
  const GenerateReserve capped = generate_reserve(p_old, limit);
  EXPECT_LE(capped.peak_bytes, limit);
  EXPECT_LT(capped.end_bytes, capped.peak_bytes);
}

TEST(GenerateReserve, OnlyTransformersGenerateOfLlamaLikeModels) {
  EXPECT_FALSE(generate_reserve_applies(
      prepared("llama-2-7b", {{"engine", "vllm"}, {"output_tokens", 128}, {"input_tokens", 128}, {"context", 256}})));
  EXPECT_FALSE(generate_reserve_applies(prepared("llama-2-7b", {{"engine", "transformers"}, {"context", 256}})));
  EXPECT_FALSE(generate_reserve_applies(
      prepared("llama-2-7b", {{"engine", "transformers"}, {"task", "lora"}, {"context", 256}})));
  EXPECT_TRUE(generate_reserve_applies(prepared(
      "mistral-7b", {{"engine", "transformers"}, {"output_tokens", 128}, {"input_tokens", 128}, {"context", 256}})));
}

}  // namespace
}  // namespace gpuplan
