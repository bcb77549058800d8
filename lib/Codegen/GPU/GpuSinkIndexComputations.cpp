//===- GpuSinkIndexComputations.cpp - index computations into launches ---===//
//
// Implements `switchyard-gpu-sink-index-computations`: what upstream's
// gpu-launch-sink-index-computations does, with each launch's uses
// redirected by one walk of its body instead of a walk of every sunk
// value's use list (quadratic in a training step's host function).
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUSINKINDEXCOMPUTATIONSPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-gpu-sink-index-computations"

using namespace mlir;

namespace {

/// The ops worth a copy in each kernel that uses them (upstream's rule):
/// side-effect free, cheap, and what the kernel's index arithmetic folds.
bool isIndexComputation(Operation *op) {
  return matchPattern(op, m_Constant()) ||
         isa<memref::DimOp, arith::SelectOp, arith::CmpIOp>(op);
}

/// Chooses what to clone into one launch.
class Sinking {
public:
  /// `parameters`: the values the body uses from above, which the kernel
  /// would take as parameters anyway.
  explicit Sinking(const llvm::SetVector<Value> &parameters)
      : parameters(parameters) {}

  /// Whether `op` can be cloned into the body with no new parameter: it is
  /// an index computation whose operands are parameters already or results
  /// of ops that can be cloned too. Those ops join `sunk` before `op`.
  bool sink(Operation *op) {
    if (sunk.contains(op))
      return true;
    if (rejected.contains(op) || !isIndexComputation(op))
      return false;
    for (Value operand : op->getOperands()) {
      if (available.contains(operand))
        continue;
      Operation *producer = operand.getDefiningOp();
      if ((!producer || !sink(producer)) && !parameters.contains(operand)) {
        rejected.insert(op);
        return false;
      }
    }
    sunk.insert(op);
    available.insert_range(op->getResults());
    return true;
  }

  /// The ops to clone, each after those it uses.
  ArrayRef<Operation *> ops() const { return sunk.getArrayRef(); }

private:
  const llvm::SetVector<Value> &parameters;
  llvm::SetVector<Operation *> sunk;
  llvm::SmallPtrSet<Operation *, 8> rejected;
  llvm::SmallPtrSet<Value, 16> available;
};

void sinkIntoLaunch(gpu::LaunchOp launch) {
  Region &body = launch.getBody();
  llvm::SetVector<Value> parameters;
  getUsedValuesDefinedAbove(body, parameters);
  Sinking sinking(parameters);
  for (Value parameter : parameters)
    if (Operation *producer = parameter.getDefiningOp())
      sinking.sink(producer);
  if (sinking.ops().empty())
    return;
  LLVM_DEBUG(llvm::dbgs() << "launch at " << launch.getLoc() << ": "
                          << sinking.ops().size() << " of " << parameters.size()
                          << " values from above cloned in\n");

  IRMapping clones;
  OpBuilder builder = OpBuilder::atBlockBegin(&body.front());
  for (Operation *op : sinking.ops())
    builder.clone(*op, clones);
  // Every use in the body of a value that now has a clone, by one walk of
  // the body (the clones' own operands are clones already).
  body.walk([&](Operation *op) {
    for (OpOperand &operand : op->getOpOperands())
      if (Value clone = clones.lookupOrNull(operand.get()))
        operand.set(clone);
  });
}

struct SwitchyardGpuSinkIndexComputationsPass
    : public switchyard::impl::SwitchyardGpuSinkIndexComputationsPassBase<
          SwitchyardGpuSinkIndexComputationsPass> {
  using Base::Base;

  void runOnOperation() override {
    getOperation().walk([](gpu::LaunchOp launch) { sinkIntoLaunch(launch); });
  }
};

} // namespace
