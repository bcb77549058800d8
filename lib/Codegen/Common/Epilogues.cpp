//===- Epilogues.cpp - elementwise work where a contraction stores -------===//

#include "lib/Codegen/Common/Epilogues.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace {

/// Whether `operand` of `consumer` is `product` read at the loop indices.
bool readsProductInPlace(linalg::GenericOp consumer, OpOperand &operand,
                         Value product) {
  return operand.get() == product &&
         consumer.getMatchingIndexingMap(&operand).isIdentity();
}

} // namespace

bool switchyard::isElementwiseEpilogue(Value product,
                                       linalg::GenericOp consumer) {
  auto productType = dyn_cast<MemRefType>(product.getType());
  if (!productType || !consumer.hasPureBufferSemantics() ||
      consumer.getNumLoops() != productType.getRank() ||
      consumer.getNumParallelLoops() != consumer.getNumLoops())
    return false;
  bool readsProduct = false;
  for (OpOperand *input : consumer.getDpsInputOperands()) {
    if (readsProductInPlace(consumer, *input, product))
      readsProduct = true;
    else if (input->get() == product)
      return false;
  }
  if (!readsProduct)
    return false;
  for (OpOperand &output : consumer.getDpsInitsMutable()) {
    if (output.get() == product
            ? !readsProductInPlace(consumer, output, product)
            : !consumer.getMatchingIndexingMap(&output).isPermutation())
      return false;
  }
  for (Operation &op : consumer.getRegion().front().without_terminator())
    if (op.getNumRegions() != 0 || !isMemoryEffectFree(&op))
      return false;
  return true;
}

void switchyard::buildEpilogue(OpBuilder &b, Location loc,
                               linalg::GenericOp consumer, Value product,
                               ValueRange indices, Value value) {
  // The element of `operand` at the loop point.
  auto elementIndices = [&](OpOperand &operand) {
    AffineMap map = consumer.getMatchingIndexingMap(&operand);
    SmallVector<Value> at;
    for (AffineExpr expr : map.getResults()) {
      if (auto dim = dyn_cast<AffineDimExpr>(expr))
        at.push_back(indices[dim.getPosition()]);
      else
        at.push_back(affine::AffineApplyOp::create(
            b, loc, AffineMap::get(map.getNumDims(), 0, expr), indices));
    }
    return at;
  };
  Block &body = consumer.getRegion().front();
  IRMapping mapping;
  for (OpOperand &operand : consumer->getOpOperands()) {
    BlockArgument arg = body.getArgument(operand.getOperandNumber());
    if (arg.use_empty())
      continue;
    if (readsProductInPlace(consumer, operand, product))
      mapping.map(arg, value);
    else if (isa<MemRefType>(operand.get().getType()))
      mapping.map(arg, memref::LoadOp::create(b, loc, operand.get(),
                                              elementIndices(operand)));
    else
      mapping.map(arg, operand.get());
  }
  for (Operation &op : body.without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(op))
      mapping.map(index.getResult(), indices[index.getDim()]);
    else
      b.clone(op, mapping);
  }
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  for (auto [output, result] :
       llvm::zip_equal(consumer.getDpsInitsMutable(), yield.getValues()))
    memref::StoreOp::create(b, loc, mapping.lookupOrDefault(result),
                            output.get(), elementIndices(output));
}

linalg::GenericOp switchyard::markedEpilogue(linalg::LinalgOp op) {
  auto consumer = dyn_cast_or_null<linalg::GenericOp>(op->getNextNode());
  if (!consumer || !consumer->hasAttr(kEpilogueAttr) ||
      op.getNumDpsInits() != 1 ||
      !isElementwiseEpilogue(op.getDpsInitOperand(0)->get(), consumer))
    return nullptr;
  return consumer;
}
