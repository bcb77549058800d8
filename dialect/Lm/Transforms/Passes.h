//===- Passes.h - lm dialect passes -----------------------------*- C++ -*-===//
//
// Declarations and registration of the passes over `lm` model definitions.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_LM_TRANSFORMS_PASSES_H
#define SWITCHYARD_DIALECT_LM_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir::lm {

#define GEN_PASS_DECL
#include "dialect/Lm/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialect/Lm/Transforms/Passes.h.inc"

} // namespace mlir::lm

#endif // SWITCHYARD_DIALECT_LM_TRANSFORMS_PASSES_H
