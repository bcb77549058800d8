//===- MoeToLinalg.h - moe to linalg lowering patterns ----------*- C++ -*-===//
//
// The reference lowering of the `moe` ops to linalg on tensors.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_CONVERSION_MOETOLINALG_MOETOLINALG_H
#define SWITCHYARD_DIALECT_CONVERSION_MOETOLINALG_MOETOLINALG_H

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace mlir::switchyard {

/// Adds the patterns that rewrite each `moe` op into linalg.generic ops.
/// Includes the row kernels of the fused ops (populateFusedKernelPatterns).
void populateMoeToLinalgPatterns(RewritePatternSet &patterns);

/// Adds the patterns that rewrite each fused moe op (moe.fused_router,
/// moe.fused_expert_proj, ...) into one row kernel: an scf.forall on
/// tensors over scalars and vectors (lib/Conversion/MoeToLinalg/
/// FusedKernels.cpp).
void populateFusedKernelPatterns(RewritePatternSet &patterns);

} // namespace mlir::switchyard

#endif // SWITCHYARD_DIALECT_CONVERSION_MOETOLINALG_MOETOLINALG_H
