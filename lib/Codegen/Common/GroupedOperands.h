//===- GroupedOperands.h - how grouped expert kernels read rows -*- C++ -*-===//
//
// The operands of moe.grouped_matmul (rows) and moe.grouped_weight_grad
// (lhs, rhs) on buffers are matrices whose row p is the p-th position of
// the routes sorted by expert, padded per expert. Either they are stored in
// that order, or (with the ops' `gather`) row p is read where its route's
// row lies, scaled by the route's gate, and a padding position reads as
// zeros. Both kernel builders read them through GroupedOperand: the loops of
// switchyard-lower-grouped-kernels and the tensor-core kernels of
// switchyard-gpu-tensor-core-matmul, so that both compute the ops' one
// definition. SortedRouteIndexing is the same for moe.sort_routes, whose
// loops (switchyard-lower-grouped-kernels) and GPU kernel
// (switchyard-gpu-sort-routes) address the routes alike.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_COMMON_GROUPEDOPERANDS_H
#define SWITCHYARD_LIB_CODEGEN_COMMON_GROUPEDOPERANDS_H

#include "mlir/IR/Builders.h"

namespace mlir::moe {
class GroupedMatmulOp;
class GroupedWeightGradOp;
class SortRoutesOp;
} // namespace mlir::moe

namespace mlir::switchyard {

/// One operand of a grouped kernel on buffers, read by padded position.
class GroupedOperand {
public:
  /// moe.grouped_matmul's rows.
  static GroupedOperand rows(moe::GroupedMatmulOp op);
  /// moe.grouped_weight_grad's lhs and rhs.
  static GroupedOperand lhs(moe::GroupedWeightGradOp op);
  static GroupedOperand rhs(moe::GroupedWeightGradOp op);

  /// The buffer the elements are loaded from.
  Value buffer() const { return data; }
  bool gathered() const { return order != nullptr; }

  /// Where padded position `p` is read: its row of buffer() (in bounds
  /// even for a padding position), and for a gathered operand the route
  /// (clamped to a valid one) and whether `p` holds a route at all.
  struct Row {
    Value index, route, valid;
  };
  Row row(OpBuilder &b, Location loc, Value p) const;

  /// The factor of the kernel from `raw`, an element or a vector of
  /// elements of row `row`: as it is where the operand is stored in sorted
  /// order; else in f32, times the route's gate where there are gates, and
  /// zero at a padding position.
  Value scale(OpBuilder &b, Location loc, const Row &row, Value raw) const;

private:
  GroupedOperand(Value data, Value order, Value gates, int64_t routesPerRow)
      : data(data), order(order), gates(gates), routesPerRow(routesPerRow) {}

  Value data, order, gates;
  int64_t routesPerRow;
};

/// The routes of moe.sort_routes on buffers, as its kernels address them:
/// route r = (n·H + h)·k + j, its expert row h·E + indices[n, h, j].
class SortedRouteIndexing {
public:
  SortedRouteIndexing(OpBuilder &b, Location loc, moe::SortRoutesOp op);

  /// R, the routes; H·E, the expert rows; P, the padded positions; T.
  Value routes, expertRows, paddedRows, tileSize;

  /// Route r's (n, h, j).
  std::tuple<Value, Value, Value> coordinates(OpBuilder &b, Value r) const;
  /// The expert row of the route at (n, h, j).
  Value expertOf(OpBuilder &b, Value n, Value h, Value j) const;
  /// A loop over the routes [lo, hi) in order, whose body `body` builds
  /// from the route r, its expert row e and its (n, h, j).
  void
  forEachRoute(OpBuilder &b, Value lo, Value hi,
               function_ref<void(Value r, Value e, Value n, Value h, Value j)>
                   body) const;
  /// With segments[0] = 0 and each expert's count in segments[e + 1]:
  /// segments[e + 1] = segments[e] + the count rounded up to T, in turn.
  void padSegments(OpBuilder &b, Value segments) const;
  /// Tile t's expert: the experts whose segments end at or before t·T.
  Value tileExpert(OpBuilder &b, Value segments, Value t) const;

private:
  Location loc;
  Value indices, heads, choices, perHead;
};

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_COMMON_GROUPEDOPERANDS_H
