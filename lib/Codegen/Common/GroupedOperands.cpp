//===- GroupedOperands.cpp - how grouped expert kernels read rows ---------===//

#include "lib/Codegen/Common/GroupedOperands.h"

#include "dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
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

SortedRouteIndexing::SortedRouteIndexing(OpBuilder &b, Location loc,
                                         moe::SortRoutesOp op)
    : loc(loc), indices(op.getIndices()) {
  auto dim = [&](Value v, int64_t d) -> Value {
    return memref::DimOp::create(b, loc, v, d);
  };
  heads = dim(indices, 1);
  choices = dim(indices, 2);
  perHead = arith::ConstantIndexOp::create(b, loc, op.getExpertsPerHead());
  tileSize = arith::ConstantIndexOp::create(b, loc, op.getTileSize());
  routes = arith::MulIOp::create(b, loc, dim(indices, 0),
                                 arith::MulIOp::create(b, loc, heads, choices));
  expertRows = arith::MulIOp::create(b, loc, heads, perHead);
  paddedRows = dim(op.getOrderInit(), 0);
}

std::tuple<Value, Value, Value>
SortedRouteIndexing::coordinates(OpBuilder &b, Value r) const {
  Value j = arith::RemUIOp::create(b, loc, r, choices);
  Value nh = arith::DivUIOp::create(b, loc, r, choices);
  Value h = arith::RemUIOp::create(b, loc, nh, heads);
  Value n = arith::DivUIOp::create(b, loc, nh, heads);
  return {n, h, j};
}

Value SortedRouteIndexing::expertOf(OpBuilder &b, Value n, Value h,
                                    Value j) const {
  Value chosen = memref::LoadOp::create(b, loc, indices, ValueRange{n, h, j});
  Value expert = arith::IndexCastOp::create(b, loc, b.getIndexType(), chosen);
  return arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, h, perHead), expert);
}

void SortedRouteIndexing::forEachRoute(
    OpBuilder &b, Value lo, Value hi,
    function_ref<void(Value, Value, Value, Value, Value)> body) const {
  auto loop = scf::ForOp::create(b, loc, lo, hi,
                                 arith::ConstantIndexOp::create(b, loc, 1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value r = loop.getInductionVar();
  auto [n, h, j] = coordinates(b, r);
  body(r, expertOf(b, n, h, j), n, h, j);
}

void SortedRouteIndexing::padSegments(OpBuilder &b, Value segments) const {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto loop = scf::ForOp::create(b, loc, zero, expertRows, one);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value e = loop.getInductionVar();
  Value next = arith::AddIOp::create(b, loc, e, one);
  Value count = memref::LoadOp::create(b, loc, segments, next);
  Value padded = arith::MulIOp::create(
      b, loc, arith::CeilDivUIOp::create(b, loc, count, tileSize), tileSize);
  Value start = memref::LoadOp::create(b, loc, segments, e);
  memref::StoreOp::create(b, loc, arith::AddIOp::create(b, loc, start, padded),
                          segments, next);
}

Value SortedRouteIndexing::tileExpert(OpBuilder &b, Value segments,
                                      Value t) const {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value start = arith::MulIOp::create(b, loc, t, tileSize);
  auto loop =
      scf::ForOp::create(b, loc, zero, expertRows, one, ValueRange{zero});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value end = memref::LoadOp::create(
      b, loc, segments,
      ValueRange{arith::AddIOp::create(b, loc, loop.getInductionVar(), one)});
  Value ended =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, end, start);
  Value sum =
      arith::AddIOp::create(b, loc, loop.getRegionIterArgs()[0],
                            arith::SelectOp::create(b, loc, ended, one, zero));
  scf::YieldOp::create(b, loc, sum);
  b.setInsertionPointAfter(loop);
  return loop.getResult(0);
}
