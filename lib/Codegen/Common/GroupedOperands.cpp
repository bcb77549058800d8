//===- GroupedOperands.cpp - how grouped expert kernels read rows ---------===//

#include "lib/Codegen/Common/GroupedOperands.h"

#include "dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::switchyard;

GroupedOperand GroupedOperand::rows(moe::GroupedMatmulOp op) {
  return GroupedOperand(op.getRows(), op.getOrder(), op.getGates(),
                        op.getRoutesPerRow().value_or(0));
}

GroupedOperand GroupedOperand::lhs(moe::GroupedWeightGradOp op) {
  std::optional<ArrayRef<int64_t>> perRow = op.getRoutesPerRow();
  return GroupedOperand(op.getLhs(), op.getOrder(), op.getLhsGates(),
                        perRow ? (*perRow)[0] : 0);
}

GroupedOperand GroupedOperand::rhs(moe::GroupedWeightGradOp op) {
  std::optional<ArrayRef<int64_t>> perRow = op.getRoutesPerRow();
  return GroupedOperand(op.getRhs(), op.getOrder(), op.getRhsGates(),
                        perRow ? (*perRow)[1] : 0);
}

GroupedOperand::Row GroupedOperand::row(OpBuilder &b, Location loc,
                                        Value p) const {
  if (!order)
    return {p, Value(), Value()};
  Value perRow = arith::ConstantIndexOp::create(b, loc, routesPerRow);
  Value routes = arith::MulIOp::create(
      b, loc, memref::DimOp::create(b, loc, data, 0), perRow);
  Value route = memref::LoadOp::create(b, loc, order, p);
  // A padding position holds R or more (unsigned: any value past the
  // routes); it reads route 0's row, which its zero factor discards.
  Value valid =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, route, routes);
  Value clamped = arith::SelectOp::create(
      b, loc, valid, route, arith::ConstantIndexOp::create(b, loc, 0));
  Value index = arith::DivUIOp::create(b, loc, clamped, perRow);
  return {index, clamped, valid};
}

Value GroupedOperand::scale(OpBuilder &b, Location loc, const Row &row,
                            Value raw) const {
  if (!order)
    return raw;
  Type f32 = b.getF32Type();
  auto vectorType = dyn_cast<VectorType>(raw.getType());
  Type wide = vectorType ? Type(vectorType.clone(f32)) : f32;
  Value factor =
      raw.getType() == wide ? raw : arith::ExtFOp::create(b, loc, wide, raw);
  if (gates) {
    Value gate = memref::LoadOp::create(b, loc, gates, row.route);
    if (gate.getType() != f32)
      gate = arith::ExtFOp::create(b, loc, f32, gate);
    if (vectorType)
      gate = vector::BroadcastOp::create(b, loc, wide, gate);
    factor = arith::MulFOp::create(b, loc, factor, gate);
  }
  Value zero = arith::ConstantOp::create(b, loc, wide, b.getZeroAttr(wide));
  return arith::SelectOp::create(b, loc, row.valid, factor, zero);
}
