//===- Passes.h - Switchyard GPU codegen passes -----------------*- C++ -*-===//
//
// Declarations and registration of the GPU target's passes that upstream
// MLIR does not provide.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_GPU_PASSES_H
#define SWITCHYARD_LIB_CODEGEN_GPU_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::switchyard {

/// Marks a gpu.launch that switchyard-gpu-merge-launches made of several:
/// its body branches on the block index to each one's body, which the
/// kernel report accounts for block by block.
inline constexpr llvm::StringLiteral kMergedLaunchAttr = "switchyard.merged";
/// Marks the scf.if at the end of a kernel's body that only the block to
/// finish last runs (switchyard-gpu-chain-launches): the kernel report
/// counts its work once per launch, not per block.
inline constexpr llvm::StringLiteral kLastBlockAttr = "switchyard.last_block";

#define GEN_PASS_DECL
#include "lib/Codegen/GPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lib/Codegen/GPU/Passes.h.inc"

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_GPU_PASSES_H
