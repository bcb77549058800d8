//===- LmSplitBlockGradients.cpp - backward passes that read the forward --===//
//
// Implements `lm-split-block-gradients`: each block's vector-Jacobian
// product (from `lm-differentiate`), which recomputes the block's forward
// pass before its backward sweep, becomes a backward function that reads
// the values its sweep needs from the forward call instead. The training
// forward function returns those values (the residuals) after its results.
//
//===----------------------------------------------------------------------===//

#include "lib/Autodiff/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_LMSPLITBLOCKGRADIENTSPASS
#include "lib/Autodiff/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "lm-split-block-gradients"

using namespace mlir;

namespace {

/// Ops the backward function recomputes rather than receives: constants,
/// scalar arithmetic (on shapes), empty and constant-filled tensors, casts
/// and reshapes (views) of what it has. Returning a view next to its source would hand the
/// caller one buffer twice.
bool isCheapToRecompute(Operation *op) {
  // A tensor filled with a constant (a reduction's initial value).
  if (auto fill = dyn_cast<linalg::FillOp>(op))
    return fill.hasPureTensorSemantics() &&
           matchPattern(fill.value(), m_Constant()) &&
           fill.output().getDefiningOp<tensor::EmptyOp>();
  if (op->getNumRegions() || !isMemoryEffectFree(op))
    return false;
  if (op->hasTrait<OpTrait::ConstantLike>() ||
      isa<tensor::EmptyOp, tensor::DimOp, tensor::CastOp,
          tensor::CollapseShapeOp, tensor::ExpandShapeOp>(op))
    return true;
  return op->getNumResults() &&
         llvm::all_of(op->getResultTypes(), [](Type type) {
           return type.isIntOrIndexOrFloat();
         }) &&
         !isa<tensor::ExtractOp>(op);
}

/// Calls `fn` with every value `op` and the ops nested in it read.
void forEachUse(Operation *op, function_ref<void(Value)> fn) {
  op->walk([&](Operation *nested) {
    for (Value operand : nested->getOperands())
      fn(operand);
  });
}

struct LmSplitBlockGradientsPass
    : public switchyard::impl::LmSplitBlockGradientsPassBase<
          LmSplitBlockGradientsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> vjps;
    for (func::FuncOp func : module.getOps<func::FuncOp>())
      if (func->hasAttr("lm.vjp"))
        vjps.push_back(func);
    DenseMap<Operation *, SmallVector<func::CallOp>> calls;
    module.walk([&](func::CallOp call) {
      if (auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee()))
        calls[callee].push_back(call);
    });
    for (func::FuncOp vjp : vjps)
      split(module, vjp, calls);
  }

  void split(ModuleOp module, func::FuncOp vjp,
             DenseMap<Operation *, SmallVector<func::CallOp>> &calls) {
    auto info = vjp->getAttrOfType<DictionaryAttr>("lm.vjp");
    auto forwardRef = info.getAs<FlatSymbolRefAttr>("forward");
    auto forward = forwardRef
                       ? module.lookupSymbol<func::FuncOp>(forwardRef)
                       : func::FuncOp();
    auto inputsAttr = info.getAs<IntegerAttr>("inputs");
    auto resultsAttr = info.getAs<IntegerAttr>("results");
    if (!forward || !inputsAttr || !resultsAttr ||
        !vjp.getBody().hasOneBlock()) {
      vjp.emitWarning("lm.vjp without its forward function, input and "
                      "result counts: left unsplit");
      return;
    }
    unsigned numInputs = inputsAttr.getInt(), numResults = resultsAttr.getInt();
    Block &body = vjp.getBody().front();
    auto returnOp = cast<func::ReturnOp>(body.getTerminator());
    ValueRange results = returnOp.getOperands().take_front(numResults);
    ValueRange adjointArgs = body.getArguments().drop_front(numInputs);

    // The forward part: what the results need.
    llvm::DenseSet<Operation *> forwardOps;
    SmallVector<Operation *> worklist;
    auto enqueue = [&](Value value) {
      Operation *def = value.getDefiningOp();
      if (def && def->getBlock() == &body && forwardOps.insert(def).second)
        worklist.push_back(def);
    };
    for (Value result : results)
      enqueue(result);
    bool readsAdjoint = false;
    while (!worklist.empty())
      forEachUse(worklist.pop_back_val(), [&](Value value) {
        readsAdjoint |= llvm::is_contained(adjointArgs, value);
        enqueue(value);
      });
    if (readsAdjoint) {
      LLVM_DEBUG(llvm::dbgs() << "@" << vjp.getName()
                              << ": its results read the adjoints; unsplit\n");
      return;
    }

    // Each call paired with the forward call of the same inputs before it.
    SmallVector<std::pair<func::CallOp, func::CallOp>> pairs;
    for (func::CallOp call : calls.lookup(vjp)) {
      func::CallOp found;
      for (func::CallOp candidate : calls.lookup(forward))
        if (candidate->getBlock() == call->getBlock() &&
            candidate->isBeforeInBlock(call) &&
            llvm::equal(candidate.getOperands(),
                        call.getOperands().take_front(numInputs)))
          found = candidate;
      if (!found) {
        LLVM_DEBUG(llvm::dbgs() << "@" << vjp.getName() << " called at "
                                << call.getLoc()
                                << " without its forward call; unsplit\n");
        return;
      }
      pairs.emplace_back(call, found);
    }

    // What the backward part reads of the forward part: recomputed if cheap,
    // else a residual.
    llvm::DenseSet<Operation *> recompute;
    llvm::SetVector<Value> residuals;
    llvm::DenseSet<Value> resultSet(results.begin(), results.end());
    std::function<void(Value)> need = [&](Value value) {
      Operation *def = value.getDefiningOp();
      if (!def || !forwardOps.contains(def) || resultSet.contains(value))
        return;
      if (!isCheapToRecompute(def)) {
        residuals.insert(value);
        return;
      }
      if (recompute.insert(def).second)
        forEachUse(def, need);
    };
    SmallVector<Operation *> backwardOps;
    for (Operation &op : body.without_terminator())
      if (!forwardOps.contains(&op)) {
        backwardOps.push_back(&op);
        forEachUse(&op, need);
      }
    forEachUse(returnOp, [&](Value value) {
      if (!llvm::is_contained(results, value))
        need(value);
    });

    // The forward function: the forward part, returning the residuals too.
    OpBuilder builder(vjp.getContext());
    SmallVector<Value> forwardResults(results);
    llvm::append_range(forwardResults, residuals);
    {
      Region &region = forward.getBody();
      region.getBlocks().clear();
      Block *entry = new Block();
      region.push_back(entry);
      IRMapping mapping;
      for (Value arg : body.getArguments().take_front(numInputs))
        mapping.map(arg, entry->addArgument(arg.getType(), arg.getLoc()));
      builder.setInsertionPointToStart(entry);
      for (Operation &op : body.without_terminator())
        if (forwardOps.contains(&op))
          builder.clone(op, mapping);
      SmallVector<Value> mapped;
      for (Value value : forwardResults)
        mapped.push_back(mapping.lookupOrDefault(value));
      func::ReturnOp::create(builder, returnOp.getLoc(), mapped);
      forward.setFunctionType(builder.getFunctionType(
          entry->getArgumentTypes(), TypeRange(ValueRange(forwardResults))));
      forward.setAllResultAttrs(ArrayRef<DictionaryAttr>{});
    }
    // Its calls return the residuals.
    DenseMap<Operation *, func::CallOp> newForwardCalls;
    for (func::CallOp call : calls.lookup(forward)) {
      builder.setInsertionPoint(call);
      auto replacement =
          func::CallOp::create(builder, call.getLoc(), forward,
                               call.getOperands());
      call.replaceAllUsesWith(
          replacement.getResults().take_front(call.getNumResults()));
      newForwardCalls[call] = replacement;
    }

    // The backward function: inputs, results, residuals, adjoints.
    {
      Block *entry = new Block();
      IRMapping mapping;
      for (Value arg : body.getArguments().take_front(numInputs))
        mapping.map(arg, entry->addArgument(arg.getType(), arg.getLoc()));
      for (Value result : results)
        if (!mapping.contains(result))
          mapping.map(result,
                      entry->addArgument(result.getType(), result.getLoc()));
        else
          (void)entry->addArgument(result.getType(), result.getLoc());
      for (Value residual : residuals)
        mapping.map(residual,
                    entry->addArgument(residual.getType(), residual.getLoc()));
      for (Value arg : adjointArgs)
        mapping.map(arg, entry->addArgument(arg.getType(), arg.getLoc()));
      builder.setInsertionPointToStart(entry);
      for (Operation &op : body.without_terminator())
        if (recompute.contains(&op))
          builder.clone(op, mapping);
      for (Operation *op : backwardOps)
        builder.clone(*op, mapping);
      SmallVector<Value> adjoints;
      for (Value value : returnOp.getOperands().drop_front(numResults))
        adjoints.push_back(mapping.lookupOrDefault(value));
      func::ReturnOp::create(builder, returnOp.getLoc(), adjoints);
      Region &region = vjp.getBody();
      region.getBlocks().clear();
      region.push_back(entry);
      SmallVector<DictionaryAttr> argAttrs(entry->getNumArguments(),
                                           builder.getDictionaryAttr({}));
      for (unsigned i = 0; i < numInputs; ++i)
        argAttrs[i] = vjp.getArgAttrDict(i);
      vjp.setFunctionType(builder.getFunctionType(
          entry->getArgumentTypes(), TypeRange(ValueRange(adjoints))));
      vjp.setAllArgAttrs(argAttrs);
      vjp.setAllResultAttrs(ArrayRef<DictionaryAttr>{});
    }
    vjp->removeAttr("lm.vjp");
    StringRef name = vjp.getName();
    if (name.consume_back("_vjp")) {
      std::string backwardName = (name + "_bwd").str();
      if (!module.lookupSymbol(backwardName))
        vjp.setName(backwardName);
    }

    // Its calls pass what the paired forward call returned.
    for (auto [call, forwardCall] : pairs) {
      func::CallOp newForward = newForwardCalls.lookup(forwardCall);
      builder.setInsertionPoint(call);
      SmallVector<Value> operands(call.getOperands().take_front(numInputs));
      llvm::append_range(operands, newForward.getResults());
      llvm::append_range(operands, call.getOperands().drop_front(numInputs));
      auto replacement =
          func::CallOp::create(builder, call.getLoc(), vjp, operands);
      call.getResults()
          .take_front(numResults)
          .replaceAllUsesWith(newForward.getResults().take_front(numResults));
      call.getResults()
          .drop_front(numResults)
          .replaceAllUsesWith(replacement.getResults());
      call.erase();
    }
    for (auto &[call, replacement] : newForwardCalls)
      call->erase();
    LLVM_DEBUG(llvm::dbgs() << "@" << forward.getName() << " returns "
                            << residuals.size() << " residuals to @"
                            << vjp.getName() << " (" << recompute.size()
                            << " ops recomputed, " << pairs.size()
                            << " calls)\n");
  }
};

} // namespace
