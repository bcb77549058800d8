//===- RematerializeFills.cpp - one fill per op that accumulates into it --===//
//
// Implements `switchyard-rematerialize-fills`: a linalg.fill on tensors that
// several ops take as their initial value (the zeros of several
// reductions, which CSE merged) is cloned for each of them, with its
// tensor.empty, right before it. Bufferization then gives each op a buffer
// that its own fill initializes, instead of filling one buffer and copying
// it into a new one per op.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDREMATERIALIZEFILLSPASS
#include "lib/Codegen/Common/Passes.h.inc"
} // namespace mlir::switchyard

using namespace mlir;

namespace {

struct SwitchyardRematerializeFillsPass
    : public switchyard::impl::SwitchyardRematerializeFillsPassBase<
          SwitchyardRematerializeFillsPass> {
  void runOnOperation() override {
    SmallVector<linalg::FillOp> fills;
    getOperation().walk([&](linalg::FillOp fill) {
      if (fill.hasPureTensorSemantics() && !fill->getResult(0).hasOneUse())
        fills.push_back(fill);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::FillOp fill : fills) {
      auto empty =
          fill.getDpsInitOperand(0)->get().getDefiningOp<tensor::EmptyOp>();
      if (!empty)
        continue;
      // Every use but the first gets a fill of its own: an init operand of
      // a destination-passing op in the same block (the ops that would
      // otherwise copy the filled buffer).
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : fill->getResult(0).getUses()) {
        auto user = dyn_cast<DestinationStyleOpInterface>(use.getOwner());
        if (user && user.isDpsInit(&use) &&
            use.getOwner()->getBlock() == fill->getBlock())
          uses.push_back(&use);
      }
      llvm::sort(uses, [](OpOperand *a, OpOperand *b) {
        return a->getOwner()->isBeforeInBlock(b->getOwner());
      });
      for (OpOperand *use : llvm::drop_begin(uses)) {
        rewriter.setInsertionPoint(use->getOwner());
        Operation *newEmpty = rewriter.clone(*empty);
        IRMapping mapping;
        mapping.map(empty.getResult(), newEmpty->getResult(0));
        Operation *newFill = rewriter.clone(*fill, mapping);
        rewriter.modifyOpInPlace(use->getOwner(),
                                 [&] { use->set(newFill->getResult(0)); });
      }
    }
  }
};

} // namespace
