//===- MoeToLinalg.h - moe to linalg lowering patterns ----------*- C++ -*-===//
//
// The reference lowering of the `moe` ops to linalg on tensors.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_CONVERSION_MOETOLINALG_MOETOLINALG_H
#define SWITCHYARD_DIALECT_CONVERSION_MOETOLINALG_MOETOLINALG_H

#include <cstdint>

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace mlir::switchyard {

/// Adds the patterns that rewrite each `moe` op into linalg.generic ops.
/// Includes the row kernels of the fused ops (populateFusedKernelPatterns,
/// populateFlashAttentionLoweringPatterns).
void populateMoeToLinalgPatterns(RewritePatternSet &patterns);

/// Adds the patterns that rewrite each fused moe op (moe.fused_router,
/// moe.fused_expert_proj, ...) into one row kernel: an scf.forall on
/// tensors over scalars and vectors (lib/Conversion/MoeToLinalg/
/// FusedKernels.cpp).
void populateFusedKernelPatterns(RewritePatternSet &patterns);

/// The expert projections and their gradients with the routes grouped by
/// expert (GroupedExperts.cpp), above the dense formulation's patterns:
/// with `tileRows` 0 the host formulation (the sort read on the host), with
/// T > 0 the padded one (segments padded to T rows, no host reads).
void populateGroupedExpertPatterns(RewritePatternSet &patterns,
                                   int64_t tileRows = 0);

/// Adds the lowerings of moe.flash_attention and moe.flash_attention_grad
/// (the ops of moe-fuse-attention) to row kernels: scf.forall on tensors
/// whose bodies work on scalars and vector<F> rows (FlashAttention.cpp).
void populateFlashAttentionLoweringPatterns(RewritePatternSet &patterns);

/// Above those: moe.flash_attention without relative keys, with a head
/// width of at most 128 and no reader of its logsumexp (no backward pass),
/// to moe.flash_attention_kernel (the GPU's tensor-core kernel, built after
/// bufferization).
void populateFlashAttentionKernelPatterns(RewritePatternSet &patterns);

} // namespace mlir::switchyard

#endif // SWITCHYARD_DIALECT_CONVERSION_MOETOLINALG_MOETOLINALG_H
