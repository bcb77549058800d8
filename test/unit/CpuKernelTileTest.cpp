//===- CpuKernelTileTest.cpp - the matmul kernels' tile per target --------===//
//
// mlir::switchyard::cpuKernelTile: two vectors of columns per row, rows
// leaving four registers free, for AVX-512, AVX-512 preferring 256-bit
// vectors, AVX2, NEON and SSE; the host's vector registers as LLVM's
// cost model of the JIT's target machine gives them, and those of other
// CPUs named as the user names them (CompileOptions::cpu), with the
// check that this machine can run their code.
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
  auto [bits, registers] = switchyard::runtime::detail::vectorRegisters();
  EXPECT_TRUE(bits == 128 || bits == 256 || bits == 512) << bits;
  EXPECT_TRUE(registers == 16 || registers == 32) << registers;
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  // AVX-512 has 32 vector registers at any width; 512-bit ones need it.
  if (features.lookup("avx512f"))
    EXPECT_EQ(registers, 32u);
  if (bits == 512)
    EXPECT_TRUE(features.lookup("avx512f"));
}

namespace rt = switchyard::runtime;

#if defined(__x86_64__)
TEST(CpuKernelTileTest, NamedCpusRegisters) {
  using Registers = std::pair<unsigned, unsigned>;
  EXPECT_EQ(rt::detail::vectorRegisters({"x86-64", ""}), Registers(128, 16));
  EXPECT_EQ(rt::detail::vectorRegisters({"haswell", ""}), Registers(256, 16));
  EXPECT_EQ(rt::detail::vectorRegisters({"znver1", ""}), Registers(256, 16));
  // Skylake's AVX-512 prefers 256-bit vectors; all 32 registers stay.
  EXPECT_EQ(rt::detail::vectorRegisters({"skylake-avx512", ""}),
            Registers(256, 32));
  // Features on top of a CPU's: AVX2's widths from an SSE2 CPU.
  EXPECT_EQ(rt::detail::vectorRegisters({"x86-64", "+avx2,+fma"}),
            Registers(256, 16));
}

TEST(CpuKernelTileTest, CpuTargetsAreChecked) {
  auto message = [](const rt::detail::CpuTarget &target) -> std::string {
    llvm::Error error = rt::detail::checkCpuTarget(target);
    return error ? llvm::toString(std::move(error)) : "";
  };
  EXPECT_EQ(message({}), "");
  EXPECT_EQ(message({llvm::sys::getHostCPUName().str(), ""}), "");
  // x86-64 (SSE2) runs on every x86-64 machine.
  EXPECT_EQ(message({"x86-64", ""}), "");
  EXPECT_TRUE(llvm::StringRef(message({"no-such-cpu", ""}))
                  .starts_with("unknown CPU 'no-such-cpu' for x86_64"));
  EXPECT_TRUE(llvm::StringRef(message({"", "avx2"}))
                  .starts_with("CPU feature 'avx2': expected +name"));
  EXPECT_TRUE(llvm::StringRef(message({"", "+no-such-feature"}))
                  .starts_with("unknown CPU feature 'no-such-feature'"));
  // An extension this machine lacks (every x86 machine lacks some: the
  // host's detection lists those it found absent).
  std::string absent;
  for (const auto &feature : llvm::sys::getHostCPUFeatures())
    if (!feature.second &&
        message({"", "+" + feature.first().str()}).find("which this machine") !=
            std::string::npos) {
      absent = feature.first().str();
      break;
    }
  ASSERT_FALSE(absent.empty());
  std::string refused = message({"x86-64", "+" + absent});
  EXPECT_TRUE(llvm::StringRef(refused).starts_with(
      "cannot run code for CPU 'x86-64' with +" + absent + " here: it uses"))
      << refused;
  EXPECT_TRUE(llvm::StringRef(refused).contains(absent)) << refused;
}
#endif

} // namespace
