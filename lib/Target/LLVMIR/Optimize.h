//===- Optimize.h - LLVM's IR pipeline for the JIT --------------*- C++ -*-===//
//
// LLVM's default optimisation pipeline over a module the runtime
// JIT-compiles, honouring `optnone`.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_TARGET_LLVMIR_OPTIMIZE_H
#define SWITCHYARD_LIB_TARGET_LLVMIR_OPTIMIZE_H

#include "llvm/Support/Error.h"

namespace llvm {
class Module;
class TargetMachine;
} // namespace llvm

namespace mlir::switchyard {

/// Runs LLVM's per-module default pipeline at `optLevel` (0-3; loop
/// unrolling, interleaving and vectorization and the SLP vectorizer on, as
/// mlir::makeOptimizingTransformer sets them) over `module`, for
/// `targetMachine`. Unlike that transformer, functions marked `optnone`
/// are left alone, as clang's pipeline leaves them (LLVM's optnone
/// instrumentation): the straight-line entry points of a training step
/// (allocations, calls, frees; switchyard-cpu-outline-loops marks them)
/// are most of its instructions and have nothing to optimise.
llvm::Error optimizeModule(llvm::Module &module, unsigned optLevel,
                           llvm::TargetMachine *targetMachine);

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_TARGET_LLVMIR_OPTIMIZE_H
