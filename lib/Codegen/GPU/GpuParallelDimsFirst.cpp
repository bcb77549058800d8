//===- GpuParallelDimsFirst.cpp - parallel linalg dimensions outermost ----===//
//
// Implements `switchyard-gpu-parallel-dims-first`: linalg ops are
// interchanged so that their parallel dimensions come before their
// reduction dimensions, and every op becomes one kernel.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Contractions.h"
#include "lib/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUPARALLELDIMSFIRSTPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-gpu-parallel-dims-first"

using namespace mlir;

namespace {
struct SwitchyardGpuParallelDimsFirstPass
    : public switchyard::impl::SwitchyardGpuParallelDimsFirstPassBase<
          SwitchyardGpuParallelDimsFirstPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : ops) {
      // Parallel dimensions first, each group in its original order.
      SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
      SmallVector<unsigned> order;
      for (auto [dim, iterator] : llvm::enumerate(iterators))
        if (iterator == utils::IteratorType::parallel)
          order.push_back(dim);
      for (auto [dim, iterator] : llvm::enumerate(iterators))
        if (iterator != utils::IteratorType::parallel)
          order.push_back(dim);
      if (llvm::equal(order, llvm::seq<unsigned>(0, iterators.size())))
        continue;

      LLVM_DEBUG(llvm::dbgs()
                 << "parallel dimensions first in " << op->getName() << " at "
                 << op->getLoc() << "\n");
      if (failed(switchyard::reorderLoops(rewriter, op, order)))
        return signalPassFailure();
    }
  }
};
} // namespace
