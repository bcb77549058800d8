//===- LinalgToLoops.cpp - linalg ops on buffers to loops, locally --------===//
//
// Implements `switchyard-linalg-to-loops`: upstream's lowering of linalg ops
// on buffers to `scf.for` / `scf.parallel` nests and its clean-up, with each
// op lowered once, up front, and no region simplification.
//
//===----------------------------------------------------------------------===//

#include "dialect/Gpu/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDLINALGTOLOOPSPASS
#include "dialect/Gpu/Transforms/Passes.h.inc"
} // namespace mlir::switchyard

using namespace mlir;

namespace {
/// Upstream's `FoldAffineOp` (mlir/lib/Dialect/Linalg/Transforms/Loops.cpp,
/// which does not export it): an `affine.apply` of a single-result map with
/// no operand and a constant result becomes that constant; with one operand
/// and a bare dimension or symbol, that operand.
struct FoldTrivialAffineApply : public OpRewritePattern<affine::AffineApplyOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(affine::AffineApplyOp op,
                                PatternRewriter &rewriter) const override {
    AffineMap map = op.getAffineMap();
    if (map.getNumResults() != 1 || map.getNumInputs() > 1)
      return failure();
    AffineExpr expr = map.getResult(0);
    if (map.getNumInputs() == 0) {
      auto constant = dyn_cast<AffineConstantExpr>(expr);
      if (!constant)
        return failure();
      rewriter.replaceOpWithNewOp<arith::ConstantIndexOp>(op,
                                                          constant.getValue());
      return success();
    }
    if (!isa<AffineDimExpr, AffineSymbolExpr>(expr))
      return failure();
    rewriter.replaceOp(op, op->getOperand(0));
    return success();
  }
};

struct SwitchyardLinalgToLoopsPass
    : public switchyard::impl::SwitchyardLinalgToLoopsPassBase<
          SwitchyardLinalgToLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    SmallVector<linalg::LinalgOp> linalgOps;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.hasPureBufferSemantics())
        linalgOps.push_back(op);
    });

    IRRewriter rewriter(context);
    for (linalg::LinalgOp op : linalgOps) {
      rewriter.setInsertionPoint(op);
      FailureOr<linalg::LinalgLoops> loops =
          parallel ? linalg::linalgOpToParallelLoops(rewriter, op)
                   : linalg::linalgOpToLoops(rewriter, op);
      if (failed(loops)) {
        op.emitOpError("could not be lowered to loops");
        return signalPassFailure();
      }
      rewriter.eraseOp(op);
    }

    // The clean-up of upstream's passes, with the same folding of every op
    // of the function (constants deduplicated and hoisted, identities
    // folded, dead ops erased: the pipelines after this rely on it), but
    // without its region simplification.
    RewritePatternSet patterns(context);
    memref::DimOp::getCanonicalizationPatterns(patterns, context);
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, context);
    patterns.add<FoldTrivialAffineApply>(context);
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    // As upstream: a clean-up that has not converged within the driver's
    // iterations leaves correct IR.
    (void)applyPatternsGreedily(getOperation(), std::move(patterns), config);
  }
};
} // namespace
