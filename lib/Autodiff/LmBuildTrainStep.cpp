//===- LmBuildTrainStep.cpp - the optimizer step ---------------------------===//
//
// Implements `lm-build-train-step`: from each `<name>_grad`, a
// `<name>_train_step` that clips the gradients by their global norm and
// applies one AdamW update to every parameter and its moments.
//
//===----------------------------------------------------------------------===//

#include "lib/Autodiff/Passes.h"
#include "lib/Support/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_LMBUILDTRAINSTEPPASS
#include "lib/Autodiff/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "lm-build-train-step"

using namespace mlir;
using namespace mlir::switchyard;

namespace {

/// Positions of the hyperparameters in the `hyper` argument.
enum Hyper : int64_t {
  kLr,
  kBeta1,
  kBeta2,
  kEps,
  kWeightDecay,
  kClip,
  kCorrection1,
  kCorrection2,
  kNumHyper
};

struct LmBuildTrainStepPass
    : public switchyard::impl::LmBuildTrainStepPassBase<LmBuildTrainStepPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> grads;
    // The gradient functions lm-differentiate made (marked lm.generated);
    // a function of the user's that only ends in _grad is not one.
    for (func::FuncOp func : module.getOps<func::FuncOp>())
      if (func.getName().ends_with("_grad") && !func.isDeclaration() &&
          func->hasAttr("lm.generated") &&
          !module.lookupSymbol(
              (func.getName().drop_back(strlen("_grad")) + "_train_step")
                  .str()))
        grads.push_back(func);
    for (func::FuncOp grad : grads) {
      if (failed(verifyGradient(grad)))
        return signalPassFailure();
      build(grad);
    }
  }

  /// Checks the signature build() relies on: one block returning the loss
  /// (a scalar f32 tensor), then one gradient per lm.param argument, of its
  /// type.
  LogicalResult verifyGradient(func::FuncOp grad) {
    if (!grad.getBody().hasOneBlock())
      return grad.emitOpError("expected a gradient function of one block");
    SmallVector<Type> params;
    for (unsigned i = 0; i < grad.getNumArguments(); ++i)
      if (grad.getArgAttr(i, "lm.param"))
        params.push_back(grad.getArgumentTypes()[i]);
    ArrayRef<Type> results = grad.getResultTypes();
    auto loss = results.empty() ? RankedTensorType()
                                : dyn_cast<RankedTensorType>(results.front());
    if (!loss || loss.getRank() != 0 || !loss.getElementType().isF32() ||
        results.size() < 1 + params.size() ||
        results.slice(1, params.size()) != ArrayRef<Type>(params))
      return grad.emitOpError(
          "expected the results of a gradient function: the loss "
          "(tensor<f32>), then one gradient per lm.param argument, of its "
          "type");
    return success();
  }

  void build(func::FuncOp grad) {
    OpBuilder builder(grad);
    builder.setInsertionPointAfter(grad);
    MLIRContext *ctx = &getContext();
    Location loc = grad.getLoc();
    StringRef base = grad.getName().drop_back(strlen("_grad"));

    // Parameters: the arguments marked lm.param, in order.
    SmallVector<unsigned> paramArgs;
    for (unsigned i = 0; i < grad.getNumArguments(); ++i)
      if (grad.getArgAttr(i, "lm.param"))
        paramArgs.push_back(i);
    SmallVector<Type> inputs(grad.getArgumentTypes());
    SmallVector<DictionaryAttr> argAttrs;
    for (unsigned i = 0; i < grad.getNumArguments(); ++i)
      argAttrs.push_back(grad.getArgAttrDict(i) ? grad.getArgAttrDict(i)
                                                : builder.getDictionaryAttr({}));
    for (StringRef moment : {"lm.adam_m", "lm.adam_v"})
      for (unsigned i : paramArgs) {
        inputs.push_back(grad.getArgumentTypes()[i]);
        argAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
            moment, grad.getArgAttr(i, "lm.param"))));
      }
    Type f32 = builder.getF32Type();
    inputs.push_back(RankedTensorType::get({kNumHyper}, f32));
    argAttrs.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr("lm.hyper", builder.getUnitAttr())));

    auto step = func::FuncOp::create(
        builder, loc, (base + "_train_step").str(),
        builder.getFunctionType(inputs, {}));
    step.setAllArgAttrs(argAttrs);
    step->setAttr("lm.generated", builder.getUnitAttr());
    if (grad->hasAttr("llvm.emit_c_interface"))
      step->setAttr("llvm.emit_c_interface", builder.getUnitAttr());
    Block *body = step.addEntryBlock();

    // The forward and backward computation: a call of _grad, which is
    // compiled once for both (a copy of its body here would double the code
    // that every later stage lowers).
    OpBuilder inner = OpBuilder::atBlockEnd(body);
    auto call = func::CallOp::create(
        inner, loc, grad,
        ValueRange(body->getArguments().take_front(grad.getNumArguments())));
    Value loss = call.getResult(0);
    unsigned numParams = paramArgs.size();
    LLVM_DEBUG(llvm::dbgs()
               << "building @" << step.getName() << " from @" << grad.getName()
               << ": " << numParams << " parameters\n");
    SmallVector<Value> gradients(call.getResults().slice(1, numParams));
    SmallVector<Value> state(call.getResults().drop_front(1 + numParams));

    ImplicitLocOpBuilder b(loc, inner);
    Value hyper = body->getArguments().back();
    auto hyperAt = [&](int64_t index) -> Value {
      return tensor::ExtractOp::create(b, hyper,
                                       ValueRange{indexConstant(b, index)});
    };

    // Global gradient norm and the clipping factor.
    Value sumSquares = f32Constant(b, 0.0);
    for (Value g : gradients) {
      unsigned rank = cast<RankedTensorType>(g.getType()).getRank();
      Value partial = generic(
          b, {g}, filled(b, {}, f32, 0.0),
          {b.getMultiDimIdentityMap(rank), AffineMap::get(rank, 0, {}, ctx)},
          iterators(0, rank), [](ImplicitLocOpBuilder &b, ValueRange args) {
            Value v = toF32(b, args[0]);
            return arith::AddFOp::create(b, args[1],
                                         arith::MulFOp::create(b, v, v));
          });
      sumSquares = arith::AddFOp::create(
          b, sumSquares, tensor::ExtractOp::create(b, partial, ValueRange{}));
    }
    Value norm = math::SqrtOp::create(b, sumSquares);
    Value clip = hyperAt(kClip);
    Value limited = arith::DivFOp::create(
        b, clip, arith::MaximumFOp::create(b, norm, f32Constant(b, 1e-12)));
    Value factor = arith::MinimumFOp::create(b, f32Constant(b, 1.0), limited);
    Value clipping = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, clip,
                                           f32Constant(b, 0.0));
    factor = arith::SelectOp::create(b, clipping, factor, f32Constant(b, 1.0));

    Value lr = hyperAt(kLr), beta1 = hyperAt(kBeta1), beta2 = hyperAt(kBeta2);
    Value eps = hyperAt(kEps), decay = hyperAt(kWeightDecay);
    Value correction1 = hyperAt(kCorrection1),
          correction2 = hyperAt(kCorrection2);
    Value one = f32Constant(b, 1.0);

    SmallVector<Value> newParams, newM, newV;
    for (unsigned p = 0; p < numParams; ++p) {
      Value param = body->getArgument(paramArgs[p]);
      Value m = body->getArgument(grad.getNumArguments() + p);
      Value v = body->getArgument(grad.getNumArguments() + numParams + p);
      auto type = cast<RankedTensorType>(param.getType());
      unsigned rank = type.getRank();
      bool decays = rank >= 2;
      AffineMap id = b.getMultiDimIdentityMap(rank);
      SmallVector<OpFoldResult> sizes = sizesOf(b, param);
      Type element = type.getElementType();
      Value initP = tensor::EmptyOp::create(b, sizes, element);
      Value initM = tensor::EmptyOp::create(b, sizes, element);
      Value initV = tensor::EmptyOp::create(b, sizes, element);
      auto update = linalg::GenericOp::create(
          b, TypeRange{type, type, type}, ValueRange{param, gradients[p], m, v},
          ValueRange{initP, initM, initV},
          SmallVector<AffineMap>(7, id), iterators(rank),
          [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
            ImplicitLocOpBuilder b(nestedLoc, nested);
            Value pv = toF32(b, args[0]);
            Value g = arith::MulFOp::create(b, toF32(b, args[1]), factor);
            Value mNew = arith::AddFOp::create(
                b, arith::MulFOp::create(b, beta1, toF32(b, args[2])),
                arith::MulFOp::create(b, arith::SubFOp::create(b, one, beta1),
                                      g));
            Value vNew = arith::AddFOp::create(
                b, arith::MulFOp::create(b, beta2, toF32(b, args[3])),
                arith::MulFOp::create(b, arith::SubFOp::create(b, one, beta2),
                                      arith::MulFOp::create(b, g, g)));
            Value mHat = arith::DivFOp::create(b, mNew, correction1);
            Value vHat = arith::DivFOp::create(b, vNew, correction2);
            Value direction = arith::DivFOp::create(
                b, mHat,
                arith::AddFOp::create(b, math::SqrtOp::create(b, vHat), eps));
            if (decays)
              direction = arith::AddFOp::create(
                  b, direction, arith::MulFOp::create(b, decay, pv));
            Value pNew = arith::SubFOp::create(
                b, pv, arith::MulFOp::create(b, lr, direction));
            linalg::YieldOp::create(
                b, ValueRange{fromF32(b, pNew, element),
                              fromF32(b, mNew, element),
                              fromF32(b, vNew, element)});
          });
      newParams.push_back(update.getResult(0));
      newM.push_back(update.getResult(1));
      newV.push_back(update.getResult(2));
    }

    Value normTensor = tensor::FromElementsOp::create(
        b, RankedTensorType::get({}, f32), ValueRange{norm});
    // The loss and the state are returned in buffers of their own, not in
    // those of the call: the call's results may alias each other as far as
    // buffer deallocation can tell, and freeing the gradients while
    // returning another of the call's buffers would need run-time alias
    // checks on the host (which the GPU's host code cannot make).
    Value lossOut = tensor::FromElementsOp::create(
        b, RankedTensorType::get({}, f32),
        ValueRange{tensor::ExtractOp::create(b, loss, ValueRange{})});
    SmallVector<Value> results = {lossOut, normTensor};
    llvm::append_range(results, newParams);
    llvm::append_range(results, newM);
    llvm::append_range(results, newV);
    for (Value value : state) {
      auto type = cast<RankedTensorType>(value.getType());
      Value init = tensor::EmptyOp::create(b, sizesOf(b, value),
                                           type.getElementType());
      results.push_back(
          linalg::CopyOp::create(b, value, init).getResult(0));
    }
    func::ReturnOp::create(b, results);
    step.setFunctionType(builder.getFunctionType(
        inputs, TypeRange(ValueRange(results))));
  }
};

} // namespace
