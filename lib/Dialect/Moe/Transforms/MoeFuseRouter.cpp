//===- MoeFuseRouter.cpp - gate and top-k into moe.fused_router -----------===//
//
// Implements moe-fuse-router: every moe.topk on the scores of a moe.gate
// becomes one moe.fused_router (router matmul, sigmoid and top-k in one
// kernel). Runs after differentiation: the gate's gradient rule has
// already read the scores, which the fused op then also produces.
//
//===----------------------------------------------------------------------===//

#include "dialect/Moe/IR/MoeOps.h"
#include "dialect/Moe/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEFUSEROUTERPASS
#include "dialect/Moe/Transforms/Passes.h.inc"
} // namespace mlir::moe

#define DEBUG_TYPE "moe-fuse-router"

using namespace mlir;
using namespace mlir::moe;

namespace {

/// moe.topk(moe.gate(x, w)) -> moe.fused_router(x, w). Other users of the
/// scores read the fused op's scores; an expert-dropout mask drawn "like"
/// the scores (it reads only their shape) gets a shape-only stand-in, since
/// the fused op, which consumes the mask, now produces the scores.
struct FuseGateTopK : public OpRewritePattern<TopKOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TopKOp topk,
                                PatternRewriter &rewriter) const override {
    auto gate = topk.getScores().getDefiningOp<GateOp>();
    if (!gate)
      return rewriter.notifyMatchFailure(topk,
                                         "scores do not come from moe.gate");
    Value scores = gate.getResult();
    RankedTensorType scoresType = gate.getResult().getType();
    if (gate->getBlock() != topk->getBlock())
      return rewriter.notifyMatchFailure(topk, "gate in another block");

    // Every other user must come after the top-k (then it can read the
    // fused op's scores) or only read the shape (dropout masks).
    SmallVector<DropoutMaskOp> shapeUsers;
    for (Operation *user : scores.getUsers()) {
      if (user == topk)
        continue;
      if (auto mask = dyn_cast<DropoutMaskOp>(user)) {
        shapeUsers.push_back(mask);
        continue;
      }
      if (user->getBlock() != topk->getBlock() || user->isBeforeInBlock(topk))
        return rewriter.notifyMatchFailure(
            topk, "a user of the scores precedes the top-k");
    }

    Location loc = topk.getLoc();
    LLVM_DEBUG(llvm::dbgs() << "moe.gate + moe.topk at " << loc
                            << " -> moe.fused_router (" << shapeUsers.size()
                            << " dropout masks given a shape-only stand-in)\n");
    if (!shapeUsers.empty()) {
      rewriter.setInsertionPointAfter(gate);
      SmallVector<OpFoldResult> sizes = {
          tensor::getMixedSize(rewriter, loc, gate.getInput(), 0)};
      for (int64_t dim : scoresType.getShape().drop_front())
        sizes.push_back(rewriter.getIndexAttr(dim));
      Value like = tensor::EmptyOp::create(rewriter, loc, sizes,
                                           scoresType.getElementType());
      like = tensor::CastOp::create(rewriter, loc, scoresType, like);
      for (DropoutMaskOp mask : shapeUsers)
        rewriter.modifyOpInPlace(mask,
                                 [&] { mask.getLikeMutable().assign(like); });
    }

    rewriter.setInsertionPoint(topk);
    auto fused = FusedRouterOp::create(
        rewriter, loc,
        TypeRange{topk.getValues().getType(), topk.getIndices().getType(),
                  scoresType},
        gate.getInput(), gate.getWeight(), topk.getK(), topk.getMask());
    rewriter.replaceOp(topk, {fused.getValues(), fused.getIndices()});
    rewriter.replaceAllUsesWith(scores, fused.getScores());
    rewriter.eraseOp(gate);
    return success();
  }
};

/// Applies FuseGateTopK everywhere.
struct MoeFuseRouterPass
    : public moe::impl::MoeFuseRouterPassBase<MoeFuseRouterPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseGateTopK>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
