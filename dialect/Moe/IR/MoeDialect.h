//===- MoeDialect.h - moe dialect declaration -------------------*- C++ -*-===//
//
// Declares the `moe` dialect: expert routing and gathered expert projections.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEDIALECT_H
#define SWITCHYARD_DIALECT_MOE_IR_MOEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialect/Moe/IR/MoeOpsDialect.h.inc"

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEDIALECT_H
