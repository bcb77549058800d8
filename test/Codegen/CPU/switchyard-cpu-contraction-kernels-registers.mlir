// The register tile that cpuKernelTile (lib/Pipelines/Pipelines.h) picks
// for a target keeps the kernel's accumulators in vector registers: LLVM's
// code for that CPU spills no vector register. The kernel of a 47M FFN
// matmul (512 × 412 by 412 × 2080), lowered with upstream's passes,
// compiled by opt and llc for the CPU named; llc marks each spill and
// reload with its size.
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-cpu-contraction-kernels{rows=8 columns=32}))" \
// RUN:   | mlir-opt --convert-linalg-to-loops --lower-affine --convert-vector-to-scf --convert-scf-to-cf --convert-vector-to-llvm --expand-strided-metadata --finalize-memref-to-llvm --convert-func-to-llvm --convert-arith-to-llvm --convert-cf-to-llvm --convert-index-to-llvm --reconcile-unrealized-casts \
// RUN:   | mlir-translate --mlir-to-llvmir > %t.avx512.ll
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-cpu-contraction-kernels{rows=6 columns=16}))" \
// RUN:   | mlir-opt --convert-linalg-to-loops --lower-affine --convert-vector-to-scf --convert-scf-to-cf --convert-vector-to-llvm --expand-strided-metadata --finalize-memref-to-llvm --convert-func-to-llvm --convert-arith-to-llvm --convert-cf-to-llvm --convert-index-to-llvm --reconcile-unrealized-casts \
// RUN:   | mlir-translate --mlir-to-llvmir > %t.avx2.ll
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-cpu-contraction-kernels{rows=8 columns=16}))" \
// RUN:   | mlir-opt --convert-linalg-to-loops --lower-affine --convert-vector-to-scf --convert-scf-to-cf --convert-vector-to-llvm --expand-strided-metadata --finalize-memref-to-llvm --convert-func-to-llvm --convert-arith-to-llvm --convert-cf-to-llvm --convert-index-to-llvm --reconcile-unrealized-casts \
// RUN:   | mlir-translate --mlir-to-llvmir > %t.avx512-256.ll
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-cpu-contraction-kernels{rows=8 columns=8}))" \
// RUN:   | mlir-opt --convert-linalg-to-loops --lower-affine --convert-vector-to-scf --convert-scf-to-cf --convert-vector-to-llvm --expand-strided-metadata --finalize-memref-to-llvm --convert-func-to-llvm --convert-arith-to-llvm --convert-cf-to-llvm --convert-index-to-llvm --reconcile-unrealized-casts \
// RUN:   | mlir-translate --mlir-to-llvmir > %t.neon.ll

// AVX-512 with 512-bit vectors (Zen 5): 8 × 32, 16 zmm accumulators.
// RUN: opt -O3 -mtriple=x86_64 -mcpu=znver5 %t.avx512.ll | llc -O3 -mtriple=x86_64 -mcpu=znver5 | FileCheck %s --check-prefix=ZEN5
// ZEN5: vfmadd{{.*}}zmm
// ZEN5-NOT: {{(64|32)-byte (Folded )?(Spill|Reload)}}

// AVX2 (Zen 1, 16 ymm registers): 6 × 16, 12 accumulators.
// RUN: opt -O3 -mtriple=x86_64 -mcpu=znver1 %t.avx2.ll | llc -O3 -mtriple=x86_64 -mcpu=znver1 | FileCheck %s --check-prefix=ZEN1
// ZEN1: vfmadd{{.*}}ymm
// ZEN1-NOT: {{32-byte (Folded )?(Spill|Reload)}}

// AVX-512 where LLVM's cost model prefers 256-bit vectors (Zen 4): 8 × 16
// (the vector width LLVM then gives 16 f32 may be either).
// RUN: opt -O3 -mtriple=x86_64 -mcpu=znver4 %t.avx512-256.ll | llc -O3 -mtriple=x86_64 -mcpu=znver4 | FileCheck %s --check-prefix=ZEN4
// ZEN4: vfmadd
// ZEN4-NOT: {{(64|32)-byte (Folded )?(Spill|Reload)}}

// AArch64 NEON (128-bit vectors, 32 registers; Neoverse V1): 8 × 8, 16
// accumulators of 4 lanes. Only general-purpose registers are saved (the
// callee-saved ones, loop bounds); no vector register is spilled.
// RUN: opt -O3 -mtriple=aarch64 -mcpu=neoverse-v1 %t.neon.ll | llc -O3 -mtriple=aarch64 -mcpu=neoverse-v1 | FileCheck %s --check-prefix=NEON
// NEON: fmla v{{[0-9]+}}.4s
// NEON-NOT: {{(str|ldr|stp|ldp)[[:space:]]+[qdv][0-9]+.*(Spill|Reload)}}

// The AVX-512 tile on the AVX2 machine: 32 ymm accumulators in 16
// registers, spilled (what the choice per target avoids).
// RUN: opt -O3 -mtriple=x86_64 -mcpu=znver1 %t.avx512.ll | llc -O3 -mtriple=x86_64 -mcpu=znver1 | FileCheck %s --check-prefix=SPILLS
// SPILLS: 32-byte Spill

func.func @ffn(%a: memref<512x412xf32>, %b: memref<412x2080xf32>, %c: memref<512x2080xf32>) {
  linalg.matmul ins(%a, %b : memref<512x412xf32>, memref<412x2080xf32>)
                outs(%c : memref<512x2080xf32>)
  return
}
