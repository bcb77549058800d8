//===- BlockFunctions.h - calls of a model's block functions ----*- C++ -*-===//
//
// The functions that `lm-outline-layers` makes of a model's blocks (marked
// `lm.layer`), and those `lm-differentiate` derives from them, are found by
// their calls: differentiation and the optimizer step both group by them.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_AUTODIFF_BLOCKFUNCTIONS_H
#define SWITCHYARD_LIB_AUTODIFF_BLOCKFUNCTIONS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::switchyard {

/// The block function (marked `lm.layer`) that `op` calls, if `op` is a
/// call of one.
inline func::FuncOp blockCallee(Operation *op) {
  auto call = dyn_cast<func::CallOp>(op);
  if (!call)
    return {};
  auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      call, call.getCalleeAttr());
  return callee && callee->hasAttr("lm.layer") ? callee : func::FuncOp();
}

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_AUTODIFF_BLOCKFUNCTIONS_H
