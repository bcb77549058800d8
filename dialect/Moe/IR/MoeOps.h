//===- MoeOps.h - moe dialect operations ------------------------*- C++ -*-===//
//
// Declares the operations of the `moe` dialect (generated from MoeOps.td).
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEOPS_H
#define SWITCHYARD_DIALECT_MOE_IR_MOEOPS_H

#include "dialect/Moe/IR/MoeDialect.h"
#include "dialect/Support/ShapeChecks.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialect/Moe/IR/MoeOps.h.inc"

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEOPS_H
