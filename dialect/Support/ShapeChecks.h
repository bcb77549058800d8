//===- ShapeChecks.h - Verifier helpers for shape contracts -----*- C++ -*-===//
//
// Small helpers shared by the `moe` and `lm` verifiers. Each one checks one
// shape rule between operands and, when it fails, emits an op error that
// names both sides and says what was expected and what was found. Dynamic
// dimensions always agree: they are checked at run time by the lowering.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_SUPPORT_SHAPECHECKS_H
#define SWITCHYARD_DIALECT_SUPPORT_SHAPECHECKS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/Operation.h"

namespace mlir::switchyard {

/// A named dimension of an operand or result: `name` dim `index`.
struct DimRef {
  llvm::StringRef name;
  mlir::Value value;
  unsigned index;

  /// The static size, or ShapedType::kDynamic.
  int64_t size() const;
};

/// Checks that two dimensions that mean the same quantity (`what`, e.g.
/// "the model width") agree. Emits, on failure:
///   expected <what> to agree: <a> dim <i> is <x> but <b> dim <j> is <y>
mlir::LogicalResult verifySameDim(mlir::Operation *op, llvm::StringRef what,
                                  DimRef a, DimRef b);

/// Checks that `actual` has exactly the shape `expected` (dynamic entries on
/// either side match anything). `origin` explains where `expected` comes
/// from. Emits, on failure:
///   expected <name> of shape <expected> (<origin>), found <actual>
mlir::LogicalResult verifyShape(mlir::Operation *op, llvm::StringRef name,
                                mlir::Type actual,
                                llvm::ArrayRef<int64_t> expected,
                                llvm::StringRef origin);

/// Formats a shape as MLIR prints it inside a tensor type: `?x2x5`.
std::string formatShape(llvm::ArrayRef<int64_t> shape);

/// The sizes every op of the `lm` and `moe` dialects keeps to, so that no
/// pass, count or allocation overflows 64-bit arithmetic on a verified
/// module, and kernels index within 32 bits per dimension: a static
/// dimension of at most kMaxDimSize, a static tensor of at most
/// kMaxElements elements (2^36: 256 GiB of f32, past any device).
constexpr int64_t kMaxDimSize = int64_t(1) << 24;
constexpr int64_t kMaxElements = int64_t(1) << 36;

/// Checks every ranked tensor or memref operand and result of `op` against
/// the limits above. Emits, on failure:
///   expected <operand|result> #<i> within the dialect's size limits
///   (dimensions up to 16777216, 2^36 elements), found tensor<...>
mlir::LogicalResult verifyShapeLimits(mlir::Operation *op);

} // namespace mlir::switchyard

namespace mlir::OpTrait::switchyard {
/// The shape limits as an op trait, verified before the op's own verifier
/// (which may then multiply static sizes without overflow).
template <typename ConcreteType>
class BoundedShapes : public TraitBase<ConcreteType, BoundedShapes> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return ::mlir::switchyard::verifyShapeLimits(op);
  }
};
} // namespace mlir::OpTrait::switchyard

#endif // SWITCHYARD_DIALECT_SUPPORT_SHAPECHECKS_H
