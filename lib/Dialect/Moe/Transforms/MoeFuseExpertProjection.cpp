//===- MoeFuseExpertProjection.cpp - fused SwitchHead projections ---------===//
//
// Implements moe-fuse-expert-projection: moe.expert_proj and
// moe.expert_merge become their one-kernel forms moe.fused_expert_proj and
// moe.fused_expert_merge, where the accumulated width is static, and their
// gradients moe.expert_proj_grad and moe.expert_merge_grad become
// moe.fused_expert_proj_grad and moe.fused_expert_merge_grad (one kernel per
// gradient), where both widths of the expert weight are static.
//
//===----------------------------------------------------------------------===//

#include "dialect/Moe/IR/MoeOps.h"
#include "dialect/Moe/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEFUSEEXPERTPROJECTIONPASS
#include "dialect/Moe/Transforms/Passes.h.inc"
} // namespace mlir::moe

#define DEBUG_TYPE "moe-fuse-expert-projection"

using namespace mlir;
using namespace mlir::moe;

namespace {

/// Replaces `FromOp` by the fused `ToOp`, which takes the same operands and
/// has the same results, where `fusible` holds: the fused kernels keep
/// static-width rows in vector registers.
template <typename FromOp, typename ToOp>
struct FuseInto : public OpRewritePattern<FromOp> {
  FuseInto(MLIRContext *context, bool (*fusible)(FromOp), StringRef reason)
      : OpRewritePattern<FromOp>(context), fusible(fusible), reason(reason) {}

  LogicalResult matchAndRewrite(FromOp op,
                                PatternRewriter &rewriter) const override {
    if (!fusible(op))
      return rewriter.notifyMatchFailure(op, reason);
    LLVM_DEBUG(llvm::dbgs() << op->getName() << " at " << op->getLoc() << " -> "
                            << ToOp::getOperationName() << "\n");
    rewriter.replaceOpWithNewOp<ToOp>(op, op->getResultTypes(),
                                      op->getOperands());
    return success();
  }

  bool (*fusible)(FromOp);
  StringRef reason;
};

/// Whether the widths of a stacked expert weight [H·E, A, B] (the lengths of
/// the gradient kernels' vectors) are static.
bool hasStaticWidths(Value weight) {
  auto type = cast<RankedTensorType>(weight.getType());
  return !type.isDynamicDim(1) && !type.isDynamicDim(2);
}

struct MoeFuseExpertProjectionPass
    : public moe::impl::MoeFuseExpertProjectionPassBase<
          MoeFuseExpertProjectionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    MLIRContext *context = &getContext();
    // moe.expert_proj -> moe.fused_expert_proj (static head width).
    patterns.add<FuseInto<ExpertProjOp, FusedExpertProjOp>>(
        context,
        [](ExpertProjOp op) {
          return !op.getResult().getType().isDynamicDim(2);
        },
        "dynamic head width");
    // moe.expert_merge -> moe.fused_expert_merge (static model width).
    patterns.add<FuseInto<ExpertMergeOp, FusedExpertMergeOp>>(
        context,
        [](ExpertMergeOp op) {
          return !op.getResult().getType().isDynamicDim(1);
        },
        "dynamic model width");
    // The gradients (static weight widths).
    patterns.add<FuseInto<ExpertProjGradOp, FusedExpertProjGradOp>>(
        context,
        [](ExpertProjGradOp op) { return hasStaticWidths(op.getWeight()); },
        "dynamic weight width");
    patterns.add<FuseInto<ExpertMergeGradOp, FusedExpertMergeGradOp>>(
        context,
        [](ExpertMergeGradOp op) { return hasStaticWidths(op.getWeight()); },
        "dynamic weight width");
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
