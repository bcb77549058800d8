//===- LmInterfaces.h - lm dialect interfaces -------------------*- C++ -*-===//
//
// The parameter-owner interface and the parameter description it returns.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_LM_IR_LMINTERFACES_H
#define SWITCHYARD_DIALECT_LM_IR_LMINTERFACES_H

#include "dialect/Lm/IR/LmDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"

namespace mlir::lm {

/// One parameter owned by a layer: its full dotted name, its type, how to
/// initialise it, and the name the official implementation gives it (empty
/// where the official module has no such tensor).
struct ParamDecl {
  std::string name;
  RankedTensorType type;
  InitAttr init;
  std::string alias = {};
};

namespace detail {
/// Checks that a layer name is a dotted path of identifiers and numbers
/// (`layers.0.att`): non-empty components of [A-Za-z0-9_]; and that every
/// unqualified attribute is one the op defines.
LogicalResult verifyLayer(Operation *op, llvm::StringRef name);
} // namespace detail

} // namespace mlir::lm

#include "dialect/Lm/IR/LmInterfaces.h.inc"

#endif // SWITCHYARD_DIALECT_LM_IR_LMINTERFACES_H
