//===- BufferCacheTest.cpp - the compiled CPU code's malloc and free ------===//
//
// Large blocks come back from the cache after free, exactly by size; small
// ones and blocks beyond the cache's limit do not; trimming empties it;
// every block begins at a cache line, aligned_alloc's too; and
// the blocks a compiled program allocates and frees across calls are reused
// rather than requested from the system again.
//
//===----------------------------------------------------------------------===//

#include "runtime/BufferCache.h"
#include "runtime/Engine/CpuProgram.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <cstring>

using namespace switchyard::runtime;

namespace {

TEST(BufferCacheTest, ReusesLargeBlocksBySizeClass) {
  bufferCacheTrim();
  // Large blocks are rounded up to eighths between powers of two: a request
  // of kLargeBlock + 100 bytes gets a block of kLargeBlock · 9/8.
  const size_t ninth = kLargeBlock * 9 / 8;
  void *large = switchyardBufferAlloc(kLargeBlock + 100);
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large) % kBlockAlignment, 0u);
  std::memset(large, 1, kLargeBlock + 100);
  switchyardBufferFree(large);
  EXPECT_EQ(bufferCacheBytes(), ninth);
  // Another class does not take it; any size of its class does, all of it.
  void *other = switchyardBufferAlloc(2 * kLargeBlock);
  EXPECT_NE(other, large);
  void *same = switchyardBufferAlloc(ninth);
  EXPECT_EQ(same, large);
  std::memset(same, 2, ninth);
  EXPECT_EQ(bufferCacheBytes(), 0u);
  switchyardBufferFree(other);
  switchyardBufferFree(same);
  EXPECT_EQ(bufferCacheBytes(), ninth + 2 * kLargeBlock);
  bufferCacheTrim();
  EXPECT_EQ(bufferCacheBytes(), 0u);
}

TEST(BufferCacheTest, CallocZeroesReusedBlocks) {
  bufferCacheTrim();
  auto *first = static_cast<unsigned char *>(switchyardBufferAlloc(kLargeBlock));
  ASSERT_NE(first, nullptr);
  std::memset(first, 7, kLargeBlock);
  switchyardBufferFree(first);
  auto *zeroed = static_cast<unsigned char *>(
      switchyardBufferCalloc(kLargeBlock / 4, 4));
  EXPECT_EQ(zeroed, first);
  for (size_t i = 0; i < kLargeBlock; ++i)
    ASSERT_EQ(zeroed[i], 0) << i;
  switchyardBufferFree(zeroed);
  EXPECT_EQ(switchyardBufferCalloc(SIZE_MAX / 2, 4), nullptr);
  bufferCacheTrim();
}

TEST(BufferCacheTest, SmallBlocksAndNullAreNotCached) {
  bufferCacheTrim();
  void *small = switchyardBufferAlloc(kLargeBlock - 1);
  ASSERT_NE(small, nullptr);
  switchyardBufferFree(small);
  switchyardBufferFree(nullptr);
  EXPECT_EQ(bufferCacheBytes(), 0u);
}

TEST(BufferCacheTest, AlignedAllocBeginsTheBlockAtTheAlignment) {
  bufferCacheTrim();
  // memref.alloc's aligned_alloc: a block that begins aligned (so that a
  // buffer's allocated and aligned pointers are one), small or large, fresh
  // or reused.
  for (size_t size : {size_t(1), size_t(100), kLargeBlock, kLargeBlock}) {
    for (size_t alignment : {size_t(1), size_t(16), kBlockAlignment}) {
      void *block = switchyardBufferAlignedAlloc(alignment, size);
      ASSERT_NE(block, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % kBlockAlignment, 0u)
          << size << " bytes aligned to " << alignment;
      std::memset(block, 3, size);
      switchyardBufferFree(block);
    }
  }
  // An alignment it cannot give, or not a power of two: null.
  EXPECT_EQ(switchyardBufferAlignedAlloc(2 * kBlockAlignment, 64), nullptr);
  EXPECT_EQ(switchyardBufferAlignedAlloc(48, 64), nullptr);
  EXPECT_EQ(switchyardBufferAlignedAlloc(0, 64), nullptr);
  bufferCacheTrim();
}

TEST(BufferCacheTest, CompiledTemporariesAreReusedAcrossCalls) {
  // y = (x + x) · 2 through a 128 KiB temporary that the program frees.
  const char *source = R"mlir(
    func.func @twice(%x: tensor<32768xf32>) -> tensor<f32> {
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<32768xf32>
      %t = linalg.add ins(%x, %x : tensor<32768xf32>, tensor<32768xf32>) outs(%e : tensor<32768xf32>) -> tensor<32768xf32>
      %s0 = tensor.empty() : tensor<f32>
      %s1 = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
      %s = linalg.reduce ins(%t : tensor<32768xf32>) outs(%s1 : tensor<f32>) dimensions = [0]
        (%a: f32, %b: f32) { %c = arith.addf %a, %b : f32
                             linalg.yield %c : f32 }
      return %s : tensor<f32>
    })mlir";
  llvm::Expected<std::unique_ptr<CpuProgram>> program =
      CpuProgram::compile(source, "buffer-cache-test", CompileOptions());
  ASSERT_TRUE(bool(program)) << llvm::toString(program.takeError());
  std::vector<float> ones(32768, 1.0f);
  HostTensor x = HostTensor::fromValues<float>("x", ElementType::f32,
                                                {32768}, ones);
  bufferCacheTrim();
  for (int call = 0; call < 3; ++call) {
    llvm::Expected<std::vector<HostTensor>> results =
        (*program)->call("twice", {&x});
    ASSERT_TRUE(bool(results)) << llvm::toString(results.takeError());
    EXPECT_EQ(results->at(0).values<float>()[0], 65536.0f);
    // The temporary is back in the cache after every call, and only it: the
    // second and later calls take it from there.
    EXPECT_GE(bufferCacheBytes(), 32768 * sizeof(float));
    EXPECT_LT(bufferCacheBytes(), 2 * 32768 * sizeof(float) + 4096);
  }
}

} // namespace
