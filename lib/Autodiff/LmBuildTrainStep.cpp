//===- LmBuildTrainStep.cpp - the optimizer step ---------------------------===//
//
// Implements `lm-build-train-step`: from each `<name>_grad`, a
// `<name>_train_step` that clips the gradients by their global norm and
// applies one AdamW update to every parameter and its moments.
//
//===----------------------------------------------------------------------===//

#include "lib/Autodiff/BlockFunctions.h"
#include "lib/Autodiff/Passes.h"
#include "lib/Support/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"
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

/// The hyperparameters an AdamW update reads, in the order its
/// linalg.generic takes them.
constexpr Hyper kAdamHyper[] = {kLr,         kBeta1,       kBeta2,
                                kEps,        kWeightDecay, kCorrection1,
                                kCorrection2};

/// Sets `b`'s location to a name location `name` around it while alive:
/// the GPU kernel report names kernels by such names.
class NamedLocation {
public:
  NamedLocation(ImplicitLocOpBuilder &b, StringRef name)
      : b(b), saved(b.getLoc()) {
    b.setLoc(NameLoc::get(b.getStringAttr(name), saved));
  }
  ~NamedLocation() { b.setLoc(saved); }

private:
  ImplicitLocOpBuilder &b;
  Location saved;
};

/// Σ g² over a gradient, as a tensor<f32>.
Value sumOfSquares(ImplicitLocOpBuilder &b, Value g) {
  NamedLocation named(b, "grad_norm");
  unsigned rank = cast<RankedTensorType>(g.getType()).getRank();
  return generic(
      b, {g}, filled(b, {}, b.getF32Type(), 0.0),
      {b.getMultiDimIdentityMap(rank),
       AffineMap::get(rank, 0, {}, b.getContext())},
      iterators(0, rank), [](ImplicitLocOpBuilder &b, ValueRange args) {
        Value v = toF32(b, args[0]);
        return arith::AddFOp::create(b, args[1],
                                     arith::MulFOp::create(b, v, v));
      });
}

/// One AdamW update of a parameter and its moments, the gradient scaled by
/// `factor` (a tensor<f32>: clipping): a linalg.generic whose results are
/// the new parameter, m and v. The hyperparameters and the factor are
/// inputs of the generic that every element reads at the same place, not
/// scalars extracted before it: on the GPU an extracted scalar is a
/// single-thread kernel and a device buffer per value and call.
linalg::GenericOp adamW(ImplicitLocOpBuilder &b, Value hyper, Value factor,
                        Value param, Value gradient, Value m, Value v) {
  NamedLocation named(b, "adamw");
  auto type = cast<RankedTensorType>(param.getType());
  unsigned rank = type.getRank();
  bool decays = rank >= 2;
  AffineMap id = b.getMultiDimIdentityMap(rank);
  SmallVector<OpFoldResult> sizes = sizesOf(b, param);
  Type element = type.getElementType();
  Value initP = tensor::EmptyOp::create(b, sizes, element);
  Value initM = tensor::EmptyOp::create(b, sizes, element);
  Value initV = tensor::EmptyOp::create(b, sizes, element);
  Value one = f32Constant(b, 1.0);
  SmallVector<Value> inputs = {param, gradient, m, v};
  SmallVector<AffineMap> maps(4, id);
  for (Hyper index : kAdamHyper) {
    inputs.push_back(hyper);
    maps.push_back(AffineMap::get(rank, 0, b.getAffineConstantExpr(index)));
  }
  inputs.push_back(factor);
  maps.push_back(AffineMap::get(rank, 0, {}, b.getContext()));
  maps.append(3, id);
  return linalg::GenericOp::create(
      b, TypeRange{type, type, type}, inputs, ValueRange{initP, initM, initV},
      maps, iterators(rank),
      [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        ImplicitLocOpBuilder b(nestedLoc, nested);
        struct {
          Value lr, beta1, beta2, eps, decay, correction1, correction2;
        } h = {args[4], args[5], args[6], args[7],
               args[8], args[9], args[10]};
        Value factor = args[11];
        Value pv = toF32(b, args[0]);
        Value g = arith::MulFOp::create(b, toF32(b, args[1]), factor);
        Value mNew = arith::AddFOp::create(
            b, arith::MulFOp::create(b, h.beta1, toF32(b, args[2])),
            arith::MulFOp::create(b, arith::SubFOp::create(b, one, h.beta1),
                                  g));
        Value vNew = arith::AddFOp::create(
            b, arith::MulFOp::create(b, h.beta2, toF32(b, args[3])),
            arith::MulFOp::create(b, arith::SubFOp::create(b, one, h.beta2),
                                  arith::MulFOp::create(b, g, g)));
        Value mHat = arith::DivFOp::create(b, mNew, h.correction1);
        Value vHat = arith::DivFOp::create(b, vNew, h.correction2);
        Value direction = arith::DivFOp::create(
            b, mHat,
            arith::AddFOp::create(b, math::SqrtOp::create(b, vHat), h.eps));
        if (decays)
          direction = arith::AddFOp::create(
              b, direction, arith::MulFOp::create(b, h.decay, pv));
        Value pNew = arith::SubFOp::create(
            b, pv, arith::MulFOp::create(b, h.lr, direction));
        linalg::YieldOp::create(b, ValueRange{fromF32(b, pNew, element),
                                              fromF32(b, mNew, element),
                                              fromF32(b, vNew, element)});
      });
}

/// The parameters that one layer's calls of block functions read (indices
/// into the gradient function's parameters, in the calls' operand order),
/// and those block functions, in call order.
struct ParamGroup {
  SmallVector<func::FuncOp, 2> blocks;
  SmallVector<unsigned> params;
};

/// The groups of single block calls (in call order) joined by layer: the
/// calls repeat a pattern of `period` block functions (an attention block,
/// then a feed-forward block), the shortest of up to 4 that they repeat at
/// least twice; each repetition becomes one group. Unchanged where the
/// calls repeat no such pattern, or a single block.
SmallVector<ParamGroup> groupsByLayer(SmallVector<ParamGroup> calls) {
  for (size_t period = 2; period <= 4; ++period) {
    if (calls.size() % period != 0 || calls.size() / period < 2)
      continue;
    bool repeats = true;
    for (size_t i = period; i < calls.size() && repeats; ++i)
      repeats = calls[i].blocks == calls[i % period].blocks;
    if (!repeats)
      continue;
    SmallVector<ParamGroup> layers;
    for (size_t i = 0; i < calls.size(); ++i) {
      if (i % period == 0)
        layers.emplace_back();
      llvm::append_range(layers.back().blocks, calls[i].blocks);
      llvm::append_range(layers.back().params, calls[i].params);
    }
    return layers;
  }
  return calls;
}

struct LmBuildTrainStepPass
    : public switchyard::impl::LmBuildTrainStepPassBase<LmBuildTrainStepPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    optimizerFunctions.clear();
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

  /// The parameters of `grad` (positions `paramArgs`) that calls of block
  /// forward functions (`lm.block_forward`, from lm-differentiate) read, one
  /// group per call; a parameter that two such calls read, or one call
  /// twice, or anything but block functions, belongs to none.
  SmallVector<ParamGroup> paramGroups(func::FuncOp grad,
                                      ArrayRef<unsigned> paramArgs) {
    Block &body = grad.getBody().front();
    DenseMap<unsigned, unsigned> paramOfArg;
    for (auto [p, arg] : llvm::enumerate(paramArgs))
      paramOfArg[arg] = p;
    SmallVector<ParamGroup> groups;
    DenseMap<unsigned, unsigned> uses;
    grad.walk([&](func::CallOp call) {
      func::FuncOp callee = blockCallee(call);
      if (!callee || !callee->hasAttr("lm.block_forward"))
        return;
      ParamGroup group{{callee}, {}};
      for (Value operand : call.getOperands())
        if (auto arg = dyn_cast<BlockArgument>(operand);
            arg && arg.getOwner() == &body &&
            paramOfArg.count(arg.getArgNumber())) {
          unsigned p = paramOfArg[arg.getArgNumber()];
          group.params.push_back(p);
          ++uses[p];
        }
      if (!group.params.empty())
        groups.push_back(std::move(group));
    });
    // Parameters read elsewhere than by block functions (the forward
    // functions above, their vector-Jacobian products) stay with the step.
    for (auto &[arg, p] : paramOfArg)
      for (OpOperand &use : body.getArgument(arg).getUses())
        if (!blockCallee(use.getOwner()))
          uses[p] += 2;
    for (ParamGroup &group : groups)
      llvm::erase_if(group.params, [&](unsigned p) { return uses[p] != 1; });
    llvm::erase_if(groups,
                   [](const ParamGroup &g) { return g.params.empty(); });
    return groups;
  }

  /// The types of `group`'s parameters, of all `paramTypes`.
  static SmallVector<Type> groupTypes(const ParamGroup &group,
                                      TypeRange paramTypes) {
    return llvm::map_to_vector(group.params,
                               [&](unsigned p) { return paramTypes[p]; });
  }

  /// A private function of the optimizer, before `step`, named after the
  /// group's blocks; each distinct one built once by `fill`.
  func::FuncOp optimizerFunction(
      const ParamGroup &group, func::FuncOp step, StringRef suffix,
      ArrayRef<Type> inputs, ArrayRef<Type> results,
      function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, ValueRange)>
          fill) {
    // Named after the blocks: the first's name, then the others' own part
    // (after the model's name): `m__switchhead_ffn_adamw`.
    std::string name;
    for (func::FuncOp block : group.blocks) {
      StringRef base = block.getName();
      base.consume_back("_train");
      if (!name.empty()) {
        size_t own = base.rfind("__");
        name += "_" + (own == StringRef::npos ? base : base.drop_front(own + 2)).str();
        continue;
      }
      name = base.str();
    }
    name += suffix.str();
    // The same block may have its parameters in another pattern (a
    // parameter shared with another call): the types tell them apart.
    std::string key = name;
    llvm::raw_string_ostream os(key);
    llvm::interleaveComma(inputs, os);
    if (func::FuncOp known = optimizerFunctions.lookup(key))
      return known;
    OpBuilder builder(step);
    auto func = func::FuncOp::create(builder, step.getLoc(), name,
                                     builder.getFunctionType(inputs, results));
    func.setPrivate();
    func->setAttr("lm.generated", builder.getUnitAttr());
    SymbolTable(step->getParentOfType<ModuleOp>())
        .insert(func, Block::iterator(step));
    Block *entry = func.addEntryBlock();
    ImplicitLocOpBuilder b(step.getLoc(), OpBuilder::atBlockEnd(entry));
    SmallVector<Value> values = fill(b, entry->getArguments());
    func::ReturnOp::create(b, values);
    optimizerFunctions[key] = func;
    return func;
  }

  /// `<block>_sum_squares(g...) -> (Σ g², ...)`.
  func::FuncOp sumSquaresFunction(const ParamGroup &group, func::FuncOp step,
                                  TypeRange paramTypes) {
    SmallVector<Type> types = groupTypes(group, paramTypes);
    SmallVector<Type> results(
        types.size(), RankedTensorType::get({}, Float32Type::get(&getContext())));
    return optimizerFunction(
        group, step, "_sum_squares", types, results,
        [](ImplicitLocOpBuilder &b, ValueRange gradients) {
          return llvm::map_to_vector(gradients, [&](Value g) {
            return sumOfSquares(b, g);
          });
        });
  }

  /// `<block>_adamw(hyper, factor, p..., g..., m..., v...) -> (p'...,
  /// m'..., v'...)`.
  func::FuncOp adamWFunction(const ParamGroup &group, func::FuncOp step,
                             TypeRange paramTypes) {
    SmallVector<Type> types = groupTypes(group, paramTypes);
    Type f32 = Float32Type::get(&getContext());
    SmallVector<Type> inputs = {RankedTensorType::get({kNumHyper}, f32),
                                RankedTensorType::get({}, f32)};
    for (int i = 0; i < 4; ++i)
      llvm::append_range(inputs, types);
    SmallVector<Type> results;
    for (int i = 0; i < 3; ++i)
      llvm::append_range(results, types);
    unsigned k = types.size();
    return optimizerFunction(
        group, step, "_adamw", inputs, results,
        [k](ImplicitLocOpBuilder &b, ValueRange args) {
          SmallVector<Value> p, m, v;
          for (unsigned i = 0; i < k; ++i) {
            auto update = adamW(b, args[0], args[1], args[2 + i],
                                args[2 + k + i], args[2 + 2 * k + i],
                                args[2 + 3 * k + i]);
            p.push_back(update.getResult(0));
            m.push_back(update.getResult(1));
            v.push_back(update.getResult(2));
          }
          SmallVector<Value> results(p);
          llvm::append_range(results, m);
          llvm::append_range(results, v);
          return results;
        });
  }

  /// The optimizer functions built so far, by name and argument types.
  llvm::StringMap<func::FuncOp> optimizerFunctions;

  /// The clipped AdamW update of `params` by `gradients` (values in the
  /// function `step` being built, whose optimizer functions are inserted
  /// before it; `grad` tells which parameters each block call reads).
  struct Update {
    Value norm;
    SmallVector<Value> params, m, v;
  };
  Update buildUpdate(ImplicitLocOpBuilder &b, func::FuncOp grad,
                     func::FuncOp step, ArrayRef<unsigned> paramArgs,
                     ValueRange params, ValueRange gradients, ValueRange ms,
                     ValueRange vs, Value hyper) {
    unsigned numParams = paramArgs.size();
    Type f32 = b.getF32Type();

    // Parameters that one block call reads (lm-outline-layers) are updated
    // by that block's optimizer functions, called once per layer; the
    // others here.
    SmallVector<ParamGroup> groups =
        groupsByLayer(paramGroups(grad, paramArgs));
    SmallVector<int> groupOf(numParams, -1);
    for (auto [index, group] : llvm::enumerate(groups))
      for (unsigned p : group.params)
        groupOf[p] = int(index);
    auto ofGroup = [&](const ParamGroup &group, ValueRange values) {
      return llvm::map_to_vector(group.params,
                                 [&](unsigned p) { return values[p]; });
    };

    // Global gradient norm and the clipping factor: the squares of each
    // parameter's gradient summed, then the sums added in parameter order.
    SmallVector<Value> partials(numParams);
    for (const ParamGroup &group : groups) {
      auto call = func::CallOp::create(
          b, sumSquaresFunction(group, step, params.getTypes()),
          ofGroup(group, gradients));
      for (auto [p, partial] : llvm::zip(group.params, call.getResults()))
        partials[p] = partial;
    }
    for (unsigned p = 0; p < numParams; ++p)
      if (groupOf[p] < 0)
        partials[p] = sumOfSquares(b, gradients[p]);
    Value sumSquares = f32Constant(b, 0.0);
    for (Value partial : partials)
      sumSquares = arith::AddFOp::create(
          b, sumSquares, tensor::ExtractOp::create(b, partial, ValueRange{}));
    Value norm = math::SqrtOp::create(b, sumSquares);
    Value clip = tensor::ExtractOp::create(
        b, hyper, ValueRange{indexConstant(b, kClip)});
    Value limited = arith::DivFOp::create(
        b, clip, arith::MaximumFOp::create(b, norm, f32Constant(b, 1e-12)));
    Value factor = arith::MinimumFOp::create(b, f32Constant(b, 1.0), limited);
    Value clipping = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, clip,
                                           f32Constant(b, 0.0));
    factor = arith::SelectOp::create(b, clipping, factor, f32Constant(b, 1.0));

    SmallVector<Value> newParams(numParams), newM(numParams), newV(numParams);
    Value factorTensor = tensor::FromElementsOp::create(
        b, RankedTensorType::get({}, f32), ValueRange{factor});
    if (!groups.empty()) {
      for (const ParamGroup &group : groups) {
        SmallVector<Value> operands = {hyper, factorTensor};
        for (ValueRange values : {ValueRange(params), ValueRange(gradients),
                                  ValueRange(ms), ValueRange(vs)})
          llvm::append_range(operands, ofGroup(group, values));
        auto call = func::CallOp::create(
            b, adamWFunction(group, step, params.getTypes()), operands);
        unsigned k = group.params.size();
        for (auto [i, p] : llvm::enumerate(group.params)) {
          newParams[p] = call.getResult(i);
          newM[p] = call.getResult(k + i);
          newV[p] = call.getResult(2 * k + i);
        }
      }
    }
    for (unsigned p = 0; p < numParams; ++p) {
      if (groupOf[p] >= 0)
        continue;
      auto update = adamW(b, hyper, factorTensor, params[p], gradients[p],
                          ms[p], vs[p]);
      newParams[p] = update.getResult(0);
      newM[p] = update.getResult(1);
      newV[p] = update.getResult(2);
    }

    return {norm, std::move(newParams), std::move(newM), std::move(newV)};
  }

  /// A public function `name` of `inputs` with `argAttrs`, then the
  /// `hyper` argument (both lists get it), marked as generated and, like
  /// `grad`, for the runtime's C interface; its entry block made, its
  /// results set when its body is built.
  static func::FuncOp
  createStepFunction(OpBuilder &builder, func::FuncOp grad, StringRef name,
                     SmallVectorImpl<Type> &inputs,
                     SmallVectorImpl<DictionaryAttr> &argAttrs) {
    inputs.push_back(RankedTensorType::get({kNumHyper}, builder.getF32Type()));
    argAttrs.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr("lm.hyper", builder.getUnitAttr())));
    auto func = func::FuncOp::create(builder, grad.getLoc(), name,
                                     builder.getFunctionType(inputs, {}));
    func.setAllArgAttrs(argAttrs);
    func->setAttr("lm.generated", builder.getUnitAttr());
    if (grad->hasAttr("llvm.emit_c_interface"))
      func->setAttr("llvm.emit_c_interface", builder.getUnitAttr());
    func.addEntryBlock();
    return func;
  }

  void build(func::FuncOp grad) {
    OpBuilder builder(grad);
    builder.setInsertionPointAfter(grad);
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
      argAttrs.push_back(grad.getArgAttrDict(i)
                             ? grad.getArgAttrDict(i)
                             : builder.getDictionaryAttr({}));
    for (StringRef moment : {"lm.adam_m", "lm.adam_v"})
      for (unsigned i : paramArgs) {
        inputs.push_back(grad.getArgumentTypes()[i]);
        argAttrs.push_back(builder.getDictionaryAttr(
            builder.getNamedAttr(moment, grad.getArgAttr(i, "lm.param"))));
      }
    Type f32 = builder.getF32Type();
    auto step = createStepFunction(builder, grad, (base + "_train_step").str(),
                                   inputs, argAttrs);
    Block *body = &step.getBody().front();

    // The forward and backward computation: a call of _grad, so that its
    // code exists once in the module. (The JIT passes a call's hundreds of
    // descriptors through a frame in memory: see passArgumentsInMemory.)
    OpBuilder inner = OpBuilder::atBlockEnd(body);
    ValueRange gradArgs =
        body->getArguments().take_front(grad.getNumArguments());
    SmallVector<Value> gradResults(
        func::CallOp::create(inner, loc, grad, gradArgs).getResults());
    Value loss = gradResults[0];
    unsigned numParams = paramArgs.size();
    LLVM_DEBUG(llvm::dbgs()
               << "building @" << step.getName() << " from @" << grad.getName()
               << ": " << numParams << " parameters\n");
    SmallVector<Value> gradients(
        ArrayRef<Value>(gradResults).slice(1, numParams));
    SmallVector<Value> state(
        ArrayRef<Value>(gradResults).drop_front(1 + numParams));

    ImplicitLocOpBuilder b(loc, inner);
    Value hyper = body->getArguments().back();
    SmallVector<Value> params, ms, vs;
    for (unsigned p = 0; p < numParams; ++p) {
      params.push_back(body->getArgument(paramArgs[p]));
      ms.push_back(body->getArgument(grad.getNumArguments() + p));
      vs.push_back(body->getArgument(grad.getNumArguments() + numParams + p));
    }
    Update update =
        buildUpdate(b, grad, step, paramArgs, params, gradients, ms, vs, hyper);
    Value norm = update.norm;
    SmallVector<Value> &newParams = update.params, &newM = update.m,
                       &newV = update.v;

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
    if (optimizerStep)
      buildOptimizerStep(grad, paramArgs, step);
  }

  /// `<name>_optimizer_step(p..., g..., m..., v..., hyper) -> (norm, p'...,
  /// m'..., v'...)`, after `step`.
  void buildOptimizerStep(func::FuncOp grad, ArrayRef<unsigned> paramArgs,
                          func::FuncOp step) {
    OpBuilder builder(step);
    builder.setInsertionPointAfter(step);
    Location loc = grad.getLoc();
    StringRef base = grad.getName().drop_back(strlen("_grad"));
    SmallVector<Type> paramTypes;
    SmallVector<StringAttr> names;
    for (unsigned i : paramArgs) {
      paramTypes.push_back(grad.getArgumentTypes()[i]);
      names.push_back(grad.getArgAttrOfType<StringAttr>(i, "lm.param"));
    }
    SmallVector<Type> inputs;
    SmallVector<DictionaryAttr> argAttrs;
    for (StringRef role : {"lm.param", "lm.grad", "lm.adam_m", "lm.adam_v"})
      for (auto [type, name] : llvm::zip_equal(paramTypes, names)) {
        inputs.push_back(type);
        argAttrs.push_back(
            builder.getDictionaryAttr(builder.getNamedAttr(role, name)));
      }
    Type f32 = builder.getF32Type();
    auto func = createStepFunction(
        builder, grad, (base + "_optimizer_step").str(), inputs, argAttrs);
    Block *body = &func.getBody().front();
    ImplicitLocOpBuilder b(loc, OpBuilder::atBlockEnd(body));
    unsigned n = paramTypes.size();
    ValueRange args = body->getArguments();
    Update update = buildUpdate(b, grad, step, paramArgs, args.take_front(n),
                                args.slice(n, n), args.slice(2 * n, n),
                                args.slice(3 * n, n), args.back());
    SmallVector<Value> results = {tensor::FromElementsOp::create(
        b, RankedTensorType::get({}, f32), ValueRange{update.norm})};
    llvm::append_range(results, update.params);
    llvm::append_range(results, update.m);
    llvm::append_range(results, update.v);
    func::ReturnOp::create(b, results);
    func.setFunctionType(
        builder.getFunctionType(inputs, TypeRange(ValueRange(results))));
  }
};

} // namespace
