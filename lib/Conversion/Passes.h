//===- Passes.h - Switchyard conversion passes ------------------*- C++ -*-===//
//
// Declarations and registration of the conversions out of the Switchyard
// dialects: lm layers into moe and linalg, lm models into functions, moe
// ops into linalg.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CONVERSION_PASSES_H
#define SWITCHYARD_LIB_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir::switchyard {

/// The mark of the ops whose values `switchyard analyze` reads
/// (lm-decompose-layers{probes}), and of the results lm-expose-probes adds
/// for them.
constexpr llvm::StringLiteral kProbeAttr = "lm.probe";

#define GEN_PASS_DECL
#include "lib/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lib/Conversion/Passes.h.inc"

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CONVERSION_PASSES_H
