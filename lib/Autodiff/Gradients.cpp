//===- Gradients.cpp - gradient rules of the moe ops ----------------------===//
//
// The vector-Jacobian products of the moe ops, written from the forward
// semantics of docs/Semantics.md as linalg on tensors (accumulating in f32,
// like the forward lowerings, whose kernels they reuse to recompute layer
// norm statistics and rotations). The rules of attention and of the expert
// projections are ops of their own (moe.attention_grad,
// moe.expert_proj_grad, moe.expert_merge_grad), lowered (or fused) with the
// forward ops. Gradients do not flow through the top-k choice or into expert
// indices and token ids; they flow into gate values, expert weights and
// activations (docs/Semantics.md, "Training").
//
// Expert-weight gradients avoid scattering: for a stacked weight [E, ...],
// the routes of each (token, expert) are first summed into a dense tensor C
// (routeSums, Kernels.h), then dW is one dense contraction of C with the
// other factor over tokens.
//
//===----------------------------------------------------------------------===//

#include "lib/Autodiff/Gradients.h"
#include "lib/Dialect/Moe/Utils/Kernels.h"
#include "dialect/Moe/IR/MoeInterfaces.h"
#include "dialect/Moe/IR/MoeOps.h"
#include "lib/Support/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"

#include <limits>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::switchyard;

namespace {

/// Converts an f32 gradient to the element type of the value it belongs to.
Value asTypeOf(ImplicitLocOpBuilder &b, Value gradient, Value of) {
  return castElements(b, gradient, elementTypeOf(of));
}

/// Multiplies an f32 tensor by a constant.
Value scaled(ImplicitLocOpBuilder &b, Value tensor, double factor) {
  if (factor == 1.0)
    return tensor;
  return mapElements(b, tensor, b.getF32Type(),
                     [&](ImplicitLocOpBuilder &b, Value v) -> Value {
                       return arith::MulFOp::create(b, v,
                                                    f32Constant(b, factor));
                     });
}

//===----------------------------------------------------------------------===//
// Dense building blocks
//===----------------------------------------------------------------------===//

/// y = s·x·wᵀ: dx = s·dy·w, dw = s·dyᵀ·x.
struct LinearGradient
    : public DifferentiableOpInterface::ExternalModel<LinearGradient,
                                                      LinearOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    auto linear = cast<LinearOp>(op);
    MLIRContext *ctx = b.getContext();
    Value x = linear.getInput(), w = linear.getWeight(), dy = adjoints[0];
    double s = linear.getScale().convertToDouble();
    // dx[n, k] over (n, k | m); dw[m, k] over (m, k | n).
    Value dx =
        contractF32(b, dy, dimsMap(ctx, 3, {0, 2}), w, dimsMap(ctx, 3, {2, 1}),
                    dimsMap(ctx, 3, {0, 1}), iterators(2, 1),
                    {sizesOf(b, x)[0], sizesOf(b, x)[1]});
    Value dw =
        contractF32(b, dy, dimsMap(ctx, 3, {2, 0}), x, dimsMap(ctx, 3, {2, 1}),
                    dimsMap(ctx, 3, {0, 1}), iterators(2, 1),
                    {sizesOf(b, w)[0], sizesOf(b, w)[1]});
    return {asTypeOf(b, scaled(b, dx, s), x), asTypeOf(b, scaled(b, dw, s), w)};
  }
};

/// dx = dy where x > 0.
struct ReluGradient
    : public DifferentiableOpInterface::ExternalModel<ReluGradient, ReluOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    Value x = op->getOperand(0);
    auto type = cast<RankedTensorType>(x.getType());
    AffineMap id = b.getMultiDimIdentityMap(type.getRank());
    Value init =
        tensor::EmptyOp::create(b, sizesOf(b, x), type.getElementType());
    Value dx = generic(
        b, {adjoints[0], x}, init, {id, id, id}, iterators(type.getRank()),
        [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
          Value zero = arith::ConstantOp::create(
              b, type.getElementType(),
              b.getFloatAttr(type.getElementType(), 0.0));
          Value positive = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT,
                                                 args[1], zero);
          return arith::SelectOp::create(b, positive, args[0], zero);
        });
    return {dx};
  }
};

/// With x̂ = (x - μ)·r and g = dy·w: db = Σ_rows dy, dw = Σ_rows dy·x̂,
/// dx = r·(g - mean(g) - x̂·mean(g·x̂)).
struct LayerNormGradient
    : public DifferentiableOpInterface::ExternalModel<LayerNormGradient,
                                                      LayerNormOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    auto norm = cast<LayerNormOp>(op);
    MLIRContext *ctx = b.getContext();
    Value x = norm.getInput(), w = norm.getWeight(), dy = adjoints[0];
    unsigned rank = cast<RankedTensorType>(x.getType()).getRank();
    auto [mean, rstd] =
        layerNormStatistics(b, x, norm.getEps().convertToDouble());
    AffineMap id = b.getMultiDimIdentityMap(rank), pre = rowMap(ctx, rank);
    AffineMap last = dimsMap(ctx, rank, {rank - 1});
    SmallVector<OpFoldResult> sizes = sizesOf(b, x);
    SmallVector<OpFoldResult> rowSizes(sizes.begin(), sizes.end() - 1);
    Type f32 = b.getF32Type();
    auto normalised = [&](ImplicitLocOpBuilder &b, Value xv, Value m,
                          Value r) -> Value {
      return arith::MulFOp::create(b, arith::SubFOp::create(b, toF32(b, xv), m),
                                   r);
    };

    // Parameter gradients: reduce over every row, keep the last dim.
    SmallVector<utils::IteratorType> rowsThenWidth(
        rank - 1, utils::IteratorType::reduction);
    rowsThenWidth.push_back(utils::IteratorType::parallel);
    OpFoldResult normWidth = sizesOf(b, w)[0];
    Value dbias =
        generic(b, {dy}, filled(b, {normWidth}, f32, 0.0), {id, last},
                rowsThenWidth, [](ImplicitLocOpBuilder &b, ValueRange args) {
                  return arith::AddFOp::create(b, args[1], toF32(b, args[0]));
                });
    Value dweight = generic(
        b, {dy, x, mean, rstd}, filled(b, {normWidth}, f32, 0.0),
        {id, id, pre, pre, last}, rowsThenWidth,
        [&](ImplicitLocOpBuilder &b, ValueRange args) {
          Value xhat = normalised(b, args[1], args[2], args[3]);
          return arith::AddFOp::create(
              b, args[4], arith::MulFOp::create(b, toF32(b, args[0]), xhat));
        });

    // Row means of g and g·x̂.
    Value width = indexToF32(b, dimOf(b, x, rank - 1));
    Value sumG = generic(b, {dy, w}, filled(b, rowSizes, f32, 0.0),
                         {id, last, pre}, iterators(rank - 1, 1),
                         [](ImplicitLocOpBuilder &b, ValueRange args) {
                           Value g = arith::MulFOp::create(b, toF32(b, args[0]),
                                                           toF32(b, args[1]));
                           return arith::AddFOp::create(b, args[2], g);
                         });
    Value sumGX =
        generic(b, {dy, w, x, mean, rstd}, filled(b, rowSizes, f32, 0.0),
                {id, last, id, pre, pre, pre}, iterators(rank - 1, 1),
                [&](ImplicitLocOpBuilder &b, ValueRange args) {
                  Value g = arith::MulFOp::create(b, toF32(b, args[0]),
                                                  toF32(b, args[1]));
                  Value xhat = normalised(b, args[2], args[3], args[4]);
                  return arith::AddFOp::create(
                      b, args[5], arith::MulFOp::create(b, g, xhat));
                });
    Value dx = generic(
        b, {dy, w, x, mean, rstd, sumG, sumGX},
        tensor::EmptyOp::create(b, sizes, f32),
        {id, last, id, pre, pre, pre, pre, id}, iterators(rank),
        [&](ImplicitLocOpBuilder &b, ValueRange args) {
          Value g =
              arith::MulFOp::create(b, toF32(b, args[0]), toF32(b, args[1]));
          Value xhat = normalised(b, args[2], args[3], args[4]);
          Value meanG = arith::DivFOp::create(b, args[5], width);
          Value meanGX = arith::DivFOp::create(b, args[6], width);
          Value inner =
              arith::SubFOp::create(b, arith::SubFOp::create(b, g, meanG),
                                    arith::MulFOp::create(b, xhat, meanGX));
          return arith::MulFOp::create(b, args[4], inner);
        });
    return {asTypeOf(b, dx, x), asTypeOf(b, dweight, w),
            asTypeOf(b, dbias, norm.getBias())};
  }
};

/// The rotation is orthogonal: its adjoint rotates by the opposite angles.
struct RopeGradient
    : public DifferentiableOpInterface::ExternalModel<RopeGradient, RopeOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    auto rope = cast<RopeOp>(op);
    SmallVector<Value> result = {rotary(b, adjoints[0], rope.getOffset(),
                                        /*inverse=*/true, rope.getStart())};
    if (rope.getStart())
      result.push_back(Value()); // The position has no adjoint.
    return result;
  }
};

/// dtable[v, d] = Σ_{b, t: tokens[b, t] = v} dy[b, t, d]: moe.embed_grad
/// over the flattened tokens (convert-moe-to-linalg lowers it for the
/// target: a one-hot matmul, or a scatter-add). No gradient into token ids.
struct EmbedGradient
    : public DifferentiableOpInterface::ExternalModel<EmbedGradient, EmbedOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    auto embed = cast<EmbedOp>(op);
    Value table = embed.getTable();
    Value tokens = tensor::CollapseShapeOp::create(
        b, embed.getTokens(), SmallVector<ReassociationIndices>{{0, 1}});
    Value dy = tensor::CollapseShapeOp::create(
        b, adjoints[0], SmallVector<ReassociationIndices>{{0, 1}, {2}});
    auto tableType = cast<RankedTensorType>(table.getType());
    Value dtable = EmbedGradOp::create(
        b, RankedTensorType::get(tableType.getShape(), b.getF32Type()),
        tokens, dy);
    return {asTypeOf(b, dtable, table), Value()};
  }
};

/// The two halves of dy along time.
struct ConcatGradient
    : public DifferentiableOpInterface::ExternalModel<ConcatGradient,
                                                      ConcatOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    auto concat = cast<ConcatOp>(op);
    Value dy = adjoints[0];
    Value split = dimOf(b, concat.getFirst(), 1);
    auto part = [&](Value like, Value offset) {
      AffineMap id = b.getMultiDimIdentityMap(3);
      Value init =
          tensor::EmptyOp::create(b, sizesOf(b, like), elementTypeOf(like));
      return generic(
          b, {}, init, {id}, iterators(3),
          [&](ImplicitLocOpBuilder &b, ValueRange) -> Value {
            Value time = arith::AddIOp::create(b, loopIndex(b, 1), offset);
            return tensor::ExtractOp::create(
                b, dy, ValueRange{loopIndex(b, 0), time, loopIndex(b, 2)});
          });
    };
    return {part(concat.getFirst(), indexConstant(b, 0)),
            part(concat.getSecond(), split)};
  }
};

/// dlogits[b, t, v] = dloss · (softmax(logits[b, t])[v] - [v = target]) / BT.
struct CrossEntropyGradient
    : public DifferentiableOpInterface::ExternalModel<CrossEntropyGradient,
                                                      CrossEntropyOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    auto loss = cast<CrossEntropyOp>(op);
    MLIRContext *ctx = b.getContext();
    Value logits = loss.getLogits(), targets = loss.getTargets();
    Type f32 = b.getF32Type();
    SmallVector<OpFoldResult> rows = sizesOf(b, targets);
    AffineMap all = dimsMap(ctx, 3, {0, 1, 2}), row = dimsMap(ctx, 3, {0, 1});
    auto [maxima, sums] = softmaxStatistics(b, logits);
    Value count = indexToF32(b, arith::MulIOp::create(b, dimOf(b, targets, 0),
                                                      dimOf(b, targets, 1)));
    Value upstream = tensor::ExtractOp::create(b, adjoints[0], ValueRange{});
    Value factor = arith::DivFOp::create(b, upstream, count);
    Value dlogits = generic(
        b, {logits, maxima, sums, targets},
        tensor::EmptyOp::create(b, sizesOf(b, logits), f32),
        {all, row, row, row, all}, iterators(3),
        [&](ImplicitLocOpBuilder &b, ValueRange args) {
          Value shifted = arith::SubFOp::create(b, toF32(b, args[0]), args[1]);
          Value p = arith::DivFOp::create(b, math::ExpOp::create(b, shifted),
                                          args[2]);
          Value target =
              arith::IndexCastOp::create(b, b.getIndexType(), args[3]);
          Value hit = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, target,
                                            loopIndex(b, 2));
          Value minusOne = arith::SubFOp::create(b, p, f32Constant(b, 1.0));
          Value d = arith::SelectOp::create(b, hit, minusOne, p);
          return arith::MulFOp::create(b, d, factor);
        });
    return {asTypeOf(b, dlogits, logits), Value()};
  }
};

//===----------------------------------------------------------------------===//
// Routing
//===----------------------------------------------------------------------===//

/// s = sigmoid(z), z = x·wᵀ: dz = ds·s·(1 - s), dx = dz·w, dw = dzᵀ·x.
struct GateGradient
    : public DifferentiableOpInterface::ExternalModel<GateGradient, GateOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    auto gate = cast<GateOp>(op);
    MLIRContext *ctx = b.getContext();
    Value x = gate.getInput(), w = gate.getWeight();
    Value scores = gate.getResult(), dscores = adjoints[0];
    if (gate.getResult().getType().getRank() == 3) {
      SmallVector<ReassociationIndices> flat = {{0}, {1, 2}};
      scores = tensor::CollapseShapeOp::create(b, scores, flat);
      dscores = tensor::CollapseShapeOp::create(b, dscores, flat);
    }
    AffineMap id = b.getMultiDimIdentityMap(2);
    Value dz =
        generic(b, {dscores, scores},
                tensor::EmptyOp::create(b, sizesOf(b, scores), b.getF32Type()),
                {id, id, id}, iterators(2),
                [](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
                  Value slope = arith::MulFOp::create(
                      b, args[1],
                      arith::SubFOp::create(b, f32Constant(b, 1.0), args[1]));
                  return arith::MulFOp::create(b, args[0], slope);
                });
    Value dx =
        contractF32(b, dz, dimsMap(ctx, 3, {0, 2}), w, dimsMap(ctx, 3, {2, 1}),
                    dimsMap(ctx, 3, {0, 1}), iterators(2, 1),
                    {sizesOf(b, x)[0], sizesOf(b, x)[1]});
    Value dw =
        contractF32(b, dz, dimsMap(ctx, 3, {2, 0}), x, dimsMap(ctx, 3, {2, 1}),
                    dimsMap(ctx, 3, {0, 1}), iterators(2, 1),
                    {sizesOf(b, w)[0], sizesOf(b, w)[1]});
    return {asTypeOf(b, dx, x), asTypeOf(b, dw, w)};
  }
};

/// The selected values come from the scores: scatter their adjoints back to
/// the chosen positions. No gradient through the choice, none into the mask.
struct TopKGradient
    : public DifferentiableOpInterface::ExternalModel<TopKGradient, TopKOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    auto topk = cast<TopKOp>(op);
    SmallVector<Value> none(op->getNumOperands(), Value());
    if (!adjoints[0])
      return none;
    MLIRContext *ctx = b.getContext();
    Value scores = topk.getScores();
    unsigned rank = topk.getScores().getType().getRank();
    // (prefix..., e | j): scores[..., e] gets dv[..., j] where i[..., j] = e.
    SmallVector<unsigned> out, route;
    for (unsigned d = 0; d < rank; ++d)
      out.push_back(d);
    for (unsigned d = 0; d + 1 < rank; ++d)
      route.push_back(d);
    route.push_back(rank);
    AffineMap routeMap = dimsMap(ctx, rank + 1, route);
    Value dscores = generic(
        b, {adjoints[0], topk.getIndices()},
        filled(b, sizesOf(b, scores), b.getF32Type(), 0.0),
        {routeMap, routeMap, dimsMap(ctx, rank + 1, out)}, iterators(rank, 1),
        [&](ImplicitLocOpBuilder &b, ValueRange args) {
          Value chosen =
              arith::IndexCastOp::create(b, b.getIndexType(), args[1]);
          Value hit = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, chosen,
                                            loopIndex(b, rank - 1));
          Value added = arith::AddFOp::create(b, args[2], args[0]);
          return arith::SelectOp::create(b, hit, added, args[2]);
        });
    none[0] = dscores;
    return none;
  }
};

/// moe.expert_proj_grad: the rule is an op of its own, so that
/// moe-fuse-expert-projection can replace its linalg (route-sum tensors) by
/// row kernels.
struct ExpertProjGradient
    : public DifferentiableOpInterface::ExternalModel<ExpertProjGradient,
                                                      ExpertProjOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    auto proj = cast<ExpertProjOp>(op);
    Value x = proj.getInput(), w = proj.getWeight(), g = proj.getGates();
    auto grad = ExpertProjGradOp::create(
        b, TypeRange{x.getType(), w.getType(), g.getType()}, x, w, g,
        proj.getIndices(), adjoints[0]);
    return {grad.getInputGrad(), grad.getWeightGrad(), grad.getGatesGrad(),
            Value()};
  }
};

/// moe.expert_merge_grad (see ExpertProjGradient).
struct ExpertMergeGradient
    : public DifferentiableOpInterface::ExternalModel<ExpertMergeGradient,
                                                      ExpertMergeOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    auto merge = cast<ExpertMergeOp>(op);
    Value heads = merge.getHeads(), w = merge.getWeight();
    Value g = merge.getGates();
    auto grad = ExpertMergeGradOp::create(
        b, TypeRange{heads.getType(), w.getType(), g.getType()}, heads, w, g,
        merge.getIndices(), adjoints[0]);
    return {grad.getHeadsGrad(), grad.getWeightGrad(), grad.getGatesGrad(),
            Value()};
  }
};

/// y = Σ_j g · ReLU(x·up[e])·down[e], with hpre = x·up[e], hid = ReLU(hpre):
///   dg[n, j]       = Σ_{q, o} hid · down[e, q, o] · dy[n, o]
///   dhpre[n, j, q] = [hpre > 0] · g · Σ_o dy[n, o] · down[e, q, o]
///   dx[n, d]       = Σ_{j, q} dhpre · up[e, d, q]
///   ddown[e, q, o] = Σ_n C[n, e, q] · dy[n, o],   C  = Σ_j [route] g · hid
///   dup[e, d, q]   = Σ_n x[n, d] · C2[n, e, q],   C2 = Σ_j [route] dhpre
struct ExpertMlpGradient
    : public DifferentiableOpInterface::ExternalModel<ExpertMlpGradient,
                                                      ExpertMlpOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    auto mlp = cast<ExpertMlpOp>(op);
    MLIRContext *ctx = b.getContext();
    Value x = mlp.getInput(), up = mlp.getUp(), down = mlp.getDown();
    Value g = mlp.getGates(), idx = mlp.getIndices(), dy = adjoints[0];
    Type f32 = b.getF32Type();
    auto expert = [&](ImplicitLocOpBuilder &b, Value index) -> Value {
      return arith::IndexCastOp::create(b, b.getIndexType(), index);
    };

    // hpre[n, j, q] over (n, j, q | d).
    SmallVector<OpFoldResult> hiddenSizes = sizesOf(b, g);
    hiddenSizes.push_back(sizesOf(b, up)[2]);
    Value hpre = generic(
        b, {x, idx}, filled(b, hiddenSizes, f32, 0.0),
        {dimsMap(ctx, 4, {0, 3}), dimsMap(ctx, 4, {0, 1}),
         dimsMap(ctx, 4, {0, 1, 2})},
        iterators(3, 1), [&](ImplicitLocOpBuilder &b, ValueRange args) {
          Value weight = tensor::ExtractOp::create(
              b, up,
              ValueRange{expert(b, args[1]), loopIndex(b, 3), loopIndex(b, 2)});
          return arith::AddFOp::create(
              b, args[2],
              arith::MulFOp::create(b, toF32(b, args[0]), toF32(b, weight)));
        });
    auto relu = [&](ImplicitLocOpBuilder &b, Value v) -> Value {
      return arith::MaximumFOp::create(b, v, f32Constant(b, 0.0));
    };

    // dg[n, j] over (n, j | q, o).
    Value dg = generic(
        b, {hpre, dy, idx}, filled(b, sizesOf(b, g), f32, 0.0),
        {dimsMap(ctx, 4, {0, 1, 2}), dimsMap(ctx, 4, {0, 3}),
         dimsMap(ctx, 4, {0, 1}), dimsMap(ctx, 4, {0, 1})},
        iterators(2, 2), [&](ImplicitLocOpBuilder &b, ValueRange args) {
          Value weight = tensor::ExtractOp::create(
              b, down,
              ValueRange{expert(b, args[2]), loopIndex(b, 2), loopIndex(b, 3)});
          Value term = arith::MulFOp::create(
              b, arith::MulFOp::create(b, relu(b, args[0]), toF32(b, weight)),
              toF32(b, args[1]));
          return arith::AddFOp::create(b, args[3], term);
        });
    // Σ_o dy · down over (n, j, q | o), then the gate and the ReLU mask.
    Value back = generic(
        b, {dy, idx}, filled(b, hiddenSizes, f32, 0.0),
        {dimsMap(ctx, 4, {0, 3}), dimsMap(ctx, 4, {0, 1}),
         dimsMap(ctx, 4, {0, 1, 2})},
        iterators(3, 1), [&](ImplicitLocOpBuilder &b, ValueRange args) {
          Value weight = tensor::ExtractOp::create(
              b, down,
              ValueRange{expert(b, args[1]), loopIndex(b, 2), loopIndex(b, 3)});
          return arith::AddFOp::create(
              b, args[2],
              arith::MulFOp::create(b, toF32(b, args[0]), toF32(b, weight)));
        });
    AffineMap id3 = b.getMultiDimIdentityMap(3);
    Value dhpre = generic(
        b, {back, hpre, g}, tensor::EmptyOp::create(b, hiddenSizes, f32),
        {id3, id3, dimsMap(ctx, 3, {0, 1}), id3}, iterators(3),
        [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
          Value active = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT,
                                               args[1], f32Constant(b, 0.0));
          Value gated = arith::MulFOp::create(b, args[0], args[2]);
          return arith::SelectOp::create(b, active, gated, f32Constant(b, 0.0));
        });
    // dx[n, d] over (n, d | j, q).
    Value dx = generic(
        b, {dhpre, idx}, filled(b, sizesOf(b, x), f32, 0.0),
        {dimsMap(ctx, 4, {0, 2, 3}), dimsMap(ctx, 4, {0, 2}),
         dimsMap(ctx, 4, {0, 1})},
        iterators(2, 2), [&](ImplicitLocOpBuilder &b, ValueRange args) {
          Value weight = tensor::ExtractOp::create(
              b, up,
              ValueRange{expert(b, args[1]), loopIndex(b, 1), loopIndex(b, 3)});
          return arith::AddFOp::create(
              b, args[2], arith::MulFOp::create(b, args[0], toF32(b, weight)));
        });
    // Expert weights through the dense route sums (one head).
    Value experts = dimOf(b, up, 0);
    SmallVector<OpFoldResult> upSizes = sizesOf(b, up),
                              downSizes = sizesOf(b, down);
    Value c = routeSums(b, g, idx, experts, upSizes[0], upSizes[2],
                        [&](ImplicitLocOpBuilder &b, Value n, Value, Value j,
                            Value q) -> Value {
                          return relu(b, tensor::ExtractOp::create(
                                             b, hpre, ValueRange{n, j, q}));
                        });
    Value ddown = contractF32(
        b, c, dimsMap(ctx, 4, {3, 0, 1}), dy, dimsMap(ctx, 4, {3, 2}),
        dimsMap(ctx, 4, {0, 1, 2}), iterators(3, 1), downSizes);
    Value c2 = routeSums(
        b, Value(), idx, experts, upSizes[0], upSizes[2],
        [&](ImplicitLocOpBuilder &b, Value n, Value, Value j,
            Value q) -> Value {
          return tensor::ExtractOp::create(b, dhpre, ValueRange{n, j, q});
        });
    Value dup = contractF32(
        b, x, dimsMap(ctx, 4, {3, 1}), c2, dimsMap(ctx, 4, {3, 0, 2}),
        dimsMap(ctx, 4, {0, 1, 2}), iterators(3, 1), upSizes);
    return {asTypeOf(b, dx, x), asTypeOf(b, dup, up), asTypeOf(b, ddown, down),
            dg, Value()};
  }
};

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// moe.attention_grad: the rule is an op of its own, so that
/// moe-fuse-attention can choose how the weights are recomputed (the
/// reference lowering materialises them, the flash kernels do not).
struct AttentionGradient
    : public DifferentiableOpInterface::ExternalModel<AttentionGradient,
                                                      AttentionOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    auto attention = cast<AttentionOp>(op);
    Value q = attention.getQuery(), k = attention.getKey();
    Value v = attention.getValue(), rel = attention.getRel();
    SmallVector<Type> types = {q.getType(), k.getType(), v.getType()};
    if (rel)
      types.push_back(rel.getType());
    Value position = attention.getPosition();
    auto grad =
        AttentionGradOp::create(b, types, q, k, v, adjoints[0], rel, position);
    SmallVector<Value> result(grad.getResults());
    if (position)
      result.push_back(Value()); // The position has no adjoint.
    return result;
  }
};

//===----------------------------------------------------------------------===//
// arith.addf and the reshapes
//===----------------------------------------------------------------------===//

/// a + b on tensors: both get the adjoint of the sum.
struct AddGradient
    : public DifferentiableOpInterface::ExternalModel<AddGradient,
                                                      arith::AddFOp> {
  SmallVector<Value> buildAdjoints(Operation *, ImplicitLocOpBuilder &,
                                   ValueRange adjoints) const {
    return {adjoints[0], adjoints[0]};
  }
};

/// The adjoint of a collapse is the matching expand, and back.
struct CollapseGradient
    : public DifferentiableOpInterface::ExternalModel<CollapseGradient,
                                                      tensor::CollapseShapeOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    auto collapse = cast<tensor::CollapseShapeOp>(op);
    Value source = collapse.getSrc();
    return {tensor::ExpandShapeOp::create(b, source.getType(), adjoints[0],
                                          collapse.getReassociationIndices(),
                                          sizesOf(b, source))};
  }
};

struct ExpandGradient
    : public DifferentiableOpInterface::ExternalModel<ExpandGradient,
                                                      tensor::ExpandShapeOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    auto expand = cast<tensor::ExpandShapeOp>(op);
    SmallVector<Value> result(op->getNumOperands(), Value());
    result[0] = tensor::CollapseShapeOp::create(
        b, expand.getSrc().getType(), adjoints[0],
        expand.getReassociationIndices());
    return result;
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// Training-only ops
//===----------------------------------------------------------------------===//

/// The same mask and scale on the adjoint; none for the mask.
struct DropoutGradient
    : public DifferentiableOpInterface::ExternalModel<DropoutGradient,
                                                      DropoutOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    auto dropout = cast<DropoutOp>(op);
    double rate = dropout.getRate().convertToDouble();
    if (rate == 0.0)
      return {adjoints[0], Value()};
    return {applyDropout(b, adjoints[0], dropout.getMask(), rate), Value()};
  }
};

/// H = -Σ_e P_e log P_e, P = mean_n p[n], p[n] = softmax(z[n]):
/// g_e = ∂H/∂p[n, e] = -(log P_e + 1) / N, and the softmax backward
/// dz[n, e] = p[n, e] · (g_e - Σ_e' p[n, e'] g_e'), times the adjoint.
struct RoutingEntropyGradient
    : public DifferentiableOpInterface::ExternalModel<RoutingEntropyGradient,
                                                      RoutingEntropyOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    Value z = cast<RoutingEntropyOp>(op).getLogits();
    MLIRContext *ctx = b.getContext();
    Type f32 = b.getF32Type();
    auto [mean, maxima, sums] = routingMean(b, z);
    Value upstream = tensor::ExtractOp::create(b, adjoints[0], ValueRange{});
    Value count = indexToF32(b, dimOf(b, z, 0));
    // g_e, already scaled by the adjoint. P_e > 0 always (softmax).
    Value g = mapElements(b, mean, f32,
                          [&](ImplicitLocOpBuilder &b, Value p) -> Value {
                            Value d = arith::AddFOp::create(
                                b, math::LogOp::create(b, p),
                                f32Constant(b, 1.0));
                            Value scaled = arith::DivFOp::create(
                                b, arith::MulFOp::create(b, d, upstream),
                                count);
                            return arith::NegFOp::create(b, scaled);
                          });
    AffineMap all = dimsMap(ctx, 2, {0, 1}), row = dimsMap(ctx, 2, {0}),
              column = dimsMap(ctx, 2, {1});
    auto probability = [](ImplicitLocOpBuilder &b, Value logit, Value max,
                          Value sum) -> Value {
      Value shifted = arith::SubFOp::create(b, toF32(b, logit), max);
      return arith::DivFOp::create(b, math::ExpOp::create(b, shifted), sum);
    };
    // s[n] = Σ_e p[n, e] g_e.
    Value dot = generic(
        b, {z, maxima, sums, g}, filled(b, {sizesOf(b, z)[0]}, f32, 0.0),
        {all, row, row, column, row}, iterators(1, 1),
        [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
          Value p = probability(b, args[0], args[1], args[2]);
          return arith::AddFOp::create(b, args[4],
                                       arith::MulFOp::create(b, p, args[3]));
        });
    Value dz = generic(
        b, {z, maxima, sums, g, dot},
        tensor::EmptyOp::create(b, sizesOf(b, z), f32),
        {all, row, row, column, row, all}, iterators(2),
        [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
          Value p = probability(b, args[0], args[1], args[2]);
          return arith::MulFOp::create(
              b, p, arith::SubFOp::create(b, args[3], args[4]));
        });
    return {asTypeOf(b, dz, z)};
  }
};

/// Identity on the input; the auxiliary loss gets its weight.
struct AddLossGradient
    : public DifferentiableOpInterface::ExternalModel<AddLossGradient,
                                                      AddLossOp> {
  SmallVector<Value> buildAdjoints(Operation *op, ImplicitLocOpBuilder &b,
                                   ValueRange adjoints) const {
    auto addLoss = cast<AddLossOp>(op);
    Value weight = arith::ConstantOp::create(
        b, DenseElementsAttr::get(
               RankedTensorType::get({}, b.getF32Type()),
               b.getF32FloatAttr(addLoss.getWeight().convertToDouble())));
    return {adjoints[0], weight};
  }
};

void mlir::moe::registerGradientModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, MoeDialect *) {
    LinearOp::attachInterface<LinearGradient>(*ctx);
    ReluOp::attachInterface<ReluGradient>(*ctx);
    LayerNormOp::attachInterface<LayerNormGradient>(*ctx);
    RopeOp::attachInterface<RopeGradient>(*ctx);
    EmbedOp::attachInterface<EmbedGradient>(*ctx);
    ConcatOp::attachInterface<ConcatGradient>(*ctx);
    CrossEntropyOp::attachInterface<CrossEntropyGradient>(*ctx);
    GateOp::attachInterface<GateGradient>(*ctx);
    TopKOp::attachInterface<TopKGradient>(*ctx);
    ExpertProjOp::attachInterface<ExpertProjGradient>(*ctx);
    ExpertMergeOp::attachInterface<ExpertMergeGradient>(*ctx);
    ExpertMlpOp::attachInterface<ExpertMlpGradient>(*ctx);
    AttentionOp::attachInterface<AttentionGradient>(*ctx);
    DropoutOp::attachInterface<DropoutGradient>(*ctx);
    RoutingEntropyOp::attachInterface<RoutingEntropyGradient>(*ctx);
    AddLossOp::attachInterface<AddLossGradient>(*ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, arith::ArithDialect *) {
    arith::AddFOp::attachInterface<AddGradient>(*ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, tensor::TensorDialect *) {
    tensor::CollapseShapeOp::attachInterface<CollapseGradient>(*ctx);
    tensor::ExpandShapeOp::attachInterface<ExpandGradient>(*ctx);
  });
}
