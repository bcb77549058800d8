//===- CpuForallToLoops.cpp - scf.forall as parallel CPU loops ------------===//
//
// Implements `switchyard-cpu-forall-to-loops` (see Passes.td): each
// bufferized scf.forall becomes nested scf.for loops, the outermost marked
// `switchyard.parallel`, since a forall's iterations are independent by
// definition.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/CPU/Passes.h"
#include "lib/Codegen/Common/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDCPUFORALLTOLOOPSPASS
#include "lib/Codegen/CPU/Passes.h.inc"
} // namespace mlir::switchyard

using namespace mlir;
using namespace mlir::switchyard;

namespace {

/// The largest temporary of one iteration that goes on the stack.
constexpr int64_t kMaxStackBytes = 16 * 1024;

/// Temporaries of one iteration (the row loops' per-row results) on the
/// stack: each static allocation in `forall`'s body of at most
/// kMaxStackBytes (the body frees it) becomes an alloca, which
/// switchyard-cpu-outline-loops moves to the entry of the loop's function.
/// A heap allocation per row cost more than the row's work.
void stackTemporaries(RewriterBase &rewriter, scf::ForallOp forall) {
  SmallVector<memref::AllocOp> allocs;
  for (Operation &op : forall.getBody()->without_terminator())
    if (auto alloc = dyn_cast<memref::AllocOp>(op))
      if (alloc.getType().hasStaticShape() &&
          alloc.getType().getNumElements() *
                  alloc.getType().getElementTypeBitWidth() / 8 <=
              kMaxStackBytes)
        allocs.push_back(alloc);
  for (memref::AllocOp alloc : allocs) {
    for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
      if (isa<memref::DeallocOp>(user))
        rewriter.eraseOp(user);
    rewriter.setInsertionPoint(alloc);
    rewriter.replaceOpWithNewOp<memref::AllocaOp>(alloc, alloc.getType(),
                                                  alloc.getAlignmentAttr());
  }
}

struct SwitchyardCpuForallToLoopsPass
    : public switchyard::impl::SwitchyardCpuForallToLoopsPassBase<
          SwitchyardCpuForallToLoopsPass> {
  void runOnOperation() override {
    // Outer foralls first: a nested one is converted after its parent, in
    // the parent's new loops.
    SmallVector<scf::ForallOp> foralls;
    getOperation().walk<WalkOrder::PreOrder>(
        [&](scf::ForallOp forall) { foralls.push_back(forall); });
    IRRewriter rewriter(&getContext());
    for (scf::ForallOp forall : foralls) {
      if (forall->getNumResults() != 0) {
        forall.emitError("expected a bufferized scf.forall (no results)");
        return signalPassFailure();
      }
      stackTemporaries(rewriter, forall);
      rewriter.setInsertionPoint(forall);
      SmallVector<Operation *> loops;
      if (failed(scf::forallToForLoop(rewriter, forall, &loops)))
        return signalPassFailure();
      if (!loops.empty())
        loops.front()->setAttr(kParallelLoopAttr, rewriter.getUnitAttr());
    }
  }
};

} // namespace
