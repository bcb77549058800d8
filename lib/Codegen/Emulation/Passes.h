//===- Passes.h - Switchyard GPU emulation passes ---------------*- C++ -*-===//
//
// Declarations and registration of the GPU emulation's passes.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_EMULATION_PASSES_H
#define SWITCHYARD_LIB_CODEGEN_EMULATION_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::switchyard {

#define GEN_PASS_DECL
#include "lib/Codegen/Emulation/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lib/Codegen/Emulation/Passes.h.inc"

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_EMULATION_PASSES_H
