//===- Passes.h - Switchyard common codegen passes --------------*- C++ -*-===//
//
// Declarations and registration of the code generation passes that the CPU
// and GPU targets share.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_COMMON_PASSES_H
#define SWITCHYARD_LIB_CODEGEN_COMMON_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::switchyard {

/// On an `scf.for`: its iterations are independent, and the CPU target
/// runs them on all cores (switchyard-linalg-to-loops with mark-parallel
/// and switchyard-cpu-contraction-kernels set it, switchyard-cpu-outline-
/// loops reads it).
inline constexpr llvm::StringLiteral kParallelLoopAttr = "switchyard.parallel";
/// The LLVM function attribute (in `passthrough`) of an outlined loop nest
/// whose first two arguments are its outermost loop's bounds and whose
/// iterations are independent; its value is the loop's step.
inline constexpr llvm::StringLiteral kParallelForAttr =
    "switchyard-parallel-for";

/// On a load inside a kernel: every thread of the block loads the same
/// value (written before a barrier, read between two barriers with no
/// write in between), so a branch on it is taken by the whole block and
/// may hold barriers. The GPU emulation (which serialises threads around
/// barriers) reads it once per block.
inline constexpr llvm::StringLiteral kBlockUniformAttr =
    "switchyard.block_uniform";

/// The most elements of a reduction to one value that one thread block
/// takes whole (switchyard-fuse-rows); larger ones are split by rows first
/// (switchyard-split-whole-reductions, its `max-unsplit`).
inline constexpr int64_t kMaxBlockReduction = 8192;

#define GEN_PASS_DECL
#include "lib/Codegen/Common/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lib/Codegen/Common/Passes.h.inc"

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_COMMON_PASSES_H
