//===- Contractions.cpp - matmul-like linalg ops and their rounding -------===//
//
// Matching of the matmul-like linalg ops that the tensor-core route and the
// operand rounding handle, and the rounding itself (Contractions.h).
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Contractions.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"

using namespace mlir;
using namespace mlir::switchyard;

FailureOr<Contraction> switchyard::matchContraction(linalg::LinalgOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1)
    return failure();
  if (!getElementTypeOrSelf(op.getDpsInitOperand(0)->get().getType()).isF32())
    return failure();
  for (OpOperand *input : op.getDpsInputOperands()) {
    Type type = getElementTypeOrSelf(input->get().getType());
    if (!type.isF32() && !type.isBF16() && !type.isF16())
      return failure();
  }

  Block *body = op.getBlock();
  auto yield = dyn_cast<linalg::YieldOp>(body->getTerminator());
  if (!yield || yield.getNumOperands() != 1)
    return failure();
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return failure();
  Value acc = body->getArgument(2);
  Value product = add.getLhs() == acc   ? add.getRhs()
                  : add.getRhs() == acc ? add.getLhs()
                                        : Value();
  auto mul = product ? product.getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul || !mul.getType().isF32())
    return failure();

  Contraction c{op, {}, mul, {}};
  size_t bodyOps = 3; // addf, mulf, yield
  for (Value factor : {mul.getLhs(), mul.getRhs()}) {
    Value v = factor;
    while (Operation *def = v.getDefiningOp()) {
      if (!isa<arith::ExtFOp, arith::TruncFOp>(def) || def->getBlock() != body)
        return failure();
      ++bodyOps;
      v = def->getOperand(0);
    }
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != body || arg.getArgNumber() >= 2 ||
        c.factors[arg.getArgNumber()])
      return failure();
    c.factors[arg.getArgNumber()] = factor;
  }
  // Nothing else in the body (a linalg.index, a second use of a cast).
  if (body->getOperations().size() != bodyOps)
    return failure();

  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || dims->k.empty())
    return failure();
  c.dims = *dims;
  return c;
}

Value switchyard::roundThrough(OpBuilder &b, Location loc, Value value,
                               FloatType elementType) {
  Value rounded = arith::TruncFOp::create(b, loc, elementType, value);
  return arith::ExtFOp::create(b, loc, b.getF32Type(), rounded);
}

void switchyard::roundContractionFactors(RewriterBase &rewriter,
                                         Contraction &c,
                                         FloatType elementType) {
  Location loc = c.mul.getLoc();
  rewriter.setInsertionPoint(c.mul);
  for (Value &factor : c.factors) {
    Value back = roundThrough(rewriter, loc, factor, elementType);
    rewriter.modifyOpInPlace(
        c.mul, [&] { c.mul->replaceUsesOfWith(factor, back); });
    factor = back;
  }
}

FailureOr<linalg::GenericOp>
mlir::switchyard::reorderLoops(RewriterBase &rewriter, linalg::LinalgOp op,
                               ArrayRef<unsigned> order) {
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
  if (!generic) {
    FailureOr<linalg::GenericOp> generalized =
        linalg::generalizeNamedOp(rewriter, op);
    if (failed(generalized))
      return op.emitOpError() << "could not be generalized to reorder its "
                                 "loops";
    generic = *generalized;
  }
  if (failed(linalg::interchangeGenericOp(rewriter, generic, order)))
    return generic.emitOpError() << "could not be interchanged";
  return generic;
}

linalg::FillOp switchyard::precedingZeroFill(DestinationStyleOpInterface op) {
  Value out = op.getDpsInitOperand(0)->get();
  for (Operation *before = op->getPrevNode(); before;
       before = before->getPrevNode()) {
    if (auto fill = dyn_cast<linalg::FillOp>(before)) {
      if (fill.getDpsInitOperand(0)->get() != out)
        return nullptr;
      APFloat value(0.0f);
      if (!matchPattern(fill.getDpsInputOperand(0)->get(),
                        m_ConstantFloat(&value)) ||
          !value.isPosZero())
        return nullptr;
      return fill;
    }
    if (!isMemoryEffectFree(before))
      return nullptr;
  }
  return nullptr;
}
