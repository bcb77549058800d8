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

namespace mlir::moe {
#define GEN_PASS_DEF_MOEFUSEEXPERTPROJECTIONPASS
#include "dialect/Moe/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

/// moe.expert_proj -> moe.fused_expert_proj (static head width).
struct FuseExpertProj : public OpRewritePattern<ExpertProjOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ExpertProjOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getResult().getType().isDynamicDim(2))
      return rewriter.notifyMatchFailure(op, "dynamic head width");
    rewriter.replaceOpWithNewOp<FusedExpertProjOp>(
        op, op.getResult().getType(), op.getInput(), op.getWeight(),
        op.getGates(), op.getIndices());
    return success();
  }
};

/// moe.expert_merge -> moe.fused_expert_merge (static model width).
struct FuseExpertMerge : public OpRewritePattern<ExpertMergeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ExpertMergeOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getResult().getType().isDynamicDim(1))
      return rewriter.notifyMatchFailure(op, "dynamic model width");
    rewriter.replaceOpWithNewOp<FusedExpertMergeOp>(
        op, op.getResult().getType(), op.getHeads(), op.getWeight(),
        op.getGates(), op.getIndices());
    return success();
  }
};

/// Whether the widths of a stacked expert weight [H·E, A, B] (the lengths of
/// the gradient kernels' vectors) are static.
bool hasStaticWidths(Value weight) {
  auto type = cast<RankedTensorType>(weight.getType());
  return !type.isDynamicDim(1) && !type.isDynamicDim(2);
}

/// moe.expert_proj_grad -> moe.fused_expert_proj_grad (static widths).
struct FuseExpertProjGrad : public OpRewritePattern<ExpertProjGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ExpertProjGradOp op,
                                PatternRewriter &rewriter) const override {
    if (!hasStaticWidths(op.getWeight()))
      return rewriter.notifyMatchFailure(op, "dynamic weight width");
    rewriter.replaceOpWithNewOp<FusedExpertProjGradOp>(op, op->getResultTypes(),
                                                       op->getOperands());
    return success();
  }
};

/// moe.expert_merge_grad -> moe.fused_expert_merge_grad (static widths).
struct FuseExpertMergeGrad : public OpRewritePattern<ExpertMergeGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ExpertMergeGradOp op,
                                PatternRewriter &rewriter) const override {
    if (!hasStaticWidths(op.getWeight()))
      return rewriter.notifyMatchFailure(op, "dynamic weight width");
    rewriter.replaceOpWithNewOp<FusedExpertMergeGradOp>(
        op, op->getResultTypes(), op->getOperands());
    return success();
  }
};

struct MoeFuseExpertProjectionPass
    : public moe::impl::MoeFuseExpertProjectionPassBase<
          MoeFuseExpertProjectionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseExpertProj, FuseExpertMerge, FuseExpertProjGrad,
                 FuseExpertMergeGrad>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
