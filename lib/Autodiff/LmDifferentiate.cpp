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
#include "lib/Autodiff/BlockFunctions.h"
#include "lib/Autodiff/Passes.h"
#include "lib/Dialect/Moe/Utils/Kernels.h"
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
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_LMDIFFERENTIATEPASS
#include "lib/Autodiff/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "lm-differentiate"

using namespace mlir;
using namespace mlir::lm;
using mlir::switchyard::blockCallee;

namespace {

bool isParam(func::FuncOp func, unsigned index) {
  return static_cast<bool>(func.getArgAttr(index, "lm.param"));
}

bool isFloatTensor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa<FloatType>(type.getElementType());
}

/// The unseeded dropout masks of a function, in program order.
SmallVector<moe::DropoutMaskOp> unseededMasks(func::FuncOp func) {
  SmallVector<moe::DropoutMaskOp> masks;
  func.walk([&](moe::DropoutMaskOp mask) {
    if (!mask.getSeed())
      masks.push_back(mask);
  });
  return masks;
}

/// Training mode: `masks` draw from `seed`, streams `0, 1, ...`.
void seedMasks(ArrayRef<moe::DropoutMaskOp> masks, Value seed) {
  for (auto [stream, mask] : llvm::enumerate(masks)) {
    moe::DropoutMaskOp op = mask;
    op.getSeedMutable().assign(seed);
    op.setStream(int64_t(stream));
  }
}

/// Appends the step's seed argument `tensor<i64>` to `func`.
Value addSeedArgument(func::FuncOp func, DictionaryAttr attrs) {
  auto seedType = RankedTensorType::get({}, IntegerType::get(func.getContext(), 64));
  (void)func.insertArgument(func.getNumArguments(), seedType, attrs,
                            func.getLoc());
  return func.getArguments().back();
}

/// A block function's seeding: the step's seed and an `i64` offset, the
/// first stream of its call, appended to its arguments; its masks draw
/// from `seed + offset`. The offset is a scalar argument rather than a
/// seed computed by the caller, so that the sum is made where the masks
/// are drawn (on the GPU, inside their kernels) instead of in code of its
/// own between the calls.
Value addBlockSeedArguments(func::FuncOp func) {
  Value seed = addSeedArgument(func, DictionaryAttr());
  Type i64 = IntegerType::get(func.getContext(), 64);
  (void)func.insertArgument(func.getNumArguments(), i64, DictionaryAttr(),
                            func.getLoc());
  Value offset = func.getArguments().back();
  OpBuilder b = OpBuilder::atBlockBegin(&func.getBody().front());
  Location loc = func.getLoc();
  Value sum = arith::AddIOp::create(
      b, loc, tensor::ExtractOp::create(b, loc, seed, ValueRange{}), offset);
  return tensor::FromElementsOp::create(b, loc, seed.getType(),
                                        ValueRange{sum});
}

/// Records `value`'s float results as active when an operand is.
void propagateActivity(Operation *op, llvm::DenseSet<Value> &active) {
  if (llvm::any_of(op->getOperands(),
                   [&](Value v) { return active.contains(v); }))
    for (Value result : op->getResults())
      if (isFloatTensor(result))
        active.insert(result);
}

/// The gradient functions of one block function, for one pattern of active
/// arguments.
struct BlockGradient {
  /// The block in training mode: its arguments, then the seed and the
  /// stream offset if it has dropout; its results.
  func::FuncOp forward;
  /// The vector-Jacobian product: `forward`'s arguments, then one adjoint
  /// per result; returns `forward`'s results (recomputed), then the
  /// adjoints of the active arguments.
  func::FuncOp vjp;
  /// The arguments whose adjoints `vjp` returns, in order.
  SmallVector<unsigned> activeArgs;
  /// How many dropout masks the block draws (the streams it uses).
  unsigned numMasks = 0;
};

/// Builds the adjoint of every active operand by a reverse sweep over
/// `ops`, from the adjoints of their results already in `adjoints`.
/// `callRule`, if set, builds the adjoints of ops it recognises (returning
/// failure for the others).
LogicalResult reverseSweep(
    ImplicitLocOpBuilder &b, ArrayRef<Operation *> ops,
    const llvm::DenseSet<Value> &active, DenseMap<Value, Value> &adjoints,
    StringRef functionName,
    function_ref<FailureOr<SmallVector<Value>>(Operation *, ValueRange)>
        callRule = nullptr) {
  for (Operation *op : llvm::reverse(ops)) {
    SmallVector<Value> resultAdjoints;
    bool any = false;
    for (Value result : op->getResults()) {
      resultAdjoints.push_back(adjoints.lookup(result));
      any |= static_cast<bool>(resultAdjoints.back());
    }
    if (!any)
      continue;
    // The adjoint's ops are named after the op they differentiate
    // (`linear_grad`), as convert-moe-to-linalg names the forward ops, for
    // the GPU kernel report.
    b.setLoc(isa<moe::MoeDialect>(op->getDialect())
                 ? switchyard::kindLocation(op, "_grad")
                 : op->getLoc());
    SmallVector<Value> operandAdjoints;
    if (FailureOr<SmallVector<Value>> called =
            callRule ? callRule(op, resultAdjoints)
                     : FailureOr<SmallVector<Value>>(failure());
        succeeded(called)) {
      operandAdjoints = std::move(*called);
    } else {
      auto rule = dyn_cast<moe::DifferentiableOpInterface>(op);
      if (!rule)
        return op->emitOpError()
               << "lies between a parameter and the loss of @" << functionName
               << " but has no gradient rule";
      LLVM_DEBUG(llvm::dbgs() << "  gradient rule of " << op->getName()
                              << " at " << op->getLoc() << "\n");
      operandAdjoints = rule.buildAdjoints(b, resultAdjoints);
    }
    for (auto [operand, adjoint] :
         llvm::zip(op->getOperands(), operandAdjoints)) {
      if (!adjoint || !active.contains(operand))
        continue;
      Value &slot = adjoints[operand];
      slot = slot ? arith::AddFOp::create(b, slot, adjoint).getResult()
                  : adjoint;
    }
  }
  return success();
}

/// The adjoint of `value`, or zeros of its type.
Value adjointOrZeros(ImplicitLocOpBuilder &b, DenseMap<Value, Value> &adjoints,
                     Value value) {
  if (Value adjoint = adjoints.lookup(value))
    return adjoint;
  return switchyard::filled(
      b, switchyard::sizesOf(b, value),
      cast<RankedTensorType>(value.getType()).getElementType(), 0.0);
}

struct LmDifferentiatePass
    : public switchyard::impl::LmDifferentiatePassBase<LmDifferentiatePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    blockGradients.clear();
    SmallVector<func::FuncOp> functions;
    SymbolTable symbols(module);
    for (func::FuncOp func : module.getOps<func::FuncOp>()) {
      // Generated functions, decoding steps (inference only), and functions
      // differentiated already.
      if (func.isDeclaration() || func->hasAttr("lm.generated") ||
          func->hasAttr(lm::kDecoderAttr) ||
          symbols.lookup((func.getName() + "_grad").str()))
        continue;
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        if (isParam(func, i)) {
          functions.push_back(func);
          break;
        }
    }
    for (func::FuncOp func : functions)
      if (failed(differentiate(func, symbols)))
        return signalPassFailure();
  }

  /// The training forward and vector-Jacobian product of block function
  /// `callee` with `activeArgs` active, built once.
  FailureOr<BlockGradient *> blockGradient(func::FuncOp callee,
                                           ArrayRef<unsigned> activeArgs,
                                           SymbolTable &symbols) {
    std::string key = callee.getName().str();
    for (unsigned i : activeArgs)
      key += "," + std::to_string(i);
    auto [slot, inserted] = blockGradients.try_emplace(key);
    if (!inserted)
      return &slot->second;
    BlockGradient *gradient = &slot->second;
    gradient->activeArgs.assign(activeArgs.begin(), activeArgs.end());

    // The forward function in training mode.
    OpBuilder builder(callee);
    auto forward = cast<func::FuncOp>(builder.clone(*callee));
    forward.setName((callee.getName() + "_train").str());
    forward->setAttr("lm.generated", builder.getUnitAttr());
    forward->setAttr("lm.block_forward", builder.getUnitAttr());
    SmallVector<moe::DropoutMaskOp> masks = unseededMasks(forward);
    gradient->numMasks = masks.size();
    if (!masks.empty())
      seedMasks(masks, addBlockSeedArguments(forward));
    symbols.insert(forward, Block::iterator(callee));
    gradient->forward = forward;

    // The vector-Jacobian product: the forward body, then the reverse sweep
    // from one adjoint argument per result.
    auto vjp = cast<func::FuncOp>(builder.clone(*forward));
    vjp->removeAttr("lm.block_forward");
    vjp.setName((callee.getName() + "_vjp").str());
    symbols.insert(vjp, Block::iterator(callee));
    gradient->vjp = vjp;
    Block &body = vjp.getBody().front();
    auto returnOp = cast<func::ReturnOp>(body.getTerminator());
    unsigned numInputs = vjp.getNumArguments();
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    llvm::DenseSet<Value> active;
    for (unsigned i : activeArgs)
      active.insert(body.getArgument(i));
    for (Operation *op : ops)
      propagateActivity(op, active);
    DenseMap<Value, Value> adjoints;
    for (Value result : returnOp.getOperands()) {
      (void)vjp.insertArgument(vjp.getNumArguments(), result.getType(),
                               DictionaryAttr(), vjp.getLoc());
      if (isFloatTensor(result) && !adjoints.count(result))
        adjoints[result] = body.getArguments().back();
    }
    ImplicitLocOpBuilder b(returnOp.getLoc(), returnOp);
    if (failed(reverseSweep(b, ops, active, adjoints, callee.getName())))
      return failure();
    SmallVector<Value> results(returnOp.getOperands());
    b.setLoc(returnOp.getLoc());
    for (unsigned i : activeArgs)
      results.push_back(adjointOrZeros(b, adjoints, body.getArgument(i)));
    func::ReturnOp::create(b, results);
    returnOp.erase();
    vjp.setFunctionType(b.getFunctionType(vjp.getArgumentTypes(),
                                          TypeRange(ValueRange(results))));
    // The split into a forward that keeps what the sweep reads and a
    // backward that reads it (lm-split-block-gradients, after the fusions).
    vjp->setAttr("lm.vjp",
                 b.getDictionaryAttr(
                     {b.getNamedAttr("forward",
                                     FlatSymbolRefAttr::get(forward)),
                      b.getNamedAttr("inputs", b.getI64IntegerAttr(numInputs)),
                      b.getNamedAttr("results", b.getI64IntegerAttr(
                                                    forward.getNumResults()))}));
    LLVM_DEBUG(llvm::dbgs() << "block @" << callee.getName() << ": @"
                            << forward.getName() << " and @" << vjp.getName()
                            << ", " << gradient->numMasks << " masks\n");
    return gradient;
  }

  LogicalResult differentiate(func::FuncOp forward, SymbolTable &symbols) {
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
    // mask from its own stream, in program order; a block function's masks
    // take the streams from its call's position on (the step's seed and
    // that offset are its last arguments).
    SmallVector<std::pair<moe::DropoutMaskOp, unsigned>> maskStreams;
    DenseMap<Operation *, unsigned> streamBase;
    unsigned numStreams = 0;
    for (Operation &op : body.without_terminator()) {
      if (func::FuncOp callee = blockCallee(&op)) {
        streamBase[&op] = numStreams;
        numStreams += unseededMasks(callee).size();
      }
      op.walk([&](moe::DropoutMaskOp mask) {
        if (!mask.getSeed())
          maskStreams.emplace_back(mask, numStreams++);
      });
    }
    Value seed;
    if (numStreams)
      seed = addSeedArgument(
          grad, b.getDictionaryAttr(b.getNamedAttr("lm.seed", b.getUnitAttr())));
    for (auto [mask, stream] : maskStreams) {
      mask.getSeedMutable().assign(seed);
      mask.setStream(int64_t(stream));
    }

    // Activity: values that depend on a parameter. A block call with active
    // operands becomes a call of its training forward function.
    llvm::DenseSet<Value> active;
    for (unsigned i = 0; i < grad.getNumArguments(); ++i)
      if (isParam(grad, i))
        active.insert(body.getArgument(i));
    SmallVector<Operation *> ops;
    DenseMap<Operation *, BlockGradient *> blockCalls;
    for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
      func::FuncOp callee = blockCallee(&op);
      SmallVector<unsigned> activeArgs;
      for (auto [i, operand] : llvm::enumerate(op.getOperands()))
        if (active.contains(operand))
          activeArgs.push_back(i);
      if (!callee || activeArgs.empty()) {
        ops.push_back(&op);
        propagateActivity(&op, active);
        continue;
      }
      FailureOr<BlockGradient *> gradient =
          blockGradient(callee, activeArgs, symbols);
      if (failed(gradient))
        return failure();
      OpBuilder at(&op);
      SmallVector<Value> operands(op.getOperands());
      if ((*gradient)->numMasks) {
        operands.push_back(seed);
        operands.push_back(arith::ConstantOp::create(
            at, op.getLoc(), at.getI64IntegerAttr(streamBase.lookup(&op))));
      }
      auto call = func::CallOp::create(at, op.getLoc(),
                                       (*gradient)->forward, operands);
      op.replaceAllUsesWith(call.getResults());
      op.erase();
      ops.push_back(call);
      blockCalls[call] = *gradient;
      propagateActivity(call, active);
    }

    LLVM_DEBUG(llvm::dbgs() << "differentiating @" << forward.getName()
                            << " into @" << grad.getName() << ": " << ops.size()
                            << " ops, " << active.size() << " active values, "
                            << numStreams << " dropout masks seeded\n");

    // The reverse sweep, emitted before the return; a block call's adjoints
    // come from its vector-Jacobian product.
    DenseMap<Value, Value> adjoints;
    Value one = arith::ConstantOp::create(
        b, DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()),
                                  b.getF32FloatAttr(1.0f)));
    adjoints[lossValue] = one;
    auto callRule =
        [&](Operation *op,
            ValueRange resultAdjoints) -> FailureOr<SmallVector<Value>> {
      BlockGradient *gradient = blockCalls.lookup(op);
      if (!gradient)
        return failure();
      SmallVector<Value> operands(op->getOperands());
      for (auto [result, adjoint] :
           llvm::zip(op->getResults(), resultAdjoints))
        operands.push_back(adjoint ? adjoint
                                   : adjointOrZeros(b, adjoints, result));
      auto vjp = func::CallOp::create(b, gradient->vjp, operands);
      SmallVector<Value> operandAdjoints(op->getNumOperands(), Value());
      for (auto [i, arg] : llvm::enumerate(gradient->activeArgs))
        operandAdjoints[arg] = vjp.getResult(op->getNumResults() + i);
      return operandAdjoints;
    };
    if (failed(reverseSweep(b, ops, active, adjoints, forward.getName(),
                            callRule)))
      return failure();

    // Return the loss, one gradient per parameter, then the forward
    // function's other results (XL memories for the next segment).
    SmallVector<Value> results = {lossValue};
    for (unsigned i = 0; i < grad.getNumArguments(); ++i)
      if (isParam(grad, i))
        results.push_back(adjointOrZeros(b, adjoints, body.getArgument(i)));
    llvm::append_range(results, returnOp.getOperands().drop_front());
    func::ReturnOp::create(b, results);
    returnOp.erase();
    grad.setFunctionType(b.getFunctionType(grad.getArgumentTypes(),
                                           TypeRange(ValueRange(results))));
    grad.setAllResultAttrs(ArrayRef<DictionaryAttr>{});
    return success();
  }

  /// The gradient functions of the block functions, by callee and active
  /// arguments.
  llvm::StringMap<BlockGradient> blockGradients;
};

} // namespace
