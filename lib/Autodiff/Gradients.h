//===- Gradients.h - gradient rules of the moe ops --------------*- C++ -*-===//
//
// Registers the DifferentiableOpInterface models: the gradient rule of
// every moe op, of arith.addf on tensors and of the tensor reshapes.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_AUTODIFF_GRADIENTS_H
#define SWITCHYARD_LIB_AUTODIFF_GRADIENTS_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::moe {

/// Attaches the gradient rules to their ops when the dialects load.
void registerGradientModels(DialectRegistry &registry);

} // namespace mlir::moe

#endif // SWITCHYARD_LIB_AUTODIFF_GRADIENTS_H
