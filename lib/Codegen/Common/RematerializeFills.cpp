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
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDREMATERIALIZEFILLSPASS
#include "lib/Codegen/Common/Passes.h.inc"
} // namespace mlir::switchyard

using namespace mlir;

namespace {

/// Whether `use` is where its op writes: a shared output of an scf.forall,
/// or (with `inits`) an init of another destination-passing op.
bool isDestination(OpOperand &use, bool inits) {
  if (auto forall = dyn_cast<scf::ForallOp>(use.getOwner())) {
    OperandRange outputs = forall.getOutputs();
    unsigned index = use.getOperandNumber();
    return index >= outputs.getBeginOperandIndex() &&
           index < outputs.getBeginOperandIndex() + outputs.size();
  }
  if (auto dps = dyn_cast<DestinationStyleOpInterface>(use.getOwner()))
    return inits && dps.isDpsInit(&use);
  return false;
}

/// Gives every destination use of `value` (see isDestination) by an op in
/// its block, but the first in program order, a copy of `value` made by
/// `clone` right before that op.
void cloneForEachDestination(IRRewriter &rewriter, Value value, bool inits,
                             function_ref<Value(IRRewriter &)> clone) {
  Block *block = value.getParentBlock();
  SmallVector<OpOperand *> uses;
  for (OpOperand &use : value.getUses())
    if (isDestination(use, inits) &&
        use.getOwner()->getBlock() == block)
      uses.push_back(&use);
  if (uses.size() < 2)
    return;
  llvm::sort(uses, [](OpOperand *a, OpOperand *b) {
    if (a->getOwner() == b->getOwner())
      return a->getOperandNumber() < b->getOperandNumber();
    return a->getOwner()->isBeforeInBlock(b->getOwner());
  });
  for (OpOperand *use : llvm::drop_begin(uses)) {
    rewriter.setInsertionPoint(use->getOwner());
    Value copy = clone(rewriter);
    rewriter.modifyOpInPlace(use->getOwner(), [&] { use->set(copy); });
  }
}

struct SwitchyardRematerializeFillsPass
    : public switchyard::impl::SwitchyardRematerializeFillsPassBase<
          SwitchyardRematerializeFillsPass> {
  void runOnOperation() override {
    SmallVector<linalg::FillOp> fills;
    SmallVector<tensor::EmptyOp> empties;
    getOperation().walk([&](Operation *op) {
      if (op->getNumResults() != 1 || op->getResult(0).hasOneUse())
        return;
      if (auto fill = dyn_cast<linalg::FillOp>(op);
          fill && fill.hasPureTensorSemantics())
        fills.push_back(fill);
      if (auto empty = dyn_cast<tensor::EmptyOp>(op))
        empties.push_back(empty);
    });
    IRRewriter rewriter(&getContext());
    // Every op that starts from a fill but the first gets a fill of its own
    // (the ops that would otherwise copy the filled buffer).
    for (linalg::FillOp fill : fills) {
      auto empty =
          fill.getDpsInitOperand(0)->get().getDefiningOp<tensor::EmptyOp>();
      if (!empty)
        continue;
      cloneForEachDestination(
          rewriter, fill->getResult(0), /*inits=*/true,
          [&](IRRewriter &b) {
            IRMapping mapping;
            mapping.map(empty.getResult(), b.clone(*empty)->getResult(0));
            return b.clone(*fill, mapping)->getResult(0);
          });
    }
    // Empty tensors that several row loops write into: one each.
    for (tensor::EmptyOp empty : empties)
      cloneForEachDestination(
          rewriter, empty.getResult(), /*inits=*/false,
          [&](IRRewriter &b) { return b.clone(*empty)->getResult(0); });
  }
};

} // namespace
