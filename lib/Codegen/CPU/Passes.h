//===- Passes.h - Switchyard CPU codegen passes -----------------*- C++ -*-===//
//
// Declarations and registration of the CPU target's passes.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_CPU_PASSES_H
#define SWITCHYARD_LIB_CODEGEN_CPU_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::switchyard {

#define GEN_PASS_DECL
#include "lib/Codegen/CPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lib/Codegen/CPU/Passes.h.inc"

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_CPU_PASSES_H
