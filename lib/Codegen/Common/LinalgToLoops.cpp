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

/// The `linalg.fill` directly before `op` that initializes its one output,
/// if `op`'s loop nest can store the fill's value itself: `op` does not
/// read that buffer as an input, its parallel dimensions come first and
/// index the output in some order, and its reduction dimensions follow (at
/// least one parallel dimension, so that the stores happen inside the
/// nest). Null otherwise.
linalg::FillOp foldableFill(linalg::LinalgOp op) {
  auto fill = dyn_cast_or_null<linalg::FillOp>(op->getPrevNode());
  if (!fill || !fill.hasPureBufferSemantics() || op.getNumDpsInits() != 1)
    return {};
  OpOperand *init = op.getDpsInitOperand(0);
  Value buffer = init->get();
  if (fill.getDpsInitOperand(0)->get() != buffer ||
      fill.value().getType() != getElementTypeOrSelf(buffer.getType()))
    return {};
  if (llvm::any_of(op.getDpsInputOperands(),
                   [&](OpOperand *input) { return input->get() == buffer; }))
    return {};
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  auto firstReduction = llvm::find(iterators, utils::IteratorType::reduction);
  unsigned numParallel = std::distance(iterators.begin(), firstReduction);
  if (numParallel == 0 ||
      std::find(firstReduction, iterators.end(),
                utils::IteratorType::parallel) != iterators.end())
    return {};
  AffineMap map = op.getMatchingIndexingMap(init);
  if (!map.isProjectedPermutation() || map.getNumResults() != numParallel)
    return {};
  return fill;
}

/// Stores `fill`'s value into its buffer inside `loops`, the loop nest of
/// the op that reads it as its initial value (foldableFill): per element of
/// the output, before the reduction loops, at the indices the output's
/// indexing `map` gives.
void storeFillInNest(RewriterBase &rewriter, linalg::FillOp fill, AffineMap map,
                     ArrayRef<Operation *> loops) {
  SmallVector<Value> ivs;
  Operation *firstReductionLoop = nullptr;
  for (Operation *loop : loops) {
    if (ivs.size() == map.getNumResults() && !firstReductionLoop)
      firstReductionLoop = loop;
    if (auto parallel = dyn_cast<scf::ParallelOp>(loop))
      llvm::append_range(ivs, parallel.getInductionVars());
    else
      ivs.push_back(cast<scf::ForOp>(loop).getInductionVar());
  }
  OpBuilder::InsertionGuard guard(rewriter);
  if (firstReductionLoop)
    rewriter.setInsertionPoint(firstReductionLoop);
  else
    rewriter.setInsertionPointToStart(&loops.back()->getRegion(0).front());
  SmallVector<Value> indices;
  for (AffineExpr result : map.getResults())
    indices.push_back(ivs[cast<AffineDimExpr>(result).getPosition()]);
  memref::StoreOp::create(rewriter, fill.getLoc(), fill.value(),
                          fill.getDpsInitOperand(0)->get(), indices);
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

    // The fills that the nests of the ops after them store instead.
    llvm::DenseMap<Operation *, linalg::FillOp> fillOf;
    llvm::DenseSet<Operation *> foldedFills;
    if (foldFills) {
      for (linalg::LinalgOp op : linalgOps) {
        if (linalg::FillOp fill = foldableFill(op)) {
          fillOf[op] = fill;
          foldedFills.insert(fill);
        }
      }
    }

    IRRewriter rewriter(context);
    for (linalg::LinalgOp op : linalgOps) {
      if (foldedFills.contains(op))
        continue;
      rewriter.setInsertionPoint(op);
      linalg::FillOp fill = fillOf.lookup(op);
      bool independent =
          markParallel && !parallel && isIndependentOuterLoop(op);
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
      if (fill && !loops->empty()) {
        storeFillInNest(rewriter, fill,
                        op.getMatchingIndexingMap(op.getDpsInitOperand(0)),
                        *loops);
        rewriter.eraseOp(fill);
      }
      rewriter.eraseOp(op);
    }
    LLVM_DEBUG(llvm::dbgs()
               << "@" << getOperation().getName() << ": " << linalgOps.size()
               << " linalg ops lowered to "
               << (parallel ? "scf.parallel" : "scf.for") << " nests, "
               << foldedFills.size() << " fills stored by the next op's\n");

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
