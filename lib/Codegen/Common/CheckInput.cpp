//===- CheckInput.cpp - refuse what upstream rewrites assume away ---------===//
//
// Implements `switchyard-check-input`: the first pass of every Switchyard
// pipeline, which reports input that verifies upstream but that upstream
// patterns are not written for (and crash on), with an error naming it.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDCHECKINPUTPASS
#include "lib/Codegen/Common/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-check-input"

using namespace mlir;

namespace {
/// Checks a dim op's constant index against its operand's rank.
LogicalResult checkDimIndex(Operation *op, Value source, Value index) {
  APInt constant;
  auto shaped = dyn_cast<ShapedType>(source.getType());
  if (!shaped || !shaped.hasRank() ||
      !matchPattern(index, m_ConstantInt(&constant)))
    return success();
  int64_t value = constant.getSExtValue();
  if (value >= 0 && value < shaped.getRank())
    return success();
  LLVM_DEBUG(llvm::dbgs() << "refusing " << op->getName() << " at "
                          << op->getLoc() << ": constant index " << value
                          << " of a rank-" << shaped.getRank() << " operand\n");
  return op->emitOpError() << "index " << value
                           << " is outside the dimensions of its "
                           << source.getType() << " operand (0 to "
                           << shaped.getRank() - 1 << ")";
}

/// Checks that a tensor.expand_shape's static output sizes are its result
/// type's: the tensor verifier accepts `output_shape [1, 1, 5]` with a
/// `tensor<1x8x5xf32>` result, the memref.expand_shape that bufferization
/// makes of it does not.
LogicalResult checkExpandShape(tensor::ExpandShapeOp op) {
  ArrayRef<int64_t> declared = op.getStaticOutputShape();
  ArrayRef<int64_t> result = op.getResultType().getShape();
  if (declared.size() != result.size())
    return success(); // The op's verifier reports this.
  for (auto [pos, size] : llvm::enumerate(result)) {
    if (ShapedType::isDynamic(size) || declared[pos] == size)
      continue;
    LLVM_DEBUG(llvm::dbgs() << "refusing tensor.expand_shape at "
                            << op.getLoc() << ": output size " << pos << "\n");
    InFlightDiagnostic diag = op.emitOpError()
                              << "output_shape gives dimension " << pos
                              << " the size ";
    if (ShapedType::isDynamic(declared[pos]))
      diag << "of a value";
    else
      diag << declared[pos];
    return diag << ", its result type " << op.getResultType() << " " << size;
  }
  return success();
}

struct SwitchyardCheckInputPass
    : public switchyard::impl::SwitchyardCheckInputPassBase<
          SwitchyardCheckInputPass> {
  void runOnOperation() override {
    WalkResult walk = getOperation().walk([](Operation *op) {
      LogicalResult ok = success();
      if (auto dim = dyn_cast<tensor::DimOp>(op))
        ok = checkDimIndex(op, dim.getSource(), dim.getIndex());
      else if (auto dim = dyn_cast<memref::DimOp>(op))
        ok = checkDimIndex(op, dim.getSource(), dim.getIndex());
      else if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op))
        ok = checkExpandShape(expand);
      return failed(ok) ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
