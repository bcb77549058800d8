//===- LmDialect.h - lm dialect declaration ---------------------*- C++ -*-===//
//
// Declares the `lm` dialect (model definitions) and its attributes.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_LM_IR_LMDIALECT_H
#define SWITCHYARD_DIALECT_LM_IR_LMDIALECT_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/Dialect.h"

#include "dialect/Lm/IR/LmDialect.h.inc"
#include "dialect/Lm/IR/LmEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/Lm/IR/LmAttrs.h.inc"

#endif // SWITCHYARD_DIALECT_LM_IR_LMDIALECT_H
