//===- Bufferization.cpp - bufferization of the moe kernel ops ------------===//
//
// The grouped kernel ops, moe.sort_routes and moe.flash_attention_kernel are
// destination-style: on tensors their results are their init operands
// updated; bufferized, the same op takes the buffers and updates the inits'
// buffers in place, as linalg's structured ops do
// (DstBufferizableOpInterfaceExternalModel gives the aliasing: every
// operand is read, the inits are written and are the results' buffers).
//
//===----------------------------------------------------------------------===//

#include "dialect/Moe/Transforms/Bufferization.h"
#include "dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::bufferization;

namespace {
template <typename OpTy>
struct KernelOpModel
    : public DstBufferizableOpInterfaceExternalModel<KernelOpModel<OpTy>,
                                                     OpTy> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto kernel = cast<OpTy>(op);
    SmallVector<Value> buffers;
    for (Value operand : op->getOperands()) {
      FailureOr<Value> buffer = getBuffer(rewriter, operand, options, state);
      if (failed(buffer))
        return failure();
      buffers.push_back(*buffer);
    }
    rewriter.setInsertionPoint(op);
    OperationState bufferized(op->getLoc(), op->getName(), buffers, TypeRange{},
                              op->getAttrs());
    rewriter.create(bufferized);
    SmallVector<Value> inits;
    for (OpOperand &init : kernel.getDpsInitsMutable())
      inits.push_back(buffers[init.getOperandNumber()]);
    replaceOpWithBufferizedValues(rewriter, op, inits);
    return success();
  }
};
} // namespace

void mlir::moe::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, MoeDialect *) {
    GroupedMatmulOp::attachInterface<KernelOpModel<GroupedMatmulOp>>(*ctx);
    GroupedWeightGradOp::attachInterface<KernelOpModel<GroupedWeightGradOp>>(
        *ctx);
    SortRoutesOp::attachInterface<KernelOpModel<SortRoutesOp>>(*ctx);
    FlashAttentionKernelOp::attachInterface<
        KernelOpModel<FlashAttentionKernelOp>>(*ctx);
    FlashAttentionGradKernelOp::attachInterface<
        KernelOpModel<FlashAttentionGradKernelOp>>(*ctx);
  });
}
