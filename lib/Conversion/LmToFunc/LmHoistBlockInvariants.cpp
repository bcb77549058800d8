//===- LmHoistBlockInvariants.cpp - what every layer computes alike -------===//
//
// Implements `lm-hoist-block-invariants`: tensors that a block function
// computes from constants alone (the Transformer-XL sinusoids) become
// arguments that its callers compute, so that a model computes them once
// rather than once per layer.
//
//===----------------------------------------------------------------------===//

#include "lib/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_LMHOISTBLOCKINVARIANTSPASS
#include "lib/Conversion/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "lm-hoist-block-invariants"

using namespace mlir;

namespace {

/// Whether `op`, a top-level op of `body`, reads nothing but what
/// `invariant` ops of `body` compute (and what it defines itself), without
/// side effects.
bool readsOnlyInvariants(Operation *op, Block &body,
                         const llvm::DenseSet<Operation *> &invariant) {
  if (!isMemoryEffectFree(op) && !isa<tensor::EmptyOp>(op))
    return false;
  bool only = true;
  op->walk([&](Operation *nested) {
    for (Value operand : nested->getOperands()) {
      if (operand.getParentBlock() == &body && isa<BlockArgument>(operand)) {
        only = false;
        return WalkResult::interrupt();
      }
      Operation *def = operand.getDefiningOp();
      if (def && def->getBlock() == &body && !invariant.contains(def)) {
        only = false;
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return only;
}

/// Whether computing `op` is worth an argument: not a constant, an empty
/// tensor or a reshape, which each caller would only recompute.
bool isWorthHoisting(Operation *op) {
  return !op->hasTrait<OpTrait::ConstantLike>() &&
         !isa<tensor::EmptyOp, tensor::CollapseShapeOp, tensor::ExpandShapeOp,
              tensor::CastOp>(op);
}

struct LmHoistBlockInvariantsPass
    : public switchyard::impl::LmHoistBlockInvariantsPassBase<
          LmHoistBlockInvariantsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (func::FuncOp func : module.getOps<func::FuncOp>())
      if (func->hasAttr("lm.layer") && func.getBody().hasOneBlock())
        hoist(module, func);
  }

  void hoist(ModuleOp module, func::FuncOp func) {
    Block &body = func.getBody().front();
    llvm::DenseSet<Operation *> invariant;
    SmallVector<Operation *> order;
    for (Operation &op : body.without_terminator())
      if (readsOnlyInvariants(&op, body, invariant)) {
        invariant.insert(&op);
        order.push_back(&op);
      }
    // The tensors that the rest of the block reads.
    llvm::SetVector<Value> hoisted;
    for (Operation &op : body) {
      if (invariant.contains(&op))
        continue;
      op.walk([&](Operation *nested) {
        for (Value operand : nested->getOperands())
          if (Operation *def = operand.getDefiningOp();
              def && invariant.contains(def) && isWorthHoisting(def) &&
              isa<RankedTensorType>(operand.getType()))
            hoisted.insert(operand);
      });
    }
    if (hoisted.empty())
      return;
    std::optional<SymbolTable::UseRange> uses =
        SymbolTable::getSymbolUses(func, module);
    if (!uses || llvm::any_of(*uses, [](const SymbolTable::SymbolUse &use) {
          return !isa<func::CallOp>(use.getUser());
        }))
      return;

    // Each call computes them before the call (CSE then keeps one copy per
    // caller) and passes them after the block's own operands.
    for (const SymbolTable::SymbolUse &use : *uses) {
      auto call = cast<func::CallOp>(use.getUser());
      OpBuilder builder(call);
      IRMapping mapping;
      for (Operation *op : order)
        builder.clone(*op, mapping);
      SmallVector<Value> operands(call.getOperands());
      for (Value value : hoisted)
        operands.push_back(mapping.lookup(value));
      auto replacement = func::CallOp::create(builder, call.getLoc(), func,
                                              operands);
      call.replaceAllUsesWith(replacement.getResults());
      call.erase();
    }
    for (Value value : hoisted) {
      (void)func.insertArgument(
          func.getNumArguments(), value.getType(),
          DictionaryAttr::get(&getContext(),
                              {NamedAttribute(StringAttr::get(&getContext(),
                                                              "lm.invariant"),
                                              UnitAttr::get(&getContext())),
                               NamedAttribute(
                                   StringAttr::get(&getContext(),
                                                   "bufferization.writable"),
                                   BoolAttr::get(&getContext(), false))}),
          value.getLoc());
      value.replaceAllUsesWith(body.getArgument(func.getNumArguments() - 1));
    }
    // What computed them, now unused, goes.
    for (Operation *op : llvm::reverse(order))
      if (op->use_empty())
        op->erase();
    LLVM_DEBUG(llvm::dbgs() << "@" << func.getName() << ": " << hoisted.size()
                            << " invariant tensors passed from argument "
                            << func.getNumArguments() - hoisted.size()
                            << " on\n");
  }
};

} // namespace
