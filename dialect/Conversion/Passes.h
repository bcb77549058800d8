//===- Passes.h - Switchyard conversion passes ------------------*- C++ -*-===//
//
// Declarations and registration of the conversions out of the Switchyard
// dialects.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_CONVERSION_PASSES_H
#define SWITCHYARD_DIALECT_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir {
namespace arith {
class ArithDialect;
} // namespace arith
namespace linalg {
class LinalgDialect;
} // namespace linalg
namespace math {
class MathDialect;
} // namespace math
namespace scf {
class SCFDialect;
} // namespace scf
namespace tensor {
class TensorDialect;
} // namespace tensor
namespace vector {
class VectorDialect;
} // namespace vector
} // namespace mlir

namespace mlir::switchyard {

#define GEN_PASS_DECL
#include "dialect/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialect/Conversion/Passes.h.inc"

} // namespace mlir::switchyard

#endif // SWITCHYARD_DIALECT_CONVERSION_PASSES_H
