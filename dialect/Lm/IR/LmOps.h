//===- LmOps.h - lm dialect operations --------------------------*- C++ -*-===//
//
// Declares the operations of the `lm` dialect (generated from LmOps.td).
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_LM_IR_LMOPS_H
#define SWITCHYARD_DIALECT_LM_IR_LMOPS_H

#include "dialect/Lm/IR/LmDialect.h"
#include "dialect/Lm/IR/LmInterfaces.h"
#include "dialect/Support/ShapeChecks.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialect/Lm/IR/LmOps.h.inc"

namespace mlir::lm {

/// The mark of a model's decoding step (lm-build-decoder), kept by the
/// function it becomes: the name of the model whose tokens it decodes.
constexpr llvm::StringLiteral kDecoderAttr = "lm.decoder";

} // namespace mlir::lm

#endif // SWITCHYARD_DIALECT_LM_IR_LMOPS_H
