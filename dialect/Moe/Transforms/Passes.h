//===- Passes.h - moe dialect passes ----------------------------*- C++ -*-===//
//
// Declarations and registration of the passes over moe ops: the fusions.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_MOE_TRANSFORMS_PASSES_H
#define SWITCHYARD_DIALECT_MOE_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir::moe {
class MoeDialect;

#define GEN_PASS_DECL
#include "dialect/Moe/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialect/Moe/Transforms/Passes.h.inc"

} // namespace mlir::moe

#endif // SWITCHYARD_DIALECT_MOE_TRANSFORMS_PASSES_H
