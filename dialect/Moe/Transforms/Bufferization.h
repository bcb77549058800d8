//===- Bufferization.h - bufferization of the grouped kernels ---*- C++ -*-===//
//
// Registers the BufferizableOpInterface models of moe.grouped_matmul and
// moe.grouped_weight_grad: destination-style ops that write their init
// operand in place once they take buffers.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_MOE_TRANSFORMS_BUFFERIZATION_H
#define SWITCHYARD_DIALECT_MOE_TRANSFORMS_BUFFERIZATION_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::moe {

/// Attaches the bufferization models to the grouped kernel ops.
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);

} // namespace mlir::moe

#endif // SWITCHYARD_DIALECT_MOE_TRANSFORMS_BUFFERIZATION_H
