//===- CpuLoopOrder.cpp - linalg loop nests for CPU vector code -----------===//
//
// Implements `switchyard-cpu-loop-order` (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Contractions.h"
#include "lib/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDCPULOOPORDERPASS
#include "lib/Codegen/CPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-cpu-loop-order"

using namespace mlir;

namespace {

/// What an access strided along the innermost loop costs against a
/// unit-stride one (a gather per vector lane against one vector load); an
/// access the innermost loop does not move is hoisted and costs nothing.
constexpr int kStridedCost = 8;

/// A loop of fewer static iterations than this is no vector loop (the
/// k = 3 choices of a route): nested innermost it costs as a strided access.
constexpr int64_t kShortLoop = 8;

/// The loop dimension to nest innermost: the one whose accesses (operands,
/// and the body's loads whose last subscript is a loop's linalg.index:
/// gathers) cost least when it moves fastest (kStridedCost for each access
/// it strides through, 1 for each it walks along the last index, 0 for
/// each it leaves in place, and kStridedCost more for a loop shorter than
/// kShortLoop); on a tie a parallel one, then the later one.
/// `y[t] = Σ_v exp(x[t, v] − m[t])` nests v innermost: x unit-stride, y and
/// m in place, where counting the unit-stride accesses alone took t (two of
/// three) and read x down its columns.
unsigned innermostDim(linalg::LinalgOp op) {
  unsigned loops = op.getNumLoops();
  SmallVector<int> cost(loops, 0);
  for (OpOperand &operand : op->getOpOperands()) {
    AffineMap map = op.getMatchingIndexingMap(&operand);
    if (map.getNumResults() == 0)
      continue;
    for (unsigned dim = 0; dim < loops; ++dim) {
      if (!map.isFunctionOfDim(dim))
        continue;
      auto last = dyn_cast<AffineDimExpr>(map.getResults().back());
      cost[dim] += last && last.getPosition() == dim ? 1 : kStridedCost;
    }
  }
  op->walk([&](memref::LoadOp load) {
    if (load.getIndices().empty())
      return;
    if (auto index = load.getIndices().back().getDefiningOp<linalg::IndexOp>())
      cost[index.getDim()] += 1;
  });
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  for (unsigned dim = 0; dim < loops; ++dim)
    if (!ShapedType::isDynamic(ranges[dim]) && ranges[dim] < kShortLoop)
      cost[dim] += kStridedCost;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  auto rank = [&](unsigned dim) {
    return std::make_tuple(-cost[dim],
                           iterators[dim] == utils::IteratorType::parallel,
                           dim);
  };
  unsigned best = loops - 1;
  for (unsigned dim = 0; dim < loops; ++dim)
    if (rank(dim) > rank(best))
      best = dim;
  return best;
}

struct SwitchyardCpuLoopOrderPass
    : public switchyard::impl::SwitchyardCpuLoopOrderPassBase<
          SwitchyardCpuLoopOrderPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.getNumReductionLoops() > 0)
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : ops) {
      unsigned loops = op.getNumLoops(), inner = innermostDim(op);
      LLVM_DEBUG(llvm::dbgs()
                 << op->getName() << " at " << op->getLoc() << ": loop "
                 << inner << " of " << loops << " innermost"
                 << (inner != loops - 1 ? " (interchanged)" : "") << "\n");
      linalg::LinalgOp reordered = op;
      if (inner != loops - 1) {
        SmallVector<unsigned> order;
        for (unsigned dim = 0; dim < loops; ++dim)
          if (dim != inner)
            order.push_back(dim);
        order.push_back(inner);
        FailureOr<linalg::GenericOp> generic =
            switchyard::reorderLoops(rewriter, op, order);
        if (failed(generic))
          return signalPassFailure();
        reordered = *generic;
      }
      // Let LLVM vectorize the reduction (a tree of partial sums).
      reordered->walk([](arith::AddFOp add) {
        add.setFastmath(add.getFastmath() | arith::FastMathFlags::reassoc);
      });
    }
  }
};

} // namespace
