//===- Reductions.cpp - reductions that can be split ---------------------===//
//
// The combiner test of Reductions.h.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Reductions.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

Operation *switchyard::splittableCombiner(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1)
    return nullptr;
  SmallVector<Operation *> combiners;
  if (!matchReduction(op.getRegionOutputArgs(), 0, combiners) ||
      combiners.size() != 1 || combiners[0]->getNumOperands() != 2 ||
      combiners[0]->getNumResults() != 1 ||
      !arith::getNeutralElement(combiners[0]))
    return nullptr;
  Value accumulator = op.getRegionOutputArgs()[0];
  if (!accumulator.hasOneUse() ||
      llvm::count(combiners[0]->getOperands(), accumulator) != 1)
    return nullptr;
  return combiners[0];
}
