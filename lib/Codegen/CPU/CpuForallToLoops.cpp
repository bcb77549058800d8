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
