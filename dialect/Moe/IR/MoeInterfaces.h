//===- MoeInterfaces.h - moe dialect interfaces -----------------*- C++ -*-===//
//
// The gradient-rule interface (DifferentiableOpInterface).
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEINTERFACES_H
#define SWITCHYARD_DIALECT_MOE_IR_MOEINTERFACES_H

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpDefinition.h"

#include "dialect/Moe/IR/MoeInterfaces.h.inc"

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEINTERFACES_H
