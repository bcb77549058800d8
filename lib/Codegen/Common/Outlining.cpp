//===- Outlining.cpp - ops into functions of their own --------------------===//
//
// outlineOps with upstream's scf::outlineSingleBlockRegion: the ops are
// wrapped in an scf.execute_region, whose region is outlined, and the
// region op is then replaced by the call it holds.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Outlining.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;

/// Clones the constants that `region` uses from above into its entry block,
/// so that the outlined function keeps them (loop bounds, sizes) constant.
/// One walk over the region's operands: replacing each constant's uses
/// (every use in the function, for each op outlined) would take quadratic
/// time on a training step.
static void cloneConstantsInto(RewriterBase &rewriter, Region &region) {
  DenseMap<Value, Value> clones;
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(&region.front());
  region.walk<WalkOrder::PreOrder>([&](Operation *op) {
    for (OpOperand &operand : op->getOpOperands()) {
      Value value = operand.get();
      if (region.isAncestor(value.getParentRegion()) ||
          !matchPattern(value, m_Constant()))
        continue;
      auto [clone, inserted] = clones.try_emplace(value);
      if (inserted)
        clone->second = rewriter.clone(*value.getDefiningOp())->getResult(0);
      rewriter.modifyOpInPlace(op, [&] { operand.set(clone->second); });
    }
  });
}

FailureOr<switchyard::OutlinedOp>
switchyard::outlineOp(RewriterBase &rewriter, Operation *op, StringRef name) {
  return outlineOps(rewriter, {op}, name);
}

FailureOr<switchyard::OutlinedOp>
switchyard::outlineOps(RewriterBase &rewriter, ArrayRef<Operation *> ops,
                       StringRef name) {
  assert(!ops.empty() && "outlining no op");
  Location loc = ops.back()->getLoc();
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(ops.front());
  auto wrapper = scf::ExecuteRegionOp::create(rewriter, loc, TypeRange{});
  rewriter.createBlock(&wrapper.getRegion());
  auto yield = scf::YieldOp::create(rewriter, loc);
  for (Operation *op : ops) {
    assert(op->getNumResults() == 0 && "outlining an op with results");
    rewriter.moveOpBefore(op, yield);
  }
  cloneConstantsInto(rewriter, wrapper.getRegion());

  func::CallOp call;
  FailureOr<func::FuncOp> function =
      outlineSingleBlockRegion(rewriter, loc, wrapper.getRegion(), name, &call);
  if (failed(function))
    return failure();
  function->setPrivate();
  // The region now holds the call and the yield: put the call in its
  // place.
  Block &callBlock = wrapper.getRegion().front();
  rewriter.eraseOp(callBlock.getTerminator());
  rewriter.inlineBlockBefore(&callBlock, wrapper);
  rewriter.eraseOp(wrapper);
  return OutlinedOp{*function, call};
}

std::string switchyard::uniqueSymbolName(Operation *symbolTableOp,
                                         StringRef prefix, unsigned &next) {
  std::string name;
  do {
    name = (prefix + Twine(next++)).str();
  } while (SymbolTable::lookupSymbolIn(symbolTableOp, name));
  return name;
}
