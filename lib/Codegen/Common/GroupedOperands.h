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
// definition.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_COMMON_GROUPEDOPERANDS_H
#define SWITCHYARD_LIB_CODEGEN_COMMON_GROUPEDOPERANDS_H

#include "mlir/IR/Builders.h"

namespace mlir::moe {
class GroupedMatmulOp;
class GroupedWeightGradOp;
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

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_COMMON_GROUPEDOPERANDS_H
