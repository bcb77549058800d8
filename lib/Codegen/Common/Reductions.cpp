//===- Reductions.cpp - reductions that can be split ---------------------===//
//
// The whole-reduction size and the combiner test of Reductions.h.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Reductions.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

std::optional<int64_t>
switchyard::wholeReductionElements(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumLoops() == 0 || op.getNumParallelLoops() != 0)
    return std::nullopt;
  int64_t elements = 1;
  for (int64_t range : op.getStaticLoopRanges()) {
    if (ShapedType::isDynamic(range))
      return std::nullopt;
    elements *= range;
  }
  return elements;
}

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
