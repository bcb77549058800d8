//===- LmDifferentiate.cpp - reverse-mode differentiation -----------------===//
//
// Implements `lm-differentiate`: for every function taking parameters, a
// `<name>_grad` function computing the loss and the gradient of every
// parameter, by a reverse sweep over the ops between the parameters and the
// loss that calls each op's gradient rule (DifferentiableOpInterface).
// The gradient function is the training mode of the model: its dropout
// masks are seeded from a new `lm.seed` argument.
//
//===----------------------------------------------------------------------===//

#include "dialect/Lm/IR/LmOps.h"
#include "lib/Autodiff/Passes.h"
#include "dialect/Moe/IR/MoeInterfaces.h"
#include "dialect/Moe/IR/MoeOps.h"
#include "lib/Support/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_LMDIFFERENTIATEPASS
#include "lib/Autodiff/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "lm-differentiate"

using namespace mlir;
using namespace mlir::lm;

namespace {

bool isParam(func::FuncOp func, unsigned index) {
  return static_cast<bool>(func.getArgAttr(index, "lm.param"));
}

bool isFloatTensor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa<FloatType>(type.getElementType());
}

struct LmDifferentiatePass
    : public switchyard::impl::LmDifferentiatePassBase<LmDifferentiatePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> functions;
    SymbolTable symbols(module);
    for (func::FuncOp func : module.getOps<func::FuncOp>()) {
      // Generated functions, and functions differentiated already.
      if (func.isDeclaration() || func->hasAttr("lm.generated") ||
          symbols.lookup((func.getName() + "_grad").str()))
        continue;
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        if (isParam(func, i)) {
          functions.push_back(func);
          break;
        }
    }
    for (func::FuncOp func : functions)
      if (failed(differentiate(func)))
        return signalPassFailure();
  }

  LogicalResult differentiate(func::FuncOp forward) {
    if (forward.getNumResults() == 0 || !forward.getBody().hasOneBlock())
      return forward.emitOpError(
          "cannot be differentiated: expected a single block returning the "
          "loss or the logits first");
    auto first = dyn_cast<RankedTensorType>(forward.getResultTypes()[0]);
    bool logits = first && first.getRank() == 3 &&
                  isa<FloatType>(first.getElementType());
    bool loss = first && first.getRank() == 0 && first.getElementType().isF32();
    if (!logits && !loss)
      return forward.emitOpError()
             << "cannot be differentiated: expected its first result to be a "
                "loss (tensor<f32>) or logits [batch, time, vocab], found "
             << forward.getResultTypes()[0];
    auto tokens = forward.getNumArguments()
                      ? dyn_cast<RankedTensorType>(forward.getArgumentTypes()[0])
                      : RankedTensorType();
    if (logits &&
        (!tokens || tokens.getRank() != 2 ||
         !tokens.getElementType().isSignlessInteger() ||
         isParam(forward, 0)))
      return forward.emitOpError(
          "cannot be differentiated: logits need token ids [batch, time] as "
          "the first argument, to type the targets");

    // The gradient function starts as a copy of the forward one.
    OpBuilder builder(forward);
    builder.setInsertionPointAfter(forward);
    auto grad = cast<func::FuncOp>(builder.clone(*forward));
    std::string name = (forward.getName() + "_grad").str();
    grad.setName(name);
    grad->setAttr("lm.generated", builder.getUnitAttr());
    Block &body = grad.getBody().front();
    auto returnOp = cast<func::ReturnOp>(body.getTerminator());
    ImplicitLocOpBuilder b(returnOp.getLoc(), builder);
    b.setInsertionPoint(returnOp);

    // The loss.
    Value lossValue = returnOp.getOperand(0);
    if (logits) {
      // The targets, as a new last argument.
      SmallVector<NamedAttribute> targetAttrs;
      if (!first.isDynamicDim(2))
        targetAttrs.push_back(b.getNamedAttr(
            "lm.vocab", b.getI64IntegerAttr(first.getDimSize(2))));
      (void)grad.insertArgument(grad.getNumArguments(), tokens,
                                b.getDictionaryAttr(targetAttrs),
                                grad.getLoc());
      grad.setArgAttr(grad.getNumArguments() - 1, "lm.targets",
                      b.getUnitAttr());
      lossValue = moe::CrossEntropyOp::create(
          b, RankedTensorType::get({}, b.getF32Type()), lossValue,
          body.getArguments().back());
    }

    // Training mode: dropout masks draw from a per-step seed argument, each
    // mask from its own stream.
    SmallVector<moe::DropoutMaskOp> masks;
    grad.walk([&](moe::DropoutMaskOp mask) {
      if (!mask.getSeed())
        masks.push_back(mask);
    });
    if (!masks.empty()) {
      auto seedType = RankedTensorType::get({}, b.getI64Type());
      (void)grad.insertArgument(
          grad.getNumArguments(), seedType,
          b.getDictionaryAttr(b.getNamedAttr("lm.seed", b.getUnitAttr())),
          grad.getLoc());
      for (auto [stream, mask] : llvm::enumerate(masks)) {
        mask.getSeedMutable().assign(body.getArguments().back());
        mask.setStream(int64_t(stream));
      }
    }

    // Activity: values that depend on a parameter.
    llvm::DenseSet<Value> active;
    for (unsigned i = 0; i < grad.getNumArguments(); ++i)
      if (isParam(grad, i))
        active.insert(body.getArgument(i));
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator()) {
      ops.push_back(&op);
      if (llvm::any_of(op.getOperands(),
                       [&](Value v) { return active.contains(v); }))
        for (Value result : op.getResults())
          if (isFloatTensor(result))
            active.insert(result);
    }

    LLVM_DEBUG(llvm::dbgs() << "differentiating @" << forward.getName()
                            << " into @" << grad.getName() << ": " << ops.size()
                            << " ops, " << active.size() << " active values, "
                            << masks.size() << " dropout masks seeded\n");

    // The reverse sweep, emitted before the return.
    DenseMap<Value, Value> adjoints;
    Value one = arith::ConstantOp::create(
        b, DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()),
                                  b.getF32FloatAttr(1.0f)));
    adjoints[lossValue] = one;
    for (Operation *op : llvm::reverse(ops)) {
      SmallVector<Value> resultAdjoints;
      bool any = false;
      for (Value result : op->getResults()) {
        resultAdjoints.push_back(adjoints.lookup(result));
        any |= static_cast<bool>(resultAdjoints.back());
      }
      if (!any)
        continue;
      auto rule = dyn_cast<moe::DifferentiableOpInterface>(op);
      if (!rule)
        return op->emitOpError()
               << "lies between a parameter and the loss of @"
               << forward.getName() << " but has no gradient rule";
      LLVM_DEBUG(llvm::dbgs() << "  gradient rule of " << op->getName()
                              << " at " << op->getLoc() << "\n");
      b.setLoc(op->getLoc());
      SmallVector<Value> operandAdjoints =
          rule.buildAdjoints(b, resultAdjoints);
      for (auto [operand, adjoint] :
           llvm::zip(op->getOperands(), operandAdjoints)) {
        if (!adjoint || !active.contains(operand))
          continue;
        Value &slot = adjoints[operand];
        slot = slot ? arith::AddFOp::create(b, slot, adjoint).getResult()
                    : adjoint;
      }
    }

    // Return the loss, one gradient per parameter, then the forward
    // function's other results (XL memories for the next segment).
    SmallVector<Value> results = {lossValue};
    for (unsigned i = 0; i < grad.getNumArguments(); ++i) {
      if (!isParam(grad, i))
        continue;
      Value param = body.getArgument(i);
      Value gradient = adjoints.lookup(param);
      if (!gradient)
        gradient = switchyard::filled(b, switchyard::sizesOf(b, param),
                                      cast<RankedTensorType>(param.getType())
                                          .getElementType(),
                                      0.0);
      results.push_back(gradient);
    }
    llvm::append_range(results, returnOp.getOperands().drop_front());
    func::ReturnOp::create(b, results);
    returnOp.erase();
    grad.setFunctionType(b.getFunctionType(grad.getArgumentTypes(),
                                           TypeRange(ValueRange(results))));
    grad.setAllResultAttrs(ArrayRef<DictionaryAttr>{});
    return success();
  }
};

} // namespace
