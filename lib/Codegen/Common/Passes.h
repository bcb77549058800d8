//===- Passes.h - Switchyard common codegen passes --------------*- C++ -*-===//
//
// Declarations and registration of the code generation passes that the CPU
// and GPU targets share.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_COMMON_PASSES_H
#define SWITCHYARD_LIB_CODEGEN_COMMON_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::switchyard {

#define GEN_PASS_DECL
#include "lib/Codegen/Common/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lib/Codegen/Common/Passes.h.inc"

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_COMMON_PASSES_H
