//===- CpuKernelTileTest.cpp - the matmul kernels' tile per target --------===//
//
// mlir::switchyard::cpuKernelTile: two vectors of columns per row, rows
// leaving four registers free, for AVX-512, AVX-512 preferring 256-bit
// vectors, AVX2, NEON and SSE; and the host's vector registers as LLVM's
// cost model of the JIT's target machine gives them.
//
//===----------------------------------------------------------------------===//

#include "lib/Pipelines/Pipelines.h"
#include "runtime/Engine/NativeCode.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Host.h"

#include "gtest/gtest.h"

namespace {

using mlir::switchyard::cpuKernelTile;
using mlir::switchyard::CpuKernelTile;

TEST(CpuKernelTileTest, TilesFitTheVectorRegisters) {
  auto tile = [](unsigned bits, unsigned registers) {
    CpuKernelTile t = cpuKernelTile(bits, registers);
    return std::make_pair(t.rows, t.columns);
  };
  EXPECT_EQ(tile(512, 32), std::make_pair(int64_t(8), int64_t(32)));
  EXPECT_EQ(tile(256, 32), std::make_pair(int64_t(8), int64_t(16)));
  EXPECT_EQ(tile(256, 16), std::make_pair(int64_t(6), int64_t(16)));
  EXPECT_EQ(tile(128, 32), std::make_pair(int64_t(8), int64_t(8)));
  EXPECT_EQ(tile(128, 16), std::make_pair(int64_t(6), int64_t(8)));
  // Every accumulator (rows × 2 vectors) and the four others fit.
  for (unsigned registers : {8u, 16u, 32u}) {
    CpuKernelTile t = cpuKernelTile(256, registers);
    EXPECT_GE(t.rows, 1);
    EXPECT_LE(2 * t.rows + 4, std::max<int64_t>(registers, 6));
  }
}

TEST(CpuKernelTileTest, HostRegistersAreTheJitTargets) {
  llvm::InitializeNativeTarget();
  auto [bits, registers] =
      switchyard::runtime::detail::hostVectorRegisters();
  EXPECT_TRUE(bits == 128 || bits == 256 || bits == 512) << bits;
  EXPECT_TRUE(registers == 16 || registers == 32) << registers;
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  // AVX-512 has 32 vector registers at any width; 512-bit ones need it.
  if (features.lookup("avx512f"))
    EXPECT_EQ(registers, 32u);
  if (bits == 512)
    EXPECT_TRUE(features.lookup("avx512f"));
}

} // namespace
