//===- LinalgToLoops.cpp - linalg ops on buffers to loops, locally --------===//
//
// Implements `switchyard-linalg-to-loops`: upstream's lowering of linalg ops
// on buffers to `scf.for` / `scf.parallel` nests and its clean-up, with each
// op lowered once, up front, and no region simplification.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDLINALGTOLOOPSPASS
#include "lib/Codegen/Common/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-linalg-to-loops"

using namespace mlir;

namespace {

/// Whether the iterations of `op`'s outermost loop are independent: its
/// dimension is parallel (each iteration writes its own elements of the
/// outputs, which it alone reads) and the body writes no memory of its own
/// (a scatter into another buffer could write one element from two
/// iterations).
bool isIndependentOuterLoop(linalg::LinalgOp op) {
  if (op.getNumLoops() == 0 ||
      op.getIteratorTypesArray().front() != utils::IteratorType::parallel)
    return false;
  WalkResult writes = op->getRegion(0).walk([](Operation *inner) {
    auto effects = dyn_cast<MemoryEffectOpInterface>(inner);
    if ((!effects && !inner->hasTrait<OpTrait::HasRecursiveMemoryEffects>() &&
         !isa<linalg::YieldOp>(inner)) ||
        (effects && effects.hasEffect<MemoryEffects::Write>()))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return !writes.wasInterrupted();
}

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
      bool independent = markParallel && !parallel &&
                         isIndependentOuterLoop(op);
      FailureOr<linalg::LinalgLoops> loops =
          parallel ? linalg::linalgOpToParallelLoops(rewriter, op)
                   : linalg::linalgOpToLoops(rewriter, op);
      if (failed(loops)) {
        op.emitOpError("could not be lowered to loops");
        return signalPassFailure();
      }
      if (independent && !loops->empty())
        if (auto outer = dyn_cast<scf::ForOp>(loops->front()))
          outer->setAttr(switchyard::kParallelLoopAttr, rewriter.getUnitAttr());
      rewriter.eraseOp(op);
    }
    LLVM_DEBUG(llvm::dbgs()
               << "@" << getOperation().getName() << ": " << linalgOps.size()
               << " linalg ops lowered to "
               << (parallel ? "scf.parallel" : "scf.for") << " nests\n");

    // The clean-up of upstream's passes, with the same folding of every op
    // of the function (constants deduplicated and hoisted, identities
    // folded, dead ops erased: the pipelines after this rely on it), but
    // without its region simplification. Upstream also adds a pattern for
    // trivial `affine.apply` ops (a constant, a bare dimension or symbol);
    // `affine.apply`'s folder, which the driver tries first, does the same.
    RewritePatternSet patterns(context);
    memref::DimOp::getCanonicalizationPatterns(patterns, context);
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, context);
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    // As upstream: a clean-up that has not converged within the driver's
    // iterations leaves correct IR.
    (void)applyPatternsGreedily(getOperation(), std::move(patterns), config);
  }
};
} // namespace
