//===- Passes.h - Switchyard GPU code generation passes ---------*- C++ -*-===//
//
// Declarations and registration of the passes of the GPU target that
// upstream MLIR does not provide.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_GPU_TRANSFORMS_PASSES_H
#define SWITCHYARD_DIALECT_GPU_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace affine {
class AffineDialect;
} // namespace affine
namespace arith {
class ArithDialect;
} // namespace arith
namespace gpu {
class GPUDialect;
} // namespace gpu
namespace LLVM {
class LLVMDialect;
} // namespace LLVM
namespace NVVM {
class NVVMDialect;
} // namespace NVVM
namespace linalg {
class LinalgDialect;
} // namespace linalg
namespace math {
class MathDialect;
} // namespace math
namespace memref {
class MemRefDialect;
} // namespace memref
namespace nvgpu {
class NVGPUDialect;
} // namespace nvgpu
namespace scf {
class SCFDialect;
} // namespace scf
namespace vector {
class VectorDialect;
} // namespace vector
} // namespace mlir

namespace mlir::switchyard {

#define GEN_PASS_DECL
#include "dialect/Gpu/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialect/Gpu/Transforms/Passes.h.inc"

} // namespace mlir::switchyard

#endif // SWITCHYARD_DIALECT_GPU_TRANSFORMS_PASSES_H
