//===- Passes.h - Switchyard autodiff passes --------------------*- C++ -*-===//
//
// Declarations and registration of reverse-mode differentiation and the
// optimizer step.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_AUTODIFF_PASSES_H
#define SWITCHYARD_LIB_AUTODIFF_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir::switchyard {

#define GEN_PASS_DECL
#include "lib/Autodiff/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lib/Autodiff/Passes.h.inc"

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_AUTODIFF_PASSES_H
