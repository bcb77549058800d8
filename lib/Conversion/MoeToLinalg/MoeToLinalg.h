//===- MoeToLinalg.h - moe to linalg lowering patterns ----------*- C++ -*-===//
//
// The reference lowering of the `moe` ops to linalg on tensors.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CONVERSION_MOETOLINALG_MOETOLINALG_H
#define SWITCHYARD_LIB_CONVERSION_MOETOLINALG_MOETOLINALG_H

#include "mlir/IR/BuiltinTypes.h"

#include <cstdint>

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace mlir::switchyard {

/// Adds the patterns that rewrite each `moe` op into linalg.generic ops.
/// Includes the row kernels of the fused ops (populateFusedKernelPatterns,
/// populateFlashAttentionLoweringPatterns, with `attentionRounding`);
/// moe.embed_grad becomes a scatter-add with `scatterEmbeddingGradient`, a
/// one-hot matmul without; `routerLogitsMatmul` as
/// populateFusedKernelPatterns.
void populateMoeToLinalgPatterns(RewritePatternSet &patterns,
                                 FloatType attentionRounding = {},
                                 bool scatterEmbeddingGradient = false,
                                 bool routerLogitsMatmul = false);

/// Adds the patterns that rewrite each fused moe op (moe.fused_router,
/// moe.fused_expert_proj, ...) into one row kernel: an scf.forall on
/// tensors over scalars and vectors (lib/Conversion/MoeToLinalg/
/// FusedKernels.cpp). With `routerLogitsMatmul`, moe.fused_router's
/// logits are one matmul first, which its row kernel reads.
void populateFusedKernelPatterns(RewritePatternSet &patterns,
                                 bool routerLogitsMatmul = false);

/// The expert projections and their gradients with the routes grouped by
/// expert (GroupedExperts.cpp), above the dense formulation's patterns:
/// with `tileRows` 0 the host formulation (the sort read on the host), with
/// T > 0 the padded one (segments padded to T rows, no host reads).
void populateGroupedExpertPatterns(RewritePatternSet &patterns,
                                   int64_t tileRows = 0);

/// The fused expert ops (moe.fused_expert_proj, moe.fused_expert_merge and
/// their gradients) in the grouped formulation without host reads, each
/// expert's segment padded to multiples of `tileRows` (> 0): the grouped
/// kernels gather their rows by route, so that no gathered copy exists.
void populateFusedGroupedExpertPatterns(RewritePatternSet &patterns,
                                        int64_t tileRows);

/// Adds the lowerings of moe.flash_attention and moe.flash_attention_grad
/// (the ops of moe-fuse-attention) to row kernels: scf.forall on tensors
/// whose bodies work on scalars and vector<F> rows (FlashAttention.cpp).
/// With `rounding` (bf16 or f16), the attention the GPU's tensor-core
/// kernels take (head width at most 128) rounds the factors those kernels
/// round: Q, K, V, the relative keys and dO as read (Δ = Σ_f dO·O from
/// the unrounded dO), the backward pass's weights P for Pᵀ·dO and dS for
/// dS·K and dSᵀ·Q; the CPU reference of the GPU's bf16/f16 route. Not the
/// forward pass's weights: the kernel rounds each exp(s - m) against its
/// block's maximum m, the row kernel would against the running one, and
/// two roundings at different points differ by more than one.
void populateFlashAttentionLoweringPatterns(RewritePatternSet &patterns,
                                            FloatType rounding = {});

/// Above those: moe.flash_attention and moe.flash_attention_grad without
/// relative keys, with a head width of at most 128, to
/// moe.flash_attention_kernel and moe.flash_attention_grad_kernel (the
/// GPU's tensor-core kernels, built after bufferization); a forward pass
/// whose logsumexp a backward row kernel reads stays a row kernel.
void populateFlashAttentionKernelPatterns(RewritePatternSet &patterns);

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CONVERSION_MOETOLINALG_MOETOLINALG_H
